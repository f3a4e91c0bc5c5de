"""Hugging Face transformers' naming of ViTs: `ViTModel` /
`ViTForImageClassification`, `Dinov2Model` / `Dinov2WithRegistersModel`,
`CLIPVisionModel` (and the image tower of `CLIPModel` /
`CLIPVisionModelWithProjection`) and `SiglipVisionModel` (and that of
`SiglipModel`), as their `save_pretrained` writes `model.safetensors`.

ViT, as in `google/vit-*`:

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

DeiT distilled (`facebook/deit-*-distilled-*`: `DeiTModel`, and
`DeiTForImageClassificationWithTeacher` with the `deit.` prefix) is ViT's
naming plus a distillation token, keras_vit's `distillation=True`:

    [deit.]embeddings.distillation_token (1, 1, D)
    [deit.]embeddings.position_embeddings (1, 2 + N, D): class,
        distillation, then the patches
    [deit.]embeddings.mask_token             (masked-image training only:
                                               dropped)
    cls_classifier.{weight,bias}             (keras_vit's head)
    distillation_classifier.{weight,bias}    (keras_vit's head_dist)

`DeiTForImageClassificationWithTeacher`'s `logits` are the two heads'
mean, as keras_vit's output with `classifier_activation=None`; a
`DeiTModel`'s `pooler_output` (its `pooler`, a tanh layer on the class
token that no DeiT was trained with) has no keras_vit equivalent in a
distilled model: it is read as the pre-logits layer, which loading into
a model without a head drops, with a note. `DeiTForImageClassification`
(one `classifier` on the class token, the distillation token's output
unused) has a classifier no keras_vit model has: its files are refused,
naming the backbone to read. DeiT without distillation is on the Hub as
`ViTForImageClassification`, read as ViT.

DINOv2 (`facebook/dinov2-*`) names its blocks as ViT does, except:

    embeddings.mask_token (1, D)             (masked-image training only:
                                               not a weight of the model;
                                               dropped)
    embeddings.register_tokens (1, R, D)     (with registers)
    embeddings.position_embeddings (1, 1 + N, D): the class token and the
        patches, never the registers
    encoder.layer.{i}.norm1, .norm2          (for layernorm_before/_after)
    encoder.layer.{i}.mlp.fc1, .mlp.fc2      (for intermediate/output.dense)
    encoder.layer.{i}.layer_scale1.lambda1, .layer_scale2.lambda1 (D,)
    layernorm                                (the final norm)

`last_hidden_state` is the tokens after `layernorm` (keras_vit's
`forward_features`: class, registers, patches), `pooler_output` its class
token (keras_vit's `include_top=False` output). With registers, the class
token's position embedding is added to the class token here (exact: it is
added to nothing else), so the position embeddings cover the patches only
(`position_embedding_tokens="patches"`, as timm converts these files).
The SwiGLU MLP of `dinov2-giant` (`use_swiglu_ffn`, `Dinov2SwiGLUFFN`)
is keras_vit's gated MLP (`use_gated_mlp=True`, `activation="silu"`):

    encoder.layer.{i}.mlp.weights_in (2H, D), .mlp.weights_out (D, H)
        the Hub files' names: the gate's outputs, then the value's
    encoder.layer.{i}.mlp.gate_proj, .up_proj (H, D), .mlp.down_proj
        transformers 5's names in memory (its conversion mapping
        chunks `weights_in` in two, the gate first)

with H = `2/3 · mlp_ratio · D` rounded up to a multiple of 8 (4096 for
the giant's 1536).

DINOv3 (`DINOv3ViTModel`; `model.layer.{i}`, transformers 4.56
`layer.{i}`) has no position table (2-D RoPE, `DINOV3_DEFAULTS`), its
attention as `{q,k,v,o}_proj` (the key's bias absent: read as zeros), its
MLP as `mlp.up_proj`, `mlp.down_proj`, and with `use_gated_mlp` (S+, H+:
`DINOv3ViTGatedMLP`) `mlp.gate_proj` beside them: keras_vit's gated MLP,
of width `intermediate_size` (the file's), SiLU (the published configs'
`hidden_act`).

CLIP (`openai/clip-vit-*`; `vision_model.` prefixed in the full model's
files, whose `text_model.*`, `text_projection`, `logit_scale` are dropped):

    embeddings.class_embedding (D,), embeddings.patch_embedding.weight
        (no bias), embeddings.position_embedding.weight (1 + N, D)
    pre_layrnorm (sic; keras_vit's norm_pre)
    encoder.layers.{i}.layer_norm1, .layer_norm2
    encoder.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias}
    encoder.layers.{i}.mlp.fc1, .mlp.fc2
    post_layernorm                           (keras_vit's encoder_norm)
    visual_projection.weight (P, D)          (no bias; keras_vit's head,
                                              with a zero bias and no
                                              classifier_activation)

`post_layernorm` is applied to the pooled class token only:
`last_hidden_state` is the last block's output (keras_vit's last
`block_outputs`), `pooler_output` keras_vit's `include_top=False` output
(the class token after `encoder_norm`), `image_embeds` its head's output.

SigLIP (`google/siglip-*`; SigLIP 2's fixed-resolution checkpoints in
this layout too) as CLIP without class token, pre-norm, or projection,
with a patch bias, and its MAP head:

    head.probe (1, 1, D), head.attention.in_proj_{weight,bias} (3D, ...),
    head.attention.out_proj, head.layernorm, head.mlp.fc1, head.mlp.fc2

`last_hidden_state` is the tokens after `post_layernorm` (keras_vit's
`forward_features`), `pooler_output` the head's (keras_vit's
`include_top=False` output, `pooling="map"`). `SiglipForImageClassification`'s
`classifier` is on the mean of `last_hidden_state`: keras_vit's
`pooling="gap"` and `head` (the MAP head's weights, in its file but
unused, are dropped). `CLIPForImageClassification` (the patches' mean
before `post_layernorm`) and `Dinov2ForImageClassification` (the class
token and the patches' mean, concatenated) have classifiers no keras_vit
pooling gives: their files are refused, naming the backbone to read. A
`SiglipVisionModel` file without the head (`vision_use_head=False`) is
read as average pooling, which its transformers class does not do (it has
no pooled output then). transformers' SigLIP 2 NaFlex files
(`Siglip2VisionModel`, `Siglip2Model`: a `Linear` patch embedding on
flattened patches, a position table resized for each image) are refused
by name.

The tensors do not record the activation or the LayerNorm epsilon; the
model is built with transformers' config defaults for the family
(`Checkpoint.layout_defaults`): DINOv2 `"gelu"` (exact) and 1e-6; CLIP
`"quick_gelu"` and 1e-5 (OpenAI's; LAION's `CLIP-ViT-*` use `hidden_act
"gelu"`: pass `activation="gelu"`); SigLIP `"gelu_tanh"`
(`gelu_pytorch_tanh`) and 1e-6. A CLIP file with `visual_projection`
implies `classifier_activation=None` too (`PROJECTION_DEFAULTS`): the head
gives the embeddings. An argument given replaces them.

The `.safetensors` file records no patch grid (the `image_size` is in the
`config.json` beside it, which keras_vit does not read: it reads the one
file it is given). As transformers' own `interpolate_pos_encoding` does,
the position embeddings are taken to be on a square grid; a checkpoint of a
non-square grid needs `load_weights(..., source_grid=(rows, cols))`.
transformers resamples them at run time (`interpolate_pos_encoding`) with
PyTorch's bicubic to the new grid's size, antialiased in
`Dinov2WithRegistersModel` only: keras_vit's `interpolation=
"bicubic_pytorch"` computes the same weights, and
`transformers_resampling(model_type)` gives the `load_weights` arguments
of each class (the same up to float32 rounding; `interpolation="bicubic"`
is TensorFlow's cubic of a = -0.5, not PyTorch's a = -0.75).
"""

