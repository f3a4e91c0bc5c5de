"""The attention takes a bfloat16 softmax only where it keeps float32
precision: oneDNN's CPU kernel, in a training step or an inference (a
`predict` step) its trainer says runs without XLA
(`_attention_core.softmax_dtype`)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit.layers import _attention_core
from keras_vit.layers import kernels
from tests.helpers import TINY
from tests.helpers import record_step_xla

_PROBE = """
import json, numpy as np, tensorflow as tf
from keras_vit.layers import _attention_core
rng = np.random.default_rng(0)
logits = tf.cast(tf.constant(rng.normal(size=(64, 1025)) * 3, "float32"),
                 "bfloat16")
want = tf.nn.softmax(tf.cast(logits, "float32"))
got = tf.cast(tf.nn.softmax(logits), "float32")
error = float(tf.reduce_max(tf.abs(got - want) / want))
print(json.dumps([_attention_core._keeps_float32("bfloat16"), error]))
"""


@pytest.mark.parametrize("onednn", ["0", "1"])
def test_the_probe_finds_the_softmaxes_at_float32_precision(onednn):
    # Over 64 rows of 1025 logits, the bfloat16 softmax is within bfloat16's
    # rounding (0.4%) of the float32 softmax of the same logits exactly
    # where the probe says so; without oneDNN (Eigen) it never is.
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": onednn}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    keeps, error = json.loads(proc.stdout.strip().splitlines()[-1])
    assert keeps == (error < 0.005), (keeps, error)
    if onednn == "0":
        assert not keeps


def _softmax_input_dtypes(dtype, step_xla=None):
    inputs = [
        tf.zeros(shape, dtype) for shape in ((1, 2, 5, 4), (1, 2, 4, 5))
    ] + [tf.zeros((1, 2, 5, 4), dtype)]

    @tf.function
    def step(query, key, value):
        with tf.GradientTape() as tape:
            tape.watch([query, key, value])
            out = _attention_core.attend(query, key, value, step_xla)
        return tape.gradient(out, [query, key, value])

    graph = step.get_concrete_function(*inputs).graph
    return {
        op.inputs[0].dtype.name
        for op in graph.get_operations()
        if op.type == "Softmax"
    }


def test_a_bfloat16_softmax_only_in_a_step_said_to_run_without_xla(
    monkeypatch,
):
    monkeypatch.setattr(_attention_core, "_keeps_float32", lambda _: True)
    assert _softmax_input_dtypes("bfloat16") == {"float32"}
    assert _softmax_input_dtypes("bfloat16", step_xla=True) == {"float32"}
    # Both passes' softmaxes, the forward's and the recomputed one.
    assert _softmax_input_dtypes("bfloat16", step_xla=False) == {"bfloat16"}
    assert _softmax_input_dtypes("float32", step_xla=False) == {"float32"}
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=2")
    assert _softmax_input_dtypes("bfloat16", step_xla=False) == {"float32"}
    monkeypatch.delenv("TF_XLA_FLAGS")
    # Where the CPU's bfloat16 softmax is not float32-precise: float32.
    monkeypatch.setattr(_attention_core, "_keeps_float32", lambda _: False)
    assert _softmax_input_dtypes("bfloat16", step_xla=False) == {"float32"}
    assert _softmax_input_dtypes("bfloat16") == {"float32"}


def _layer_softmaxes(layer, tokens, return_attention_scores):
    """`{(input dtype, consumer types)}` of the Softmax ops of an
    inference call of `layer`, as the graph runs it (unread ops pruned)."""

    @tf.function
    def call(x):
        out = layer(x, return_attention_scores=return_attention_scores)
        return out if return_attention_scores else (out,)

    graph = call.get_concrete_function(tokens).graph
    # What the function's outputs need: the ops it would run.
    needed, frontier = set(), [t.op for t in graph.outputs]
    while frontier:
        op = frontier.pop()
        if op.name not in needed:
            needed.add(op.name)
            frontier.extend(t.op for t in op.inputs)
    return {
        (
            op.inputs[0].dtype.name,
            tuple(sorted({c.type for c in op.outputs[0].consumers()})),
        )
        for op in graph.get_operations()
        if op.type == "Softmax" and op.name in needed
    }


def test_inference_takes_a_bfloat16_softmax_only_in_a_step_said_to(
    monkeypatch,
):
    monkeypatch.setattr(_attention_core, "_keeps_float32", lambda _: True)
    layer = keras_vit.layers.MultiHeadSelfAttention(
        num_heads=2, dtype="mixed_bfloat16"
    )
    rng = np.random.default_rng(0)
    tokens = tf.constant(rng.normal(size=(2, 9, 16)), "float32")
    layer(tokens)
    plain = {("float32", ("Cast",))}  # cast down for the values' matmul
    assert _layer_softmaxes(layer, tokens, False) == plain
    with kernels.compiled_step(layer, xla=True):
        assert _layer_softmaxes(layer, tokens, False) == plain
    with kernels.compiled_step(layer, xla=False):
        # One bfloat16 softmax feeds the values' matmul; the float32
        # weights are computed only for a caller that asks for them.
        assert _layer_softmaxes(layer, tokens, False) == {
            ("bfloat16", ("BatchMatMulV2",))
        }
        got, weights = layer(tokens, return_attention_scores=True)
        assert weights.dtype == "float32"
    want, want_weights = layer(tokens, return_attention_scores=True)
    np.testing.assert_array_equal(weights, want_weights)
    np.testing.assert_allclose(
        tf.cast(got, "float32"), tf.cast(want, "float32"), rtol=0.02, atol=0.02
    )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_training_step_says_whether_xla_compiles_it(jit_compile, monkeypatch):
    seen = record_step_xla(monkeypatch)
    model = keras_vit.ViT(**TINY, dtype="mixed_bfloat16")
    model.compile(
        "adamw", "sparse_categorical_crossentropy", jit_compile=jit_compile
    )
    images = np.zeros((2, 32, 32, 3), "float32")
    model.train_on_batch(images, np.zeros((2,), "int32"))
    assert seen and set(seen) == {jit_compile}
    # So do the evaluation and prediction steps.
    labels = np.zeros((2,), "int32")
    for step in ("test_on_batch", "predict_on_batch"):
        seen.clear()
        if step == "test_on_batch":
            model.test_on_batch(images, labels)
        else:
            model.predict_on_batch(images)
        assert seen and set(seen) == {jit_compile}, step
    # Outside the trainer's step (a call of the model): not said.
    seen.clear()
    with tf.GradientTape():
        model(images, training=True)
    assert seen == [None] * TINY["num_layers"]


def test_the_step_switch_is_the_models_own_and_is_put_back():
    # The trainer tells its own layers, for the step it traces, and puts
    # back what they had: a model called after fit (an export's trace)
    # and the same layers in a model of one's own keep the plain graph.
    model = keras_vit.ViT(**TINY, dtype="mixed_bfloat16")
    model.compile("adamw", "sparse_categorical_crossentropy")
    images = np.zeros((2, 32, 32, 3), "float32")
    model.train_on_batch(images, np.zeros((2,), "int32"))
    told = [
        layer.step_xla
        for layer in model._flatten_layers()
        if hasattr(layer, "step_xla")
    ]
    assert len(told) == 3 * TINY["num_layers"] + 1  # 2 norms, 1 attention
    assert set(told) == {None}
    block = model.get_layer("block_0")
    with kernels.compiled_step(block, xla=False):
        assert block.attention.step_xla is False
        assert model.get_layer("block_1").attention.step_xla is None
    assert block.attention.step_xla is None


@pytest.mark.parametrize(
    "model, xla, match",
    [(None, False, "model=None"), ("block", "no", "xla='no'")],
)
def test_the_step_switch_refuses_what_it_cannot_tell(model, xla, match):
    if model == "block":
        model = keras_vit.layers.TransformerBlock(2, 8)
    with pytest.raises(ValueError, match=match):
        with kernels.compiled_step(model, xla):
            pass
