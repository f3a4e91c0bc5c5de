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
