"""How an image becomes a model's input for inference and evaluation: the
one source of the resize setting (`check`; a model's, `of_model`) and of
the op that applies it (`resize_image`; as a MediaPipe region of interest,
`region_of_interest`).

Two ways are in use among the released checkpoints' evaluations:

- squashed: the whole image resized to the input size, its aspect ratio
  not kept. google-research/vision_transformer evaluates so
  (`vit_jax/input_pipeline.py`: `tf.image.resize`, bilinear, without
  antialiasing), as does Hugging Face's `ViTImageProcessor` (PIL's
  bilinear, which antialiases). `crop_pct=None`.
- cropped, as timm evaluates (`timm.data.transforms_factory.
  transforms_imagenet_eval`, crop mode "center"): the image resized,
  aspect ratio kept, so that it covers `floor(size / crop_pct)`, then the
  centre `size` cut out. `crop_pct` 0.9 for timm's 224 px ViTs, 1.0 (the
  shorter side to the size, the rest of the longer cut off) for its 384 px
  ones, DeiT III and DINOv2; bicubic, antialiased (PIL).

TensorFlow's antialiased bicubic is PIL's kernel (Keys, a = -0.5), and the
sizes and offsets below round as torchvision's do, so a timm crop comes
out within a pixel level of timm's on the same decoded pixels.
"""

import math

from keras_vit import arg_checks

#: The interpolations an `image_resize` takes (`tf.image.resize` methods).
INTERPOLATIONS = ("bilinear", "bicubic")

#: The setting's keys; a model without one (and any key not given) takes
#: `DEFAULT`: the whole image squashed, bilinear, antialiased.
DEFAULT = {"crop_pct": None, "interpolation": "bilinear", "antialias": True}


def check(image_resize):
    """`image_resize` checked and completed from `DEFAULT`: `None` (the
    default), or a dict with any of `crop_pct` (`None` to squash, or the
    fraction in (0, 1] of the resized image that the centre crop keeps),
    `interpolation` (one of `INTERPOLATIONS`) and `antialias` (bool).

    Raises:
        ValueError: naming the key and the value received.
    """
    if image_resize is None:
        return dict(DEFAULT)
    if not isinstance(image_resize, dict) or not set(image_resize) <= set(
        DEFAULT
    ):
        raise ValueError(
            "`image_resize` must be None or a dict with keys among "
            f"{sorted(DEFAULT)}. Received: image_resize={image_resize!r}"
        )
    checked = {**DEFAULT, **image_resize}
    crop_pct = checked["crop_pct"]
    if crop_pct is not None and not (
        arg_checks.finite_positive_float("image_resize['crop_pct']", crop_pct)
        <= 1.0
    ):
        raise ValueError(
            "`image_resize['crop_pct']` must be None or in (0, 1]. "
            f"Received: image_resize={image_resize!r}"
        )
    return {
        "crop_pct": None if crop_pct is None else float(crop_pct),
        "interpolation": arg_checks.one_of(
            "image_resize['interpolation']",
            checked["interpolation"],
            INTERPOLATIONS,
        ),
        "antialias": arg_checks.boolean(
            "image_resize['antialias']", checked["antialias"]
        ),
    }


def describe(image_resize):
    """`image_resize` in a few words, for tables: `"crop 0.9 bicubic"`,
    `"squash bilinear"`, with `", no antialias"` where it has none."""
    setting = check(image_resize)
    crop = setting["crop_pct"]
    words = "squash" if crop is None else f"crop {crop}"
    words += f" {setting['interpolation']}"
    return words if setting["antialias"] else words + ", no antialias"


def of_model(model):
    """The `image_resize` that images are read with for `model`: a
    `keras_vit.ViT`'s own (from its preset: the resize its published
    accuracy was measured with), or `None` (`DEFAULT`, the squash) for any
    other Keras model, which records none. Every command and evaluation
    that reads images for a model asks here, so that they all resize alike.
    """
    return getattr(model, "image_resize", None)


