"""Every path that reads images for a model, or evaluates one, resizes them
as the model's `image_resize` says (`keras_vit.data.resize.of_model`): the
`keras-vit inspect` command, few-shot evaluation, a training run's
validation, and the calibration and verification images of an export.
Before, they all squashed the whole image, whatever the model recorded.

Each test reads the 3:2 sample photo for a tiny model that crops
(`crop_pct` 1.0: the shorter side to the size, the centre of the longer),
which is > 5 levels (mean) from the squash."""

import importlib
import shutil
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import cli
from keras_vit.data import datasets
from keras_vit.data import resize
from keras_vit.data.images import load_image_files
from tests.helpers import TINY

CROP = {"crop_pct": 1.0, "interpolation": "bicubic"}


@pytest.fixture(scope="module")
def cropping_model():
    return keras_vit.ViT(**{**TINY, "num_layers": 1}, image_resize=CROP)


@pytest.fixture(scope="module")
def cat():
    """The sample photo's pixels as the model's evaluation reads them
    (cropped), after checking that they are not the squash's."""
    path = keras_vit.sample_image_path()
    (cropped,) = load_image_files([path], (32, 32), image_resize=CROP)
    (squashed,) = load_image_files([path], (32, 32))
    assert np.abs(cropped - squashed).mean() > 5.0
    return cropped


def test_a_vit_gives_its_setting_and_another_model_none(cropping_model):
    assert resize.of_model(cropping_model) == resize.check(CROP)
    inputs = keras.Input((32, 32, 3))
    plain = keras.Model(inputs, keras.layers.Flatten()(inputs))
    assert resize.of_model(plain) is None  # the squash, as before


def test_inspect_crops_for_a_cropping_model(
    cropping_model, cat, tmp_path, monkeypatch
):
    from keras_vit import visualize

    cropping_model.save(tmp_path / "crop.keras")
    seen = []
    monkeypatch.setattr(
        visualize,
        "inspect",
        lambda model, images, *args, **kwargs: seen.append(images) or [],
    )
    argv = ["inspect", str(tmp_path / "crop.keras")]
    argv += ["--image", keras_vit.sample_image_path()]
    assert cli.main([*argv, "--output", str(tmp_path / "figures")]) == 0
    (images,) = seen
    np.testing.assert_allclose(images[0], cat, atol=1e-3)


def test_visualize_load_images_takes_the_setting(cropping_model, cat):
    from keras_vit import visualize

    (image,) = visualize.load_images(
        [keras_vit.sample_image_path()],
        (32, 32),
        image_resize=resize.of_model(cropping_model),
    )
    np.testing.assert_allclose(image, cat, atol=1e-3)


def test_few_shot_features_are_of_the_cropped_images(cropping_model, cat):
    from keras_vit import evaluation

    # A representation that is the image itself shows what was read.
    inputs = keras.Input((32, 32, 3))
    identity = keras.Model(inputs, keras.layers.Flatten()(inputs))
    image = datasets.read_image(tf.constant(keras_vit.sample_image_path()))
    pairs = tf.data.Dataset.from_tensors((image, 0))
    ((features, labels),) = evaluation._split_features(
        cropping_model, identity, (pairs,), 2, 1, 0
    )
    assert labels.tolist() == [0]
    np.testing.assert_allclose(features[0], cat.ravel(), atol=1e-3)


@pytest.fixture
def cat_folder(tmp_path):
    """An image folder of two classes, each holding the sample photo
    twice."""
    for name in ("a/1.jpg", "a/2.jpg", "b/1.jpg", "b/2.jpg"):
        (tmp_path / "cats" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(keras_vit.sample_image_path(), tmp_path / "cats" / name)
    return f"folder:{tmp_path / 'cats'}"


def test_training_validates_on_the_cropped_images(
    cropping_model, cat, cat_folder, tmp_path
):
    from tests.training.test_train import tiny_config

    train_module = importlib.import_module("keras_vit.training.train")

    config = tiny_config(
        tmp_path,
        dataset=cat_folder,
        validation_split=0.5,
        image_size=32,
        batch_size=2,
    )
    setup = types.SimpleNamespace(kind="default")
    data = train_module._load_data(config, setup)
    pipelines = train_module._pipelines(
        config,
        setup,
        data,
        cropping_model,
        types.SimpleNamespace(initial_epoch=0),
    )
    images, _ = next(iter(pipelines["validation"]))
    assert len(images) == 2
    for image in images.numpy():
        np.testing.assert_allclose(image, cat, atol=1e-3)


def test_calibration_and_verification_read_cropped_images(cat, cat_folder):
    from keras_vit.export import representative
    from keras_vit.export import verification

    # Two classes, as the folder's (verification matches its labels to the
    # model's outputs).
    model = keras_vit.ViT(
        **{**TINY, "num_layers": 1, "num_classes": 2}, image_resize=CROP
    )
    calibration = representative.load_model_inputs(
        model, cat_folder, split="train"
    )
    (verified,) = verification._image_sets(cat_folder, model, 4)
    for images in (calibration.images, verified.images):
        assert images.shape == (4, 32, 32, 3)
        for image in images:
            np.testing.assert_allclose(image, cat, atol=1e-3)
