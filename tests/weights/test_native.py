"""keras_vit's own files (`.keras`, `.weights.h5`): what their tensors,
held by position, cannot tell apart is checked, never guessed."""

import os
import re

import numpy as np
import pytest

import keras_vit
from tests import helpers
from tests.helpers import random_images
from tests.helpers import randomize_weights

#: Any tiny ViT, logits out (softmax hides differences).
TINY = dict(helpers.TINY, classifier_activation=None)


def _tiny(seed=0, **kwargs):
    model = keras_vit.ViT(**{**TINY, **kwargs})
    randomize_weights(model, seed=seed)
    return model


def _save(model, path):
    path = str(path)
    (model.save if path.endswith(".keras") else model.save_weights)(path)
    return path


def _weights(model):
    return [w.numpy().copy() for w in model.weights]


def _refused(model, path, match, load=keras_vit.load_weights):
    """Asserts that loading `path` into `model` with `load` is refused with
    `match` and changes none of its weights."""
    before = _weights(model)
    with pytest.raises(ValueError, match=match):
        load(model, path)
    for old, w in zip(before, model.weights):
        np.testing.assert_array_equal(old, w.numpy())


def _assert_same_outputs(a, b):
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        a.predict(images, verbose=0), b.predict(images, verbose=0), atol=1e-5
    )


def test_a_keras_file_refuses_another_number_of_heads(tmp_path):
    # The fused QKV kernel has the same shape for 2 and 4 heads: the heads
    # the config records are what tells them apart.
    path = _save(_tiny(), tmp_path / "a.keras")
    _refused(
        _tiny(seed=1, num_heads=4), path, "num_heads: checkpoint 2, model 4"
    )
    loaded = _tiny(seed=1)
    checkpoint = keras_vit.load_weights(loaded, path)
    assert checkpoint.num_heads == 2
    _assert_same_outputs(loaded, _tiny())


@pytest.mark.parametrize(
    "setting, received",
    [
        ({"activation": "quick_gelu"}, "activation='quick_gelu'"),
        ({"layer_norm_epsilon": 1e-5}, "layer_norm_epsilon=1e-05"),
    ],
)
def test_a_keras_file_refuses_another_activation_or_epsilon(
    tmp_path, setting, received
):
    # Same tensors, other outputs: refused, naming the file's and the
    # model's values.
    path = _save(_tiny(), tmp_path / "a.keras")
    name = next(iter(setting))
    theirs = f"{name}={keras_vit.ViT(**TINY).vit_config.to_dict()[name]!r}"
    _refused(
        _tiny(seed=1, **setting),
        path,
        rf"with {theirs} \(its config records them\).*Received: {received}$",
    )


def test_a_keras_file_refuses_another_token_layout(tmp_path):
    # One register and a distillation token are both (1, 1, D): the
    # config says which the file holds.
    path = _save(
        _tiny(num_register_tokens=1, include_top=False), tmp_path / "r.keras"
    )
    _refused(
        _tiny(seed=1, distillation=True, include_top=False),
        path,
        "with distillation=False, num_register_tokens=1 .* has "
        "distillation=True, num_register_tokens=0",
    )


def _without_token_record(path):
    """`path` as a keras_vit before the token record wrote it."""
    import h5py

    with h5py.File(path, "r+") as file:
        del file["layers/patch_encoder/vars/prefix_tokens"]
    return path


def test_a_weights_file_records_its_tokens(tmp_path):
    # A .weights.h5 holds a layer's weights by position, unnamed: the
    # record beside the patch encoder's says which tokens lead them, for
    # keras_vit's loader and for Keras's own load_weights.
    source = _tiny(distillation=True, include_top=False)
    distilled = _save(source, tmp_path / "d.weights.h5")
    loaded = _tiny(seed=1, distillation=True, include_top=False)
    keras_vit.load_weights(loaded, distilled)
    _assert_same_outputs(loaded, source)
    registers = _tiny(seed=1, num_register_tokens=1, include_top=False)
    _refused(
        registers,
        distilled,
        "with distillation=1, num_register_tokens=0 .recorded beside.* "
        "Received: distillation=0, num_register_tokens=1$",
    )
    # Keras's loader copied them by position; ViT.load_weights refuses
    # the file whole, as keras_vit.load_weights does.
    _refused(
        registers,
        distilled,
        "with distillation=1, num_register_tokens=0 .recorded beside",
        load=keras_vit.ViT.load_weights,
    )


