"""The sample images shipped with the package (keras_vit.sample_image_path)."""

import os

import pytest

import keras_vit
from keras_vit.data.images import load_image_files
from keras_vit.data.sample_images import SAMPLE_IMAGES


def test_the_cat_is_a_small_jpeg_that_reads_as_a_photo():
    path = keras_vit.sample_image_path("cat")
    assert path == keras_vit.sample_image_path()  # the default
    with open(path, "rb") as file:
        data = file.read()
    assert data[:3] == b"\xff\xd8\xff" and len(data) < 60_000
    (image,) = load_image_files([path], (256, 384))
    assert image.shape == (256, 384, 3)
    assert image.std() > 20  # a photo, not a blank


def test_an_unknown_name_is_refused_with_the_names():
    with pytest.raises(ValueError, match=r"\['cat'\].*Received: name='dog'"):
        keras_vit.sample_image_path("dog")


def test_every_sample_has_its_source_and_licence_beside_it():
    folder = os.path.dirname(keras_vit.sample_image_path())
    files = sorted(
        f for f in os.listdir(folder) if f not in ("README.md", "__init__.py")
    )
    assert files == sorted(SAMPLE_IMAGES.values())
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as file:
        rows = [line for line in file if line.startswith("| `")]
    listed = {row.split("`")[1]: row for row in rows}
    assert sorted(listed) == files
    for row in listed.values():
        assert "CC0" in row or "Apache-2.0" in row, row
