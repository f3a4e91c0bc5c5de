"""`keras_vit.data.resize`: the inference resize a model records
(`image_resize`), against timm's evaluation crop of the sample photo
(tests/golden/make_resize_references.py)."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit.data import datasets
from keras_vit.data import resize

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"


def _cases():
    with np.load(GOLDEN / "resize_timm.expected.npz") as data:
        return {k: data[k] for k in data.files if k != "timm_version"}


def _setting(key):
    """`(image_size, image_resize)` of a reference key
    (`make_resize_references.case_key`)."""
    size, crop_pct, interpolation = key.split("_")
    rows, cols = (int(side) for side in size.split("x"))
    return (rows, cols), {
        "crop_pct": float(crop_pct),
        "interpolation": interpolation,
    }


@pytest.mark.parametrize("key", sorted(_cases()))
def test_a_crop_matches_timms_pixels(key):
    expected = _cases()[key].astype("float32")
    image_size, setting = _setting(key)
    image = datasets.read_image(tf.constant(keras_vit.sample_image_path()))
    ours = np.clip(resize.resize_image(image, image_size, setting), 0, 255)
    assert ours.shape == expected.shape
    # timm rounds to uint8 (PIL); the rest is the kernels' float order.
    difference = np.abs(np.asarray(ours) - expected)
    assert difference.mean() < 0.5 and difference.max() <= 3.0
    # The whole photo squashed is far from timm's crop: the check can fail.
    squashed = resize.resize_image(image, image_size, {"crop_pct": None})
    assert np.abs(np.asarray(squashed) - expected).mean() > 5.0


@pytest.mark.parametrize(
    "shape, image_size, crop_pct, scaled, offset",
    [
        # Shorter side to floor(224 / 0.9) = 248, the longer truncated
        # (torchvision's Resize(int)): 248 * 500 / 375 = 330.67 -> 330.
        ((375, 500), (224, 224), 0.9, (248, 330), (12, 53)),
        ((500, 375), (224, 224), 0.9, (330, 248), (53, 12)),
        # A square image: both sides to 248, the centre 224 at 12.
        ((300, 300), (224, 224), 0.9, (248, 248), (12, 12)),
        # Offsets round half to even: (225 - 224) / 2 = 0.5 -> 0.
        ((225, 400), (224, 224), 1.0, (224, 398), (0, 87)),
        # A non-square input: timm's ResizeKeepRatio to cover
        # floor((224, 160) / 0.9) = (248, 177), rounded.
        ((400, 400), (224, 160), 0.9, (248, 248), (12, 44)),
    ],
)
def test_the_sizes_and_offsets_are_torchvisions(
    shape, image_size, crop_pct, scaled, offset
):
    setting = resize.check({"crop_pct": crop_pct})
    got = resize._cover_size(tf.constant(shape), *image_size, setting)
    assert tuple(np.asarray(got)) == scaled
    assert [
        int(resize._centre_offset(side, crop))
        for side, crop in zip(got, image_size)
    ] == list(offset)


def test_a_crop_takes_the_centre_and_squashing_takes_everything():
    # A 4:3 image whose outer columns are white, the middle black: cropped
    # at 1.0 the white falls outside; squashed it stays.
    image = np.zeros((60, 80, 3), "float32")
    image[:, :6] = image[:, -6:] = 255.0
    crop = resize.resize_image(image, (30, 30), {"crop_pct": 1.0})
    whole = resize.resize_image(image, (30, 30), None)
    assert crop.shape == whole.shape == (30, 30, 3)
    assert float(tf.reduce_max(crop)) == 0.0
    assert float(whole[0, 0, 0]) > 200.0


def test_the_default_is_the_whole_image_bilinear_antialiased():
    assert (
        resize.check(None)
        == resize.DEFAULT
        == {
            "crop_pct": None,
            "interpolation": "bilinear",
            "antialias": True,
        }
    )
    assert resize.check({"crop_pct": 1}) == {**resize.DEFAULT, "crop_pct": 1.0}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("bicubic", r"must be None or a dict"),
        ({"crop": 0.9}, r"keys among"),
        ({"crop_pct": 0.0}, r"crop_pct'\]` must be a finite positive"),
        ({"crop_pct": 1.5}, r"must be None or in \(0, 1\]"),
        ({"crop_pct": float("nan")}, r"finite positive"),
        ({"interpolation": "area"}, r"must be one of \['bilinear', 'bicubic'"),
        ({"antialias": 1}, r"antialias'\]` must be True or False"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(bad, message):
    with pytest.raises(ValueError, match=message):
        resize.check(bad)


def test_bicubic_overshoot_is_clipped_to_pixels():
    # A black image with one white column: bicubic rings below 0 beside
    # it (timm's PIL pixels are uint8), which the model must not get.
    image = np.zeros((40, 40, 3), "float32")
    image[:, 20] = 255.0
    setting = {"crop_pct": 1.0, "interpolation": "bicubic", "antialias": False}
    out = np.asarray(resize.resize_image(image, (60, 60), setting))
    assert out.min() == 0.0 and 200.0 < out.max() <= 255.0
    raw = tf.image.resize(image, (60, 60), "bicubic")  # without the clip
    assert float(tf.reduce_min(raw)) < -1.0
