"""The loading rules: fine-tuning, all or nothing, safe reading, presets."""

import hashlib
import os
import shutil
import warnings

import numpy as np
import pytest

import keras_vit
from keras_vit import registry
from keras_vit.registry import presets as registry_presets
from keras_vit.weights import download
from tests.helpers import TINY_HYBRID
from tests.weights.test_golden_parity import TINY
from tests.weights.test_golden_parity import expected
from tests.weights.test_golden_parity import golden


def _snapshot(model):
    return [w.numpy().copy() for w in model.weights]


def _assert_unchanged(model, before):
    for old, w in zip(before, model.weights):
        np.testing.assert_array_equal(old, w.numpy())


def _copy_npz(tmp_path, edit, name="edited.npz", source="vit_token.npz"):
    with np.load(golden(source)) as data:
        arrays = {k: data[k] for k in data.files}
    edit(arrays)
    path = str(tmp_path / name)
    np.savez(path, **arrays)
    return path


# === Fine-tuning: new head, new resolution ===


def test_new_class_count_drops_the_head_and_says_so_once():
    with pytest.warns(
        UserWarning, match="5 classes and the model's 7"
    ) as record:
        model = keras_vit.ViT.from_preset(
            golden("vit_prelogits.npz"), **{**TINY, "num_classes": 7}
        )
    assert len([r for r in record if "classes" in str(r.message)]) == 1
    assert "pre-logits" in str(record[0].message)
    # As for fine-tuning in the paper: no pre-logits, a zero head ...
    assert model.representation_size is None
    np.testing.assert_array_equal(model.get_layer("head").kernel.numpy(), 0.0)
    # ... and the body is the checkpoint's.
    ref = expected("vit_prelogits.expected.npz")
    body = keras_vit.ViT(**{**TINY, "include_top": False})
    body.set_weights(model.get_weights()[:-2])
    np.testing.assert_allclose(
        body.predict(ref["images"], verbose=0), ref["features"], atol=1e-4
    )


def test_include_top_false_skips_the_head_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = keras_vit.ViT.from_preset(
            golden("vit_token.npz"), **{**TINY, "include_top": False}
        )
    ref = expected("vit_token.expected.npz")
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["features"], atol=1e-4
    )


def test_new_resolution_starts_from_resampled_position_embeddings():
    checkpoint = keras_vit.weights.read_checkpoint(golden("vit_token.npz"))
    with pytest.warns(UserWarning, match="4x4 to a 6x8 patch grid"):
        model = keras_vit.ViT.from_preset(
            golden("vit_token.npz"), **{**TINY, "image_size": (48, 64)}
        )
    posemb = model.get_layer("patch_encoder").pos_embedding.numpy()
    source = checkpoint.tensors["patch_encoder/position_embedding"]
    expected_posemb = keras_vit.patch_grid.resample_position_embeddings(
        source, (6, 8), (4, 4), interpolation="bilinear_align_corners"
    )
    np.testing.assert_allclose(posemb, np.asarray(expected_posemb), atol=1e-6)
    np.testing.assert_array_equal(posemb[0, 0], source[0, 0])  # class token
    # Corners of the grid map onto corners (the original code's zoom).
    grid, src = posemb[0, 1:].reshape(6, 8, -1), source[0, 1:].reshape(4, 4, -1)
    np.testing.assert_allclose(grid[0, 0], src[0, 0], atol=1e-6)
    np.testing.assert_allclose(grid[-1, -1], src[-1, -1], atol=1e-6)
    # Everything else is exactly the checkpoint's.
    np.testing.assert_array_equal(
        model.get_layer("block_1").mlp_fc2.kernel.numpy(),
        checkpoint.tensors["block_1/mlp_fc2/kernel"],
    )
    assert model.predict(np.zeros((1, 48, 64, 3)), verbose=0).shape == (1, 5)


def test_resolution_defaults_to_the_checkpoints():
    kwargs = {k: v for k, v in TINY.items() if k != "image_size"}
    model = keras_vit.ViT.from_preset(
        golden("vit_token.timm.safetensors"), **kwargs
    )
    assert model.image_size == (32, 32)


def _hf_with_pooler(tmp_path):
    """The transformers ViTModel golden with a pooler, as google/vit-*-in21k
    files are: a pre-logits layer (`pooler.dense`) and no classifier."""
    import safetensors.numpy

    tensors = safetensors.numpy.load_file(
        golden("vit_token.hf_base.safetensors")
    )
    rng = np.random.default_rng(0)
    tensors["pooler.dense.weight"] = rng.normal(size=(32, 32)).astype("f")
    tensors["pooler.dense.bias"] = rng.normal(size=32).astype("f")
    path = str(tmp_path / "vit_in21k_like.safetensors")
    safetensors.numpy.save_file(tensors, path)
    return path, tensors


def test_a_pooler_without_a_head_is_dropped_for_a_new_head(tmp_path):
    # It was "unexpected in the checkpoint: pre_logits/bias, ...", though
    # the original .npz of the same model (head and pre-logits) fine-tunes.
    path, tensors = _hf_with_pooler(tmp_path)
    with pytest.warns(UserWarning, match="pre-logits layer was not loaded"):
        model = keras_vit.ViT.from_preset(path, **{**TINY, "num_classes": 10})
    assert model.representation_size is None
    np.testing.assert_array_equal(model.get_layer("head").kernel.numpy(), 0.0)
    ref = expected("vit_token.hf_base.expected.npz")
    body = keras_vit.ViT(**{**TINY, "include_top": False})
    body.set_weights(model.get_weights()[:-2])
    np.testing.assert_allclose(
        body.predict(ref["images"], verbose=0), ref["features"], atol=1e-4
    )
    # A model built with a pre-logits layer takes the pooler's weights.
    kept = keras_vit.ViT(**{**TINY, "representation_size": 32})
    with pytest.warns(UserWarning, match="no classification head") as record:
        keras_vit.load_weights(kept, path)
    assert "pre-logits" not in str(record[0].message)
    np.testing.assert_array_equal(
        kept.get_layer("pre_logits").kernel.numpy(),
        tensors["pooler.dense.weight"].T,
    )