def test_a_weights_file_whose_tokens_fit_two_layouts_is_refused(tmp_path):
    # A .weights.h5 written before the token record: a register's weights
    # would have become the distillation token's, and the other way round.
    registers = _without_token_record(
        _save(
            _tiny(num_register_tokens=1, include_top=False),
            tmp_path / "r.weights.h5",
        )
    )
    distilled = _without_token_record(
        _save(
            _tiny(distillation=True, include_top=False),
            tmp_path / "d.weights.h5",
        )
    )
    _refused(
        _tiny(seed=1, distillation=True, include_top=False),
        registers,
        r"\(distillation=True, num_register_tokens=0\) and of a model with "
        r"distillation=False, num_register_tokens=1",
    )
    _refused(
        _tiny(seed=1, num_register_tokens=1, include_top=False),
        distilled,
        "Received: distillation=False, num_register_tokens=1$",
    )
    # No class token and one register: as shaped as a class token.
    no_class = _without_token_record(
        _save(
            _tiny(class_token=False, pooling="gap", num_register_tokens=1),
            tmp_path / "c.weights.h5",
        )
    )
    _refused(
        _tiny(seed=1, class_token=False, pooling="gap", num_register_tokens=1),
        no_class,
        "Received: class_token=False, num_register_tokens=1$",
    )


@pytest.mark.parametrize(
    "layout", [{"distillation": True}, {"num_register_tokens": 1}]
)
def test_a_weights_file_with_its_heads_says_its_tokens(tmp_path, layout):
    # A file with a head has a distillation head exactly when it has a
    # distillation token: it loads into its own layout only.
    source = _tiny(**layout)
    path = _save(source, tmp_path / "m.weights.h5")
    loaded = _tiny(seed=1, **layout)
    keras_vit.load_weights(loaded, path)
    _assert_same_outputs(loaded, source)
    other = (
        {"num_register_tokens": 1}
        if "distillation" in layout
        else {"distillation": True}
    )
    # Another class count drops the heads: the tokens are still told apart
    # (in a file from before the token record).
    _refused(
        _tiny(seed=1, **other, num_classes=3),
        _without_token_record(path),
        "does not record its model's prefix tokens",
    )


# --- reading in place --------------------------------------------------------


def _member_data_start(path):
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("model.weights.h5")
    assert info.compress_type == zipfile.ZIP_STORED  # as Keras writes it
    with open(path, "rb") as file:
        file.seek(info.header_offset + 26)
        name, extra = np.frombuffer(file.read(4), "<u2")
    return info.header_offset + 30 + int(name) + int(extra), info.file_size


def test_a_check_reads_the_file_in_place_one_tensor_at_a_time(tmp_path):
    import h5py

    from keras_vit.weights import keras_files
    from keras_vit.weights import loading

    model = _tiny(seed=1)
    for path in (
        _save(model, tmp_path / "m.keras"),
        _save(model, tmp_path / "m.weights.h5"),
    ):
        with keras_files.opened_keras_weights(path, model) as checkpoint:
            tensors = checkpoint.tensors
            assert all(isinstance(t, h5py.Dataset) for t in tensors.values())
            values, zeros, notes = loading.prepare(
                model, checkpoint, keep=False
            )
            assert (values, zeros, notes) == ({}, [], [])
            for weight in model.weights:
                np.testing.assert_array_equal(tensors[weight.path], weight)
        # Read into memory, the same values.
        read = keras_files.read_keras_weights(path, model).tensors
        assert all(type(t) is np.ndarray for t in read.values())
        assert sorted(read) == sorted(tensors)
        loaded = keras_vit.ViT(**TINY)
        loaded.load_weights(path)
        _assert_same_outputs(model, loaded)


def _keras_reads(monkeypatch):
    """The paths Keras's own `Model.load_weights` is given, as a list."""
    import keras

    seen, keras_load = [], keras.Model.load_weights

    def spy(model, filepath, *args, **kwargs):
        seen.append((str(filepath), os.path.isfile(filepath)))
        return keras_load(model, filepath, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "load_weights", spy)
    return seen


