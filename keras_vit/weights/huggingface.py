"""Hugging Face transformers' ViT naming (`ViTModel`,
`ViTForImageClassification`), as in `google/vit-*` `model.safetensors`:

    [vit.]embeddings.cls_token (1, 1, D), [vit.]embeddings.position_embeddings
    [vit.]embeddings.patch_embeddings.projection.{weight (D, C, P, P), bias}
    [vit.]encoder.layer.{i}.layernorm_before.{weight,bias}
    [vit.]encoder.layer.{i}.attention.attention.{query,key,value}.{weight,bias}
    [vit.]encoder.layer.{i}.attention.output.dense.{weight,bias}
    [vit.]encoder.layer.{i}.layernorm_after.{weight,bias}
    [vit.]encoder.layer.{i}.intermediate.dense.{weight,bias}
    [vit.]encoder.layer.{i}.output.dense.{weight,bias}
    [vit.]layernorm.{weight,bias}
    [vit.]pooler.dense.{weight,bias}   (ViTModel: Dense + tanh on the class
                                        token, i.e. the paper's pre-logits)
    classifier.{weight,bias}          (ViTForImageClassification)

The `vit.` prefix is present in the classification model's files.
transformers 5 names the same tensors differently in memory
(`layers.{i}.attention.q_proj`, `mlp.fc1`, ...); files written from such a
state dict are read too (`_NEW_NAMES`).

The `.safetensors` file records no patch grid (the `image_size` is in the
`config.json` beside it, which keras_vit does not read: it reads the one
file it is given). As transformers' own `interpolate_pos_encoding` does,
the position embeddings are taken to be on a square grid; a checkpoint of a
non-square grid needs `load_weights(..., source_grid=(rows, cols))`.
"""

import re

from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import concatenate
from keras_vit.weights.checkpoint import torch_conv_to_projection
from keras_vit.weights.checkpoint import torch_linear
from keras_vit.weights.checkpoint import torch_norm
from keras_vit.weights.checkpoint import transpose

SIGNATURES = (
    "embeddings.patch_embeddings.projection.weight",
    "vit.embeddings.patch_embeddings.projection.weight",
)


# transformers >= 5 in-memory names -> the Hub files' names.
_NEW_NAMES = (
    (re.compile(r"(^|\.)layers\.(\d+)\."), r"\1encoder.layer.\2."),
    (re.compile(r"\.attention\.([qkv])_proj\."), None),
    (re.compile(r"\.attention\.o_proj\."), ".attention.output.dense."),
    (re.compile(r"\.mlp\.fc1\."), ".intermediate.dense."),
    (re.compile(r"\.mlp\.fc2\."), ".output.dense."),
)
_QKV = {"q": "query", "k": "key", "v": "value"}


def _old_name(key):
    for pattern, replacement in _NEW_NAMES:
        if replacement is None:
            key = pattern.sub(
                lambda m: f".attention.attention.{_QKV[m.group(1)]}.", key
            )
        else:
            key = pattern.sub(replacement, key)
    return key


def read_huggingface(tensors, path):
    """Converts a transformers ViT state dict (name → array).

    Its position embeddings are taken to be on a square grid (see the
    module's docstring)."""
    if any(re.search(r"(^|\.)layers\.\d+\.", k) for k in tensors):
        tensors = {_old_name(k): v for k, v in tensors.items()}
    src = TensorSource(tensors, path)
    p = (
        "vit."
        if "vit.embeddings.cls_token" in src or SIGNATURES[1] in src
        else ""
    )
    out = {}
    kernel, patch_size = torch_conv_to_projection(
        src.take(f"{p}embeddings.patch_embeddings.projection.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take(
        f"{p}embeddings.patch_embeddings.projection.bias", 1
    )
    out["patch_encoder/class_token"] = src.take(f"{p}embeddings.cls_token", 3)
    out["patch_encoder/position_embedding"] = src.take(
        f"{p}embeddings.position_embeddings", 3
    )
    i = 0
    while f"{p}encoder.layer.{i}.layernorm_before.weight" in src:
        prefix, name = f"{p}encoder.layer.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.layernorm_before", out, f"{name}/norm1")
        kernels, biases = [], []
        for part in ("query", "key", "value"):
            part = f"{prefix}.attention.attention.{part}"
            kernels.append(transpose(src.take(f"{part}.weight", 2)))
            biases.append(src.take(f"{part}.bias", 1))
        out[f"{name}/attention/qkv/kernel"] = concatenate(kernels, axis=1)
        out[f"{name}/attention/qkv/bias"] = concatenate(biases)
        torch_linear(
            src,
            f"{prefix}.attention.output.dense",
            out,
            f"{name}/attention/proj",
        )
        torch_norm(src, f"{prefix}.layernorm_after", out, f"{name}/norm2")
        torch_linear(
            src, f"{prefix}.intermediate.dense", out, f"{name}/mlp_fc1"
        )
        torch_linear(src, f"{prefix}.output.dense", out, f"{name}/mlp_fc2")
        i += 1
    torch_norm(src, f"{p}layernorm", out, "encoder_norm")
    # Half a layer (a bias without its weight) is reported missing.
    if f"{p}pooler.dense.weight" in src or f"{p}pooler.dense.bias" in src:
        torch_linear(src, f"{p}pooler.dense", out, "pre_logits")
    if "classifier.weight" in src or "classifier.bias" in src:
        torch_linear(src, "classifier", out, "head")
    return src.checkpoint(out, "huggingface", patch_size=patch_size)
