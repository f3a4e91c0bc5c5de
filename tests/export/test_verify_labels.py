"""A labelled image folder's accuracy is measured on the model's classes.

A folder's labels index its own sorted sub-folders: one missing class
shifted every later label, and the verification reported a wrong accuracy
with no error. They are matched to the export's class names, or refused.
"""

import numpy as np
import pytest
from PIL import Image

import keras_vit
from keras_vit import export
from keras_vit.export import verification
from keras_vit.export import verification_checks
from tests.export.helpers import TINY_EXPORT
from tests.helpers import randomize_weights

NAMES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A 3-class model, and images (uint8-valued: a random colour each,
    with noise) each with the class the model gives it (all three occur:
    15, 22 and 23 of the 60)."""
    model = keras_vit.ViT(**{**TINY_EXPORT, "num_classes": 3})
    randomize_weights(model, seed=0, scale=0.3)
    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (60, 1, 1, 3))
    noise = rng.integers(-20, 21, (60, 32, 32, 3))
    images = np.clip(colours + noise, 0, 255).astype("float32")
    top = model.predict(images, verbose=0).argmax(-1)
    assert set(top.tolist()) == {0, 1, 2}
    return model, images, top, tmp_path_factory.mktemp("labels")


def _folder(root, images, names):
    """A folder of PNGs, one sub-folder per class named by `names[i]`
    (`None`: left out)."""
    root.mkdir()
    for i, (image, name) in enumerate(zip(images, names)):
        if name is not None:
            (root / name).mkdir(exist_ok=True)
            Image.fromarray(image.astype("uint8")).save(
                root / name / f"{i}.png"
            )
    return f"folder:{root}"


def test_a_folder_missing_a_class_is_scored_on_the_models_classes(labelled):
    model, images, top, place = labelled
    # Class b left out: the folder's sub-folders are [a, c], whose labels
    # were 0 and 1, and every c image was counted wrong.
    keep = top != 1
    folder = _folder(place / "ac", images[keep], [NAMES[t] for t in top[keep]])
    result = export.export_tflite(
        model,
        place / "m.tflite",
        labels=NAMES,
        verify_data=folder,
        num_verify_images=100,
    )
    expected = result.report.comparisons
    for c in expected:
        # The labels are the model's own classes: Keras scores 1.0, and
        # the export agrees with Keras on every image.
        assert c.reference_accuracy == 1.0, c
        assert c.accuracy == c.top1_agreement == 1.0, c
    # The sidecar and the report say what it was checked on.
    checked = {"source": folder, "images": int(keep.sum()), "labelled": True}
    assert result.metadata["verified_on"] == [checked]
    assert export.read_metadata(place / "m.tflite")["verified_on"] == [checked]
    assert "labelled with the model's classes" in result.report.summary()
    # `keras-vit verify` reads the names from the export's metadata.
    report = verification.verify(
        place / "m.tflite", model, data=folder, verbose=0
    )
    assert [c.reference_accuracy for c in report.comparisons] == [1.0] * 3


def test_a_folder_whose_classes_are_not_the_models_is_refused(labelled):
    model, images, top, place = labelled
    folder = _folder(place / "ad", images[:6], ["a", "d", "d", "a", "e", "a"])
    with pytest.raises(ValueError) as caught:
        export.export_tflite(
            model, place / "x.tflite", labels=NAMES, verify_data=folder
        )
    message = str(caught.value)
    assert "its classes ['d', 'e'] are not among the model's" in message
    assert message.endswith(f"Received: data={folder!r}")
    assert not (place / "x.tflite").exists()


def test_without_names_a_folder_of_another_class_count_is_refused(labelled):
    model, images, top, place = labelled
    folder = _folder(place / "two", images[:4], ["a", "c", "a", "c"])
    with pytest.raises(ValueError) as caught:
        export.export_tflite(model, place / "y.tflite", verify_data=folder)
    message = str(caught.value)
    assert "it has 2 classes (['a', 'c']), the model 3" in message
    assert message.endswith(f"Received: data={folder!r}")
    # A dataset's labels that cannot be matched give no accuracy instead:
    # digits (10 classes) verifies any model.
    result = export.export_tflite(
        model, place / "z.tflite", labels=NAMES, num_verify_images=4
    )
    assert all(c.accuracy is None for c in result.report.comparisons)
    # ... and the report and the sidecar say so: an agreement, no accuracy.
    assert result.metadata["verified_on"] == [
        {"source": "digits (test)", "images": 4, "labelled": False}
    ]
    assert (
        "checked on digits (test): 4 images, without labels of the model's "
        "classes: agreement with the Keras model, not accuracy"
    ) in result.report.summary()
    unverified = export.export_tflite(model, place / "u.tflite", verify=False)
    assert unverified.metadata["verified_on"] is None


def test_compare_refuses_labels_that_are_no_class_of_the_outputs():
    outputs = np.eye(3)[[0, 1, 2, 2]]
    assert verification_checks.compare(
        outputs, outputs, np.array([0, 1, 2, 0])
    ).accuracy
    for labels in (np.array([0, 1, 3, 2]), np.array([0, 1, 2])):
        with pytest.raises(ValueError, match="must hold one class index"):
            verification_checks.compare(outputs, outputs, labels, source="s")
