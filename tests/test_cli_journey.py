"""What a user meets on the command line (the audit of 4 December): a
training run's folder is a MODEL wherever a model is loaded, and the
mistakes people make are answered in one line that names the argument and
the value received."""

import json
import os

import numpy as np
import pytest
from PIL import Image

import keras_vit
from keras_vit import cli
from keras_vit import evaluation
from keras_vit import model_argument
from keras_vit import resolver
from keras_vit.data import datasets
from keras_vit.export import verification
from tests.helpers import TINY
from tests.helpers import random_images

CLASSES = [f"kind{i}" for i in range(TINY["num_classes"])]


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder holding a tiny `.keras` model, a training run's folder
    (`run/`, its `model.keras` and `class_names.json`), an image and an
    image folder of three classes (`photos/`, four images each)."""
    root = tmp_path_factory.mktemp("journey")
    model = keras_vit.ViT(**TINY)
    model.save(root / "tiny.keras")
    (root / "run").mkdir()
    model.save(root / "run" / "model.keras")
    (root / "run" / "class_names.json").write_text(json.dumps(CLASSES))
    pixels = random_images((13, 40, 40, 3), seed=2).astype("uint8")
    Image.fromarray(pixels[0]).save(root / "img.png")
    for c, name in enumerate("abc"):
        (root / "photos" / name).mkdir(parents=True)
        for i in range(4):
            image = Image.fromarray(pixels[1 + 4 * c + i])
            image.save(root / "photos" / name / f"{i}.png")
    return root


def _error(capsys, argv):
    """The one line a failing command writes (it must fail, status 2,
    printing nothing on stdout)."""
    assert cli.main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith("keras-vit: error: ")
    return line


def test_a_folder_as_an_image_is_called_a_folder(place, capsys):
    folder = place / "photos" / "a"
    line = _error(capsys, ["predict", place / "tiny.keras", folder])
    assert "is a folder, not an image file" in line
    assert f"Received: image={str(folder)!r}" in line


def test_a_missing_export_to_verify_is_called_missing(place, capsys):
    missing = str(place / "nosuch.tflite")
    line = _error(
        capsys, ["verify", missing, "--reference", place / "tiny.keras"]
    )
    assert "does not exist" in line
    assert f"Received: exported={missing!r}" in line
    with pytest.raises(ValueError, match="does not exist"):
        verification.verify(missing, place / "tiny.keras")


def test_a_missing_output_folder_names_output(place, capsys):
    output = str(place / "x" / "y" / "z.tflite")
    line = _error(
        capsys,
        ["export", place / "tiny.keras", "--format", "tflite"]
        + ["--output", output, "--no-verify"],
    )
    assert "`output` into does not exist" in line
    assert line.endswith(f"Received: output={output!r}")
    assert "metadata" not in line


@pytest.mark.parametrize("command", ["predict", "export", "inspect"])
def test_a_preset_in_weights_is_refused_for_a_model_file(
    command, place, capsys
):
    model = str(place / "tiny.keras")
    argv = {
        "predict": ["predict", model, place / "img.png"],
        "export": ["export", model, "--format", "tflite", "--output", "o"],
        "inspect": ["inspect", model, "--image", place / "img.png"]
        + ["--output", place / "figures"],
    }[command]
    line = _error(capsys, argv + ["--weights", "augreg_in21k"])
    assert "`weights` applies to builder names only" in line
    assert f"Received: model={model!r}, weights='augreg_in21k'" in line


def test_a_weights_file_with_a_model_file_is_left_to_the_loader(place):
    model = place / "tiny.keras"
    for weights in (None, "w.npz", str(place / "tiny.keras")):
        assert resolver.locate(model, weights) == str(model)
    assert resolver.locate("ViT_B16", "augreg_in21k") == "ViT_B16"  # a name


def test_an_unknown_model_points_to_the_presets_command(place, capsys):
    line = _error(capsys, ["predict", "nosuch_model", place / "img.png"])
    assert "`keras-vit presets`" in line
    assert line.endswith("Received: model='nosuch_model'")


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "{}", "--format", "tflite", "--output", "o.tflite"],
        ["benchmark-export", "{}"],
        ["verify", "x.tflite", "--reference", "{}"],
        ["inspect", "{}", "--image", "img.png", "--output", "f"],
        ["few-shot", "{}", "--dataset", "digits"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_takes_a_folder_as_a_training_run(
    argv, place, capsys, monkeypatch
):
    # A folder that is no run is refused as such (not as an unknown model
    # name), before anything is loaded.
    monkeypatch.chdir(place)
    (place / "x.tflite").write_bytes(b"")
    argv = [a.format("photos") for a in argv]
    line = _error(capsys, argv)
    assert "not a training run's folder (it holds no model.keras)" in line
    name = "reference" if argv[0] == "verify" else "model"
    assert line.endswith(f"Received: {name}='photos'")


def test_a_run_folder_exports_verifies_and_inspects(place, capsys):
    run, output = place / "run", place / "run.tflite"
    assert (
        cli.main(
            ["export", str(run), "--format", "tflite", "--output", str(output)]
            + ["--no-verify"]
        )
        == 0
    )
    # The run's class names went into the export, as from its model.keras.
    sidecar = json.loads((place / "run.json").read_text())
    assert sidecar["class_names"] == CLASSES
    capsys.readouterr()
    assert (
        cli.main(
            ["verify", str(output), "--reference", str(run)]
            + ["--num-images", "2", "--quiet"]
        )
        == 0
    )
    assert capsys.readouterr().out.rstrip().endswith("passed")
    figures = place / "figures"
    assert (
        cli.main(
            ["inspect", str(run), "--image", str(place / "img.png")]
            + ["--output", str(figures)]
        )
        == 0
    )
    assert (figures / "index.html").is_file()


def test_a_dataset_named_like_a_folder_here_suggests_folder(place, monkeypatch):
    pytest.importorskip("tensorflow_datasets")
    monkeypatch.chdir(place)
    with pytest.raises(ValueError) as caught:
        datasets.load("photos")
    message = str(caught.value)
    assert "an image folder is given as 'folder:photos'" in message
    assert message.endswith("Received: dataset='photos'")


def test_images_lying_in_the_folder_itself_are_counted(place):
    name = f"folder:{place / 'photos' / 'a'}"
    with pytest.raises(ValueError) as caught:
        datasets.load(name)
    message = str(caught.value)
    assert "4 images lie directly in the image folder" in message
    assert "each class needs its own sub-folder" in message
    assert message.endswith(f"Received: dataset={name!r}")


def test_too_few_shots_name_the_classes_and_what_to_change():
    labels = np.repeat(np.arange(3), [2, 6, 1])
    with pytest.raises(ValueError) as caught:
        evaluation.sample_shots(
            labels, 3, (1, 5), 0, class_names=["cat", "dog", "emu"]
        )
    message = str(caught.value)
    assert "2 class(es) have fewer ('cat': 2, 'emu': 1)" in message
    assert "--shots" in message and "--test-fraction" not in message
    assert message.endswith("Received: shots=[1, 5]")


def test_few_shot_on_a_held_out_folder_suggests_test_fraction(place, capsys):
    line = _error(
        capsys,
        ["few-shot", place / "tiny.keras", "--dataset"]
        + [f"folder:{place / 'photos'}", "--shots", "4"]
        + ["--test-fraction", "0.5", "--quiet"],
    )
    # Half the images are held out to test on: what is left of each class.
    from keras_vit.data.pipeline import holdout_indices

    pool, _ = holdout_indices(12, 0.5, name="test_fraction")
    left = np.bincount(pool // 4, minlength=3)
    listing = ", ".join(f"{c!r}: {n}" for c, n in zip("abc", left))
    assert f"3 class(es) have fewer ({listing})" in line
    assert "--shots" in line and "--test-fraction" in line
    assert line.endswith("Received: shots=[4], test_fraction=0.5")


def _model_helps():
    """`{command: help}` of the argument naming the model of each command
    that loads one."""
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    found = {}
    for command, dest in (
        ("predict", "model"),
        ("export", "model"),
        ("benchmark-export", "model"),
        ("verify", "reference"),
        ("inspect", "model"),
        ("few-shot", "model"),
    ):
        (action,) = [a for a in commands[command]._actions if a.dest == dest]
        found[command] = action.help
    return found


def test_every_model_argument_names_presets_and_run_folders():
    for command, text in _model_helps().items():
        assert model_argument.MODEL_HELP in text, command
    assert "preset's unique name" in model_argument.MODEL_HELP
    assert "training run's folder" in model_argument.MODEL_HELP


def test_a_run_folder_is_its_model_file(place):
    run = place / "run"
    assert resolver.locate(run) == os.path.join(run, "model.keras")
    assert resolver.locate("ViT_B16") == "ViT_B16"
