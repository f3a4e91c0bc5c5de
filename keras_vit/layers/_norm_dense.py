"""A `LayerNorm` and the `Dense` it feeds, with a backward pass that keeps
only the LayerNorm's input.

In a pre-norm block each LayerNorm feeds one projection (`norm1` the
attention's `qkv`, `norm2` the MLP's `mlp_fc1`). Differentiated op by op,
the pair keeps two tensors of the token rows' size for the backward pass:
the float32 normalised rows `x̂` (for the LayerNorm's and `gamma`'s
gradients) and the LayerNorm's output (for the kernel's gradient). `apply`
computes the same function and keeps the input rows alone (in the compute
dtype) and two floats a row, recomputing `x̂` and the output once the
upstream gradient exists (`_recompute.after`), as fused LayerNorm-linear
kernels do (NVIDIA Apex's and Transformer Engine's `LayerNormLinear`):
two rows' worth less per LayerNorm, 170 MB kept for ViT-B/16 at 384 px,
batch 4, in float32 and in mixed bfloat16 alike (TensorFlow's tensor peak
fell 131 MB in float32 with XLA, 176 MB in mixed bfloat16). Training
steps only: inference keeps the two layers' own graph, the one every
export converts.
"""

import keras
from keras import ops

from keras_vit.layers import _recompute


def fuses(norm, dense, training):
    """Whether `norm` then `dense` on token rows take `apply`: a training
    call, a `dense` without LoRA or quantization (their kernels are not one
    tensor) and without an activation."""
    return bool(
        training
        and norm is not None
        and not dense.lora_enabled
        and dense.quantization_mode is None
        and dense.activation is keras.activations.linear
    )


def apply(norm, dense, rows):
    """`dense(norm(rows))` for built layers and `(N, D)` rows, the backward
    pass keeping only `rows` and each row's mean and inverse deviation."""
    dtype = dense.compute_dtype
    kernel = ops.cast(dense.kernel, dtype)
    bias = None if dense.bias is None else ops.cast(dense.bias, dtype)
    gamma, beta = (ops.cast(w, "float32") for w in (norm.gamma, norm.beta))
    if bias is None:
        return _without_bias(norm.epsilon)(rows, gamma, beta, kernel)
    return _with_bias(norm.epsilon)(rows, gamma, beta, kernel, bias)


def _with_bias(epsilon):
    @ops.custom_gradient
    def norm_dense(rows, gamma, beta, kernel, bias):
        out, grad = _norm_dense(epsilon, rows, gamma, beta, kernel)
        return ops.add(out, bias), grad

    return norm_dense


def _without_bias(epsilon):
    @ops.custom_gradient
    def norm_dense(rows, gamma, beta, kernel):
        out, grad = _norm_dense(epsilon, rows, gamma, beta, kernel)

        def grad_without_bias(*args, upstream=None):
            return grad(*args, upstream=upstream)[:-1]

        return out, grad_without_bias

    return norm_dense


def _norm_dense(epsilon, rows, gamma, beta, kernel):
    """`LayerNorm(epsilon)(rows) @ kernel` as `LayerNorm` and `Dense`
    compute it, and the gradient function of `(rows, gamma, beta, kernel,
    bias)`."""
    x = ops.cast(rows, "float32")
    mean = ops.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    variance = ops.mean(centered * centered, axis=-1, keepdims=True)
    inv_std = ops.rsqrt(variance + epsilon)
    normed = ops.cast(centered * inv_std * gamma + beta, kernel.dtype)
    out = ops.matmul(normed, kernel)

    def grad(*args, upstream=None):
        # Keras passes the upstream gradient positionally on TensorFlow and
        # as `upstream` on other backends.
        g = args[0] if upstream is None else upstream
        (again,) = _recompute.after(g, rows)
        x_hat = (ops.cast(again, "float32") - mean) * inv_std
        normed = ops.cast(x_hat * gamma + beta, g.dtype)
        d_kernel = ops.einsum("ni,no->io", normed, g)
        # Summed in g's dtype: TensorFlow and JAX accumulate a bfloat16
        # sum in float32 (the same result as casting up first, measured),
        # and casting an (N, out) gradient up costs a pass over it.
        d_bias = ops.sum(g, axis=0)
        d_normed = ops.cast(ops.einsum("no,io->ni", g, kernel), "float32")
        d_gamma = ops.sum(d_normed * x_hat, axis=0)
        d_beta = ops.sum(d_normed, axis=0)
        # The LayerNorm's closed form, as `layer_norm._normalize`'s.
        d_x_hat = d_normed * gamma
        mean_g = ops.mean(d_x_hat, axis=-1, keepdims=True)
        mean_gx = ops.mean(d_x_hat * x_hat, axis=-1, keepdims=True)
        d_rows = inv_std * (d_x_hat - mean_g - x_hat * mean_gx)
        return ops.cast(d_rows, rows.dtype), d_gamma, d_beta, d_kernel, d_bias

    return out, grad
