"""The MLP activations of `keras_vit.options.ACTIVATIONS`, by name."""

from keras import ops
from keras.backend import standardize_dtype

from keras_vit.layers import _gelu


def activate(x, name, training=False):
    """`x` through the activation `name` (one of `ACTIVATIONS`).

    In training the exact GELU is `_gelu.gelu`: the same function, whose
    backward pass keeps only `x`; inference keeps the plain op (the graph
    every export converts)."""
    if name == "quick_gelu":  # OpenAI CLIP's
        # A Python number takes `x`'s dtype as it is (a cast of 1.702 went
        # through float32: 2e-8 off in float64).
        return x * ops.sigmoid(1.702 * x)
    if name == "silu":  # SwiGLU's gate
        return x * ops.sigmoid(x)
    if name == "gelu" and training:
        return _gelu.gelu(x)
    if name == "gelu" and standardize_dtype(x.dtype) == "float64":
        return _gelu.exact(x)  # the plain op's 1/sqrt(2) is float32's
    return ops.gelu(x, approximate=name == "gelu_tanh")