import re

import numpy as np

from keras_vit.weights.checkpoint import DINOV3_DEFAULTS
from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import concatenate
from keras_vit.weights.checkpoint import torch_conv_to_projection
from keras_vit.weights.checkpoint import torch_gated_linear
from keras_vit.weights.checkpoint import torch_linear
from keras_vit.weights.checkpoint import torch_norm
from keras_vit.weights.checkpoint import transpose

SIGNATURES = (
    "embeddings.patch_embeddings.projection.weight",
    "vit.embeddings.patch_embeddings.projection.weight",
    "embeddings.patch_embedding.weight",  # CLIP, SigLIP
    "vision_model.embeddings.patch_embedding.weight",
    "dinov2.embeddings.patch_embeddings.projection.weight",  # refused
    "deit.embeddings.patch_embeddings.projection.weight",
    "embeddings.patch_embeddings.weight",  # DINOv3
)
#: DeiT's prefix in its classification models' files (`SIGNATURES[5]`),
#: like ViT's `vit.`.
_PREFIXES = ("vit.", "deit.")

#: What each family's transformers config sets that its tensors do not
#: record (see the module's docstring).
LAYOUT_DEFAULTS = {
    "dinov2": {"activation": "gelu", "layer_norm_epsilon": 1e-6},
    "clip": {
        "activation": "quick_gelu",
        "layer_norm_epsilon": 1e-5,
        "patch_bias": False,
    },
    "siglip": {"activation": "gelu_tanh", "layer_norm_epsilon": 1e-6},
    "dinov3": {"activation": "gelu", **DINOV3_DEFAULTS},
}
#: Whether each transformers class, by its config's `model_type`,
#: antialiases when `interpolate_pos_encoding` resamples its position
#: embeddings (`nn.functional.interpolate(..., size=..., mode="bicubic",
#: align_corners=False)` in transformers 5.25's `models/*/modeling_*.py`,
#: `antialias=True` in `Dinov2WithRegistersEmbeddings` only).
INTERPOLATE_POS_ENCODING_ANTIALIAS = {
    "vit": False,
    "deit": False,
    "dinov2": False,
    "dinov2_with_registers": True,
    "clip": False,
    "clip_vision_model": False,
    "siglip": False,
    "siglip_vision_model": False,
}


