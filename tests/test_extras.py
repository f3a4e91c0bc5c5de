"""Each feature that needs an optional dependency says which extra of
`keras-vision-transformer` installs it when it is missing."""

import sys

import pytest

from keras_vit import extras
from keras_vit.export import graph
from keras_vit.export import onnx
from keras_vit.export import openvino
from keras_vit.export import runtime
from keras_vit.training import train
from tests.helpers import TINY
from tests.training.test_train import tiny_config


def _missing(monkeypatch, *modules):
    # `None` in sys.modules makes an import raise ImportError.
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def keras_vit_model():
    from keras_vit import ViT

    return ViT(**TINY)


def test_every_optional_module_has_its_extra():
    assert set(extras.EXTRAS) == {
        "tensorflow_datasets",
        "matplotlib",
        "sklearn",
        "tensorboard",
        "ai_edge_litert",
        "tf2onnx",
        "onnx",
        "onnxruntime",
        "openvino",
        "huggingface_hub",
    }


def test_litert_names_the_export_extra(monkeypatch, tmp_path):
    _missing(
        monkeypatch,
        "ai_edge_litert",
        "ai_edge_litert.interpreter",
        "ai_edge_litert.schema_py_generated",
    )
    with pytest.raises(extras.MissingExtraError, match=r"\[export\]"):
        runtime.load_interpreter(tmp_path / "m.tflite")
    with pytest.raises(extras.MissingExtraError, match=r"\[export\]"):
        graph.read_graph(b"TFL3")


@pytest.mark.parametrize("module", ["tf2onnx", "onnxruntime"])
def test_onnx_export_names_the_onnx_extra(monkeypatch, tmp_path, module):
    _missing(monkeypatch, module)
    with pytest.raises(
        extras.MissingExtraError, match=r"ONNX export.*\[onnx\]"
    ):
        onnx.export_onnx(keras_vit_model(), str(tmp_path / "m.onnx"))
    assert not list(tmp_path.iterdir())


def test_openvino_export_names_the_openvino_extra(monkeypatch, tmp_path):
    _missing(monkeypatch, "openvino")
    with pytest.raises(
        extras.MissingExtraError, match=r"OpenVINO export.*\[openvino\]"
    ):
        openvino.export_openvino(keras_vit_model(), str(tmp_path / "m.xml"))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "module, feature",
    [("matplotlib", "learning curves"), ("tensorboard", "TensorBoard logs")],
)
def test_training_names_the_train_extra_before_it_starts(
    monkeypatch, tmp_path, module, feature
):
    _missing(monkeypatch, module)
    config = tiny_config(tmp_path, epochs=1)
    with pytest.raises(
        extras.MissingExtraError, match=rf"{feature}.*\[train\]"
    ):
        train(config)
    assert not (tmp_path / "run").exists()
