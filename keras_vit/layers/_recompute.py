"""What a backward pass that recomputes forward values needs: its inputs
made anew once the upstream gradient exists.

A custom gradient that recomputes a forward value (the attention's
probabilities, the MLP's GELU) saves memory only if the recomputation
runs in the backward pass and is not merged with the forward pass's:

- TensorFlow's graph executor runs an op as soon as its inputs exist, so
  a recomputation from forward tensors alone runs during the forward pass
  and its result waits for the backward pass: every block's attention
  probabilities are kept after all, and the step peaks higher by about
  their size.
- XLA (under TensorFlow's `jit_compile` and on JAX) merges the two as
  common subexpressions, with the same effect. XLA on the CPU drops
  optimization barriers before it merges, so a barrier would not do.

The step's peaks with and without the wait:
`benchmarks/results/2026-12-02-training-memory-recompute.md` and
`benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`.

`after` gives the recomputation inputs that depend on the upstream
gradient, as TensorFlow's `recompute_grad` does: plus a zero made from
one element of it that no simplifier folds.
"""

from keras import ops


def after(dependency, *tensors):
    """`tensors` plus a zero computed from `dependency`: the same values,
    available only once `dependency` is, and not the forward pass's."""
    first = ops.cast(ops.reshape(dependency, (-1,))[:1], "bool")
    zero = ops.where(ops.equal(first, first), 0.0, float("nan"))
    return tuple(x + ops.cast(zero, x.dtype) for x in tensors)
