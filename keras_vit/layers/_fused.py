"""Chains of elementwise ops compiled into one kernel, on TensorFlow.

Outside XLA, TensorFlow runs each op of a chain such as the exact GELU's
derivative (`0.5 + 0.5 erf(x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi)`, in
float32 from bfloat16) as a pass of its own over the whole tensor: a dozen
passes over the MLP's `(N, 4D)` activations per block in a training step.
`elementwise(fn)` is `fn` compiled by XLA as one function (one pass,
whatever else the step runs), as fused training kernels do (PyTorch's
compiled and fused GELU backward). Under an XLA-compiled step it is
inlined like any other function; on the other backends, where the step is
compiled whole (JAX) or not (PyTorch), it is `fn` itself.

XLA's `erf` is a polynomial approximation as TensorFlow's is: the two
agree to float32 rounding, not bit for bit.
"""

import keras


def elementwise(fn):
    """`fn` (tensors in, tensors out, no state) as one XLA kernel on
    TensorFlow; `fn` unchanged on other backends."""
    if keras.backend.backend() != "tensorflow":
        return fn
    import tensorflow as tf

    return tf.function(fn, jit_compile=True, autograph=False)
