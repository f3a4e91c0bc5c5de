"""The MLP activations of `keras_vit.options.ACTIVATIONS`, by name."""

from keras import ops


def activate(x, name):
    """`x` through the activation `name` (one of `ACTIVATIONS`)."""
    if name == "quick_gelu":  # OpenAI CLIP's
        return x * ops.sigmoid(ops.cast(1.702, x.dtype) * x)
    return ops.gelu(x, approximate=name == "gelu_tanh")
