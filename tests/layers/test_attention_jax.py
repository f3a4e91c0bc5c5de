"""On the JAX backend, attention without weights asked for runs
`keras.ops.dot_product_attention` (cuDNN's flash attention on a GPU) and
computes what the plain path computes; the training paths that recompute
in their backward passes (the attention's, the MLP's `gelu_dense`) give
automatic differentiation's gradients there too."""

import json
import subprocess
import sys

import pytest

from tests.helpers import backend_env

# Run on the JAX backend in a process of its own (the backend is chosen at
# import). The weights-returning call takes the plain path; the other one,
# counted, the fused op.
SCRIPT = r"""
import json
import keras
import numpy as np
from keras import ops
from keras_vit.layers import MultiHeadSelfAttention

calls = []
fused = ops.dot_product_attention
def counted(*args, **kwargs):
    calls.append(1)
    return fused(*args, **kwargs)
ops.dot_product_attention = counted

result = {"backend": keras.backend.backend(), "diffs": {}}
x = np.random.default_rng(0).normal(size=(2, 17, 32)).astype("float32")
for qk_norm in (False, True):
    layer = MultiHeadSelfAttention(num_heads=4, qk_norm=qk_norm)
    for training in (False, True):
        before = len(calls)
        out = layer(x, training=training)
        assert len(calls) == before + 1, "no fused call"
        plain, _ = layer(x, training=training, return_attention_scores=True)
        assert len(calls) == before + 1, "weights asked: fused"
        diff = float(np.max(np.abs(ops.convert_to_numpy(out - plain))))
        result["diffs"][f"qk_norm={qk_norm} training={training}"] = diff
# Gradients agree too (the fused op's against the recomputing path's).
import jax
layer = MultiHeadSelfAttention(num_heads=4)
layer.build(x.shape)
def loss(weights, scores):
    outputs, _ = layer.stateless_call(
        weights, [], x, training=True, return_attention_scores=scores
    )
    return ops.sum(ops.square(outputs[0] if scores else outputs))
weights = [v.value for v in layer.trainable_variables]
grads = [jax.grad(loss)(weights, scores) for scores in (False, True)]
# Relative to each gradient's largest entry (a sum of squares gives
# gradients of ~10, whose float32 rounding is ~1e-6 absolute).
result["grad_diff"] = max(
    float(np.max(np.abs(a - b)) / np.max(np.abs(a))) for a, b in zip(*grads)
)
# A block's gradients with the MLP's `gelu_dense` against plain autodiff.
from keras_vit.layers import TransformerBlock, _gelu
block = TransformerBlock(num_heads=4, mlp_dim=48)
block.build(x.shape)
def block_loss(weights):
    outputs, _ = block.stateless_call(
        weights, [], x, training=True, return_attention_scores=True
    )
    return ops.sum(ops.square(outputs[0]))
weights = [v.value for v in block.trainable_variables]
fused_grads = jax.grad(block_loss)(weights)
_gelu.gelu_dense = lambda h, kernel, bias: (
    ops.matmul(ops.gelu(h, approximate=False), kernel) + bias
)
plain_grads = jax.grad(block_loss)(weights)
result["block_grad_diff"] = max(
    float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
    for a, b in zip(fused_grads, plain_grads)
)
# In a model, whose blocks always ask for their weights: `predict` and
# `fit` (traced) fuse every block; an eager call asking for the weights
# takes the plain path; the weights a traced call returns are the plain
# path's.
import keras_vit
model = keras_vit.ViT(
    image_size=32, patch_size=8, hidden_dim=32, num_layers=2,
    num_heads=4, mlp_dim=48, num_classes=3,
)
images = np.random.default_rng(1).uniform(0, 255, (2, 32, 32, 3))
before = len(calls)
model.predict(images, verbose=0)
result["predict_calls"] = len(calls) - before
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
before = len(calls)
model.fit(images, np.array([0, 2]), epochs=1, verbose=0)
result["fit_calls"] = len(calls) - before
intermediates = model.intermediates_model()
before = len(calls)
eager = intermediates(images)
result["eager_weights_calls"] = len(calls) - before
traced = intermediates.predict(images, verbose=0)
result["traced_weights_calls"] = len(calls) - before
result["weights_diff"] = max(
    float(np.max(np.abs(ops.convert_to_numpy(a) - b)))
    for a, b in zip(eager["attention_weights"], traced["attention_weights"])
)
print(json.dumps(result))
"""


def test_fused_attention_on_jax_equals_the_plain_path():
    pytest.importorskip("jax")
    env = backend_env("jax")
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    assert len(result["diffs"]) == 4
    assert max(result["diffs"].values()) < 1e-5, result
    assert result["grad_diff"] < 1e-5, result
    assert result["block_grad_diff"] < 1e-5, result
    # A ViT's blocks always ask for their weights: the fused op ran in none
    # of them.
    # (Counted as traced: each trace calls it once per block.)
    for traced in ("predict_calls", "fit_calls", "traced_weights_calls"):
        assert result[traced] > 0 and result[traced] % 2 == 0, result
    assert result["eager_weights_calls"] == 0, result
    assert result["weights_diff"] < 1e-6, result