def transformers_resampling(model_type):
    """How the transformers class of `model_type` resamples its position
    embeddings at another image size, as `load_weights` takes it.

    Args:
        model_type: the `model_type` of a transformers `config.json`
            (`"vit"`, `"deit"`, `"dinov2"`, `"dinov2_with_registers"`,
            `"clip"`, `"clip_vision_model"`, `"siglip"`,
            `"siglip_vision_model"`).

    Returns:
        `{"interpolation": "bicubic_pytorch", "antialias": bool}`, the
        arguments of `keras_vit.load_weights` / `ViT.from_preset` that
        give the class's own `interpolate_pos_encoding`.

    Example:

    >>> transformers_resampling("dinov2")
    {'interpolation': 'bicubic_pytorch', 'antialias': False}
    """
    known = INTERPOLATE_POS_ENCODING_ANTIALIAS
    if not isinstance(model_type, str) or model_type not in known:
        raise ValueError(
            "`model_type` must be one of "
            f"{tuple(INTERPOLATE_POS_ENCODING_ANTIALIAS)}. "
            f"Received: model_type={model_type!r}"
        )
    return {
        "interpolation": "bicubic_pytorch",
        "antialias": INTERPOLATE_POS_ENCODING_ANTIALIAS[model_type],
    }


#: What CLIP's `visual_projection` (read as the head) implies: its outputs
#: are embeddings (`image_embeds`), not a classifier's logits, so no
#: softmax (a softmax over them is a silent wrong answer).
PROJECTION_DEFAULTS = {"classifier_activation": None}
#: The text tower and contrastive scalars of a full `CLIPModel` /
#: `SiglipModel` file: not the image model's, dropped.
_TEXT = re.compile(
    r"^(text_model\.|text_projection\.|logit_scale$|logit_bias$)"
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


def _old_attention_name(key):
    """transformers 5's in-memory attention names -> the files'."""
    key = _NEW_NAMES[1][0].sub(
        lambda m: f".attention.attention.{_QKV[m.group(1)]}.", key
    )
    return _NEW_NAMES[2][0].sub(_NEW_NAMES[2][1], key)


def read_huggingface(tensors, path):
    """Converts a transformers ViT, DINOv2, CLIP or SigLIP state dict
    (name → array), the family told by its names.

    Its position embeddings are taken to be on a square grid (see the
    module's docstring)."""
    if SIGNATURES[4] in tensors:
        _refuse_head(
            path,
            "Dinov2ForImageClassification",
            "the class token and the patches' mean concatenated",
            "the dinov2. prefix and classifier.*",
            "Dinov2Model",
        )
    if SIGNATURES[2] in tensors or SIGNATURES[3] in tensors:
        return _read_clip_or_siglip(tensors, path)
    if SIGNATURES[6] in tensors:
        return _read_dinov3(tensors, path)
    if any(_DEIT.search(k) for k in tensors):  # (its mask token: not DINOv2)
        return _read_vit(tensors, path)
    if any(_DINOV2.search(k) for k in tensors):
        return _read_dinov2(tensors, path)
    return _read_vit(tensors, path)


def _prefix(src):
    """The prefix of a classification model's files (`vit.`, `deit.`), or
    `""` (`ViTModel`, `DeiTModel`)."""
    return next(
        (
            p
            for p in _PREFIXES
            if f"{p}embeddings.cls_token" in src
            or f"{p}embeddings.patch_embeddings.projection.weight" in src
        ),
        "",
    )


def _read_vit(tensors, path):
    """`ViTModel` / `ViTForImageClassification`, and DeiT's distilled
    models (see the module's docstring)."""
    if any(re.search(r"(^|\.)layers\.\d+\.", k) for k in tensors):
        tensors = {_old_name(k): v for k, v in tensors.items()}
    src = TensorSource(tensors, path)
    p = _prefix(src)
    deit = _read_deit_tokens(src, p, path)
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
    if deit is not None:
        out["patch_encoder/distillation_token"] = deit
    _vit_blocks(src, p, out)
    torch_norm(src, f"{p}layernorm", out, "encoder_norm")
    # Half a layer (a bias without its weight) is reported missing.
    if f"{p}pooler.dense.weight" in src or f"{p}pooler.dense.bias" in src:
        torch_linear(src, f"{p}pooler.dense", out, "pre_logits")
    heads = (("classifier", "head"),)
    if deit is not None:
        heads = (
            ("cls_classifier", "head"),
            ("distillation_classifier", "head_dist"),
        )
    for theirs, ours in heads:
        if f"{theirs}.weight" in src or f"{theirs}.bias" in src:
            torch_linear(src, theirs, out, ours)
    return src.checkpoint(
        out,
        "huggingface",
        patch_size=patch_size,
        position_embedding_tokens="all" if deit is not None else None,
    )


def _read_deit_tokens(src, p, path):
    """A DeiT file's distillation token (`None` for ViT's), its mask token
    dropped; refuses `DeiTForImageClassification`'s (see the module's
    docstring)."""
    token = src.take_if_present(f"{p}embeddings.distillation_token", 3)
    if token is None:
        return None
    src.take_if_present(f"{p}embeddings.mask_token")  # training only
    if "classifier.weight" in src or "classifier.bias" in src:
        _refuse_head(
            path,
            "DeiTForImageClassification",
            "the class token alone, the distillation token's output unused",
            "the deit. prefix and classifier.*",
            "DeiTModel",
        )
    return token


def _vit_blocks(src, p, out):
    """ViT's (and DeiT's) `encoder.layer.{i}` blocks."""
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


_DEIT = re.compile(r"(^|\.)embeddings\.distillation_token$")
_DINOV2 = re.compile(r"(^|\.)(layer_scale1\.lambda1|mask_token)$")


def _attention(src, prefix, names, out, name):
    """Separate query, key and value `Linear`s (`names`, then the output
    projection's) as keras_vit's fused `qkv` and `proj`."""
    kernels, biases = [], []
    for part in names[:3]:
        kernels.append(transpose(src.take(f"{prefix}.{part}.weight", 2)))
        biases.append(src.take(f"{prefix}.{part}.bias", 1))
    out[f"{name}/attention/qkv/kernel"] = concatenate(kernels, axis=1)
    out[f"{name}/attention/qkv/bias"] = concatenate(biases)
    torch_linear(src, f"{prefix}.{names[3]}", out, f"{name}/attention/proj")


def _read_dinov2(tensors, path):
    """`Dinov2Model` / `Dinov2WithRegistersModel` (see the module's
    docstring), also as transformers 5 names them in memory
    (`attention.{q,k,v,o}_proj`)."""
    if any(_NEW_NAMES[1][0].search(k) for k in tensors):
        tensors = {_old_attention_name(k): v for k, v in tensors.items()}
    src = TensorSource(tensors, path)
    out = {}
    kernel, patch_size = torch_conv_to_projection(
        src.take("embeddings.patch_embeddings.projection.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take(
        "embeddings.patch_embeddings.projection.bias", 1
    )
    src.take_if_present("embeddings.mask_token")  # training only: dropped
    cls = src.take("embeddings.cls_token", 3)
    posemb = src.take("embeddings.position_embeddings", 3)
    registers = src.take_if_present("embeddings.register_tokens", 3)
    tokens = "all"
    if registers is not None:
        out["patch_encoder/register_tokens"] = registers
        if cls is not None and posemb is not None:  # see the docstring
            cls, posemb, tokens = cls + posemb[:, :1], posemb[:, 1:], "patches"
    out["patch_encoder/class_token"] = cls
    out["patch_encoder/position_embedding"] = posemb
    i = 0
    while f"encoder.layer.{i}.norm1.weight" in src:
        prefix, name = f"encoder.layer.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.norm1", out, f"{name}/norm1")
        _attention(
            src,
            f"{prefix}.attention",
            ("attention.query", "attention.key", "attention.value")
            + ("output.dense",),
            out,
            name,
        )
        torch_norm(src, f"{prefix}.norm2", out, f"{name}/norm2")
        _dinov2_mlp(src, f"{prefix}.mlp", out, name)
        for k in (1, 2):
            out[f"{name}/ls{k}/gamma"] = src.take(
                f"{prefix}.layer_scale{k}.lambda1", 1
            )
        i += 1
    torch_norm(src, "layernorm", out, "encoder_norm")
    return src.checkpoint(
        out,
        "huggingface",
        patch_size=patch_size,
        position_embedding_tokens=tokens,
        layout_defaults=dict(LAYOUT_DEFAULTS["dinov2"]),
    )


_DINOV3_LAYER = re.compile(r"^(model\.)?layer\.(\d+)\.norm1\.weight$")


def _read_dinov3(tensors, path):
    """`DINOv3ViTModel` (see the module's docstring): transformers 5
    names its blocks `model.layer.{i}`, 4.56 `layer.{i}`."""
    src = TensorSource(tensors, path)
    out = {}
    kernel, patch_size = torch_conv_to_projection(
        src.take("embeddings.patch_embeddings.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take(
        "embeddings.patch_embeddings.bias", 1
    )
    src.take_if_present("embeddings.mask_token")  # training only: dropped
    out["patch_encoder/class_token"] = src.take("embeddings.cls_token", 3)
    registers = src.take_if_present("embeddings.register_tokens", 3)
    if registers is not None and registers.shape[1]:
        out["patch_encoder/register_tokens"] = registers
    p = "model." if any(k.startswith("model.layer.") for k in tensors) else ""
    for i in sorted(
        int(m.group(2)) for k in tensors if (m := _DINOV3_LAYER.match(k))
    ):
        prefix, name = f"{p}layer.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.norm1", out, f"{name}/norm1")
        _dinov3_attention(src, f"{prefix}.attention", out, name)
        torch_norm(src, f"{prefix}.norm2", out, f"{name}/norm2")
        _dinov3_mlp(src, f"{prefix}.mlp", out, name)
        for k in (1, 2):
            out[f"{name}/ls{k}/gamma"] = src.take(
                f"{prefix}.layer_scale{k}.lambda1", 1
            )
    torch_norm(src, "norm", out, "encoder_norm")
    return src.checkpoint(
        out,
        "huggingface",
        patch_size=patch_size,
        layout_defaults=dict(LAYOUT_DEFAULTS["dinov3"]),
    )


def _dinov3_attention(src, prefix, out, name):
    """DINOv3's `{q,k,v}_proj` as the fused `qkv`, a bias absent from
    the file (the key's: `key_bias=False`) read as zeros, and `o_proj`."""
    kernels = [
        transpose(src.take(f"{prefix}.{part}_proj.weight", 2)) for part in "qkv"
    ]
    out[f"{name}/attention/qkv/kernel"] = concatenate(kernels, axis=1)
    if kernels[0] is not None:
        width = kernels[0].shape[1]
        out[f"{name}/attention/qkv/bias"] = concatenate(
            [  # a misshaped bias is reported and leaves the bias out
                src.take(f"{prefix}.{part}_proj.bias", 1)
                if f"{prefix}.{part}_proj.bias" in src
                else np.zeros(width, kernels[0].dtype)
                for part in "qkv"
            ]
        )
    torch_linear(src, f"{prefix}.o_proj", out, f"{name}/attention/proj")


def _dinov3_mlp(src, prefix, out, name):
    """`DINOv3ViTMLP` (`up_proj`, `down_proj`) or, with a `gate_proj`,
    `DINOv3ViTGatedMLP` (`use_gated_mlp`: S+ and H+), the gate's
    projection first in keras_vit's `mlp_fc1`."""
    if f"{prefix}.gate_proj.weight" in src:
        torch_gated_linear(
            src,
            f"{prefix}.gate_proj",
            f"{prefix}.up_proj",
            out,
            f"{name}/mlp_fc1",
        )
    else:
        torch_linear(src, f"{prefix}.up_proj", out, f"{name}/mlp_fc1")
    torch_linear(src, f"{prefix}.down_proj", out, f"{name}/mlp_fc2")


#: A DINOv2 block's MLP, by the name of its first layer: the plain MLP's
#: `(fc1, fc2)` and the SwiGLU's `(weights_in, weights_out)` (see the
#: module's docstring).
_DINOV2_MLPS = {
    "fc1": ("fc1", "fc2"),
    "weights_in": ("weights_in", "weights_out"),
}


def _dinov2_mlp(src, prefix, out, name):
    """A `Dinov2Model` block's MLP: plain, or the SwiGLU by either name
    (the gate's projection first in keras_vit's `mlp_fc1`)."""
    if f"{prefix}.gate_proj.weight" in src or f"{prefix}.up_proj.weight" in src:
        torch_gated_linear(
            src,
            f"{prefix}.gate_proj",
            f"{prefix}.up_proj",
            out,
            f"{name}/mlp_fc1",
        )
        torch_linear(src, f"{prefix}.down_proj", out, f"{name}/mlp_fc2")
        return
    swiglu = f"{prefix}.fc1.weight" not in src and (
        f"{prefix}.weights_in.weight" in src
    )  # (a stray weights_in beside fc1 is reported as unexpected)
    fc1, fc2 = _DINOV2_MLPS["weights_in" if swiglu else "fc1"]
    torch_linear(src, f"{prefix}.{fc1}", out, f"{name}/mlp_fc1")
    torch_linear(src, f"{prefix}.{fc2}", out, f"{name}/mlp_fc2")


def _clip_tokens(src, p, out):
    """CLIP's class embedding and its `(1 + N, D)` position embedding
    table (SigLIP's: `(N, D)`), and the position ids buffer dropped."""
    cls = src.take_if_present(f"{p}embeddings.class_embedding", 1)
    if cls is not None:
        out["patch_encoder/class_token"] = cls.reshape(1, 1, -1)
    table = src.take(f"{p}embeddings.position_embedding.weight", 2)
    if table is not None:
        out["patch_encoder/position_embedding"] = table[None]
    src.take_if_present(f"{p}embeddings.position_ids")  # a buffer
    return cls is not None


def _siglip_head(src, p, out):
    """SigLIP's `head` (multihead attention pooling) as `pooling/`."""
    out["pooling/probe"] = src.take(f"{p}head.probe", 3)
    weight = src.take(f"{p}head.attention.in_proj_weight", 2)
    bias = src.take(f"{p}head.attention.in_proj_bias", 1)
    width = None if weight is None else weight.shape[1]
    if weight is not None:  # [query | key | value] rows
        out["pooling/query/kernel"] = weight[:width].T
        out["pooling/key_value/kernel"] = weight[width:].T
    if bias is not None:
        out["pooling/query/bias"] = bias[: bias.shape[0] // 3]
        out["pooling/key_value/bias"] = bias[bias.shape[0] // 3 :]
    torch_linear(src, f"{p}head.attention.out_proj", out, "pooling/proj")
    torch_norm(src, f"{p}head.layernorm", out, "pooling/norm")
    torch_linear(src, f"{p}head.mlp.fc1", out, "pooling/mlp_fc1")
    torch_linear(src, f"{p}head.mlp.fc2", out, "pooling/mlp_fc2")


def _refuse_head(path, model, head, drop, base):
    raise ValueError(
        f"{path} is a transformers {model} file, whose classifier (on "
        f"{head}) has no keras_vit equivalent; nothing was read. Its "
        f"backbone is a {base}: write the file without {drop} "
        "(safetensors.numpy.load_file / save_file) and read that."
    )


def _refuse_naflex(tensors, name, path):
    """Raises for a transformers `Siglip2*` (NaFlex) file: its patch
    embedding is a `Linear` on flattened patches, 2-D, not SigLIP's
    convolution (see the module's docstring)."""
    if np.ndim(tensors.get(name)) != 2:
        return
    raise ValueError(
        f"{path} is in transformers' SigLIP 2 NaFlex layout (Siglip2*: "
        f"{name} is a linear layer of shape {np.shape(tensors[name])} on "
        "flattened patches, the position table resized for each image's "
        "patch count), which keras_vit does not support. SigLIP 2's "
        "fixed-resolution checkpoints load from timm "
        "(timm/vit_*_siglip_*.v2_webli) or in SigLIP's transformers layout."
    )


def _read_clip_or_siglip(tensors, path):
    """`CLIPVisionModel` (and `CLIPModel`'s image tower) or
    `SiglipVisionModel` (see the module's docstring)."""
    tensors = {k: v for k, v in tensors.items() if not _TEXT.match(k)}
    src = TensorSource(tensors, path)
    p = "vision_model." if SIGNATURES[3] in src else ""
    _refuse_naflex(tensors, f"{p}embeddings.patch_embedding.weight", path)
    out = {}
    kernel, patch_size = torch_conv_to_projection(
        src.take(f"{p}embeddings.patch_embedding.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    clip = _clip_tokens(src, p, out)
    if clip:
        torch_norm(src, f"{p}pre_layrnorm", out, "norm_pre")
    else:
        out["patch_encoder/projection/bias"] = src.take(
            f"{p}embeddings.patch_embedding.bias", 1
        )
    i = 0
    while f"{p}encoder.layers.{i}.layer_norm1.weight" in src:
        prefix, name = f"{p}encoder.layers.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.layer_norm1", out, f"{name}/norm1")
        _attention(
            src,
            f"{prefix}.self_attn",
            ("q_proj", "k_proj", "v_proj", "out_proj"),
            out,
            name,
        )
        torch_norm(src, f"{prefix}.layer_norm2", out, f"{name}/norm2")
        torch_linear(src, f"{prefix}.mlp.fc1", out, f"{name}/mlp_fc1")
        torch_linear(src, f"{prefix}.mlp.fc2", out, f"{name}/mlp_fc2")
        i += 1
    torch_norm(src, f"{p}post_layernorm", out, "encoder_norm")
    classifier = "classifier.weight" in src or "classifier.bias" in src
    if classifier and clip:
        _refuse_head(
            path,
            "CLIPForImageClassification",
            "the patches' mean before post_layernorm",
            "classifier.*",
            "CLIPVisionModel",
        )
    if classifier:  # SiglipForImageClassification: on the tokens' mean
        for key in src.keys():
            if key.startswith(f"{p}head."):
                src.take(key)  # its MAP head, which it does not use
        torch_linear(src, "classifier", out, "head")
    elif f"{p}head.probe" in src:
        _siglip_head(src, p, out)
    layout = dict(LAYOUT_DEFAULTS["clip" if clip else "siglip"])
    projection = src.take_if_present("visual_projection.weight", 2)
    if projection is not None:  # CLIP's image_embeds: a head without bias
        out["head/kernel"] = projection.T
        out["head/bias"] = np.zeros(projection.shape[0], projection.dtype)
        layout.update(PROJECTION_DEFAULTS)
    return src.checkpoint(
        out,
        "huggingface",
        patch_size=patch_size,
        position_embedding_tokens="all" if clip else None,
        layout_defaults=layout,
    )
