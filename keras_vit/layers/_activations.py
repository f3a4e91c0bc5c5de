"""The MLP activations of `keras_vit.options.ACTIVATIONS`, by name."""

from keras import ops

from keras_vit.layers import _gelu


def activate(x, name, training=False):
    """`x` through the activation `name` (one of `ACTIVATIONS`).

    In training the exact GELU is `_gelu.gelu`: the same function, whose
    backward pass keeps only `x`; inference keeps the plain op (the graph
    every export converts)."""
    if name == "quick_gelu":  # OpenAI CLIP's
        return x * ops.sigmoid(ops.cast(1.702, x.dtype) * x)
    if name == "gelu" and training:
        return _gelu.gelu(x)
    return ops.gelu(x, approximate=name == "gelu_tanh")
