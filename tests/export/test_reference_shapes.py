"""`verify` against a reference model of another class count, head or
image size than the export: a `ValueError` naming both models' shapes,
before any image is run (it was NumPy's broadcast error, LiteRT's
"Dimension mismatch" or a cut-off subprocess traceback, even with
`raise_on_failure=False`)."""

import re

import numpy as np
import pytest

import keras_vit
from keras_vit import cli
from keras_vit import export
from keras_vit.export import verification_checks
from tests.export.helpers import TINY_EXPORT
from tests.helpers import random_images

REFERENCES = {
    "num_classes": (dict(num_classes=5), "(32, 32, 3)", "(None, 5)"),
    "image_size": (dict(image_size=48), "(48, 48, 3)", "(None, 10)"),
    "include_top": (dict(include_top=False), "(32, 32, 3)", "(None, 32)"),
}
EXPORTS = {"tflite": "(1, 10)", "saved_model": "(None, 10)"}


@pytest.fixture(scope="module")
def exports(random_model_path, random_tflite_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved") / "sm"
    export.export_saved_model(random_model_path, folder, verify=False)
    return {"tflite": str(random_tflite_path), "saved_model": str(folder)}


@pytest.mark.parametrize("fmt", list(EXPORTS))
@pytest.mark.parametrize("changed", list(REFERENCES))
@pytest.mark.parametrize("data", ["array", "digits"])
def test_a_reference_of_other_shapes_is_named(exports, fmt, changed, data):
    arguments, model_in, model_out = REFERENCES[changed]
    reference = keras_vit.ViT(**{**TINY_EXPORT, **arguments}, name="other")
    images = random_images((4, 32, 32, 3)) if data == "array" else data
    expected = (
        f"Received: reference='other' with input {model_in} / output "
        f"{model_out} for an export of (32, 32, 3) / {EXPORTS[fmt]}"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        export.verify(
            exports[fmt],
            reference,
            data=images,
            num_images=4,
            raise_on_failure=False,
        )


def test_the_reference_it_came_from_passes(exports, random_model):
    for fmt in EXPORTS:
        report = export.verify(
            exports[fmt], random_model, data="digits", num_images=4
        )
        assert report.passed


def _other_reference(kind, folder):
    """The argument `keras-vit verify --reference` gets for a 5-class
    model, as a `.keras` file, a training run's folder or a builder name,
    and the flags that go with it."""
    if kind == "builder":
        return "ViT_Ti16", ["--image-size", "32", "--num-classes", "5"]
    model = keras_vit.ViT(**{**TINY_EXPORT, "num_classes": 5}, name="other")
    if kind == "file":
        path = folder / "tiny.keras"
        model.save(path)
        return str(path), []
    run = folder / "run"
    run.mkdir()
    model.save(run / "model.keras")
    return str(run), []


@pytest.mark.parametrize(
    "fmt, kind",
    [
        ("tflite", "file"),
        ("tflite", "run_folder"),
        ("tflite", "builder"),
        ("saved_model", "file"),
    ],
)
def test_the_command_names_the_reference_as_passed(
    exports, fmt, kind, tmp_path, capsys
):
    # It named the model `keras-vit verify` had loaded ("'other'",
    # "'vit_ti16'"), not the file, folder or builder name passed.
    reference, flags = _other_reference(kind, tmp_path)
    argv = ["verify", exports[fmt], "--reference", reference, *flags]
    assert cli.main([*argv, "--num-images", "4", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"Received: reference={reference!r} with input" in error, error


def test_compare_refuses_outputs_of_other_shapes():
    with pytest.raises(
        ValueError, match=r"shape \(2, 10\), Keras's .*\(2, 5\)"
    ):
        verification_checks.compare(
            np.zeros((2, 10)), np.zeros((2, 5)), runtime="x"
        )
