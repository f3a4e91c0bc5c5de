"""Softmax attention whose backward pass recomputes its probabilities.

A training step of the plain formulation keeps each block's `(B, heads,
T, T)` float32 probabilities (and their compute-dtype copy) alive from the
forward pass to the backward pass: at 577 tokens (384 px, patch 16) that
is ~64 MB per block per 4 images, twice. `attend` keeps only what the
gradients need at token size, the queries, keys, values and outputs (the
outputs are the output projection's input, which its backward pass keeps
anyway); the backward pass recomputes the probabilities from them, one
block at a time, as fused attention kernels do (Dao et al., 2022,
FlashAttention, Algorithm 4). The
cost is one extra `query @ key` matmul and softmax per block in the
backward pass. Both passes take the softmax as one op: without XLA (a
mixed-bfloat16 step on the CPU) every elementwise op over the `(B,
heads, T, T)` logits is a kernel of its own, and computing a log-sum-exp
to save cost seven of them per block (three `exp`, four subtractions).
The recomputation waits for the upstream gradient (`_recompute.after`),
or it would run, and be kept, in the forward pass after all.

The backward pass's other `(B, heads, T, T)` work is two elementwise ops
in the compute dtype, `P * (dP - r)`: the row term `r = sum(dP * P)`
equals `sum(dO * O)` over the head's width (Dao, 2023, FlashAttention-2,
Section 3.1.2), a float32 sum at token size. In mixed bfloat16 `dP` is a
bfloat16 matmul's output already; a float32 `P * (dP - r)` cast back cost
four more `(B, heads, T, T)` kernels per block for the same rounding.
The outputs `O` cost no memory where the step runs without XLA: they are the
output projection's input, one buffer. XLA instead fuses their transpose into
the row term's reduction, which then reads the matmul's `(B, heads, T, d)`
result, and keeps both layouts (ViT-B/16 float32, 224 px, batch 8: 58 MB). In a
step its trainer says XLA compiles (`step_xla=True`, see `kernels`), the row
term is `sum(dP * P)` in float32, one more fused read of the two `(B, heads, T,
T)` matrices the backward pass has.

`attend` returns the outputs alone: the weights a caller asks for are
the plain `probabilities`, which the graph prunes when nothing reads them;
a second output of a custom gradient would be handed a `(B, heads, T, T)`
zero cotangent by TensorFlow even when unused.
"""

import functools
import math
import os

import keras
from keras import ops

from keras_vit.layers import _fused
from keras_vit.layers import _recompute
from keras_vit.layers.layer_norm import statistics_dtype


def probabilities(query, key, dtype=None):
    """The softmax of `query @ key` in `dtype`. Defaults to `None`: the
    inputs' `statistics_dtype` (float32, float64 for float64 inputs)."""
    if dtype is None:
        dtype = statistics_dtype(query.dtype)
    return ops.softmax(ops.cast(ops.matmul(query, key), dtype), axis=-1)


def row_from_outputs(step_xla):
    """Whether `attend`'s backward pass takes its row term from the
    outputs: unless the step is known to run under XLA (`step_xla`, see
    `kernels`), which would keep a second copy of them (the module's
    docstring)."""
    return step_xla is not True


def softmax_dtype(dtype, step_xla=None):
    """The dtype the attention takes its softmax in, for `dtype` inputs
    (`attend`'s, and the plain path's in inference).

    float32 (float64 for float64: `statistics_dtype`) unless a bfloat16 softmax
    keeps float32 precision: on TensorFlow, oneDNN's CPU softmax computes in
    float32 and rounds once (one kernel instead of a cast up, a float32 softmax
    and a cast down, in both passes; timings and errors:
    `benchmarks/results/2026-12-02-attention-backward.md`), but Eigen's
    (TensorFlow without oneDNN) and XLA's compute `x - max` in bfloat16: 7%
    error on small probabilities against 0.4%. So bfloat16 only in a step
    (training, evaluation or prediction) whose trainer says it runs without XLA
    (`step_xla=False`, see `kernels`), on TensorFlow on a machine without a GPU
    and with XLA's auto-clustering off, where a probe finds the CPU's bfloat16
    softmax at float32 precision (`_keeps_float32`).
    """
    if (
        keras.backend.standardize_dtype(dtype) != "bfloat16"
        or step_xla is not False
        or not _tensorflow_cpu_without_xla()
        or not _keeps_float32("bfloat16")
    ):
        return statistics_dtype(dtype)
    return "bfloat16"


