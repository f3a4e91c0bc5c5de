"""examples/tflite_inference.py (LiteRT alone) gives the probabilities that
Keras and `keras-vit predict` give for the same image, whatever the export
takes: pixels (the default), or for a model built with
`include_preprocessing=False` the inputs its metadata's `normalization`
describes, as floats or quantized. (tests/export/test_cli.py runs it as a
script on a `keras-vit export` and checks it imports no TensorFlow.)
"""

import json
import os
import runpy

import numpy as np
import pytest
from PIL import Image

import keras_vit
from keras_vit.cli import predict
from keras_vit.export import pixel_inputs
from keras_vit.export import tflite as tflite_lib
from tests.export.helpers import TINY_EXPORT
from tests.helpers import random_images
from tests.helpers import randomize_weights

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
EXAMPLE = os.path.join(ROOT, "examples", "tflite_inference.py")
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
CLASSES = TINY_EXPORT["num_classes"]


def _example():
    return runpy.run_path(EXAMPLE)


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    """`(path, pixels)`: a PNG at the models' 32 x 32 (no resizing, so the
    example's Pillow and keras_vit's TensorFlow read the same pixels)."""
    pixels = random_images((1, 32, 32, 3), seed=7)
    path = tmp_path_factory.mktemp("photo") / "photo.png"
    Image.fromarray(pixels[0].astype("uint8")).save(path)
    return str(path), pixels


def _pair(include_preprocessing, normalization, activation="softmax"):
    """`(model, twin)`: a random tiny ViT, and the same weights taking
    [0, 255] pixels (what the model computes for a photo's pixels)."""
    model = keras_vit.ViT(
        **TINY_EXPORT,
        include_preprocessing=include_preprocessing,
        normalization=normalization,
        classifier_activation=activation,
    )
    randomize_weights(model, seed=11, scale=0.5)
    twin = keras_vit.ViT(
        **TINY_EXPORT,
        normalization=normalization,
        classifier_activation=activation,
    )
    twin.set_weights(model.get_weights())
    return model, twin


def _by_class(results):
    """`[(name, probability), ...]` as a `(classes,)` array."""
    row = np.full(CLASSES, np.nan)
    for name, probability in results:
        row[int(name.removeprefix("class_"))] = probability
    return row


def _softmax(y):
    y = np.exp(y - y.max(axis=-1, keepdims=True))
    return y / y.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    "include_preprocessing, normalization, activation",
    [
        (True, None, "softmax"),  # the default export: pixels
        (False, None, "softmax"),  # the paper's [-1, 1]
        (False, IMAGENET, "softmax"),  # (pixels / 255 - mean) / std
        (False, IMAGENET, None),  # logits
    ],
)
def test_the_example_matches_keras_and_predict(
    include_preprocessing, normalization, activation, photo, tmp_path
):
    # The audit: the example fed [0, 255] pixels to every export, so a model
    # built with include_preprocessing=False got wrong inputs, silently.
    model, twin = _pair(include_preprocessing, normalization, activation)
    path = str(tmp_path / "vit.tflite")
    tflite_lib.export_tflite(model, path, verify=False)
    image, pixels = photo
    expected = twin.predict(pixels, verbose=0)[0]
    if activation is None:
        expected = _softmax(expected)
    got = _by_class(_example()["classify"](path, image, top=CLASSES))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    predicted = predict.load_predictor(path).predict([image])[0]
    np.testing.assert_allclose(got, predicted, atol=1e-5)
    # Fed the pixels as they are, the model would have answered otherwise.
    if not include_preprocessing:
        raw = model.predict(pixels, verbose=0)[0]
        raw = _softmax(raw) if activation is None else raw
        assert np.abs(raw - expected).max() > 0.05


def test_a_full_integer_export_quantizes_the_normalised_inputs(photo, tmp_path):
    # The normalised values, not the pixels, go through the input's scale
    # and zero point: pixels in [0, 255] would all clip to the top code.
    # int8: a uint8 input must be the pixels themselves (MediaPipe feeds
    # them so; such an export is refused), and MediaPipe refuses int8.
    model, twin = _pair(False, IMAGENET)
    inputs = pixel_inputs.normalize_pixels(
        random_images((16, 32, 32, 3)), IMAGENET
    )
    path = str(tmp_path / "int8.tflite")
    tflite_lib.export_tflite(
        model,
        path,
        quantize="int8",
        io_dtype="int8",
        representative_data=inputs,
        verify=False,
    )
    image, pixels = photo
    expected = twin.predict(pixels, verbose=0)[0]
    got = _by_class(_example()["classify"](path, image, top=CLASSES))
    np.testing.assert_allclose(got, expected, atol=0.05)
    assert got.argmax() == expected.argmax()


