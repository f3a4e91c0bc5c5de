"""The training augmentation's strength against its references (RandAugment:
Cubuk et al. and timm; CutMix: Yun et al.; the Inception crop)."""

import numpy as np
import pytest
import tensorflow as tf

from keras_vit.data import pipeline


@pytest.mark.parametrize("magnitude", [0.5, 0.9])
def test_rand_augment_ranges_are_two_sided_and_within_the_reference(
    magnitude,
):
    # Keras's RandAugment turned magnitude m into the range (0, m) for every
    # operation: at 0.5 rotations up to 180 degrees, all one way, one-way
    # translations up to half the image, brightness and contrast only up.
    # The reference at timm's magnitude 10 m: rotation 30 m degrees,
    # translation 0.45 m of the side, shear 0.3 m, enhancement 1 +- 0.9 m,
    # each of either sign.
    size = 40
    layer = pipeline._per_image_rand_augment_class()(
        value_range=(0, 255), num_ops=2, magnitude=magnitude
    )
    images = tf.fill([2000, size, size, 3], 100.0)
    t = layer.get_random_transformation(images, training=True)["transforms"]

    def check(values, bound):
        values = np.asarray(values).ravel()
        assert np.abs(values).max() <= bound * (1 + 1e-5)
        assert np.abs(values).max() > 0.9 * bound  # the range is used
        assert 0.4 < (values < 0).mean() < 0.6  # both signs, as often

    check(t["random_rotation"]["angle"], 30 * magnitude)
    check(t["random_translation"]["translations"], 0.45 * magnitude * size)
    check(t["random_shear"]["shear_factor"], 0.3 * magnitude)
    check(t["random_contrast"]["contrast_factor"] - 1.0, 0.9 * magnitude)
    # Brightness measured on the images: PIL's is a gain, 1 +- 0.9 m.
    brightened = layer.random_brightness.transform_images(
        images, t["random_brightness"]
    )
    check(np.asarray(brightened)[:, 0, 0, 0] / 100.0 - 1.0, 0.9 * magnitude)
    for name in ("random_color_degeneration", "random_sharpness"):
        factor = np.asarray(t[name]["factor"])
        if name == "random_sharpness":
            factor = 2 * factor - 1  # Keras's 0.5 leaves the image as it is
        check(factor, 0.9 * magnitude)
    _check_solarization_and_posterization(layer, magnitude)


def _check_solarization_and_posterization(layer, magnitude):
    """Checks `layer`'s solarization and posterization at `magnitude` on a
    ramp of the 256 pixel values; returns the ramps they give."""
    # Keras's Solarization added U(0, 255 m) and inverted the pixels at or
    # above a threshold in U(0, 255 m): at magnitudes 0 and 0.9 it changed
    # every pixel of this ramp. timm's (and big_vision's) adds nothing and
    # inverts at or above 256 - 256 m; here the threshold is drawn between
    # that and 256 (none). Posterization keeps 8 down to 8 - int(4 m) bits
    # (the paper's 4 to 8; Keras kept int(8 m), 4 bits at m = 0.5).
    ramp = np.arange(256, dtype="float32")
    images = tf.constant(np.tile(ramp[None, :, None, None], (4000, 1, 1, 3)))
    t = layer.get_random_transformation(images, training=True)["transforms"]
    solarized = np.asarray(
        layer.solarization.transform_images(images, t["solarization"])
    )[..., 0, 0]
    changed = solarized != ramp
    inverted = np.broadcast_to(255 - ramp, solarized.shape)
    np.testing.assert_array_equal(solarized[changed], inverted[changed])
    thresholds = np.asarray(t["solarization"]["thresholds"]).ravel()
    assert thresholds.min() >= 256 * (1 - magnitude) - 1e-3
    assert thresholds.max() <= 256 + 1e-3
    # Thresholds uniform in [256 (1 - m), 256] invert m / 2 of a ramp.
    assert abs(changed.mean() - magnitude / 2) < 0.02
    posterized = np.asarray(
        layer.random_posterization.transform_images(
            images, t["random_posterization"]
        )
    )[..., 0, 0]
    # k bits kept leave 2^k values of the 256, each a multiple of 2^(8-k).
    kept = [len(np.unique(row)).bit_length() - 1 for row in posterized]
    assert set(kept) == set(range(8 - int(4 * magnitude), 9))
    np.testing.assert_array_equal(
        posterized % 2 ** (8 - np.array(kept))[:, None], 0
    )
    return solarized, posterized


