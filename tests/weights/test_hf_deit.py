"""Hugging Face transformers' DeiT distilled files, as the same tensors in
timm's file give.

transformers' `DeiTForImageClassificationWithTeacher` (the Hub's
`facebook/deit-*-distilled-*`) is timm's `VisionTransformerDistilled`
under other names (transformers' models/deit/modeling_deit.py): a
`deit.` prefix, `embeddings.distillation_token` after the class token,
`embeddings.position_embeddings` for both tokens and the patches, ViT's
blocks, and `cls_classifier` / `distillation_classifier`, whose logits it
averages, as timm does in eval. Here the committed timm golden
(tests/golden/family_deit_distilled.timm.safetensors) is renamed to those
names: keras_vit must read the same model from both, giving timm's
recorded outputs.
"""

import os

import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
TIMM = os.path.join(GOLDEN, "family_deit_distilled.timm.safetensors")
HEADS = 2  # the golden's (the fused-QKV formats do not record it)


def _expected():
    path = os.path.join(GOLDEN, "family_deit_distilled.expected.npz")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _block(timm, i, p):
    """timm's block `i` in transformers' DeiT names."""
    src, dst = f"blocks.{i}", f"{p}encoder.layer.{i}"
    out = {}
    for kind in ("weight", "bias"):
        qkv = np.split(timm[f"{src}.attn.qkv.{kind}"], 3)
        for part, value in zip(("query", "key", "value"), qkv):
            out[f"{dst}.attention.attention.{part}.{kind}"] = value
        for theirs, ours in (
            ("norm1", "layernorm_before"),
            ("attn.proj", "attention.output.dense"),
            ("norm2", "layernorm_after"),
            ("mlp.fc1", "intermediate.dense"),
            ("mlp.fc2", "output.dense"),
        ):
            out[f"{dst}.{ours}.{kind}"] = timm[f"{src}.{theirs}.{kind}"]
    return out


def _hf_file(tmp_path, model, **extra):
    """The timm golden's tensors in the file of transformers' `model`
    class: `"teacher"` (`DeiTForImageClassificationWithTeacher`),
    `"base"` (`DeiTModel`, with its pooler) or `"classifier"`
    (`DeiTForImageClassification`)."""
    timm = load_file(TIMM)
    p = "" if model == "base" else "deit."
    out = {
        f"{p}embeddings.cls_token": timm["cls_token"],
        f"{p}embeddings.distillation_token": timm["dist_token"],
        f"{p}embeddings.position_embeddings": timm["pos_embed"],
        f"{p}embeddings.patch_embeddings.projection.weight": timm[
            "patch_embed.proj.weight"
        ],
        f"{p}embeddings.patch_embeddings.projection.bias": timm[
            "patch_embed.proj.bias"
        ],
        f"{p}layernorm.weight": timm["norm.weight"],
        f"{p}layernorm.bias": timm["norm.bias"],
    }
    for i in range(2):
        out.update(_block(timm, i, p))
    heads = {
        "teacher": {
            "cls_classifier": "head",
            "distillation_classifier": "head_dist",
        },
        "classifier": {"classifier": "head"},
        "base": {},
    }[model]
    for theirs, ours in heads.items():
        out[f"{theirs}.weight"] = timm[f"{ours}.weight"]
        out[f"{theirs}.bias"] = timm[f"{ours}.bias"]
    if model == "base":  # DeiTModel's pooler: Linear(D, D), then tanh
        rng = np.random.default_rng(0)
        out["pooler.dense.weight"] = rng.normal(size=(16, 16)).astype("f4")
        out["pooler.dense.bias"] = rng.normal(size=16).astype("f4")
    out.update(extra)
    path = str(tmp_path / f"deit_{model}.safetensors")
    save_file(out, path)
    return path


def _model(path, **kwargs):
    checkpoint = read_checkpoint(path)
    assert checkpoint.source in ("timm", "huggingface")
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    return convert.model_for_checkpoint(
        checkpoint, num_heads=HEADS, classifier_activation=None, **kwargs
    )


def test_a_deit_with_teacher_file_is_timms_distilled_model(tmp_path):
    path = _hf_file(tmp_path, "teacher")
    checkpoint = read_checkpoint(path)
    assert checkpoint.source == "huggingface"
    implied = convert.architecture(checkpoint)
    assert implied["distillation"] is True and implied["pooling"] == "token"
    assert implied["num_classes"] == 5
    ours, timms = _model(path), _model(TIMM)
    for mine, theirs in zip(ours.weights, timms.weights):
        assert mine.path == theirs.path
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    expected = _expected()
    outputs = ours.predict(expected["images"], verbose=0)
    np.testing.assert_array_equal(
        outputs, timms.predict(expected["images"], verbose=0)
    )
    # timm's (and transformers') logits: the mean of the two heads'.
    np.testing.assert_allclose(outputs, expected["logits"], atol=1e-5, rtol=0)


def test_a_deit_model_file_gives_the_distilled_features(tmp_path):
    """`DeiTModel`: no prefix, no heads, a pooler (a tanh layer no DeiT
    was trained with, which a distilled model has no place for) and, with
    `use_mask_token=True`, a mask token (training only): the backbone."""
    mask = {"embeddings.mask_token": np.zeros((1, 1, 16), "float32")}
    path = _hf_file(tmp_path, "base", **mask)
    ours, timms = _model(path), _model(TIMM, include_top=False)
    assert ours.distillation and not ours.include_top
    images = _expected()["images"]
    np.testing.assert_array_equal(
        ours.predict(images, verbose=0), timms.predict(images, verbose=0)
    )


def test_a_deit_classifier_file_is_refused(tmp_path):
    """`DeiTForImageClassification`: one classifier on the class token,
    the distillation token in the sequence but unheaded: no keras_vit
    model computes that."""
    path = _hf_file(tmp_path, "classifier")
    with pytest.raises(ValueError, match="DeiTForImageClassification") as info:
        read_checkpoint(path)
    assert "DeiTModel" in str(info.value) and path in str(info.value)
