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

`attend` returns the outputs alone: the weights a caller asks for are
the plain `probabilities`, which the graph prunes when nothing reads them;
a second output of a custom gradient would be handed a `(B, heads, T, T)`
zero cotangent by TensorFlow even when unused.
"""

from keras import ops

from keras_vit.layers import _recompute


def probabilities(query, key):
    """The float32 softmax of `query @ key` (whatever the inputs' dtype)."""
    return ops.softmax(ops.cast(ops.matmul(query, key), "float32"), axis=-1)


@ops.custom_gradient
def attend(query, key, value):
    """Softmax attention `softmax(query @ key) @ value`, with a backward
    pass that recomputes the probabilities.

    Args:
        query: `(B, heads, T, d)` queries, already scaled by `d ** -0.5`.
        key: `(B, heads, d, T)` keys, transposed, ready for `query @ key`.
        value: `(B, heads, T, d)` values.

    Returns:
        The `(B, T, heads, d)` outputs, in token order (ready to be
        reshaped into the output projection's `(B·T, D)` rows, one buffer
        that the projection's backward pass keeps too), in the values'
        dtype; the softmax is in float32 whatever the inputs' dtype.
    """
    weights = ops.cast(probabilities(query, key), value.dtype)
    outputs = ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3))

    def grad(*args, upstream=None):
        # Keras passes the upstream gradient positionally on TensorFlow and
        # as `upstream` on other backends.
        d_tokens = args[0] if upstream is None else upstream
        q, k, v, out = _recompute.after(d_tokens, query, key, value, outputs)
        probs = ops.cast(probabilities(q, k), v.dtype)
        d_outputs = ops.transpose(d_tokens, (0, 2, 1, 3))  # (B, heads, T, d)
        d_value = ops.matmul(ops.transpose(probs, (0, 1, 3, 2)), d_outputs)
        d_probs = ops.matmul(d_outputs, ops.transpose(v, (0, 1, 3, 2)))
        # The softmax's Jacobian: dS = P * (dP - sum(dP * P) over the row),
        # where sum(dP * P) = sum(dO * O) over the head's width: a float32
        # sum over `d` rather than a `(B, heads, T, T)` product and sum.
        row = ops.sum(
            ops.cast(d_tokens, "float32") * ops.cast(out, "float32"), axis=-1
        )  # (B, T, heads)
        row = ops.expand_dims(ops.transpose(row, (0, 2, 1)), -1)
        d_logits = probs * (d_probs - ops.cast(row, d_probs.dtype))
        d_query = ops.matmul(d_logits, ops.transpose(k, (0, 1, 3, 2)))
        d_key = ops.matmul(ops.transpose(q, (0, 1, 3, 2)), d_logits)
        return d_query, d_key, d_value

    return outputs, grad