def test_rand_augment_magnitude_zero_leaves_solarization_and_posterization():
    layer = pipeline._per_image_rand_augment_class()(
        value_range=(0, 255), num_ops=2, magnitude=0.0
    )
    for ramps in _check_solarization_and_posterization(layer, 0.0):
        assert (ramps == np.arange(256.0)).all()


def _own_weights_and_pixels(alpha, batches=30, batch=64, size=32):
    """Each image's weight of its own label and the share of its own
    pixels left after CutMix, over `batches` batches of `batch` images
    (image i filled with the value 3 i, label i)."""
    values = np.arange(batch)
    images = np.broadcast_to(
        (values * 3).astype("uint8")[:, None, None, None],
        (batch, size, size, 3),
    )
    ds = tf.data.Dataset.from_tensor_slices((images, values.astype("int64")))
    aug = pipeline.Augmentation(
        random_resized_crop=False, flip=False, cutmix=alpha
    )
    stream = pipeline.train_pipeline(
        ds,
        batch,
        (size, size),
        batch,
        augmentation=aug,
        shuffle=False,
        repeat=True,
    )
    weights, pixels = [], []
    for x, y in stream.take(batches):
        x, y = x.numpy(), y.numpy()
        weights.append(y[values, values])
        own = np.abs(x[..., 0] - values[:, None, None] * 3) < 0.5
        pixels.append(own.mean(axis=(1, 2)))
    return np.concatenate(weights), np.concatenate(pixels)


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_cutmix_mixes_as_beta_alpha_alpha_by_the_pixels_pasted(alpha):
    # Keras's CutMix(factor=a) drew alpha itself in [0, a] per batch (more
    # unmixed images than Beta(a, a)), refused a > 1, and weighed labels
    # by the box's continuous area rather than the whole pixels pasted.
    weights, pixels = _own_weights_and_pixels(alpha)
    # An image paired with itself keeps weight 1; the others' share of
    # weights in (0.1, 0.9) is Beta(alpha, alpha)'s.
    mixed = weights[weights < 1.0]
    assert len(mixed) > 0.9 * len(weights)
    beta = np.random.default_rng(0).beta(alpha, alpha, 200_000)

    def share(w):
        return ((w > 0.1) & (w < 0.9)).mean()

    assert abs(share(mixed) - share(beta)) < 0.04
    np.testing.assert_allclose(weights, pixels, atol=1e-6)


def _same_sized(images):
    """`images` as an in-memory dataset, of one static image shape (it
    took a batched crop path before bf08162)."""
    labels = np.zeros(len(images), "int64")
    return tf.data.Dataset.from_tensor_slices((images, labels))


def test_crops_of_same_sized_images_have_the_aspect_ratio_in_pixels():
    # The batched crop drew the aspect ratio relative to the image's
    # proportions: 64x128 images gave crops of 1.6 to 2.6 (w/h in pixels)
    # instead of the Inception crop's 3/4 to 4/3. Each pixel holds its
    # coordinates, so the output's corners tell the crop's size.
    height, width, n = 64, 128, 256
    rows, columns = np.mgrid[:height, :width]
    image = np.stack(
        [columns * 2, rows * 4, np.zeros_like(rows)], axis=-1
    ).astype("uint8")
    aug = pipeline.Augmentation(flip=False, crop_area=(0.35, 1.0))
    stream = pipeline.train_pipeline(
        _same_sized(np.repeat(image[None], n, 0)),
        2,
        (32, 32),
        n,
        augmentation=aug,
        shuffle=False,
    )
    x = next(iter(stream))[0].numpy()
    crop_width = (x[:, :, -1, 0] - x[:, :, 0, 0]).mean(axis=1) / 2
    crop_height = (x[:, -1, :, 1] - x[:, 0, :, 1]).mean(axis=1) / 4
    ratio = crop_width / crop_height
    # (The corners are the outer pixels' centres: allow the 1/32 margin.)
    assert ratio.min() > 0.75 * 0.93 and ratio.max() < 4 / 3 / 0.93
    assert ratio.min() < 0.85 and ratio.max() > 1.15  # the range is used


