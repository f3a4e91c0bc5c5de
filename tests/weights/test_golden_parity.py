"""Parity with the reference implementations, from committed golden files.

tests/golden/make_checkpoints.py (developer-side: torch, timm, transformers)
made tiny models with every weight perturbed, saved them in each format and
recorded their outputs; the .npz files were proven original-format by
loading them back with timm's own .npz loader. Here, without torch, the
same weights loaded by keras_vit must give the same logits to 1e-4 (to
bfloat16's rounding, in bfloat16 models).
"""

import os

import numpy as np
import pytest

import keras_vit

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
TINY = dict(
    image_size=32,
    patch_size=8,
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    mlp_dim=64,
    num_classes=5,
    classifier_activation=None,
)


def golden(name):
    return os.path.join(GOLDEN, name)


def expected(name):
    with np.load(golden(name)) as data:
        return {key: data[key] for key in data.files}


CASES = [
    # weights file, expected outputs, model arguments, source format
    ("vit_token.npz", "vit_token.expected.npz", {}, "original"),
    ("vit_token.timm.safetensors", "vit_token.expected.npz", {}, "timm"),
    (
        "vit_token.hf.safetensors",
        "vit_token.hf.expected.npz",
        {},
        "huggingface",
    ),
    ("vit_gap.npz", "vit_gap.expected.npz", {"pooling": "gap"}, "original"),
    (
        "vit_gap.timm.safetensors",
        "vit_gap.expected.npz",
        {"pooling": "gap"},
        "timm",
    ),
    (
        "vit_bigvision.npz",
        "vit_bigvision.expected.npz",
        {"pooling": "gap"},
        "big_vision",
    ),
    ("vit_prelogits.npz", "vit_prelogits.expected.npz", {}, "original"),
]


@pytest.mark.parametrize("weights, outputs, kwargs, source", CASES)
def test_logits_match_the_reference(weights, outputs, kwargs, source):
    ref = expected(outputs)
    model = keras_vit.ViT.from_preset(golden(weights), **TINY, **kwargs)
    logits = model.predict(ref["images"], verbose=0)
    np.testing.assert_allclose(logits, ref["logits"], atol=1e-4, rtol=0)
    checkpoint = keras_vit.weights.read_checkpoint(golden(weights))
    assert checkpoint.source == source
    assert checkpoint.unexpected == []


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
@pytest.mark.parametrize(
    "weights, outputs",
    [
        ("vit_token.npz", "vit_token.expected.npz"),
        ("vit_token.timm.safetensors", "vit_token.expected.npz"),
        ("vit_token.hf.safetensors", "vit_token.hf.expected.npz"),
    ],
)
def test_checkpoints_load_into_bfloat16_models(policy, weights, outputs):
    # Mixed precision keeps float32 variables; the "bfloat16" policy (for
    # inference, docs/performance.md) stores every weight in bfloat16. Both
    # give the reference's logits to bfloat16's rounding (measured on the
    # .npz: 0.014 and 0.015 on logits of up to 1.86).
    ref = expected(outputs)
    model = keras_vit.ViT.from_preset(golden(weights), **TINY, dtype=policy)
    stored = "float32" if policy.startswith("mixed_") else "bfloat16"
    assert {v.dtype for v in model.weights} == {stored}
    logits = model.predict(ref["images"], verbose=0)
    scale = np.abs(ref["logits"]).max()
    np.testing.assert_allclose(logits, ref["logits"], atol=0.02 * scale, rtol=0)


def test_prelogits_layer_is_taken_from_the_checkpoint():
    # Same class count: the head and its tanh pre-logits layer are loaded;
    # representation_size comes from the checkpoint.
    model = keras_vit.ViT.from_preset(golden("vit_prelogits.npz"), **TINY)
    assert model.representation_size == 24
    assert model.get_config()["representation_size"] == 24
    ref = expected("vit_prelogits.expected.npz")
    features = keras_vit.ViT.from_preset(
        golden("vit_prelogits.npz"), **{**TINY, "include_top": False}
    ).predict(ref["images"], verbose=0)
    np.testing.assert_allclose(features, ref["features"], atol=1e-4)


@pytest.mark.parametrize(
    "weights", ["vit_token.hf_base.safetensors", "vit_token.hf.safetensors"]
)
def test_huggingface_features(weights):
    ref = expected("vit_token.hf_base.expected.npz")
    model = keras_vit.ViT.from_preset(
        golden(weights), **{**TINY, "include_top": False}
    )
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["features"], atol=1e-4
    )


def test_huggingface_transformers5_names(tmp_path):
    # transformers >= 5 names the tensors differently in memory
    # (layers.{i}.attention.q_proj, mlp.fc1, ...); a file saved from such a
    # state dict loads too.
    import safetensors.numpy

    renames = [
        ("encoder.layer.", "layers."),
        ("attention.attention.query", "attention.q_proj"),
        ("attention.attention.key", "attention.k_proj"),
        ("attention.attention.value", "attention.v_proj"),
        ("attention.output.dense", "attention.o_proj"),
        ("intermediate.dense", "mlp.fc1"),
        ("output.dense", "mlp.fc2"),
    ]
    tensors = safetensors.numpy.load_file(golden("vit_token.hf.safetensors"))
    renamed = {}
    for key, value in tensors.items():
        for old, new in renames:
            key = key.replace(old, new)
        renamed[key] = value
    assert "vit.layers.0.attention.q_proj.weight" in renamed
    path = str(tmp_path / "model.safetensors")
    safetensors.numpy.save_file(renamed, path)
    ref = expected("vit_token.hf.expected.npz")
    model = keras_vit.ViT.from_preset(path, **TINY)
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )


def test_load_weights_into_an_existing_model():
    model = keras_vit.ViT(**TINY)
    checkpoint = keras_vit.load_weights(
        model, golden("vit_token.timm.safetensors")
    )
    assert checkpoint.num_classes == 5 and checkpoint.patch_size == 8
    ref = expected("vit_token.expected.npz")
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )
