"""Softmax attention whose backward pass recomputes its probabilities.

A training step of the plain formulation keeps each block's `(B, heads,
T, T)` float32 probabilities (and their compute-dtype copy) alive from the
forward pass to the backward pass: at 577 tokens (384 px, patch 16) that
is ~64 MB per block per 4 images, twice. `attend` keeps only what the
gradients need at token size, the queries, keys and values, and one
float32 log-sum-exp per row; the backward pass rebuilds the probabilities
from them, one block at a time, as fused attention kernels do (Dao et
al., 2022, FlashAttention, Algorithm 4; PyTorch's scaled_dot_product
attention saves the same). The cost is one extra `query @ key` matmul per
block in the backward pass.
"""

from keras import ops


def _probabilities(query, key, log_sum_exp):
    logits = ops.cast(ops.matmul(query, key), "float32")
    return ops.exp(logits - log_sum_exp)


@ops.custom_gradient
def attend(query, key, value):
    """Softmax attention `softmax(query @ key) @ value`, with a backward
    pass that recomputes the probabilities.

    Args:
        query: `(B, heads, T, d)` queries, already scaled by `d ** -0.5`.
        key: `(B, heads, d, T)` keys, transposed, ready for `query @ key`.
        value: `(B, heads, T, d)` values.

    Returns:
        `(outputs, weights)`: the `(B, heads, T, d)` outputs in the values'
        dtype and the float32 `(B, heads, T, T)` probabilities (rows sum to
        1; the softmax is in float32 whatever the inputs' dtype). Gradients
        flow through both.
    """
    logits = ops.cast(ops.matmul(query, key), "float32")
    log_sum_exp = ops.logsumexp(logits, axis=-1, keepdims=True)
    weights = ops.exp(logits - log_sum_exp)
    outputs = ops.matmul(ops.cast(weights, value.dtype), value)

    def grad(*upstream, **unused):
        # TensorFlow passes one cotangent per output, JAX one tuple.
        if len(upstream) == 1 and isinstance(upstream[0], (tuple, list)):
            upstream = upstream[0]
        d_outputs, d_weights = upstream
        probs = _probabilities(query, key, log_sum_exp)
        low = ops.cast(probs, value.dtype)
        d_value = ops.matmul(ops.transpose(low, (0, 1, 3, 2)), d_outputs)
        d_probs = ops.cast(
            ops.matmul(d_outputs, ops.transpose(value, (0, 1, 3, 2))),
            "float32",
        )
        if d_weights is not None:
            d_probs = d_probs + ops.cast(d_weights, "float32")
        # The softmax's Jacobian: dS = P * (dP - sum(dP * P) over the row).
        d_logits = probs * (
            d_probs - ops.sum(d_probs * probs, axis=-1, keepdims=True)
        )
        d_logits = ops.cast(d_logits, query.dtype)
        d_query = ops.matmul(d_logits, ops.transpose(key, (0, 1, 3, 2)))
        d_key = ops.matmul(ops.transpose(query, (0, 1, 3, 2)), d_logits)
        return d_query, d_key, d_value

    return (outputs, weights), grad
