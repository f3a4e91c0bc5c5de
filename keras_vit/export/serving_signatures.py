"""The signatures of a SavedModel export: their names, input dtypes, and
the decoding of image files that `serving_bytes` runs."""

from keras_vit.data import images
from keras_vit.data import resize
from keras_vit.export.model_io import input_spec
from keras_vit.export.pixel_inputs import takes_pixels

#: SavedModel signature names: float32 inputs, uint8 pixels, and encoded
#: image files (JPEG, PNG, GIF, BMP bytes; TF Serving's REST API takes them
#: base64-encoded as `{"b64": ...}`).
FLOAT_SIGNATURE = "serving_default"


UINT8_SIGNATURE = "serving_uint8"


BYTES_SIGNATURE = "serving_bytes"


#: The input name of `BYTES_SIGNATURE` (the others take `images`).
BYTES_INPUT = "image_bytes"


def decoded_files(model, image_bytes):
    """A `[batch]` string tensor of image files as `model`'s float32
    `[batch, H, W, 3]` pixels: each decoded and resized at its input size
    as its `image_resize` says (`keras_vit.data.images.decoded_model_pixels`,
    as `load_image_files` reads files), in a graph: the SavedModel's
    `serving_bytes` signature runs it, and its verification the same."""
    # TensorFlow imported here, not above: `import keras_vit` on the JAX or
    # torch backend imports this module and must not import TensorFlow.
    import tensorflow as tf

    height, width, channels = input_spec(model)
    image_resize = resize.of_model(model)
    return tf.map_fn(
        lambda contents: images.decoded_model_pixels(
            contents, (height, width), image_resize
        ),
        image_bytes,
        fn_output_signature=tf.TensorSpec((height, width, channels), "float32"),
    )


def saved_model_signatures(model):
    """`{name: input dtype}` of a SavedModel export of `model` (written by
    `keras_vit.export.saved_model`, checked by `verify_saved_model`):
    `serving_default` takes float32 inputs; `serving_uint8` takes uint8
    pixels (a decoded JPEG as it is) and `serving_bytes` encoded image
    files (`"string"`: decoded and resized inside, as the model's
    `image_resize` says), both only for a model that takes [0, 255] RGB
    pixels: the normalised inputs of one built with
    `include_preprocessing=False` do not fit in uint8 (-1 would wrap to
    255), normalising inside the signature would be a second copy of the
    model's preprocessing, and a grayscale model's luma is left to the
    caller."""
    signatures = {FLOAT_SIGNATURE: "float32"}
    if takes_pixels(model):
        signatures[UINT8_SIGNATURE] = "uint8"
        if input_spec(model)[-1] == 3:
            signatures[BYTES_SIGNATURE] = "string"
    return signatures
