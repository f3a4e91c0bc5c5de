"""What a model takes and returns, as the exports record it: its input
size, check pixels, output kind, weight bytes and placeholder class
names."""

import keras
import numpy as np

from keras_vit.models.config import activation_kind


def input_spec(model):
    """`(height, width, channels)` of a single-image-input model.

    A `ViT(dynamic_image_size=True)` takes any size; its exports (TFLite,
    ONNX, OpenVINO: fixed sizes) and verification are at its `image_size`,
    where its graph resamples nothing (a SavedModel keeps any size:
    `saved_model.build_archive`).

    Raises:
        ValueError: if the model does not take one `(B, H, W, C)` input of
            known size.
    """
    if getattr(model, "dynamic_image_size", False) is True:
        return (*model.image_size, model.num_channels)
    shapes = model.input_shape
    if isinstance(shapes, list) or len(shapes) != 4 or None in shapes[1:]:
        raise ValueError(
            "Export needs a model with one (batch, height, width, channels) "
            f"image input of known size. Received: model {model.name!r} with "
            f"input shape {shapes}"
        )
    return tuple(int(s) for s in shapes[1:])


def check_pixels(model, batch_size):
    """Random float32 pixels in [0, 255] (seed 0), `(batch_size, height,
    width, channels)` (a batch of 2 for a dynamic one), which the ONNX and
    OpenVINO exports are checked against Keras on."""
    height, width, channels = input_spec(model)
    x = np.random.default_rng(0).uniform(
        0, 255, (batch_size or 2, height, width, channels)
    )
    return x.astype("float32")


def output_kind(model):
    """What the model returns: `"probabilities"`, `"logits"`, `"features"`
    or `"outputs"` (another activation's). The SavedModel's output key, the
    sidecar's `output.kind`, the verification's limits and whether
    `keras-vit predict` takes a softmax all follow it."""
    if getattr(model, "include_top", True) is False:
        return "features"
    return activation_kind(getattr(model, "classifier_activation", "softmax"))


def weight_bytes(model):
    """The bytes of `model`'s weights as they are held (int8 kernels of a
    Keras-quantized model take one byte a value)."""
    # TensorFlow imported here, not above: `import keras_vit` on the JAX or
    # torch backend imports this module and must not import TensorFlow.
    import tensorflow as tf

    return sum(
        int(np.prod(w.shape))
        * tf.as_dtype(keras.backend.standardize_dtype(w.dtype)).size
        for w in model.weights
    )


def placeholder_class_names(num_classes):
    """`["class_0", "class_1", ...]`: the names of a model's outputs where
    none are known (no `labels`, no training run's)."""
    return [f"class_{i}" for i in range(num_classes)]
