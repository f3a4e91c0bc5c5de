"""ONNX export (optional: tf2onnx and onnxruntime), used to time ONNX Runtime."""

import os

import numpy as np
import pytest

from keras_vit import export

pytest.importorskip("tf2onnx")
pytest.importorskip("onnxruntime")

from keras_vit.export import onnx as onnx_lib  # noqa: E402


def test_onnx_matches_keras_with_exact_gelu(random_model, tmp_path):
    # tf2onnx has no converter for TensorFlow's Erfc (the exact GELU); the
    # registered one must give Keras's outputs.
    path = export.export_onnx(random_model, tmp_path / "m.onnx", batch_size=None)
    x = np.random.default_rng(1).uniform(0, 255, (3, *random_model.input_shape[1:]))
    x = x.astype("float32")
    got = onnx_lib.run_onnx(path, x)
    np.testing.assert_allclose(got, np.asarray(random_model(x)), atol=1e-4)
    import onnx

    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert "Erf" in ops


def test_bad_output_folder_leaves_nothing(random_model, tmp_path):
    target = tmp_path / "missing" / "m.onnx"
    with pytest.raises(ValueError, match="does not exist"):
        export.export_onnx(random_model, target)
    assert not os.path.exists(target.parent)


def test_a_mismatch_leaves_no_file(random_model, tmp_path):
    target = tmp_path / "m.onnx"
    with pytest.raises(RuntimeError, match="differs from Keras"):
        export.export_onnx(random_model, target, atol=-1.0)
    assert os.listdir(tmp_path) == []


def test_conversion_collects_each_discarded_graph_copy(random_model, tmp_path, monkeypatch):
    # tf2onnx deep-copies the graph before every optimizer pass; without a
    # collection per pass the copies pile up (ViT-B/16: 18.8 GB of RSS).
    from tf2onnx import optimizer

    original = optimizer._get_optimizers
    collections = []
    monkeypatch.setattr(onnx_lib.gc, "collect", lambda: collections.append(1))
    export.export_onnx(random_model, tmp_path / "m.onnx")
    assert len(collections) >= len(original())  # at least one round of passes
    assert optimizer._get_optimizers is original  # restored afterwards
