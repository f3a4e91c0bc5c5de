"""OpenVINO export (optional: openvino), used to time OpenVINO Runtime."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import export
from keras_vit.export import float32_copy
from tests.export.helpers import TINY_EXPORT
from tests.helpers import randomize_weights

pytest.importorskip("openvino")

from keras_vit.export import openvino as openvino_lib  # noqa: E402


def _pixels(model, batch, seed=1):
    x = np.random.default_rng(seed).uniform(
        0, 255, (batch, *model.input_shape[1:])
    )
    return x.astype("float32")


def test_openvino_matches_keras(random_model, tmp_path):
    path = export.export_openvino(
        random_model, tmp_path / "m.xml", batch_size=None
    ).path
    assert sorted(os.listdir(tmp_path)) == ["m.bin", "m.json", "m.xml"]
    x = _pixels(random_model, 3)
    expected = np.asarray(random_model(x))
    np.testing.assert_allclose(
        openvino_lib.run_openvino(path, x), expected, atol=1e-4
    )
    # bfloat16 is a compile-time choice on the same file: within its
    # rounding (4e-4 seen), and not float32's result where the CPU has
    # bfloat16 (elsewhere OpenVINO may compute it in float32).
    from keras_vit.training import recipe

    error = np.max(
        np.abs(
            openvino_lib.run_openvino(path, x, precision="bfloat16") - expected
        )
    )
    assert error < 1e-2
    if recipe.cpu_has_bfloat16():
        assert error > 1e-5


def test_a_static_batch_is_fixed_in_the_graph(random_model, tmp_path):
    import openvino

    path = export.export_openvino(
        random_model, tmp_path / "m.xml", batch_size=4
    ).path
    graph = openvino.Core().read_model(path)
    assert list(graph.inputs[0].get_shape()) == [4, 32, 32, 3]
    # OpenVINO's error for a batch the graph does not have is its own type,
    # not part of its API: any error will do.
    with pytest.raises(Exception):  # noqa: B017
        openvino_lib.run_openvino(path, _pixels(random_model, 2))


def test_hybrids_and_mixed_precision_models_export(tmp_path):
    # A ResNet stem (convolutions, GroupNorm, max-pooling), and a bfloat16
    # model exported as its float32 copy, checked against that copy.
    hybrid = keras_vit.ViT(
        **{**TINY_EXPORT, "patch_size": 1},
        stem={"block_units": [1, 1], "width": 8, "root_width": 16, "groups": 4},
    )
    randomize_weights(hybrid, seed=4)
    path = export.export_openvino(hybrid, tmp_path / "hybrid.xml").path
    x = _pixels(hybrid, 1)
    np.testing.assert_allclose(
        openvino_lib.run_openvino(path, x), np.asarray(hybrid(x)), atol=1e-4
    )
    mixed = keras_vit.ViT(**TINY_EXPORT, dtype="mixed_bfloat16")
    randomize_weights(mixed, seed=5)
    path = export.export_openvino(mixed, tmp_path / "mixed.xml").path
    reference = float32_copy.float32_model(mixed)
    np.testing.assert_allclose(
        openvino_lib.run_openvino(path, x), np.asarray(reference(x)), atol=1e-4
    )
    assert mixed.dtype_policy.name == "mixed_bfloat16"


def test_a_mismatch_leaves_no_file(random_model, tmp_path, monkeypatch):
    run = openvino_lib.run_openvino
    monkeypatch.setattr(
        openvino_lib, "run_openvino", lambda path, x: run(path, x) + 1e-3
    )
    with pytest.raises(
        export.VerificationError, match="differs from Keras by up to 0.001"
    ):
        export.export_openvino(random_model, tmp_path / "m.xml")
    assert os.listdir(tmp_path) == []


def test_bad_arguments_are_refused_by_name(
    random_model, random_openvino_path, tmp_path
):
    for kwargs, message in [
        ({"output": tmp_path / "m.onnx"}, "output=.*m.onnx"),
        ({"output": tmp_path / "missing" / "m.xml"}, "does not exist"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"atol": -1.0}, "atol=-1.0"),
        ({"verify": "yes"}, "verify='yes'"),
    ]:
        kwargs = {"output": tmp_path / "m.xml", **kwargs}
        with pytest.raises(ValueError, match=message):
            export.export_openvino(random_model, **kwargs)
    assert os.listdir(tmp_path) == []
    path = random_openvino_path  # an export (tests/export/conftest.py's)
    with pytest.raises(ValueError, match="precision='int4'"):
        openvino_lib.compile_openvino(path, precision="int4")
    with pytest.raises(ValueError, match="num_threads=0"):
        openvino_lib.compile_openvino(path, num_threads=0)
    assert keras.backend.backend() == "tensorflow"