def test_interpolation_is_an_argument():
    model = keras_vit.ViT(**{**TINY, "image_size": 64})
    with pytest.warns(UserWarning, match="bicubic"):
        keras_vit.load_weights(
            model, golden("vit_token.npz"), interpolation="bicubic"
        )
    checkpoint = keras_vit.weights.read_checkpoint(golden("vit_token.npz"))
    np.testing.assert_allclose(
        model.get_layer("patch_encoder").pos_embedding.numpy(),
        np.asarray(
            keras_vit.patch_grid.resample_position_embeddings(
                checkpoint.tensors["patch_encoder/position_embedding"],
                8,
                interpolation="bicubic",
            )
        ),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="interpolation='cubic'"):
        keras_vit.load_weights(
            model, golden("vit_token.npz"), interpolation="cubic"
        )


# === All or nothing ===


def test_architecture_mismatch_lists_everything_and_changes_nothing():
    model = keras_vit.ViT(**{**TINY, "mlp_dim": 48, "num_layers": 3})
    before = _snapshot(model)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, golden("vit_token.npz"))
    message = str(info.value)
    assert "nothing was loaded" in message
    assert "block_2/mlp_fc1/kernel" in message  # missing (3 blocks vs 2)
    assert (
        "block_0/mlp_fc1/kernel: checkpoint (32, 64), model (32, 48)" in message
    )
    assert "mlp_dim=64" in message and "mlp_dim=48" in message
    _assert_unchanged(model, before)


