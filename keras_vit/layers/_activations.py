"""The MLP activations of `keras_vit.options.ACTIVATIONS`, by name."""

from keras import ops

from keras_vit.layers import _gelu


def activate(x, name, training=False):
    """`x` through the activation `name` (one of `ACTIVATIONS`).

    In training the exact GELU is `_gelu.gelu`: the same function, whose
    backward pass keeps only `x`. Inference takes `_gelu.exact`: of float32
    the plain op (the graph every export converts); of bfloat16 or float16
    computed in float32, which TensorFlow's CPU kernels run several times
    faster than a bfloat16 `erfc`."""
    if name == "quick_gelu":  # OpenAI CLIP's
        return x * ops.sigmoid(ops.cast(1.702, x.dtype) * x)
    if name == "gelu":
        return _gelu.gelu(x) if training else _gelu.exact(x)
    return ops.gelu(x, approximate=True)
