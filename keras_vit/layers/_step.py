"""What the trainer says of the step being traced: XLA compiles it or not.

TensorFlow gives a function being traced no sign of whether XLA will
compile it; only the trainer knows (`models/keras_fixes._StepSaysXla`,
for its training, evaluation and prediction steps). Layers that compute
the same function two ways choose by it: the attention's softmax dtype
and backward pass (`_attention_core`), and the LayerNorm's forward pass
in a step without XLA (`layer_norm`). Outside a trainer's step (a model
called directly, or traced for an export) nothing is known, and the
layers keep their plain graph.
"""

import contextlib
import threading

_said = threading.local()


@contextlib.contextmanager
def compiled_step(xla):
    """Within it, the step being traced in this thread is known to run with
    XLA (`xla=True`) or without it (`xla=False`)."""
    previous = xla_compiled()
    _said.xla = bool(xla)
    try:
        yield
    finally:
        _said.xla = previous


def xla_compiled():
    """What the trainer said of the step being traced: True (XLA), False
    (no XLA), or None (outside a trainer's step: not known)."""
    return getattr(_said, "xla", None)