def test_values_beyond_the_models_dtype_are_refused(tmp_path):
    # 7e4 is finite in the file and inf in float16 (largest 65504): it was
    # loaded as inf, with only NumPy's RuntimeWarning.
    def enlarge(arrays):
        arrays["head/kernel"] = np.array(arrays["head/kernel"], copy=True)
        arrays["head/kernel"][0, :2] = (7e4, -1e5)

    path = _copy_npz(tmp_path, enlarge)
    model = keras_vit.ViT(**{**TINY, "dtype": "float16"})
    before = _snapshot(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning either
        with pytest.raises(ValueError) as info:
            keras_vit.load_weights(model, path)
    message = str(info.value)
    assert "nothing was loaded" in message and path in message, message
    assert (
        "head/kernel: 2 of 160 values overflow float16 (largest magnitude "
        "100000, float16's maximum 65504)" in message
    ), message
    _assert_unchanged(model, before)
    # In float32 (and mixed_float16's float32 variables) they fit.
    for dtype in ("float32", "mixed_float16"):
        model = keras_vit.ViT(**{**TINY, "dtype": dtype})
        keras_vit.load_weights(model, path)
        assert model.get_layer("head").kernel.numpy()[0, 1] == -1e5


def test_a_keras_quantized_model_takes_and_writes_no_float_checkpoint(tmp_path):
    # After `model.quantize("int8")` the kernels are int8 with scales: a
    # float checkpoint cannot be loaded into them, nor written from them
    # (save_npz once wrote the int8 values as if they were floats).
    model = keras_vit.ViT(**TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers without weights to quantize
        model.quantize("int8")
    before = _snapshot(model)
    with pytest.raises(
        ValueError,
        match="quantized in Keras.*into the float model, "
        "then quantize it.*model='vit'",
    ):
        keras_vit.load_weights(model, golden("vit_token.npz"))
    _assert_unchanged(model, before)
    with pytest.raises(
        ValueError, match="quantized in Keras.*original .npz layout"
    ):
        keras_vit.weights.save_npz(model, str(tmp_path / "int8.npz"))
    assert not os.listdir(tmp_path)


def test_missing_unexpected_and_misshaped_tensors(tmp_path):
    def edit(arrays):
        del arrays["Transformer/encoderblock_1/LayerNorm_2/scale"]
        arrays["Transformer/extra/kernel"] = np.zeros(3, "float32")
        arrays["Transformer/encoder_norm/scale"] = np.zeros(31, "float32")

    path = _copy_npz(tmp_path, edit)
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, path)
    message = str(info.value)
    assert "Transformer/encoderblock_1/LayerNorm_2/scale" in message
    assert "Transformer/extra/kernel (source name)" in message
    assert "encoder_norm/gamma: checkpoint (31,), model (32,)" in message
    _assert_unchanged(model, before)
    with pytest.raises(ValueError):
        keras_vit.ViT.from_preset(path, **TINY)


def test_class_token_mismatch_is_refused():
    with pytest.raises(ValueError, match="patch_encoder/class_token"):
        keras_vit.ViT.from_preset(golden("vit_gap.npz"), **TINY)  # token model


@pytest.mark.parametrize(
    "name", ["vit_token.npz", "vit_token.timm.safetensors"]
)
def test_truncated_file_names_the_path(tmp_path, name):
    path = str(tmp_path / name)
    with open(golden(name), "rb") as src, open(path, "wb") as dst:
        dst.write(src.read()[:5000])
    with pytest.raises(ValueError, match="truncated or corrupt") as info:
        keras_vit.ViT.from_preset(path, **TINY)
    assert path in str(info.value)


def test_npz_is_read_without_pickles(tmp_path):
    path = str(tmp_path / "pickled.npz")
    np.savez(path, **{"embedding/kernel": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ValueError, match="pickled.npz"):
        keras_vit.ViT.from_preset(path, **TINY)


@pytest.mark.parametrize(
    "name", ["model.pth", "pytorch_model.bin", "x.pt", "y.ckpt"]
)
def test_pytorch_pickles_are_refused(name):
    with pytest.raises(ValueError, match="safetensors"):
        keras_vit.ViT.from_preset(name, **TINY)


def test_unknown_formats_and_files(tmp_path):
    with pytest.raises(ValueError, match="Weights file not found"):
        keras_vit.ViT.from_preset(str(tmp_path / "missing.npz"), **TINY)
    with pytest.raises(ValueError, match="weights=42"):
        keras_vit.ViT.from_preset(42, **TINY)
    with pytest.raises(ValueError, match="Unknown weights.*'imagenet'"):
        keras_vit.ViT_Ti16(weights="imagenet")
    path = str(tmp_path / "other.npz")
    np.savez(path, something=np.zeros(3))
    with pytest.raises(ValueError, match="not a ViT checkpoint"):
        keras_vit.ViT.from_preset(path, **TINY)
    import safetensors.numpy

    path = str(tmp_path / "other.safetensors")
    safetensors.numpy.save_file({"conv.weight": np.zeros(3, "float32")}, path)
    with pytest.raises(ValueError, match="neither timm's"):
        keras_vit.ViT.from_preset(path, **TINY)


# === keras_vit's own files ===


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_native_files_round_trip_and_fine_tune(tmp_path, suffix):
    source = keras_vit.ViT.from_preset(golden("vit_token.npz"), **TINY)
    path = str(tmp_path / f"model{suffix}")
    if suffix == ".keras":
        source.save(path)
    else:
        source.save_weights(path)
    ref = expected("vit_token.expected.npz")
    model = keras_vit.ViT.from_preset(path, **TINY)
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )
    with pytest.warns(UserWarning, match="5 classes and the model's 3"):
        tuned = keras_vit.ViT.from_preset(
            path, **{**TINY, "num_classes": 3, "image_size": 48}
        )
    np.testing.assert_array_equal(tuned.get_layer("head").kernel.numpy(), 0.0)
    np.testing.assert_array_equal(
        tuned.get_layer("block_0").attention.qkv.kernel.numpy(),
        source.get_layer("block_0").attention.qkv.kernel.numpy(),
    )


def _save(model, path):
    (model.save if path.endswith(".keras") else model.save_weights)(path)
    return path


def _drop_grid_record(path):
    """Rewrites a keras_vit file as one written before the grid was recorded."""
    import io
    import zipfile

    import h5py

    def drop(file):
        del file["layers/patch_encoder/vars/grid_size"]

    if not path.endswith(".keras"):
        with h5py.File(path, "a") as file:
            drop(file)
        return path
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = io.BytesIO(members["model.weights.h5"])
    with h5py.File(data, "a") as file:
        drop(file)
    members["model.weights.h5"] = data.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path


def _posemb(model):
    return model.get_layer("patch_encoder").pos_embedding.numpy()


def _resampled(model, grid, source_grid):
    return np.asarray(
        keras_vit.patch_grid.resample_position_embeddings(
            _posemb(model),
            grid,
            source_grid,
            interpolation="bilinear_align_corners",
        )
    )


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_native_file_on_a_grid_of_the_same_size_and_another_shape_is_resampled(
    tmp_path, suffix
):
    # A 4x4 grid into image_size=(16, 64), a 2x8 grid: 16 positions either
    # way, so the embeddings were copied, the geometry scrambled, silently.
    from tests.helpers import randomize_weights

    source = keras_vit.ViT(**TINY)
    randomize_weights(source)
    path = _save(source, str(tmp_path / f"model{suffix}"))
    with pytest.warns(UserWarning, match="from a 4x4 to a 2x8 patch grid"):
        wide = keras_vit.ViT.from_preset(
            path, **{**TINY, "image_size": (16, 64)}
        )
    np.testing.assert_allclose(
        _posemb(wide), _resampled(source, (2, 8), (4, 4)), atol=1e-6
    )
    # A non-square source loads at any size ("not a square number" before).
    with pytest.warns(UserWarning, match="from a 2x8 to a 4x4 patch grid"):
        square = keras_vit.ViT.from_preset(
            _save(wide, str(tmp_path / f"wide{suffix}")), **TINY
        )
    np.testing.assert_allclose(
        _posemb(square), _resampled(wide, (4, 4), (2, 8)), atol=1e-6
    )


def test_keras_load_weights_refuses_a_grid_of_the_same_size_and_another_shape(
    tmp_path,
):
    path = _save(keras_vit.ViT(**TINY), str(tmp_path / "model.weights.h5"))
    wide = keras_vit.ViT(**{**TINY, "image_size": (16, 64)})
    # Refused whole, before Keras copies anything (keras_vit's loader
    # resamples them).
    with pytest.raises(
        ValueError,
        match=r"(?s)resampled from a 4x4 to a 2x8 patch grid.*nothing was "
        r"loaded.*keras_vit.load_weights\(model, ",
    ):
        wide.load_weights(path)


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_native_file_without_a_grid_record(tmp_path, suffix):
    from tests.helpers import randomize_weights

    source = keras_vit.ViT(**{**TINY, "image_size": (16, 64)})  # 2x8
    randomize_weights(source)
    path = _drop_grid_record(_save(source, str(tmp_path / f"model{suffix}")))
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    if suffix == ".keras":
        # The archive's config.json records image_size and patch_size.
        with pytest.warns(UserWarning, match="from a 2x8 to a 4x4"):
            keras_vit.load_weights(model, path)
        np.testing.assert_allclose(
            _posemb(model), _resampled(source, (4, 4), (2, 8)), atol=1e-6
        )
        return
    # A .weights.h5 alone says nothing of its grid: refused, never guessed
    # (it was taken to be the model's 4x4, and copied).
    with pytest.raises(
        ValueError,
        match=r"(?s)nothing was loaded.*does not record "
        r"the patch grid.*source_grid=\(rows, cols\)",
    ):
        keras_vit.load_weights(model, path)
    _assert_unchanged(model, before)
    with pytest.raises(ValueError, match="does not record the patch grid"):
        keras_vit.ViT.from_preset(path, **{**TINY, "image_size": (16, 64)})
    with pytest.raises(
        ValueError,
        match=r"hold 16 patch positions, and a 3x3 grid "
        r"holds 9. Received: source_grid=\(3, 3\)",
    ):
        keras_vit.load_weights(model, path, source_grid=(3, 3))
    _assert_unchanged(model, before)
    with pytest.warns(UserWarning, match="from a 2x8 to a 4x4"):
        keras_vit.load_weights(model, path, source_grid=(2, 8))
    np.testing.assert_allclose(
        _posemb(model), _resampled(source, (4, 4), (2, 8)), atol=1e-6
    )


def test_a_file_without_a_grid_record_says_how_to_load_it_into_its_own_size(
    tmp_path,
):
    # Refused by design (its grid cannot be known), but the message gave no
    # way out for the usual case: the file of a model of this very size.
    from tests.helpers import randomize_weights

    size = {**TINY, "image_size": (16, 64)}  # a 2x8 grid
    source = keras_vit.ViT(**size)
    randomize_weights(source)
    path = _drop_grid_record(_save(source, str(tmp_path / "model.weights.h5")))
    model = keras_vit.ViT(**size)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, path)
    message = str(info.value)
    assert (
        f"keras_vit.load_weights(model, {path!r}, source_grid=(2, 8))"
        in message
    ), message
    assert f"model.load_weights({path!r})" in message, message
    # Both ways load it as it was saved.
    keras_vit.load_weights(model, path, source_grid=(2, 8))
    other = keras_vit.ViT(**size)
    other.load_weights(path)
    for loaded in (model, other):
        for got, want in zip(loaded.weights, source.weights):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    # Not suggested to a model whose grid could not be the file's.
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(
            keras_vit.ViT(**{**TINY, "image_size": 48}), path
        )
    assert "this very size" not in str(info.value)


