"""ONNX export (optional: tf2onnx and onnxruntime), to time ONNX Runtime."""

import os

import numpy as np
import pytest

import keras_vit
from keras_vit import export
from tests.export.helpers import TINY_EXPORT
from tests.helpers import randomize_weights

pytest.importorskip("tf2onnx")
pytest.importorskip("onnxruntime")

from keras_vit.export import onnx as onnx_lib  # noqa: E402


def test_onnx_matches_keras_with_exact_gelu(random_model, tmp_path):
    # tf2onnx has no converter for TensorFlow's Erfc (the exact GELU); the
    # registered one must give Keras's outputs.
    path = export.export_onnx(
        random_model, tmp_path / "m.onnx", batch_size=None
    ).path
    x = np.random.default_rng(1).uniform(
        0, 255, (3, *random_model.input_shape[1:])
    )
    x = x.astype("float32")
    got = onnx_lib.run_onnx(path, x)
    np.testing.assert_allclose(got, np.asarray(random_model(x)), atol=1e-4)
    import onnx

    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert "Erf" in ops


def test_relative_position_embeddings_export_to_onnx(tmp_path):
    # Their logits are skewed with reshapes and strided slices.
    model = keras_vit.ViT(**TINY_EXPORT, position_embedding="relative")
    randomize_weights(model, seed=2)
    path = export.export_onnx(
        model, tmp_path / "rel.onnx", batch_size=None
    ).path
    x = (
        np.random.default_rng(1)
        .uniform(0, 255, (3, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        onnx_lib.run_onnx(path, x), np.asarray(model(x)), atol=1e-4
    )


def test_bad_output_folder_leaves_nothing(random_model, tmp_path):
    target = tmp_path / "missing" / "m.onnx"
    with pytest.raises(ValueError, match="does not exist"):
        export.export_onnx(random_model, target)
    assert not os.path.exists(target.parent)


@pytest.mark.parametrize("external_data", [False, True])
def test_a_mismatch_leaves_no_file(
    random_model, tmp_path, external_data, monkeypatch
):
    target = tmp_path / "m.onnx"
    run = onnx_lib.run_onnx
    monkeypatch.setattr(
        onnx_lib, "run_onnx", lambda path, x: run(path, x) + 1e-3
    )
    with pytest.raises(
        export.VerificationError, match="differs from Keras by up to 0.001"
    ):
        export.export_onnx(random_model, target, external_data=external_data)
    assert os.listdir(tmp_path) == []


def test_bad_arguments_are_refused_by_name(random_model, tmp_path):
    # opset 7 wrote a graph ONNX Runtime rejected; a negative atol failed
    # every export as a "mismatch".
    from tf2onnx import constants

    newest = max(constants.OPSET_TO_IR_VERSION)
    for kwargs, message in [
        ({"opset": 7}, "opset=7"),
        ({"opset": newest + 1}, f"opset={newest + 1}"),
        ({"opset": "17"}, "opset='17'"),
        ({"atol": -1.0}, "atol=-1.0"),
        ({"verify": "yes"}, "verify='yes'"),
    ]:
        with pytest.raises(ValueError, match=message):
            export.export_onnx(random_model, tmp_path / "m.onnx", **kwargs)
    assert os.listdir(tmp_path) == []
    path = export.export_onnx(
        random_model, tmp_path / "m.onnx", opset=onnx_lib.MIN_OPSET
    ).path
    x = (
        np.random.default_rng(1)
        .uniform(0, 255, (1, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        onnx_lib.run_onnx(path, x), np.asarray(random_model(x)), atol=1e-4
    )


def test_weights_are_initializers_with_the_models_values(
    random_model, tmp_path
):
    # The weights are added after conversion instead of frozen into the
    # graph tf2onnx copies: each must be an initializer holding its value,
    # and the images the only input.
    import onnx
    from onnx import numpy_helper

    path = export.export_onnx(random_model, tmp_path / "m.onnx").path
    graph = onnx.load(path).graph
    assert [i.name for i in graph.input] == ["images"]
    initializers = [numpy_helper.to_array(t) for t in graph.initializer]
    for weight in random_model.weights:
        value = np.asarray(weight.numpy())
        assert any(
            i.shape == value.shape and np.array_equal(i, value)
            for i in initializers
        ), weight.path


def test_the_graph_does_not_depend_on_the_weights_values(tmp_path):
    # Frozen into the graph, a fresh model's unit LayerNorm scales and zero
    # biases were folded away by grappler (a graph trained weights never
    # get, and a faster one: it flattered ONNX Runtime in the benchmarks).
    import collections

    import onnx

    fresh = keras_vit.ViT(**TINY_EXPORT)
    trained = keras_vit.ViT(**TINY_EXPORT)
    randomize_weights(trained, seed=4)

    def ops(model, name):
        path = export.export_onnx(model, tmp_path / name).path
        graph = onnx.load(path).graph
        return collections.Counter(node.op_type for node in graph.node)

    assert ops(fresh, "fresh.onnx") == ops(trained, "trained.onnx")


def test_dropout_seed_state_is_not_left_in_the_file(tmp_path):
    # A model with dropout has seed-generator variables the inference graph
    # never reads; they must not become (unused) initializers.
    import onnx

    model = keras_vit.ViT(
        **TINY_EXPORT, dropout_rate=0.1, attention_dropout_rate=0.1
    )
    path = export.export_onnx(model, tmp_path / "m.onnx").path
    graph = onnx.load(path).graph
    used = {name for node in graph.node for name in node.input}
    assert all(t.name in used for t in graph.initializer)


def test_external_data_writes_the_weights_beside_the_model(
    random_model, tmp_path
):
    result = export.export_onnx(
        random_model, tmp_path / "m.onnx", external_data=True
    )
    path = result.path
    assert sorted(os.listdir(tmp_path)) == ["m.json", "m.onnx", "m.onnx.data"]
    assert result.metadata["file_bytes"] == os.path.getsize(
        path
    ) + os.path.getsize(path + ".data")
    umask = os.umask(0)
    os.umask(umask)
    for name in ("m.onnx", "m.onnx.data"):  # not onnx's private 0600
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~umask
    sizes = [np.asarray(w.numpy()).nbytes for w in random_model.weights]
    moved = sum(
        n for n in sizes if n >= 1024
    )  # onnx keeps those under 1 KB inline
    assert os.path.getsize(tmp_path / "m.onnx.data") >= moved
    single = export.export_onnx(
        random_model, tmp_path / "single.onnx", verify=False
    ).path
    assert (
        os.path.getsize(single) - os.path.getsize(path) > 0.9 * moved
    )  # less the references to it
    x = np.random.default_rng(2).uniform(
        0, 255, (1, *random_model.input_shape[1:])
    )
    got = onnx_lib.run_onnx(path, x.astype("float32"))
    np.testing.assert_allclose(got, np.asarray(random_model(x)), atol=1e-4)


def test_large_weights_go_to_external_data_by_default(
    random_model, tmp_path, monkeypatch
):
    # Above EXTERNAL_DATA_BYTES (ONNX files stop at 2 GiB; ViT-H/14 has
    # 2.5 GB of weights); a tiny threshold stands in for a huge model.
    export.export_onnx(random_model, tmp_path / "small.onnx")
    assert sorted(os.listdir(tmp_path)) == ["small.json", "small.onnx"]
    monkeypatch.setattr(onnx_lib, "EXTERNAL_DATA_BYTES", 1000)
    export.export_onnx(random_model, tmp_path / "big.onnx")
    assert sorted(os.listdir(tmp_path)) == [
        "big.json",
        "big.onnx",
        "big.onnx.data",
        "small.json",
        "small.onnx",
    ]


def test_weights_over_two_gib_without_external_data_is_a_clear_error(
    random_model, tmp_path, monkeypatch
):
    # The tiny model's weights reported as 2 GiB stand in for ViT-H/14's.
    monkeypatch.setattr(onnx_lib, "_weights_bytes", lambda proto: 1 << 31)
    with pytest.raises(ValueError, match=r"2\.15 GB.*external_data=False"):
        export.export_onnx(
            random_model, tmp_path / "m.onnx", external_data=False
        )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_bad_external_data_is_a_clear_error(random_model, tmp_path, bad):
    with pytest.raises(ValueError, match=f"external_data={bad!r}"):
        export.export_onnx(random_model, tmp_path / "m.onnx", external_data=bad)
    assert os.listdir(tmp_path) == []


def test_a_mixed_bfloat16_model_exports_as_float32(tmp_path):
    # ONNX Runtime has no bfloat16 kernels on CPU: the file failed to load.
    mixed = keras_vit.ViT(**TINY_EXPORT, dtype="mixed_bfloat16")
    randomize_weights(mixed, seed=2, scale=0.1)
    reference = keras_vit.ViT(**TINY_EXPORT)
    reference.set_weights(mixed.get_weights())
    path = export.export_onnx(mixed, tmp_path / "m.onnx").path
    x = (
        np.random.default_rng(1)
        .uniform(0, 255, (1, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        onnx_lib.run_onnx(path, x), np.asarray(reference(x)), atol=1e-4
    )


def test_a_re_export_without_external_data_removes_the_old_data(
    random_model, tmp_path
):
    # The old `.data` file belonged to the model being replaced; left
    # behind, it looked like part of the new export.
    target = tmp_path / "m.onnx"
    export.export_onnx(random_model, target, external_data=True)
    assert (tmp_path / "m.onnx.data").exists()
    export.export_onnx(random_model, target, external_data=False)
    assert sorted(os.listdir(tmp_path)) == ["m.json", "m.onnx"]
    x = np.zeros((1, 32, 32, 3), "float32")
    np.testing.assert_allclose(
        onnx_lib.run_onnx(str(target), x),
        np.asarray(random_model(x)),
        atol=1e-4,
    )
