"""The exact GELU, with a backward pass that keeps only its input.

`ops.gelu(x, approximate=False)` on TensorFlow is `0.5 * x * erfc(-x /
sqrt(2))`, and automatic differentiation of those ops keeps four
MLP-wide tensors alive for the backward pass besides `x` (`-x / sqrt(2)`,
the `erfc`, `0.5 * x`, and the sum): in a ViT-B/16 training step at 384 px
that is 1.3 GB of the 3.6 GB kept between the passes (read off the step's
graph: `benchmarks/results/2026-12-01-training-memory.md`). `gelu` computes
the same function and differentiates it in closed form from `x` alone:
`d/dx = Phi(x) + x * phi(x)` (Hendrycks and Gimpel, 2016), in float32;
its forward pass computes a bfloat16 GELU in float32 too (`exact`).

`gelu_dense` goes one step further for the MLP: `gelu(x) @ kernel + bias`
keeping only `x`, the backward pass recomputing `gelu(x)` for the
kernel's gradient (one MLP-wide tensor less per block: 325 MB in float32
for ViT-B/16 at 384 px, batch 4), as fused MLP kernels do.

On TensorFlow the elementwise chains (the GELU, and its value and
derivative in the backward pass) run as one XLA kernel each
(`_fused.elementwise`): one pass over the MLP's activations instead of
one per op (what a training step gains:
`benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`).
"""

import math

from keras import ops
from keras.backend import standardize_dtype

from keras_vit.layers import _dense_grad
from keras_vit.layers import _fused
from keras_vit.layers import _recompute
from keras_vit.layers.layer_norm import statistics_dtype


@ops.custom_gradient
def gelu(x):
    """`x * Phi(x)`, `Phi` the standard normal CDF (the exact GELU)."""
    y = _exact_fused(x)

    def grad(*args, upstream=None):
        # Keras passes the upstream gradient positionally on TensorFlow and
        # as `upstream` on other backends.
        g = args[0] if upstream is None else upstream
        return g * _slope(x)

    return y, grad


@ops.custom_gradient
def gelu_dense(x, kernel, bias):
    """`gelu(x) @ kernel + bias` for `(N, in)` rows `x`, an `(in, out)`
    kernel and an `(out,)` bias, all of one dtype; the backward pass
    keeps only `x` and recomputes `gelu(x)` once the upstream gradient
    exists (`_recompute.after`)."""
    y = ops.matmul(_exact_fused(x), kernel) + bias

    def grad(*args, upstream=None):
        g = args[0] if upstream is None else upstream
        (again,) = _recompute.after(g, x)
        activations, slopes = _value_and_derivative(again)
        d_kernel = _dense_grad.kernel_gradient(activations, g)
        wide = statistics_dtype(g.dtype)
        d_bias = ops.cast(ops.sum(ops.cast(g, wide), axis=0), g.dtype)
        d_x = _dense_grad.input_gradient(g, kernel) * slopes
        return d_x, d_kernel, d_bias

    return y, grad


def exact(x):
    """`x * Phi(x)` in `x`'s dtype. Of a lower precision than float32 it
    is computed in float32: TensorFlow's CPU `gelu` of bfloat16 (an
    `erfc` of bfloat16) is slower than a cast up, an `erf` and a cast down
    (`benchmarks/results/2026-12-02-training-memory-recompute.md`).
    Of float32 it is the plain op, whose `erfc` is exact in the negative
    tail, where `0.5 + 0.5 * erf` rounds `Phi` to 0 (at twice the cost).
    Of float64 it is the formula in float64 (`statistics_dtype`): the
    plain op rounds its `1 / sqrt(2)` to float32."""
    if standardize_dtype(x.dtype) == "float32":
        return ops.gelu(x, approximate=False)
    wide = ops.cast(x, statistics_dtype(x.dtype))
    return ops.cast(wide * _cdf(wide), x.dtype)


@_fused.elementwise
def _value_and_derivative(x):
    """`gelu(x)` and `d gelu / dx` in `x`'s dtype, from one float32 (or
    float64: `statistics_dtype`) `Phi` (`gelu(x) = x * Phi(x)`), in one
    pass on TensorFlow."""
    x32 = ops.cast(x, statistics_dtype(x.dtype))
    cdf = _cdf(x32)
    return (
        ops.cast(x32 * cdf, x.dtype),
        ops.cast(cdf + x32 * _pdf(x32), x.dtype),
    )


def derivative(x):
    """`d gelu / dx = Phi(x) + x * phi(x)`, computed in float32 whatever
    `x`'s dtype: a bfloat16 `x` is cast up once and the derivative cast
    down once, so `erf` and `exp`, the costly ops of a mixed-bfloat16
    training step's backward pass, run on float32 (more precise too); a
    float64 `x` keeps float64 (`statistics_dtype`)."""
    x = ops.cast(x, statistics_dtype(x.dtype))
    return _cdf(x) + x * _pdf(x)


# `exact`, and `derivative` in `x`'s dtype, each in one pass on TensorFlow
# (training steps).
_exact_fused = _fused.elementwise(exact)
_slope = _fused.elementwise(lambda x: ops.cast(derivative(x), x.dtype))


def _cdf(x):
    """The standard normal CDF `Phi(x)` of float32 (or float64) `x`."""
    return 0.5 + 0.5 * ops.erf(x * (1.0 / math.sqrt(2.0)))


def _pdf(x):
    """The standard normal density `phi(x)` of float32 (or float64) `x`."""
    return ops.exp(x * x * -0.5) * (1.0 / math.sqrt(2.0 * math.pi))