def test_a_hybrid_native_file_loads_and_fine_tunes(tmp_path):
    # The stem's bottleneck units sit in a `units` list group that the
    # reader took for a layer: every stem weight was "unexpected".
    source, path = _saved_and_reloaded(TINY_HYBRID, tmp_path)
    with pytest.warns(UserWarning, match="from a 4x4 to a 8x8 patch grid"):
        bigger = keras_vit.ViT.from_preset(
            path, **{**TINY_HYBRID, "image_size": 64}
        )
    np.testing.assert_array_equal(
        bigger.get_layer("resnet_stem").weights[-1].numpy(),
        source.get_layer("resnet_stem").weights[-1].numpy(),
    )


def test_an_older_hybrid_keras_file_takes_its_grid_from_its_own_config(
    tmp_path,
):
    # A stem's feature map depends on the stem, which is not rebuilt from
    # the archive: the config gives the grid when it is the model's config,
    # and otherwise the grid is not known.
    hybrid = TINY_HYBRID
    path = _drop_grid_record(
        _save(keras_vit.ViT(**hybrid), str(tmp_path / "h.keras"))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keras_vit.load_weights(keras_vit.ViT(**hybrid), path)
    with pytest.raises(ValueError, match="does not record the patch grid"):
        keras_vit.load_weights(
            keras_vit.ViT(**{**hybrid, "image_size": 64}), path
        )


def test_source_grid_must_agree_with_the_file(tmp_path):
    path = _save(keras_vit.ViT(**TINY), str(tmp_path / "model.weights.h5"))
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(
        ValueError,
        match=r"records a 4x4 patch grid.*"
        r"Received: source_grid=\(2, 8\)",
    ):
        keras_vit.load_weights(model, path, source_grid=(2, 8))
    sincos = {**TINY, "position_embedding": "sincos2d"}
    path = _save(keras_vit.ViT(**sincos), str(tmp_path / "sincos.weights.h5"))
    with pytest.raises(
        ValueError, match="has none. Received: source_grid=\\(4, 4\\)"
    ):
        keras_vit.load_weights(keras_vit.ViT(**sincos), path, source_grid=4)
    _assert_unchanged(model, before)


def test_a_native_head_bias_without_its_kernel(tmp_path):
    # It was taken for "no classification head": zeroed, with a warning.
    import h5py

    path = _save(keras_vit.ViT(**TINY), str(tmp_path / "model.weights.h5"))
    with h5py.File(path, "a") as file:
        del file["layers/dense/vars/0"]
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(
        ValueError, match=r"missing from the checkpoint \(1\):\n    head/kernel"
    ):
        keras_vit.load_weights(model, path)
    _assert_unchanged(model, before)


def test_a_non_square_npz_needs_its_grid(tmp_path):
    # The .npz records no grid; its releases (and readers) are square.
    wide = keras_vit.ViT(**{**TINY, "image_size": (16, 32)})  # 2x4
    posemb = _posemb(wide)
    path = _copy_npz(
        tmp_path,
        lambda a: a.update(
            {"Transformer/posembed_input/pos_embedding": posemb}
        ),
    )
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(
        ValueError,
        match=r"(?s)nothing was loaded.*8 patch positions, "
        "not a square grid.*source_grid",
    ):
        keras_vit.load_weights(model, path)
    _assert_unchanged(model, before)
    with pytest.warns(UserWarning, match="from a 2x4 to a 4x4"):
        keras_vit.load_weights(model, path, source_grid=(2, 4))
    np.testing.assert_allclose(
        _posemb(model), _resampled(wide, (4, 4), (2, 4)), atol=1e-6
    )
    # save_npz would write a 2x8 grid its readers take to be 4x4: refused.
    with pytest.raises(
        ValueError,
        match=r"records no patch grid.*2x8.*"
        r"Received a model with image_size=\(16, 64\)",
    ):
        keras_vit.weights.save_npz(
            keras_vit.ViT(**{**TINY, "image_size": (16, 64)}),
            str(tmp_path / "wide.npz"),
        )
    assert not (tmp_path / "wide.npz").exists()


# === A broken head is not a fine-tuning case ===


@pytest.mark.parametrize(
    "kernel, bias, num_classes",
    [
        ((32, 5), (7,), 5),  # the bias alone of another size
        ((32, 7), (5,), 7),  # the kernel alone
        (
            (31, 7),
            (7,),
            5,
        ),  # a 7-class head for 31 features, in a 32-wide model
        (None, (5,), 5),  # a bias and no kernel
    ],
)
def test_a_head_whose_tensors_disagree_is_a_broken_checkpoint(
    tmp_path, kernel, bias, num_classes
):
    # Each once loaded with "the checkpoint's head has N classes" (or "no
    # classification head") and a zeroed head.
    def edit(arrays):
        if kernel is None:
            del arrays["head/kernel"]
        else:
            arrays["head/kernel"] = np.ones(kernel, "float32")
        arrays["head/bias"] = np.ones(bias, "float32")

    path = _copy_npz(tmp_path, edit)
    model = keras_vit.ViT(**{**TINY, "num_classes": num_classes})
    before = _snapshot(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="nothing was loaded") as info:
            keras_vit.load_weights(model, path)
    message = str(info.value)
    if kernel is None:
        assert "missing from the checkpoint (2):\n    head/kernel\n" in message
        assert "head/kernel (source name)" in message
    else:
        for name, shape, want in (
            ("kernel", kernel, (32, num_classes)),
            ("bias", bias, (num_classes,)),
        ):
            if shape != want:
                assert (
                    f"head/{name}: checkpoint {shape}, model {want}" in message
                )
    _assert_unchanged(model, before)


# === Every fault in one error, every file named ===


def test_tensors_of_the_wrong_rank_are_reported_together(tmp_path):
    def edit(arrays):
        arrays["Transformer/encoder_norm/scale"] = np.zeros((2, 32), "float32")
        arrays["embedding/kernel"] = np.zeros((8, 8, 3), "float32")
        del arrays["Transformer/encoderblock_0/LayerNorm_0/bias"]

    path = _copy_npz(tmp_path, edit)
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, path)
    message = str(info.value)
    assert "nothing was loaded" in message and path in message
    assert (
        "Transformer/encoder_norm/scale (source name): shape (2, 32), "
        "expected 1 dimensions"
    ) in message
    assert (
        "embedding/kernel (source name): shape (8, 8, 3), expected 4" in message
    )
    assert (
        "Transformer/encoderblock_0/LayerNorm_0/bias (source name)" in message
    )
    _assert_unchanged(model, before)