def test_a_feature_extractor_is_refused(photo, tmp_path):
    model = keras_vit.ViT(**TINY_EXPORT, include_top=False)
    path = str(tmp_path / "features.tflite")
    tflite_lib.export_tflite(model, path, verify=False)
    with pytest.raises(ValueError, match="no classifier head.*'features'"):
        _example()["classify"](path, photo[0])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A float32 export of a random model that takes normalised inputs."""
    model, _ = _pair(False, None)
    path = str(tmp_path_factory.mktemp("exported") / "vit.tflite")
    tflite_lib.export_tflite(model, path, verify=False)
    return path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--top", "0"], "--top must be 1 or more. Received: top=0"),
        (["--top", "-1"], "--top must be 1 or more. Received: top=-1"),
        (["--threads", "0"], "--threads must be 1 or more. Received: thr"),
    ],
)
def test_counts_below_one_are_refused(argv, message, exported, photo, capsys):
    # --top -1 printed every class but the last, --top 0 nothing, and
    # --threads 0 failed with LiteRT's words.
    with pytest.raises(SystemExit) as stopped:
        _example()["main"]([exported, photo[0], *argv])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
    # One class, one thread: the smallest counts are taken.
    (only,) = _example()["classify"](exported, photo[0], top=1, threads=1)
    assert only[0].startswith("class_")


def test_missing_or_old_metadata_is_refused(exported, photo, tmp_path):
    classify = _example()["classify"]
    sidecar = exported.removesuffix(".tflite") + ".json"
    meta = json.loads(open(sidecar).read())
    alone = tmp_path / "alone.tflite"
    alone.write_bytes(open(exported, "rb").read())
    with pytest.raises(ValueError, match="No metadata beside the model"):
        classify(str(alone), photo[0])
    # Metadata from before input.normalization cannot say what to feed.
    del meta["input"]["normalization"]
    (tmp_path / "alone.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="no input.normalization"):
        classify(str(alone), photo[0])


def test_the_example_resizes_as_the_metadata_says(tmp_path):
    # The example squashed every image bilinearly, whatever crop the model
    # was evaluated with (its metadata's input.image_resize).
    from keras_vit.data.images import load_image_files

    setting = {"crop_pct": 1.0, "interpolation": "bicubic", "antialias": True}
    model = keras_vit.ViT(**TINY_EXPORT, image_resize=setting)
    randomize_weights(model, seed=12, scale=0.5)
    path = str(tmp_path / "vit.tflite")
    tflite_lib.export_tflite(model, path, verify=False)
    photo = keras_vit.sample_image_path()  # 3:2: crop and squash differ
    load = _example()["load_image"]
    google = {"crop_pct": None, "interpolation": "bilinear", "antialias": False}
    for each in (setting, {**setting, "crop_pct": 0.9}, None, google):
        for height, width in ((32, 32), (32, 48), (224, 224)):
            # Pillow's pixels are keras_vit's TensorFlow ones, within a
            # level (they differ by more than 5 between crop and squash).
            want = load_image_files([photo], (height, width), 3, each)[0]
            got = load(photo, height, width, each)
            difference = np.abs(got - want)
            assert difference.mean() < 0.5, (each, height, width)
            assert difference.max() <= 3.0, (each, height, width)
    probabilities = _by_class(_example()["classify"](path, photo, CLASSES))
    expected = predict.load_predictor(path).predict([photo])[0]
    np.testing.assert_allclose(probabilities, expected, atol=2e-3)
    # Metadata from before input.image_resize: its exports were fed
    # squashed images, and still are.
    sidecar = tmp_path / "vit.json"
    meta = json.loads(sidecar.read_text())
    del meta["input"]["image_resize"]
    sidecar.write_text(json.dumps(meta))
    squashed = load_image_files([photo], (32, 32))
    expected = model.predict(squashed, verbose=0)[0]
    probabilities = _by_class(_example()["classify"](path, photo, CLASSES))
    np.testing.assert_allclose(probabilities, expected, atol=2e-3)
