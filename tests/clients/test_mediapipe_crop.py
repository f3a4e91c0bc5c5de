"""MediaPipe Tasks' region of interest reproduces keras_vit's centre crop:
what MediaPipe feeds the model, read back through an "echo" classifier
whose scores are its input pixels."""

import keras
import numpy as np
import pytest

from keras_vit.data import resize
from keras_vit.export import tflite

SIZE = (16, 16)
CROP = {"crop_pct": 0.875, "interpolation": "bilinear", "antialias": False}


@pytest.fixture(scope="module")
def echo_path(tmp_path_factory):
    """A classifier whose 768 "class scores" are its 16 x 16 x 3 input.
    (Only the tests that run MediaPipe take it: the region's arithmetic
    is tested without MediaPipe installed.)"""
    pytest.importorskip("mediapipe")
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Reshape((SIZE[0] * SIZE[1] * 3,)),
        ],
        name="echo",
    )
    path = tmp_path_factory.mktemp("echo") / "echo.tflite"
    path.write_bytes(tflite.tflite_bytes(model))
    return str(path)


def _smooth_photo():
    """40 x 56 uint8 RGB, at most about 21 levels a pixel apart."""
    y, x = np.mgrid[0:40, 0:56].astype("float64")
    wave = np.sin(2 * np.pi * x / 40) * np.cos(2 * np.pi * y / 30)
    photo = 127.5 + 100 * wave[..., None] * np.array([1.0, -0.7, 0.4])
    return np.round(photo).astype("uint8")


def _fed(path, photo, roi):
    """The input MediaPipe gives the model for `photo` and region `roi`."""
    mp = pytest.importorskip("mediapipe")
    rect = pytest.importorskip(
        "mediapipe.tasks.python.components.containers.rect"
    )
    vision = mp.tasks.vision
    options = vision.ImageClassifierOptions(
        base_options=mp.tasks.BaseOptions(model_asset_path=path),
        max_results=-1,
    )
    with vision.ImageClassifier.create_from_options(options) as classifier:
        result = classifier.classify(
            mp.Image(image_format=mp.ImageFormat.SRGB, data=photo),
            vision.ImageProcessingOptions(region_of_interest=rect.RectF(**roi)),
        )
    pixels = np.zeros(SIZE[0] * SIZE[1] * 3)
    for category in result.classifications[0].categories:
        pixels[category.index] = category.score
    return pixels.reshape(*SIZE, 3)


def test_the_region_of_interest_samples_keras_vits_crop(echo_path):
    photo = _smooth_photo()
    want = resize.resize_image(photo, SIZE, CROP).numpy()
    roi = resize.region_of_interest(photo.shape, SIZE, CROP)
    # MediaPipe warps in uint8 (rounded to a level) with OpenCV's bilinear
    # weights in 1/32 pixel: within one level of keras_vit's crop.
    assert np.abs(_fed(echo_path, photo, roi) - want).max() <= 1.0
    # The kept part itself (rows 1..17 of 18, columns 4..20 of 25), as
    # MediaPipe samples edge to edge, is half a step off: many levels.
    kept = {"left": 4 / 25, "top": 1 / 18, "right": 20 / 25, "bottom": 17 / 18}
    assert np.abs(_fed(echo_path, photo, kept) - want).max() > 5.0


def test_the_region_of_interest_is_shifted_by_half_a_step():
    # 48 x 64 photo, 32 x 32 input, crop_pct 0.875: covered at 36 x 48,
    # rows 2..34 and columns 8..40 kept; MediaPipe's first samples must be
    # at keras_vit's, (2.5 * 48 / 36 - 0.5) and (8.5 * 64 / 48 - 0.5).
    roi = resize.region_of_interest((48, 64, 3), (32, 32), CROP)
    assert roi == pytest.approx(
        {
            "left": 8.5 / 48 - 0.5 / 64,
            "top": 2.5 / 36 - 0.5 / 48,
            "right": 8.5 / 48 - 0.5 / 64 + 32 / 48,
            "bottom": 2.5 / 36 - 0.5 / 48 + 32 / 36,
        }
    )
    # No crop, or a crop reaching the edge: kept inside the image.
    whole = {"left": 0.0, "top": 0.0, "right": 1.0, "bottom": 1.0}
    assert resize.region_of_interest((48, 64, 3), (32, 32)) == whole
    edge = resize.region_of_interest(
        (48, 48, 3), (32, 32), {**CROP, "crop_pct": 1.0}
    )
    assert edge == whole


@pytest.mark.parametrize(
    "shape, size, named",
    [
        ((0, 48, 3), (32, 32), "image_shape"),
        ((48, 48, 3), (32, 0), "image_size"),
    ],
)
def test_an_empty_image_or_input_is_refused_by_name(shape, size, named):
    with pytest.raises(ValueError, match=f"`{named}` must be a positive"):
        resize.region_of_interest(shape, size, CROP)
