"""The two matmuls of a dense layer's backward pass, for the custom
gradients that fuse a dense layer with what feeds it (`_norm_dense`,
`_gelu.gelu_dense`).

For `(N, in)` rows and an `(N, out)` upstream gradient, the kernel's
gradient is `rows^T @ upstream`. Written as `einsum("ni,no->io")`,
TensorFlow 2.21 with oneDNN takes a slow path for some shapes (float32
rows of 768 and a gradient of 3072, ViT-B/16's `mlp_fc1`, ran at under
half the transposed matmul's rate:
`benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`). A matmul of
the transpose takes oneDNN's matmul kernel, the transpose folded into it
(TensorFlow's grappler, XLA).
"""

from keras import ops


def kernel_gradient(rows, upstream):
    """`rows^T @ upstream`: the `(in, out)` gradient of a kernel applied to
    `(N, in)` rows, given the `(N, out)` upstream gradient."""
    return ops.matmul(ops.transpose(rows), upstream)


def input_gradient(upstream, kernel):
    """`upstream @ kernel^T`: the `(N, in)` gradient of the rows a `(in,
    out)` kernel was applied to."""
    return ops.matmul(upstream, ops.transpose(kernel))
