"""The one switch for kernels that only a step's trainer can choose.

Two of keras_vit's layers compute the same function another way where
they know whether XLA compiles the step being traced, which only the
trainer knows (TensorFlow gives a traced function no sign of it). Each
such layer says what it was told in an attribute, `step_xla`:

* `None`, the default: not known (a layer called directly, traced for an
  export, or inside a model of your own). The plain graph.
* `True`: a step that XLA compiles.
* `False`: a step that runs without XLA.

keras_vit's models set it on their own layers for each step they trace,
from `model.jit_compile` (`models.keras_fixes`), and put it back after:
`compiled_step(model, xla)` is that switch, and a model of your own that
holds keras_vit layers can use it the same way. What it picks, each
proven equal to the plain path by a test:

* `MultiHeadSelfAttention` in training (`_attention_core.attend`): the
  backward pass's row term from the outputs unless `step_xla` is `True`
  (under XLA, from the probabilities, which XLA keeps anyway)
  (tests/layers/test_training_memory.py, gradients against autodiff).
* `MultiHeadSelfAttention` with `step_xla=False` in bfloat16 on a CPU
  whose oneDNN softmax keeps float32 precision: the softmax in bfloat16
  (`_attention_core.softmax_dtype`; tests/layers/
  test_attention_softmax_dtype.py).
* `LayerNorm` with `step_xla=False` in a bfloat16 evaluation or
  prediction step: one XLA kernel (`layer_norm.fused_forward`;
  tests/layers/test_layer_norm.py).

The layers' other memory-saving kernels (the recomputed attention
probabilities, the closed-form LayerNorm, GELU and Dense gradients) need
no switch: they are the layers' training graph wherever they run.
"""

import contextlib

import keras

from keras_vit import arg_checks


@contextlib.contextmanager
def compiled_step(model, xla):
    """Within it, the layers of `model` (a Keras model or layer, itself
    included) that take a `step_xla` are told that the step being traced
    runs with XLA (`xla=True`) or without it (`xla=False`); each gets its
    own value back after."""
    if not isinstance(model, keras.layers.Layer):
        raise ValueError(
            "compiled_step tells the layers of a Keras model or layer. "
            f"Received: model={model!r}"
        )
    xla = arg_checks.boolean("xla", xla)
    layers = [
        layer
        for layer in model._flatten_layers(include_self=True)
        if hasattr(layer, "step_xla")
    ]
    previous = [layer.step_xla for layer in layers]
    for layer in layers:
        layer.step_xla = xla
    try:
        yield
    finally:
        for layer, value in zip(layers, previous):
            layer.step_xla = value
