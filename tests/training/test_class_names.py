"""A run keeps the class names it trained on, for its exports.

They were derived again from the run's dataset at export time: for an image
folder, its sub-folders as they are then, so a renamed or moved folder gave
other names (or none), silently.
"""

import json
import os

import keras
import pytest

from keras_vit.export import metadata
from keras_vit.training import train
from keras_vit.training.train import CLASS_NAMES_FILE
from tests.training.test_train import tiny_config

CLASSES = ["cat", "dog"]


def _image_folder(root, classes=CLASSES, per_class=8):
    from PIL import Image

    from tests.helpers import random_images

    for index, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        pixels = random_images((per_class, 16, 16, 3), seed=index)
        for i, image in enumerate(pixels.astype("uint8")):
            Image.fromarray(image).save(root / name / f"{i}.png")
    return root


def _folder_run(tmp_path, folder, **kwargs):
    return tiny_config(
        tmp_path, dataset=f"folder:{folder}", batch_size=8, **kwargs
    )


@pytest.mark.slow
def test_the_run_records_its_class_names_and_exports_keep_them(tmp_path):
    from keras_vit import export

    folder = _image_folder(tmp_path / "photos")
    train(_folder_run(tmp_path, folder, epochs=1))
    run = tmp_path / "run"
    with open(run / CLASS_NAMES_FILE) as file:
        assert json.load(file) == CLASSES
    # The folder changes after the run: a class renamed, one added.
    os.rename(folder / "dog", folder / "wolf")
    (folder / "bird").mkdir()
    for model in ("model.keras", "best.keras"):
        assert metadata.training_run_class_names(str(run / model)) == CLASSES
        # The model carries them too.
        loaded = keras.saving.load_model(str(run / model))
        assert loaded.class_names == tuple(CLASSES)
    tflite = export.export_tflite(
        str(run / "model.keras"), tmp_path / "vit.tflite", verify=False
    )
    saved = export.export_saved_model(
        str(run / "model.keras"), tmp_path / "sm", verify=False
    )
    for result in (tflite, saved):
        with open(result.metadata_path) as file:
            assert json.load(file)["class_names"] == CLASSES
    assert saved.metadata_path == str(tmp_path / "sm" / "keras_vit.json")


@pytest.mark.slow
def test_a_rerun_on_changed_classes_is_refused(tmp_path):
    folder = _image_folder(tmp_path / "photos")
    train(_folder_run(tmp_path, folder, epochs=1))
    # Same count, other names: labels would silently mean other classes.
    os.rename(folder / "dog", folder / "wolf")
    with pytest.raises(ValueError, match=r"\['cat', 'dog'\] there"):
        train(_folder_run(tmp_path, folder, epochs=2))
    os.rename(folder / "wolf", folder / "dog")
    result = train(_folder_run(tmp_path, folder, epochs=2))
    assert result.initial_epoch == 1  # it resumed


@pytest.mark.slow
def test_a_rerun_on_changed_images_is_refused(tmp_path):
    # The validation split is drawn by index over the folder's files: after
    # an image was added, a resumed run trained on images it had validated
    # on (only the class names were compared).
    import shutil

    folder = _image_folder(tmp_path / "photos")
    train(_folder_run(tmp_path, folder, epochs=1, validation_split=0.25))
    with open(tmp_path / "run" / "config.json") as file:
        examples = json.load(file)["resolved"]["examples"]
    assert examples["num_examples"] == 16 and len(examples["digest"]) == 64
    added = folder / "dog" / "extra.png"
    shutil.copy(folder / "dog" / "0.png", added)
    with pytest.raises(
        ValueError,
        match=r"other images.*16 examples, files digest "
        + examples["digest"][:12]
        + r" there, 17 examples.*Received: output=",
    ):
        train(_folder_run(tmp_path, folder, epochs=2, validation_split=0.25))
    # As many images, another one: the files tell.
    os.remove(folder / "dog" / "0.png")
    with pytest.raises(ValueError, match=r"16 examples.* there, 16 examples"):
        train(_folder_run(tmp_path, folder, epochs=2, validation_split=0.25))
    os.rename(added, folder / "dog" / "0.png")
    result = train(
        _folder_run(tmp_path, folder, epochs=2, validation_split=0.25)
    )
    assert result.initial_epoch == 1  # it resumed


def test_a_run_written_before_lists_its_folder_as_then(tmp_path):
    # A run folder of an earlier version: config.json, no class_names.json.
    folder = _image_folder(tmp_path / "photos", per_class=1)
    here = os.path.dirname(__file__)
    with open(os.path.join(here, "nested_config.json")) as file:
        config = json.load(file)
    config["data"]["dataset"] = f"folder:{folder}"
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config))
    model = str(run / "model.keras")
    (run / "model.keras").write_bytes(b"")
    # A hidden folder is no class, here as in training.
    (folder / ".ipynb_checkpoints").mkdir()
    assert metadata.training_run_class_names(model) == CLASSES
    # The file, where there is one, comes first.
    (run / CLASS_NAMES_FILE).write_text('["x", "y"]')
    assert metadata.training_run_class_names(model) == ["x", "y"]


@pytest.mark.parametrize("text", ["not json", "{}", "[]", "[1, 2]"])
def test_a_broken_class_names_file_is_named_not_guessed_around(tmp_path, text):
    (tmp_path / CLASS_NAMES_FILE).write_text(text)
    (tmp_path / "model.keras").write_bytes(b"")
    with pytest.raises(ValueError, match="class_names.json"):
        metadata.training_run_class_names(str(tmp_path / "model.keras"))


def test_a_builder_name_reads_no_class_names_from_the_current_folder(
    tmp_path, monkeypatch
):
    # `export_tflite("ViT_Ti16", ...)`: the name's folder is "", the
    # current directory, which may hold any run's class names.
    (tmp_path / CLASS_NAMES_FILE).write_text('["cat", "dog"]')
    monkeypatch.chdir(tmp_path)
    assert metadata.training_run_class_names("ViT_Ti16") is None
    (tmp_path / "model.keras").write_bytes(b"")
    assert metadata.training_run_class_names("model.keras") == ["cat", "dog"]


@pytest.mark.slow
def test_masked_patch_prediction_records_no_class_names(tmp_path):
    # It has no classes: an "unlabelled" name would be a wrong one.
    from PIL import Image

    from tests.helpers import random_images

    folder = tmp_path / "photos"
    folder.mkdir()
    for i, image in enumerate(random_images((16, 16, 16, 3)).astype("uint8")):
        Image.fromarray(image).save(folder / f"{i}.png")
    train(_folder_run(tmp_path, folder, epochs=1, objective="masked_patches"))
    run = tmp_path / "run"
    assert (run / "model.keras").is_file()
    assert not (run / CLASS_NAMES_FILE).exists()


def test_a_users_class_names_file_is_not_overwritten(tmp_path):
    # Not a run's folder: a class_names.json there is a user's.
    out = tmp_path / "run"
    out.mkdir()
    (out / CLASS_NAMES_FILE).write_text("mine")
    with pytest.raises(ValueError, match="class_names.json"):
        train(tiny_config(tmp_path, epochs=1))
    assert (out / CLASS_NAMES_FILE).read_text() == "mine"
    assert os.listdir(out) == [CLASS_NAMES_FILE]