def test_a_0d_tensor_in_a_big_vision_file(tmp_path):
    # A scanned (depth-stacked) tensor with no depth axis: an IndexError.
    key = "params/Transformer/encoderblock/MlpBlock_0/Dense_0/bias"
    path = _copy_npz(
        tmp_path,
        lambda a: a.update(
            {
                key: np.float32(0),
                "params/Transformer/encoder_norm/scale": np.float32(1),
            }
        ),
        source="vit_bigvision.npz",
    )
    model = keras_vit.ViT(**{**TINY, "pooling": "gap", "class_token": False})
    before = _snapshot(model)
    with pytest.raises(ValueError, match="nothing was loaded") as info:
        keras_vit.load_weights(model, path)
    message = str(info.value)
    assert path in message
    assert (
        "Transformer/encoderblock/MlpBlock_0/Dense_0/bias (source name): shape "
        "()" in message
    )
    assert (
        "Transformer/encoder_norm/scale (source name): shape (), expected 1"
        in message
    )
    _assert_unchanged(model, before)


def test_a_tensor_of_strings_is_reported_with_the_file(tmp_path):
    path = _copy_npz(
        tmp_path,
        lambda a: a.update(
            {"Transformer/encoder_norm/bias": np.array(["x"] * 32)}
        ),
    )
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(
        ValueError,
        match=r"(?s)nothing was loaded.*not numbers.*"
        r"encoder_norm/beta: checkpoint <U1, model float32",
    ):
        keras_vit.load_weights(model, path)
    _assert_unchanged(model, before)


def _poison(arrays, key, values=(np.nan, np.inf, -np.inf)):
    """Puts NaN / inf into the first values of tensor `key`."""
    value = np.array(arrays[key], copy=True)
    value.reshape(-1)[: len(values)] = values
    arrays[key] = value