def test_load_weights_hands_keras_a_copy_of_a_keras_files_weights(
    tmp_path, monkeypatch
):
    # Keras read the weights member through zipfile's seeks, which read
    # from the member's start on Python 3.11: 15-17 s for a ViT-B/16.
    import tempfile

    from keras_vit import files
    from keras_vit.weights import keras_files

    # Its optimizer holds a step count and moments, which the file keeps.
    source = _tiny(seed=1)
    source.compile("adam", "sparse_categorical_crossentropy")
    source.optimizer.build(source.trainable_variables)
    rng = np.random.default_rng(0)
    for variable in source.optimizer.variables:
        variable.assign(rng.uniform(1, 2, variable.shape))
    path = str(tmp_path / "m.keras")
    source.save(path)
    seen = _keras_reads(monkeypatch)

    def loaded():
        model = _tiny(seed=2)
        model.compile("adam", "sparse_categorical_crossentropy")
        model.optimizer.build(model.trainable_variables)
        model.load_weights(path)
        for got, want in zip(model.variables, source.variables, strict=True):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        for got, want in zip(
            model.optimizer.variables, source.optimizer.variables, strict=True
        ):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        return seen[-1]

    copy, existed = loaded()
    assert existed and os.path.basename(copy) == "model.weights.h5"
    assert os.path.dirname(os.path.dirname(copy)) == str(tmp_path)
    assert os.listdir(tmp_path) == ["m.keras"]  # the copy's folder went

    # A folder that cannot hold it: the system's temporary folder does.
    def refused(name):
        raise PermissionError(f"read-only: {name}")

    monkeypatch.setattr(files, "temporary_folder", refused)
    copy, existed = loaded()
    assert existed and copy.startswith(tempfile.gettempdir() + os.sep)
    assert not os.path.exists(copy)
    # Neither: Keras reads the archive itself.
    monkeypatch.setattr(keras_files, "_system_temporary_folder", refused)
    assert loaded() == (path, True)
    assert os.listdir(tmp_path) == ["m.keras"]


def test_a_damaged_member_is_left_to_keras_without_the_check(tmp_path):
    # skip_mismatch=True skips keras_vit's check: the copy, which checks
    # the member's CRC, does not stand in for the archive, and what was
    # copied is removed.
    import zipfile

    from keras_vit.weights import keras_files

    path = _save(_tiny(seed=1), tmp_path / "m.keras")
    start, size = _member_data_start(path)
    with open(path, "r+b") as file:
        file.seek(start + size // 2)
        byte = file.read(1)
        file.seek(start + size // 2)
        file.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(zipfile.BadZipFile, match="CRC"):
        with zipfile.ZipFile(path) as archive:
            archive.read(keras_files.WEIGHTS_MEMBER)
    with keras_files.weights_for_keras(path) as readable:
        assert readable == path
    assert os.listdir(tmp_path) == ["m.keras"]
    with keras_files.weights_for_keras(tmp_path / "x.weights.h5") as readable:
        assert readable == tmp_path / "x.weights.h5"  # not a .keras file


def test_a_stored_member_reads_as_its_bytes_wherever_it_seeks(tmp_path):
    import io

    from keras_vit.weights.keras_files import _StoredMember

    path = _save(_tiny(), tmp_path / "m.keras")
    start, size = _member_data_start(path)
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(size)
    with open(path, "rb", buffering=0) as raw:
        member = _StoredMember(raw, start, size)
        assert member.seek(0, io.SEEK_END) == size and member.read(5) == b""
        rng = np.random.default_rng(0)
        for offset in rng.integers(0, size, 20):
            member.seek(int(offset))
            assert member.read(300) == data[offset : offset + 300]
            member.seek(-7, io.SEEK_CUR)
            assert member.read(7) == data[offset + 293 : offset + 300]
        with pytest.raises(OSError, match="negative"):
            member.seek(-1)


def test_a_damaged_stored_member_is_refused_naming_the_file(tmp_path):
    # Read in place, the member's CRC is still checked (zipfile checks it
    # reading to the end): a damaged tensor is no silent wrong weight.
    from keras_vit.weights import keras_files

    path = _save(_tiny(), tmp_path / "m.keras")
    start, size = _member_data_start(path)
    with open(path, "r+b") as file:
        file.seek(start + size - 100)  # tensor data, past the metadata
        byte = file.read(1)
        file.seek(-1, 1)
        file.write(bytes([byte[0] ^ 0xFF]))
    for load in (keras_vit.load_weights, keras_vit.ViT.load_weights):
        _refused(_tiny(seed=2), path, "truncated or corrupt.*CRC", load)
    # A tensor that cannot be read inside the `with` is named as well.
    model = _tiny()
    path = _save(model, tmp_path / "ok.weights.h5")
    with pytest.raises(ValueError, match=re.escape(path)):
        with keras_files.opened_keras_weights(path, model):
            raise OSError("Can't read data")
