"""A `LayerNorm` and the `Dense` it feeds, with a backward pass that keeps
only the LayerNorm's input.

In a pre-norm block each LayerNorm feeds one projection (`norm1` the
attention's `qkv`, `norm2` the MLP's `mlp_fc1`). Differentiated op by op,
the pair keeps two tensors of the token rows' size for the backward pass:
the float32 normalised rows `x̂` (for the LayerNorm's and `gamma`'s
gradients) and the LayerNorm's output (for the kernel's gradient). `project`
computes the same function and keeps the input rows alone (in the compute
dtype) and two floats a row, recomputing `x̂` and the output once the
upstream gradient exists (`_recompute.after`), as fused LayerNorm-linear
kernels do (NVIDIA Apex's and Transformer Engine's `LayerNormLinear`):
two rows' worth less per LayerNorm, 170 MB kept for ViT-B/16 at 384 px,
batch 4, in float32 and in mixed bfloat16 alike (the step peaks before
and after: `benchmarks/results/2026-12-02-layernorm-dense.md`). Training
steps only: inference keeps the two layers' own graph, the one every
export converts.

On TensorFlow the LayerNorm's elementwise work (its output, recomputed,
and its gradients) runs as one XLA kernel each (`_fused.elementwise`)
rather than as an op, and a pass over the rows, per step of the formula:
faster in mixed bfloat16, level in float32 without XLA
(`benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`). XLA's sums
round otherwise than TensorFlow's: the output equals the two layers' to
float32 rounding, no longer bit for bit.
"""

import keras
from keras import ops
from keras.backend import standardize_dtype

from keras_vit.layers import _dense_grad
from keras_vit.layers import _fused
from keras_vit.layers import _recompute
from keras_vit.layers import layer_norm


def project(norm, dense, rows, training):
    """`dense(norm(rows))` of `(N, D)` rows (`dense(rows)` without a
    `norm`), taken as one function whose backward pass keeps only `rows`
    where `fuses`."""
    if norm is None:
        return dense(rows)
    if not fuses(norm, dense, training):
        return dense(norm(rows))
    dtype = dense.compute_dtype
    kernel, bias = (ops.cast(w, dtype) for w in (dense.kernel, dense.bias))
    gamma, beta = norm.scale_and_offset()
    return _norm_dense(norm.epsilon)(rows, gamma, beta, kernel, bias)


def fuses(norm, dense, training):
    """Whether a `norm` then `dense` take the fused function: a training
    call, and a plain `dense` (with a bias, without an activation, LoRA or
    quantization, whose kernels are not one tensor)."""
    return bool(
        training
        and dense.bias is not None
        and not dense.lora_enabled
        and dense.quantization_mode is None
        and dense.activation is keras.activations.linear
    )


def _norm_dense(epsilon):
    """`LayerNorm(epsilon)(rows) @ kernel + bias` as `LayerNorm` and
    `Dense` compute it, with the backward pass that keeps only `rows` and
    each row's mean and inverse deviation."""

    @ops.custom_gradient
    def norm_dense(rows, gamma, beta, kernel, bias):
        dtype = standardize_dtype(kernel.dtype)
        normed, mean, inv_std = layer_norm.fused_forward(
            rows, gamma, beta, epsilon, dtype
        )
        out = ops.add(ops.matmul(normed, kernel), bias)

        def grad(*args, upstream=None):
            # Keras passes the upstream gradient positionally on TensorFlow
            # and as `upstream` on other backends.
            g = args[0] if upstream is None else upstream
            (again,) = _recompute.after(g, rows)
            normed = _renormalize(again, mean, inv_std, gamma, beta, dtype)
            d_kernel = _dense_grad.kernel_gradient(normed, g)
            # Summed in g's dtype: TensorFlow and JAX accumulate a bfloat16
            # sum in float32 (the same result as casting up first), and
            # casting an (N, out) gradient up costs a pass over it.
            d_bias = ops.sum(g, axis=0)
            d_rows, d_gamma, d_beta = _norm_gradients(
                _dense_grad.input_gradient(g, kernel),
                again,
                mean,
                inv_std,
                gamma,
            )
            return d_rows, d_gamma, d_beta, d_kernel, d_bias

        return out, grad

    return norm_dense


# Module-level functions, `epsilon` and `dtype` static arguments: each is
# compiled once per shape, not once per LayerNorm-Dense pair of a model.
@_fused.elementwise
def _renormalize(rows, mean, inv_std, gamma, beta, dtype):
    """The LayerNorm's output again, in `dtype`, from its input `rows` and
    their statistics."""
    return ops.cast(_x_hat(rows, mean, inv_std) * gamma + beta, dtype)


@_fused.elementwise
def _norm_gradients(d_normed, rows, mean, inv_std, gamma):
    """The gradients of the LayerNorm's input `rows` (in their dtype),
    `gamma` and `beta`, from that of its output `d_normed` (in `gamma`'s
    dtype, the statistics')."""
    d_normed = ops.cast(d_normed, gamma.dtype)
    x_hat = _x_hat(rows, mean, inv_std)
    d_gamma = ops.sum(d_normed * x_hat, axis=0)
    d_beta = ops.sum(d_normed, axis=0)
    d_rows = layer_norm.normalized_gradient(d_normed * gamma, x_hat, inv_std)
    return ops.cast(d_rows, rows.dtype), d_gamma, d_beta


def _x_hat(rows, mean, inv_std):
    """The normalised rows, from the rows and their statistics, in the
    statistics' dtype."""
    return (ops.cast(rows, mean.dtype) - mean) * inv_std