def _tensorflow_cpu_without_xla():
    """Whether ops run on TensorFlow, on the CPU (no GPU to place them
    on) and outside XLA's auto-clustering."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return not (
        tf.config.list_logical_devices("GPU")
        or tf.config.optimizer.get_jit()
        or "auto_jit" in os.environ.get("TF_XLA_FLAGS", "")
    )


@functools.cache
def _keeps_float32(dtype):
    """Whether TensorFlow's CPU softmax of `dtype` logits keeps float32
    precision: probed on the row `[24, 0.1015625]`, whose `x - max`
    bfloat16 cannot hold (-23.8984375 rounds to -23.875, and the small
    probability comes out 2.4% off)."""
    import tensorflow as tf

    with tf.init_scope(), tf.device("/CPU:0"):
        row = tf.constant([[24.0, 0.1015625]], dtype)
        got = float(tf.cast(tf.nn.softmax(row), "float32")[0, 1])
    want = 1.0 / (1.0 + math.exp(24.0 - 0.1015625))
    return abs(got / want - 1.0) < 0.01


@_fused.elementwise
def _softmax_gradient(probs, d_probs, row):
    """`P * (dP - row)`, the float32 `row` taken to `dP`'s dtype: the
    logits' gradient, in one pass over the `(B, heads, T, T)` tensors on
    TensorFlow (`_fused`) where each op would be a pass of its own; it
    pays in bfloat16 on long sequences (figures: `benchmarks/results/`,
    2026-12-02-xeon-optimizer-fusions.md and, a block alone,
    2026-12-05-figures-moved-from-docstrings.md)."""
    return probs * (d_probs - ops.cast(row, d_probs.dtype))


def attend(query, key, value, step_xla=None):
    """Softmax attention `softmax(query @ key) @ value`, with a backward
    pass that recomputes the probabilities.

    Args:
        query: `(B, heads, T, d)` queries, already scaled by `d ** -0.5`.
        key: `(B, heads, d, T)` keys, transposed, ready for `query @ key`.
        value: `(B, heads, T, d)` values.
        step_xla: what the trainer said of the step (`kernels`): it picks
            the softmax's dtype (`softmax_dtype`) and the backward pass's
            row term (`row_from_outputs`). Defaults to `None` (not
            known).

    Returns:
        The `(B, T, heads, d)` outputs, in token order (ready to be
        reshaped into the output projection's `(B·T, D)` rows, one buffer
        that the projection's backward pass keeps too), in the values'
        dtype; the softmax is in float32 (float64 of float64 inputs), or
        where that keeps float32 precision in bfloat16 (`softmax_dtype`).
    """
    return _attend(
        softmax_dtype(value.dtype, step_xla), row_from_outputs(step_xla)
    )(query, key, value)


def _attend(precision, from_outputs):
    """`attend`'s custom-gradient function, for a softmax in `precision`
    and the row term from the outputs or not (`from_outputs`)."""

    @ops.custom_gradient
    def attention(query, key, value):
        return _attention_and_gradient(
            query, key, value, precision, from_outputs
        )

    return attention


def _attention_and_gradient(query, key, value, precision, from_outputs):
    """The outputs of `attend` and their gradient function."""
    wide = statistics_dtype(value.dtype)  # the row term's
    weights = ops.cast(probabilities(query, key, precision), value.dtype)
    outputs = ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3))

    def grad(*args, upstream=None):
        # Keras passes the upstream gradient positionally on TensorFlow and
        # as `upstream` on other backends.
        d_tokens = args[0] if upstream is None else upstream
        # The recomputation's inputs wait for the upstream gradient; the
        # outputs are read only with it, so they need no copy that waits.
        q, k, v = _recompute.after(d_tokens, query, key, value)
        probs = ops.cast(probabilities(q, k, precision), v.dtype)
        d_outputs = ops.transpose(d_tokens, (0, 2, 1, 3))  # (B, heads, T, d)
        d_value = ops.matmul(ops.transpose(probs, (0, 1, 3, 2)), d_outputs)
        d_probs = ops.matmul(d_outputs, ops.transpose(v, (0, 1, 3, 2)))
        # The softmax's Jacobian: dS = P * (dP - sum(dP * P) over the row).
        if from_outputs:
            # sum(dP * P) = sum(dO * O) over the head's width: a float32
            # sum over `d` rather than a `(B, heads, T, T)` product and sum.
            row = ops.sum(
                ops.cast(d_tokens, wide) * ops.cast(outputs, wide), axis=-1
            )  # (B, T, heads)
            row = ops.expand_dims(ops.transpose(row, (0, 2, 1)), -1)
        else:
            row = ops.sum(
                ops.cast(d_probs, wide) * ops.cast(probs, wide),
                axis=-1,
                keepdims=True,
            )  # (B, heads, T, 1)
        d_logits = _softmax_gradient(probs, d_probs, row)
        d_query = ops.matmul(d_logits, ops.transpose(k, (0, 1, 3, 2)))
        d_key = ops.matmul(ops.transpose(q, (0, 1, 3, 2)), d_logits)
        return d_query, d_key, d_value

    return outputs, grad