@pytest.mark.parametrize(
    "source", ["npz", "timm", "huggingface", "weights.h5", "keras"]
)
def test_non_finite_tensors_are_listed_and_nothing_is_loaded(tmp_path, source):
    # NaN and inf loaded silently: a diverged run's or a damaged file's
    # weights give NaN for every image.
    import safetensors.numpy

    if source == "npz":
        path = _copy_npz(
            tmp_path,
            lambda a: (
                _poison(a, "Transformer/encoder_norm/scale", (np.nan,)),
                _poison(a, "embedding/kernel", (np.inf, np.nan, -np.inf)),
            ),
        )
        broken = [
            "encoder_norm/gamma: 1 NaN of 32 values",
            "patch_encoder/projection/kernel: 1 NaN, 2 inf of",
        ]
    elif source in ("timm", "huggingface"):
        name = (
            "vit_token.timm.safetensors"
            if source == "timm"
            else "vit_token.hf.safetensors"
        )
        arrays = safetensors.numpy.load_file(golden(name))
        key = sorted(k for k in arrays if "norm" in k and k.endswith("bias"))[
            -1
        ]
        _poison(arrays, key, (np.nan, np.nan))
        path = str(tmp_path / name)
        safetensors.numpy.save_file(arrays, path)
        broken = ["2 NaN of"]
    else:
        import h5py

        path = _save(keras_vit.ViT(**TINY), str(tmp_path / f"m.{source}"))
        member = path
        if source == "keras":
            import zipfile

            with zipfile.ZipFile(path) as archive:
                members = {n: archive.read(n) for n in archive.namelist()}
            member = str(tmp_path / "model.weights.h5")
            with open(member, "wb") as file:
                file.write(members["model.weights.h5"])
        with h5py.File(member, "a") as file:
            data = file["layers/dense/vars/1"]
            data[0] = np.inf
        if source == "keras":
            with open(member, "rb") as file:
                members["model.weights.h5"] = file.read()
            with zipfile.ZipFile(path, "w") as archive:
                for n, content in members.items():
                    archive.writestr(n, content)
        broken = ["head/bias: 1 inf of 5 values"]
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, path)
    message = str(info.value)
    assert "nothing was loaded" in message and path in message, message
    assert "not finite (NaN or inf)" in message, message
    for line in broken:
        assert line in message, message
    _assert_unchanged(model, before)
    if source == "npz":
        # A broken head is not dropped quietly for fine-tuning either, and
        # convert writes nothing.
        from keras_vit.weights import convert

        path = _copy_npz(
            tmp_path, lambda a: _poison(a, "head/bias"), name="head.npz"
        )
        with pytest.raises(
            ValueError, match=r"(?s)not finite.*head/bias: 1 NaN, 2 inf"
        ):
            keras_vit.ViT.from_preset(path, **{**TINY, "num_classes": 3})
        output = tmp_path / "converted.keras"
        with pytest.raises(ValueError, match="not finite"):
            convert.convert(path, str(output))
        assert not output.exists()


def _corrupt_keras_member(path):
    """Recompresses a .keras archive and damages its weights member's data."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("model.weights.h5")
    with open(path, "r+b") as file:
        file.seek(info.header_offset + 30 + len(info.filename) + 100)
        file.write(b"\xff" * 64)
    return path


def _malformed_h5(path):
    import h5py

    with h5py.File(path, "a") as file:  # `vars` an array, not a group
        del file["layers/dense/vars"]
        file["layers/dense/vars"] = np.zeros(3)
    return path


@pytest.mark.parametrize(
    "damage", ["npy_as_npz", "keras_member", "h5_group", "h5_strings"]
)
def test_malformed_files_are_named_and_change_nothing(tmp_path, capsys, damage):
    model = keras_vit.ViT(**TINY)
    before = _snapshot(model)
    if damage == "npy_as_npz":
        path = str(tmp_path / "weights.npz")
        with open(path, "wb") as file:
            np.save(file, np.zeros(3))
    elif damage == "keras_member":
        path = _corrupt_keras_member(
            _save(keras_vit.ViT(**TINY), str(tmp_path / "m.keras"))
        )
    elif damage == "h5_group":
        path = _malformed_h5(
            _save(keras_vit.ViT(**TINY), str(tmp_path / "m.weights.h5"))
        )
    else:
        import h5py

        path = _save(keras_vit.ViT(**TINY), str(tmp_path / "m.weights.h5"))
        with h5py.File(path, "a") as file:
            del file["layers/dense/vars/1"]
            file["layers/dense/vars/1"] = np.array([b"abc"] * 5)
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, path)
    assert path in str(info.value)
    _assert_unchanged(model, before)
    if damage == "npy_as_npz":  # and on the command line
        from keras_vit import cli

        assert (
            cli.main(["convert", path, "--output", str(tmp_path / "x.keras")])
            == 2
        )
        err = capsys.readouterr().err
        assert err.startswith("keras-vit: error: ") and path in err
        assert "not a .npz archive" in err


# === Presets ===


def test_preset_table():
    table = keras_vit.list_presets()
    names = {(p["builder"], p["name"]) for p in table}
    assert ("ViT_B16", "augreg_in21k_ft_in1k") in names
    assert ("ViT_H14", "in21k") in names
    for preset in table:
        assert preset["url"].startswith("https://")
        assert preset["builder"] == registry.BUILDER_OF.get(preset["variant"])
        assert preset["builder"] is not None or preset["variant"] == "S/14"
    assert [p["name"] for p in keras_vit.list_presets("ViT_Ti16")] == [
        "augreg_in21k",
        "augreg_in21k_ft_in1k",
        "augreg_in21k_ft_in1k_384",
        "eupe_lvd1689m_256",
    ]
    with pytest.raises(ValueError, match="model='ViT_X'"):
        keras_vit.list_presets("ViT_X")


@pytest.mark.parametrize("index", range(len(registry.PRESETS)))
def test_preset_parameter_counts(index):
    import keras

    preset = registry.PRESETS[index]
    with keras.StatelessScope(initialize_variables=False):
        model = keras_vit.ViT.from_variant(
            preset["variant"],
            image_size=preset["image_size"],
            num_classes=preset["num_classes"] or 1000,  # None: no head
            representation_size=preset["representation_size"],
            **preset["vit_arguments"],
        )
    assert model.count_params() == preset["params"]


def preset_record(variant, name, url, image_size, num_classes, **fields):
    """A preset record with every field (`keras_vit.registry.FIELDS`)."""
    return {
        "unique_name": f"{registry.model_name(variant)}_{name}",
        "name": name,
        "variant": variant,
        "source": "original",
        "description": "test",
        "url": url,
        "sha256": None,
        "image_size": image_size,
        "num_classes": num_classes,
        "representation_size": None,
        "params": None,
        "vit_arguments": {},
        "normalization": None,
        "image_resize": None,
        "license": None,
        **fields,
    }


@pytest.fixture
def local_preset(tmp_path, monkeypatch):
    """A preset whose URL is a local file in the exact released format, for a
    variant with the golden model's numbers."""
    source = str(tmp_path / "served.npz")
    shutil.copy(golden("vit_token.npz"), source)
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    numbers = {
        k: TINY[k]
        for k in (
            "patch_size",
            "hidden_dim",
            "num_layers",
            "num_heads",
            "mlp_dim",
        )
    }
    monkeypatch.setitem(registry.VARIANTS, "Tiny/8", numbers)
    preset = preset_record(
        "Tiny/8", "tiny_test", "file://" + source, 32, 5, sha256=digest
    )
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry.PRESETS, preset]
    )
    monkeypatch.setattr(download, "CACHE_DIR", str(tmp_path / "cache"))
    return preset


