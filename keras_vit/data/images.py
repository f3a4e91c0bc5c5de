"""Image files and pixels as a model takes them: the one image reader of
every command (`keras-vit inspect`, `export`, `verify`, `few-shot`).

`model_pixels` turns RGB pixels into a model's channels (for one channel,
the luma with ITU-R 601 weights); `load_image_files` reads image files with
the pipelines' reader and evaluation resizing (a model's `image_resize`),
then `model_pixels`.
"""

import numpy as np

from keras_vit import arg_checks
from keras_vit.data import datasets
from keras_vit.data import resize

#: RGB -> grayscale weights (ITU-R 601, as PIL's "L" mode).
GRAY_WEIGHTS = (0.299, 0.587, 0.114)


def model_pixels(images, num_channels):
    """RGB batches `(N, H, W, 3)` in [0, 255] (`resize.resize_image`'s,
    which clips) as a model with `num_channels` (1 or 3) takes them: for
    one channel the luma with ITU-R 601 weights, which sum to 1, so that a
    grayscale source (digits; the pipeline repeats it in three channels)
    comes back as it was."""
    images = np.asarray(images, "float32")
    if num_channels == 1:
        images = images @ np.asarray(GRAY_WEIGHTS, "float32")[:, None]
    return images


def _reason(message):
    """The reader's own words in a TensorFlow error's `message` (its
    assertion's data, `NOT_AN_IMAGE` or `NOT_DECODABLE` without the colon),
    else the message's first line."""

    for known in (datasets.NOT_AN_IMAGE, datasets.NOT_DECODABLE):
        if known in message:
            return known.rstrip(":")
    return message.splitlines()[0]


def load_image_files(paths, image_size, num_channels=3, image_resize=None):
    """Reads image files as float32 `(N, H, W, num_channels)` pixels in
    [0, 255], resized to `image_size` `(H, W)` as `eval_pipeline` resizes
    them and converted by `model_pixels`.

    Args:
        paths: image file paths (JPEG, PNG, GIF or BMP).
        image_size: `(height, width)` of the model input, or an int for
            a square one.
        num_channels: 1 or 3, the model's. Defaults to `3`.
        image_resize: how each image is resized: a model's `image_resize`
            (`model.image_resize`: a preset's evaluation, timm's centre
            crop or the whole image squashed; see
            `keras_vit.data.resize.check`). Defaults to `None`: the whole
            image squashed, bilinear, antialiased.

    Raises:
        ValueError: for a file that cannot be read or is not an image,
            naming it.
    """
    import tensorflow as tf

    image_size = arg_checks.size_2d("image_size", image_size)
    image_resize = resize.check(image_resize)
    out = []
    for path in paths:
        try:
            image = datasets.read_image(tf.constant(str(path)))
        except (tf.errors.OpError, ValueError) as error:
            reason = _reason(getattr(error, "message", str(error)))
            raise ValueError(
                f"Could not read the image: {reason}. Received: image={path!r}"
            ) from None
        out.append(
            np.asarray(resize.resize_image(image, image_size, image_resize))
        )
    return model_pixels(np.stack(out), num_channels).astype("float32")


def decoded_model_pixels(contents, image_size, image_resize=None):
    """An image file's bytes (a scalar string tensor) as the float32 RGB
    `(height, width, 3)` pixels in [0, 255] that `load_image_files` reads
    from the file, in a TensorFlow graph: decoded as PIL decodes
    (`datasets.decode_image`), resized as `image_resize` says
    (`resize.resize_image`, which clips). A SavedModel export's
    `serving_bytes` signature runs it, so that a served JPEG is the model's
    input that the `keras-vit` commands would give it."""

    return resize.resize_image(
        datasets.decode_image(contents), image_size, image_resize
    )
