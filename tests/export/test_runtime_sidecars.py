"""The metadata sidecar of ONNX and OpenVINO exports (`x.onnx` / `x.xml`
-> `x.json`), as TFLite's: what it holds, what it never replaces, and that
a failed or stopped re-export never leaves a model beside another one's
metadata. One test per behaviour, run for each format."""

import dataclasses
import importlib.util
import os
import shutil

import pytest

import keras_vit
from keras_vit import export
from tests.export.helpers import TINY_EXPORT
from tests.helpers import randomize_weights


@dataclasses.dataclass
class Format:
    """An export format's names: its exporter, its module and the
    functions a test replaces there (the runtime that verifies, the
    conversion), its extension and the files an export writes."""

    name: str
    needs: tuple
    module: str
    run: str
    convert: str
    extension: str
    files: tuple

    def export(self, *args, **kwargs):
        return getattr(export, f"export_{self.name}")(*args, **kwargs)

    @property
    def lib(self):
        return importlib.import_module(f"keras_vit.export.{self.module}")


FORMATS = [
    Format(
        "onnx",
        ("tf2onnx", "onnxruntime"),
        "onnx",
        "run_onnx",
        "_convert",
        ".onnx",
        ("m.json", "m.onnx"),
    ),
    Format(
        "openvino",
        ("openvino",),
        "openvino",
        "run_openvino",
        "_save_ir",
        ".xml",
        ("m.bin", "m.json", "m.xml"),
    ),
]


@pytest.fixture(params=FORMATS, ids=lambda f: f.name)
def fmt(request):
    for module in request.param.needs:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    return request.param


@pytest.fixture
def earlier_export(fmt, request, tmp_path):
    """`m` + the format's extension in `tmp_path`: a copy of the random
    model's export to `fmt` (unlabelled; tests/export/conftest.py's, made
    once for the run), as an earlier export that a test exports over."""
    shared = request.getfixturevalue(f"random_{fmt.name}_path").parent
    for name in fmt.files:
        shutil.copy(shared / name, tmp_path / name)
    return tmp_path / f"m{fmt.extension}"


def test_the_sidecar_holds_labels_input_spec_and_resize(
    fmt, random_model_path, tmp_path
):
    # ONNX and OpenVINO exports wrote no metadata: no class names, input
    # spec or resize.
    setting = {"crop_pct": 1.0, "interpolation": "bicubic"}
    model = keras_vit.ViT(**TINY_EXPORT, image_resize=setting)
    randomize_weights(model, seed=6)
    labels = [f"label{i}" for i in range(10)]
    result = fmt.export(model, tmp_path / f"m{fmt.extension}", labels=labels)
    assert result.metadata_path == str(tmp_path / "m.json")
    # A result goes where the path these exporters once returned went.
    assert (
        os.fspath(result) == result.path == str(tmp_path / f"m{fmt.extension}")
    )
    found = export.read_metadata(result)
    assert found == result.metadata
    assert found["format"] == fmt.name
    assert found["class_names"] == labels
    assert found["input"]["shape"] == [1, 32, 32, 3]
    assert (found["input"]["height"], found["input"]["width"]) == (32, 32)
    assert found["input"]["pixel_range"] == [0, 255]
    assert found["input"]["image_resize"] == {**setting, "antialias": True}
    assert found["output"] == {
        "kind": "probabilities",
        "shape": [1, 10],
        "dtype": "float32",
    }
    model_files = [f for f in fmt.files if f != "m.json"]
    assert found["file_bytes"] == sum(
        os.path.getsize(tmp_path / f) for f in model_files
    )
    assert found["parameters"] == model.count_params()
    # Without labels: the training run's class names, as for TFLite.
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(random_model_path, run / "model.keras")
    (run / "config.json").write_text('{"data": {"dataset": "digits"}}')
    result = fmt.export(
        str(run / "model.keras"),
        tmp_path / f"run{fmt.extension}",
        batch_size=None,
    )
    assert result.metadata["class_names"] == [str(d) for d in range(10)]
    assert result.metadata["input"]["shape"] == [None, 32, 32, 3]


def test_a_sidecar_it_should_not_replace_is_refused_before_the_conversion(
    fmt, random_model, tmp_path, monkeypatch
):
    notes = tmp_path / "m.json"
    output = tmp_path / f"m{fmt.extension}"
    monkeypatch.setattr(
        fmt.lib, fmt.convert, lambda *a: pytest.fail("converted")
    )
    # A file keras_vit did not write: refused unless overwrite.
    notes.write_text('{"mine": true}')
    with pytest.raises(ValueError, match=r"metadata of an export to .*"):
        fmt.export(random_model, output)
    # Another export's metadata (vit.tflite and vit.onnx share vit.json):
    # refused even with overwrite, which would leave that one without it.
    notes.write_text('{"format": "tflite", "keras_vit_version": "0.1.0"}')
    for overwrite in (False, True):
        with pytest.raises(
            ValueError,
            match=r"metadata of the tflite export beside it.*Received: output=",
        ):
            fmt.export(random_model, output, overwrite=overwrite)
    # Another extension: `keras-vit predict vit.tflite` ran it with LiteRT.
    with pytest.raises(
        ValueError,
        match=rf"must be a `\{fmt.extension}` file.*output='.*n.tflite'",
    ):
        fmt.export(random_model, str(tmp_path / "n.tflite"))
    # The sidecar's own name: the metadata would overwrite the model.
    with pytest.raises(ValueError, match=r"Received: output='.*m.json'"):
        fmt.export(random_model, notes, overwrite=True)
    assert os.listdir(tmp_path) == ["m.json"]


def test_a_failed_re_export_keeps_the_earlier_export_and_its_sidecar(
    fmt, earlier_export, random_model, tmp_path, monkeypatch
):
    labels = list("abcdefghij")
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert sorted(before) == sorted(fmt.files)
    run = getattr(fmt.lib, fmt.run)
    monkeypatch.setattr(fmt.lib, fmt.run, lambda path, x: run(path, x) + 1e-3)
    with pytest.raises(export.VerificationError):
        fmt.export(random_model, earlier_export, labels=labels)
    after = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    assert after == before
    monkeypatch.setattr(fmt.lib, fmt.run, run)
    # An earlier export's sidecar is replaced with the new one.
    fmt.export(random_model, earlier_export, labels=labels)
    assert export.read_metadata(earlier_export)["class_names"] == labels


def test_a_re_export_stopped_before_its_metadata_leaves_none(
    fmt, earlier_export, random_model, tmp_path, monkeypatch
):
    # Stopped after the new model took its place but before its metadata
    # was written: the old metadata is gone, not left to describe it.
    output = earlier_export
    assert (tmp_path / "m.json").exists()
    old_model = output.read_bytes()

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fmt.lib.metadata_lib, "write", stopped)
    with pytest.raises(KeyboardInterrupt):
        fmt.export(random_model, output, batch_size=2)
    assert output.read_bytes() != old_model
    assert not (tmp_path / "m.json").exists()