def test_crops_of_same_sized_images_are_antialiased():
    # The batched crop resized with `crop_and_resize`, which does not
    # antialias: a zone plate shrunk from 96 to 32 pixels kept its fine
    # rings as aliases (std 71.6 levels where the eval pipeline's
    # antialiased resize gives flat grey).
    n = 96
    y, x = np.mgrid[:n, :n] - n / 2
    plate = 127.5 + 127.5 * np.cos(np.pi * (x**2 + y**2) / n)
    plates = np.repeat(plate.astype("uint8")[None, ..., None], 3, -1)
    ds = _same_sized(np.repeat(plates, 4, 0))
    whole = pipeline.Augmentation(flip=False, crop_area=(1.0, 1.0))
    train = pipeline.train_pipeline(
        ds, 2, (32, 32), 4, augmentation=whole, shuffle=False
    )
    train = next(iter(train))[0].numpy()
    evaluation = next(iter(pipeline.eval_pipeline(ds, 2, (32, 32), 4)))[0]
    np.testing.assert_allclose(train, evaluation.numpy(), atol=0.5)


def test_jpegs_decode_to_the_pixels_pil_decodes(tmp_path):
    # tf.io.decode_image's default DCT differed from PIL's (timm's reader)
    # by up to 18 levels on photos (mean about 1). Every reader of image
    # files (folders, `keras-vit inspect` / `predict`) decodes as PIL does.
    from PIL import Image
    from sklearn.datasets import load_sample_image

    from keras_vit import data
    from keras_vit.data import datasets
    from keras_vit.data import images

    photo = load_sample_image("flower.jpg")[100:228, 200:360]
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.fromarray(photo).save(tmp_path / label / "x.jpg", quality=90)
    path = tmp_path / "a" / "x.jpg"
    expected = np.asarray(Image.open(path).convert("RGB"))
    decoded = datasets.read_image(tf.constant(str(path))).numpy()
    np.testing.assert_array_equal(decoded, expected)
    folder = data.load(f"folder:{tmp_path}")
    for image, _ in folder.train:
        np.testing.assert_array_equal(image.numpy(), expected)
    # The command line's reader, at the image's own size (no resampling).
    read = images.load_image_files([path], expected.shape[:2])
    np.testing.assert_allclose(read[0], expected, atol=1e-3)


@pytest.mark.parametrize(
    "augmentation",
    [
        pipeline.Augmentation(rand_augment=2, rand_augment_magnitude=0.9),
        pipeline.Augmentation(mixup=0.4),
        pipeline.Augmentation(cutmix=1.0),
    ],
    ids=["rand_augment", "mixup", "cutmix"],
)
def test_augmentation_is_float32_under_a_mixed_precision_policy(augmentation):
    # Keras's preprocessing layers take the global dtype policy: under
    # mixed_bfloat16 CutMix raised a ValueError, MixUp a TypeError, and
    # RandAugment gave bfloat16 images (float32 is promised). They compute
    # in float32 now, the same numbers as under the float32 policy.
    import keras

    images = np.random.default_rng(0).integers(0, 256, (16, 12, 12, 3))
    ds = tf.data.Dataset.from_tensor_slices(
        (images.astype("uint8"), np.arange(16, dtype="int64") % 4)
    )

    def batches():
        stream = pipeline.train_pipeline(
            ds, 4, (8, 8), 8, augmentation=augmentation, deterministic=True
        )
        return [(x.numpy(), y.numpy(), x.dtype, y.dtype) for x, y in stream]

    expected = batches()
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        got = batches()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert len(got) == len(expected) == 2
    for (x, y, x_type, y_type), (want_x, want_y, _, _) in zip(got, expected):
        assert x_type == y_type == tf.float32
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(y, want_y)