def resize_image(image, image_size, image_resize=None):
    """One `(H, W, C)` image as a float32 `(height, width, C)` model input,
    resized as `image_resize` (checked by `check`) says, and clipped to
    [0, 255]: bicubic interpolation overshoots (below 0 near dark edges),
    where timm's PIL pixels are uint8.

    Args:
        image: a tensor `(H, W, C)`, any real dtype (decoded pixels).
        image_size: `(height, width)` of the model input.
        image_resize: a model's `image_resize`, or `None` for `DEFAULT`.
    """
    import tensorflow as tf

    setting = check(image_resize)
    height, width = (int(side) for side in image_size)
    image = tf.cast(image, "float32")
    resize = {
        "method": setting["interpolation"],
        "antialias": setting["antialias"],
    }
    if setting["crop_pct"] is None:
        image = tf.image.resize(image, (height, width), **resize)
    else:
        scaled = _cover_size(tf.shape(image)[:2], height, width, setting)
        image = tf.image.resize(image, scaled, **resize)
        top = _centre_offset(scaled[0], height)
        left = _centre_offset(scaled[1], width)
        image = image[top : top + height, left : left + width]
        image.set_shape([height, width, image.shape[-1]])
    return tf.clip_by_value(image, 0.0, 255.0)


def region_of_interest(image_shape, image_size, image_resize=None):
    """The region of an image of `image_shape` `(H, W, ...)` from which
    MediaPipe Tasks samples what `resize_image` samples, as a dict of
    `left`, `top`, `right` and `bottom`, fractions of its width and height
    (`RectF(**roi)`; its positional order is left, top, bottom, right).

    MediaPipe (its CPU path, OpenCV's `warpPerspective`) maps the region's
    edges to the input's edges, so output pixel `j` samples the image at
    `left_px + j * step`, pixel centres at integers; `tf.image.resize`
    samples at `(j + 0.5) * step - 0.5` of the resized image's part. The
    region is the part `resize_image` keeps (the centre crop of
    `crop_pct`, or the whole image) moved by half a step less half a
    pixel, so both sample the same points. Kept inside the image (as
    MediaPipe requires): where the move would leave it (no crop, or a crop
    at an edge), the samples are up to `|step - 1| / 2` pixels apart.
    MediaPipe interpolates bilinearly without antialiasing, so it
    reproduces `image_resize`s with `interpolation="bilinear"` and
    `antialias=False`; others differ by their filter."""
    setting = check(image_resize)
    height, width = (
        arg_checks.positive_int("image_size", side) for side in image_size
    )
    for side in image_shape[:2]:
        arg_checks.positive_int("image_shape", side)
    if setting["crop_pct"] is None:
        rows, columns, top, left = height, width, 0, 0
    else:
        rows, columns = (
            int(v) for v in _cover_size(image_shape[:2], height, width, setting)
        )
        top = int(_centre_offset(rows, height))
        left = int(_centre_offset(columns, width))
    top, bottom = _sampled_span(top, height, rows, int(image_shape[0]))
    left, right = _sampled_span(left, width, columns, int(image_shape[1]))
    return {"left": left, "top": top, "right": right, "bottom": bottom}


def _sampled_span(start, size, resized, full):
    """`(first, last)`, fractions of `full` pixels, of the span MediaPipe
    samples as `tf.image.resize` to `resized` then `[start, start + size)`
    does (`region_of_interest`), kept inside [0, 1]."""
    extent = size / resized
    first = (start + 0.5) / resized - 0.5 / full
    first = min(max(first, 0.0), 1.0 - extent)
    return first, min(first + extent, 1.0)


def _cover_size(shape, height, width, setting):
    """The `(rows, columns)` that timm resizes an image of `shape` to
    before its centre crop: the image scaled, aspect ratio kept, to cover
    `floor(side / crop_pct)` of each side; for a square input, torchvision's
    `Resize(int)` (the shorter side to that size, the longer truncated:
    `int(size * long / short)`), else timm's `ResizeKeepRatio` (each side
    rounded half to even, as Python's `round`)."""
    import tensorflow as tf

    crop_pct = setting["crop_pct"]
    target = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    rows, columns = (tf.cast(shape[i], "float64") for i in (0, 1))
    if target[0] == target[1]:
        short = tf.minimum(rows, columns)
        scaled = tf.constant(target[0], "float64")
        size = [
            tf.where(side == short, scaled, tf.floor(scaled * side / short))
            for side in (rows, columns)
        ]
    else:
        ratio = tf.minimum(rows / target[0], columns / target[1])
        size = [tf.round(side / ratio) for side in (rows, columns)]
    return tf.cast(tf.stack(size), "int32")


def _centre_offset(size, crop):
    """torchvision's `CenterCrop` offset: `round((size - crop) / 2)`, half
    to even as Python's `round`."""
    import tensorflow as tf

    return tf.cast(tf.round(tf.cast(size - crop, "float64") / 2.0), "int32")