def test_preset_downloads_once_checks_sha256_and_loads(local_preset, tmp_path):
    model = keras_vit.ViT.from_variant(
        "Tiny/8", weights="tiny_test", num_classes=5, classifier_activation=None
    )
    assert model.image_size == (32, 32)  # the preset's resolution
    ref = expected("vit_token.expected.npz")
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )
    cached = tmp_path / "cache" / "models" / "keras_vit" / "Tiny8-tiny_test.npz"
    assert cached.exists()
    # Cached: later calls do not fetch again.
    os.remove(local_preset["url"][len("file://") :])
    assert download.download(local_preset) == str(cached)
    keras_vit.ViT.from_variant("Tiny/8", weights="tiny_test", num_classes=5)


def test_preset_with_wrong_sha256_is_deleted(local_preset, tmp_path):
    bad = {**local_preset, "sha256": "0" * 64}
    cache = tmp_path / "cache2"
    with pytest.raises(ValueError, match="sha256") as info:
        download.download(bad, cache_dir=str(cache))
    assert "deleted" in str(info.value)
    assert not any(cache.rglob("*.npz"))


def test_preset_unreachable_is_a_clear_error(tmp_path):
    bad = preset_record("B/16", "x", "file:///nonexistent/file.npz", 224, 1000)
    with pytest.raises(ValueError, match="Could not download preset 'x'"):
        download.download(bad, cache_dir=str(tmp_path))
    assert not any(tmp_path.rglob("*.npz"))


@pytest.fixture
def http_server():
    """`serve(data, cut=None)`: the URL of a local HTTP server sending
    `data`; with `cut`, only its first `cut` bytes and no Content-Length
    (a connection cut short), holding the connection open until the test
    ends when `hold` is set."""
    import http.server
    import threading

    release = threading.Event()
    servers = []

    def serve(data, cut=None, hold=False):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                self.send_response(200)
                if cut is None:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:cut])
                self.wfile.flush()
                if hold:
                    release.wait(60)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/vit.npz"

    yield serve
    release.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def _cache(tmp_path):
    return tmp_path / "cache" / "models" / "keras_vit"


def test_a_truncated_cached_download_is_downloaded_again(
    local_preset, tmp_path
):
    """What a download killed by an earlier version left under the cache's
    name (no preset has a sha256): it was reused forever, and every load
    failed on a 'truncated or corrupt' file nobody said was a download."""
    with open(golden("vit_token.npz"), "rb") as file:
        whole = file.read()
    cached = _cache(tmp_path) / "Tiny8-tiny_test.npz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(whole[: len(whole) // 2])
    preset = {**local_preset, "sha256": None}
    with pytest.warns(UserWarning) as caught:
        path = download.download(preset)
    message = str(caught[0].message)
    assert f"preset 'tiny_test', {cached}, is no whole .npz file" in message
    assert "deleted and is downloaded again" in message
    assert path == str(cached) and cached.read_bytes() == whole


def test_a_download_cut_short_is_refused_and_not_cached(http_server, tmp_path):
    """A server that closes early without a Content-Length: urllib cannot
    tell, so the half file was cached as the preset's."""
    with open(golden("vit_token.npz"), "rb") as file:
        whole = file.read()
    url = http_server(whole, cut=len(whole) // 2)
    preset = preset_record("B/16", "cut", url, 224, 1000)
    with pytest.raises(ValueError) as info:
        download.download(preset, cache_dir=str(tmp_path / "cache"))
    assert "is no whole .npz file" in str(info.value)
    assert "nothing was cached" in str(info.value)
    assert os.listdir(_cache(tmp_path)) == []


@pytest.mark.slow
def test_a_killed_download_leaves_nothing_under_the_cache_name(
    http_server, tmp_path
):
    """A process killed mid-download (SIGKILL: no cleanup runs) left the
    half file under the cache's name, reused forever; now it is a
    temporary file, which the next download removes."""
    import json
    import signal
    import subprocess
    import sys
    import time

    with open(golden("vit_token.npz"), "rb") as file:
        whole = file.read()
    url = http_server(whole, cut=len(whole) // 2, hold=True)
    preset = preset_record("B/16", "killed", url, 224, 1000)
    script = (
        "import json, sys\n"
        "from keras_vit.weights import download\n"
        "download.download(json.loads(sys.argv[1]), cache_dir=sys.argv[2])\n"
    )
    cache = _cache(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(preset)]
        + [str(tmp_path / "cache")]
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
            f.stat().st_size for f in cache.glob("*") if f.is_file()
        ):
            assert process.poll() is None, "the download ended by itself"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    left = os.listdir(cache)
    assert "ViT_B16-killed.npz" not in left and len(left) == 1, left
    # The next download into the folder removes what the killed one left.
    whole_preset = {**preset, "url": "file://" + golden("vit_token.npz")}
    path = download.download(whole_preset, cache_dir=str(tmp_path / "cache"))
    assert os.listdir(cache) == ["ViT_B16-killed.npz"]
    with open(path, "rb") as file:
        assert file.read() == whole


def test_preset_names_are_checked_against_the_variant():
    with pytest.raises(
        ValueError, match="exists for variants .*'H/14'.*not for S/16"
    ):
        keras_vit.ViT_S16(weights="in21k")


def _saved_and_reloaded(kwargs, tmp_path):
    """A random `ViT(**kwargs)` saved as `.weights.h5`, checked to load back
    exactly at its own resolution: `(model, path)`."""
    from tests.helpers import randomize_weights

    source = keras_vit.ViT(**kwargs)
    randomize_weights(source)
    path = str(tmp_path / "model.weights.h5")
    source.save_weights(path)
    same = keras_vit.ViT.from_preset(path, **kwargs)
    for a, b in zip(same.weights, source.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return source, path


def test_learned2d_native_file_fine_tunes_at_another_resolution(tmp_path):
    kwargs = {**TINY, "position_embedding": "learned2d"}
    source, path = _saved_and_reloaded(kwargs, tmp_path)
    # A taller image: the rows are resampled, the columns kept.
    height = TINY["image_size"] * 2
    with pytest.warns(UserWarning, match="Row position embeddings resampled"):
        tall = keras_vit.ViT.from_preset(
            path, **{**kwargs, "image_size": (height, TINY["image_size"])}
        )
    encoder, original = (
        tall.get_layer("patch_encoder"),
        source.get_layer("patch_encoder"),
    )
    np.testing.assert_array_equal(
        encoder.pos_embedding_x.numpy(), original.pos_embedding_x.numpy()
    )
    np.testing.assert_allclose(
        encoder.pos_embedding_y.numpy(),
        keras_vit.patch_grid.resample_position_embeddings(
            original.pos_embedding_y.numpy(),
            (tall.grid_size[0], 1),
            source_grid=(source.grid_size[0], 1),
            num_prefix_tokens=0,
            interpolation="bilinear_align_corners",
        ),
        atol=1e-6,
    )
    # The original .npz layout has no place for them.
    with pytest.raises(ValueError, match="position_embedding='learned2d'"):
        keras_vit.weights.save_npz(source, str(tmp_path / "model.npz"))
    assert not (tmp_path / "model.npz").exists()


def test_relative_native_file_loads_at_its_resolution_only(tmp_path):
    kwargs = {**TINY, "position_embedding": "relative"}
    source, path = _saved_and_reloaded(kwargs, tmp_path)
    # 1D offsets along the sequence have no meaning on another grid.
    with pytest.raises(
        ValueError, match=r"(?s)nothing was loaded.*17 tokens.*takes 37"
    ):
        keras_vit.ViT.from_preset(
            path, **{**kwargs, "image_size": (TINY["image_size"], 72)}
        )
    with pytest.raises(ValueError, match="position_embedding='relative'"):
        keras_vit.weights.save_npz(source, str(tmp_path / "model.npz"))
    assert not (tmp_path / "model.npz").exists()
    # A checkpoint with absolute embeddings: the error names both sides.
    keras_vit.weights.save_npz(
        keras_vit.ViT(**TINY), str(tmp_path / "learned.npz")
    )
    with pytest.raises(
        ValueError,
        match=r"(?s)position_embedding='relative'.*"
        r"missing.*block_0/attention/relative_position_embedding.*"
        r"unexpected.*patch_encoder/position_embedding",
    ):
        keras_vit.ViT.from_preset(str(tmp_path / "learned.npz"), **kwargs)


# === Loading after construction: from_preset ===


def test_from_preset_builds_for_the_weights_then_loads_them():
    ref = expected("vit_prelogits.expected.npz")
    # The resolution and the pre-logits layer come from the checkpoint.
    model = keras_vit.ViT.from_preset(
        golden("vit_prelogits.npz"), **{**TINY, "image_size": None}
    )
    assert (
        model.image_size == (TINY["image_size"],) * 2
        and model.representation_size is not None
    )
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )
    with pytest.raises(ValueError, match="first argument.*Received: weights="):
        keras_vit.ViT.from_preset(
            golden("vit_prelogits.npz"), weights="other.npz", **TINY
        )
    # The arguments' own errors come before any file is read.
    with pytest.raises(ValueError, match="hidden_dim=18 and num_heads=4"):
        keras_vit.ViT.from_preset(
            "missing.npz", **{**TINY, "hidden_dim": 18, "num_heads": 4}
        )


def test_a_download_shows_keras_progress_bar(local_preset, capsys):
    # keras.utils.get_file draws it (the bar is Keras's, not ours).
    path = download.download(local_preset)
    out = capsys.readouterr().out
    assert f"Downloading data from {local_preset['url']}" in out
    size = os.path.getsize(path)
    assert f"{size}/{size}" in out, out
