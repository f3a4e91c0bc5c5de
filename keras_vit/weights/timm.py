"""timm's ViT naming (`timm.models.vision_transformer.VisionTransformer`),
as in the `model.safetensors` files on the Hugging Face Hub under `timm/`:

    patch_embed.proj.weight (D, C, P, P), patch_embed.proj.bias
    cls_token (1, 1, D), pos_embed (1, T, D)
    blocks.{i}.norm1.{weight,bias}
    blocks.{i}.attn.qkv.weight (3D, D), blocks.{i}.attn.qkv.bias (3D,)
    blocks.{i}.attn.proj.{weight,bias}
    blocks.{i}.norm2.{weight,bias}
    blocks.{i}.mlp.fc1.{weight,bias}, blocks.{i}.mlp.fc2.{weight,bias}
    norm.{weight,bias}
    head.weight (classes, D), head.bias

The modern families add (each optional):

    dist_token (1, 1, D), head_dist.{weight,bias}      DeiT, distilled
    reg_token (1, R, D)                                 DINOv2 registers
    blocks.{i}.ls1.gamma, blocks.{i}.ls2.gamma (D,)     LayerScale
    blocks.{i}.attn.q_norm.*, blocks.{i}.attn.k_norm.*  QK-norm
    norm_pre.{weight,bias}                              CLIP
    fc_norm.{weight,bias} (and no norm.*)               average pooling
    attn_pool.latent (1, 1, D), attn_pool.q, .kv, .proj, .norm,
    attn_pool.mlp.fc1, .fc2                             SigLIP's MAP head

and CLIP's `patch_embed.proj` has no bias, nor DINOv3's S and B
`attn.qkv` (timm's `qkv_bias=False`).

DINOv3 (`vit_*_patch16_dinov3*`, EUPE `*_dinov3_qkvb.eupe_*`) is timm's
`Eva` class, named as above except:

    blocks.{i}.gamma_1, blocks.{i}.gamma_2 (D,)        LayerScale
    blocks.{i}.attn.q_bias, blocks.{i}.attn.v_bias (D,) `qkvb`: the fused
        projection's query and value biases; the key's is zero (a buffer,
        not in the file) and is read as zeros
    no pos_embed                                        2-D RoPE

An `Eva` file (one of these names) without `pos_embed` is DINOv3's
layout: read with `position_embedding="rope"`, `rope_theta=100` and
LayerNorm epsilon 1e-5 (`DINOV3_DEFAULTS`, the `vit_*_dinov3` models'
arguments), class-token pooling as upstream DINOv3 (timm's `Eva` defaults
to average pooling: pass `pooling="gap"` for that). An `Eva` file with
`pos_embed` (EVA-02, Perception Encoder: RoPE with absolute embeddings) is
refused.

A SwiGLU MLP is read as keras_vit's gated MLP (`use_gated_mlp=True`,
`activation="silu"`), its `mlp_fc1` the gate's outputs then the value's,
in either of timm's layouts:

    blocks.{i}.mlp.fc1_g, blocks.{i}.mlp.fc1_x (H, D)  `SwiGLU`
    blocks.{i}.mlp.fc1 (2H, D), mlp.fc2 (D, H)          `SwiGLUPacked`
        (`GluMlp(gate_last=False)`: the gate first), told from a plain
        MLP by its fc1 being twice as wide as fc2's input

(`vit_giant_patch14_dinov2`: packed, H = 4096; DINOv3's S+ and H+,
`swiglu_align_to=8`: split, H = `int(D · mlp_ratio)` rounded up to a
multiple of 8, which the file's shapes record). A SwiGLU with a norm
inside (`mlp.norm`, EVA-02's `scale_mlp`) has no keras_vit equivalent:
its norm is reported as unexpected. What the file does not record
(the activation: CLIP's quick GELU; the LayerNorm epsilon: 1e-5 for CLIP;
LayerScale's init value) is an argument.

Hybrids add the ResNetV2 backbone under `patch_embed.backbone.`
(`stem.conv`, `stem.norm`, `stages.{s}.blocks.{u}.conv{1,2,3}`,
`norm{1,2,3}`, `downsample.conv`, `downsample.norm`), and their
`patch_embed.proj` is a 1x1 convolution on its map.

PyTorch `Linear` weights are `(out, in)`: transposed here. timm's fused
`qkv` output is ordered [query heads | key heads | value heads], the same as
keras_vit's.

The file records no patch grid (timm keeps the image size in the model's
config, not in `model.safetensors`); as timm's own `resample_abs_pos_embed`
does by default, `pos_embed` is taken to be on a square grid. A checkpoint
of a non-square grid needs `load_weights(..., source_grid=(rows, cols))`.

Nor does it record whether `pos_embed` has entries for the class,
distillation and register tokens (timm's `no_embed_class=False`, DeiT,
DINOv2) or for the patches only (`no_embed_class=True`: DeiT III, DINOv2
with registers). Of the two readings, the one whose patch count is a
square grid (or is the `source_grid` given) is taken; where both are (9
entries and 5 prefix tokens: 3x3, or 2x2 after them) the reader refuses
unless told (`position_embedding_tokens=`).
"""

import math
import re

import numpy as np

from keras_vit.weights.checkpoint import DINOV3_DEFAULTS
from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import concatenate
from keras_vit.weights.checkpoint import position_tokens_of
from keras_vit.weights.checkpoint import torch_conv_to_projection
from keras_vit.weights.checkpoint import torch_gated_linear
from keras_vit.weights.checkpoint import torch_linear
from keras_vit.weights.checkpoint import torch_norm
from keras_vit.weights.checkpoint import transpose

#: A key only timm's naming has; `read_safetensors` uses it to tell timm
#: files from Hugging Face transformers files.
SIGNATURE = "patch_embed.proj.weight"


def _conv(src, name):
    """A PyTorch (out, in, h, w) conv weight as a Keras (h, w, in, out)
    kernel."""
    weight = src.take(name, 4)
    return None if weight is None else weight.transpose(2, 3, 1, 0)


_BACKBONE = "patch_embed.backbone."
_BLOCK = re.compile(r"^patch_embed\.backbone\.stages\.(\d+)\.blocks\.(\d+)\.")


def _hybrid_stem(src, out):
    """timm's ResNetV2 backbone of the hybrids (`vit_*_r50_*`,
    `vit_*_r26_*`)."""
    if f"{_BACKBONE}stem.conv.weight" not in src:
        return
    stem = "resnet_stem"
    out[f"{stem}/root_conv/kernel"] = _conv(src, f"{_BACKBONE}stem.conv.weight")
    torch_norm(src, f"{_BACKBONE}stem.norm", out, f"{stem}/root_norm")
    units = sorted(
        {
            (int(m.group(1)), int(m.group(2)))
            for k in src.keys()
            if (m := _BLOCK.match(k))
        }
    )
    for stage, unit in units:
        prefix = f"{_BACKBONE}stages.{stage}.blocks.{unit}"
        name = f"{stem}/block{stage + 1}_unit{unit + 1}"
        for i in (1, 2, 3):
            out[f"{name}/conv{i}/kernel"] = _conv(
                src, f"{prefix}.conv{i}.weight"
            )
            torch_norm(src, f"{prefix}.norm{i}", out, f"{name}/norm{i}")
        if f"{prefix}.downsample.conv.weight" in src:
            out[f"{name}/proj_conv/kernel"] = _conv(
                src, f"{prefix}.downsample.conv.weight"
            )
            torch_norm(
                src, f"{prefix}.downsample.norm", out, f"{name}/proj_norm"
            )


def _tokens(src, out):
    """The class, distillation and register tokens and the position
    embeddings; returns the number of tokens before the patches."""
    names = (
        ("cls_token", "class_token"),
        ("dist_token", "distillation_token"),
        ("reg_token", "register_tokens"),
    )
    prefix = 0
    for name, ours in names:
        value = src.take_if_present(name, 3)
        if value is not None:
            out[f"patch_encoder/{ours}"] = value
            prefix += value.shape[1]
    posemb = src.take_if_present("pos_embed", 3)
    if posemb is not None:
        out["patch_encoder/position_embedding"] = posemb
    return prefix


#: Names only timm's `Eva` class (DINOv3, EVA-02, Perception Encoder,
#: Naver's RoPE-ViT) has.
_EVA = re.compile(r"^(blocks\.\d+\.(gamma_[12]|attn\.[qv]_bias)|rope\.freqs)$")


def _qkv(src, prefix, out, name):
    """The fused `qkv` projection: its bias is `qkv.bias`, or `Eva`'s
    `q_bias` and `v_bias` with the key's zero between them, or none."""
    out[f"{name}/kernel"] = transpose(src.take(f"{prefix}.qkv.weight", 2))
    if f"{prefix}.q_bias" in src or f"{prefix}.v_bias" in src:
        query = src.take(f"{prefix}.q_bias", 1)
        value = src.take(f"{prefix}.v_bias", 1)
        key = None if query is None else np.zeros_like(query)
        out[f"{name}/bias"] = concatenate([query, key, value])
    elif f"{prefix}.qkv.bias" in src:
        out[f"{name}/bias"] = src.take(f"{prefix}.qkv.bias", 1)


def _blocks(src, out):
    i = 0
    while f"blocks.{i}.norm1.weight" in src:
        prefix, name = f"blocks.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.norm1", out, f"{name}/norm1")
        _qkv(src, f"{prefix}.attn", out, f"{name}/attention/qkv")
        for norm in ("q_norm", "k_norm"):
            if f"{prefix}.attn.{norm}.weight" in src:
                torch_norm(
                    src,
                    f"{prefix}.attn.{norm}",
                    out,
                    f"{name}/attention/{norm}",
                )
        torch_linear(src, f"{prefix}.attn.proj", out, f"{name}/attention/proj")
        torch_norm(src, f"{prefix}.norm2", out, f"{name}/norm2")
        _mlp(src, f"{prefix}.mlp", out, name)
        for scale, eva in (("ls1", "gamma_1"), ("ls2", "gamma_2")):
            for theirs in (f"{scale}.gamma", eva):
                if f"{prefix}.{theirs}" in src:
                    out[f"{name}/{scale}/gamma"] = src.take(
                        f"{prefix}.{theirs}", 1
                    )
        i += 1


def _mlp(src, prefix, out, name):
    """A block's MLP: plain or packed (`fc1`), or timm's `SwiGLU`
    (`fc1_g`, `fc1_x`) packed as keras_vit's gated `mlp_fc1`, the gate
    first."""
    if f"{prefix}.fc1_g.weight" in src or f"{prefix}.fc1_x.weight" in src:
        torch_gated_linear(
            src, f"{prefix}.fc1_g", f"{prefix}.fc1_x", out, f"{name}/mlp_fc1"
        )
    else:
        torch_linear(src, f"{prefix}.fc1", out, f"{name}/mlp_fc1")
    torch_linear(src, f"{prefix}.fc2", out, f"{name}/mlp_fc2")


def _attention_pool(src, out):
    """timm's `AttentionPoolLatent` (SigLIP's MAP head) as `pooling/`."""
    if "attn_pool.latent" not in src:
        return
    out["pooling/probe"] = src.take("attn_pool.latent", 3)
    for theirs, ours in (
        ("q", "query"),
        ("kv", "key_value"),
        ("proj", "proj"),
        ("mlp.fc1", "mlp_fc1"),
        ("mlp.fc2", "mlp_fc2"),
    ):
        torch_linear(src, f"attn_pool.{theirs}", out, f"pooling/{ours}")
    torch_norm(src, "attn_pool.norm", out, "pooling/norm")


def _heads(src, out):
    for theirs, ours in (("head", "head"), ("head_dist", "head_dist")):
        if f"{theirs}.weight" in src or f"{theirs}.bias" in src:
            torch_linear(src, theirs, out, ours)  # half: reported missing


def read_timm(tensors, path, position_embedding_tokens=None, source_grid=None):
    """Converts a timm ViT state dict (name → array) to a `Checkpoint`.

    Its position embeddings are taken to be on a square grid, unless
    `source_grid` says otherwise; `position_embedding_tokens` (`"all"`,
    `"patches"` or `None`: decided from the grid, see the module's
    docstring) whether they have entries for the class, distillation and
    register tokens."""
    layout = _eva_layout(tensors, path)
    src = TensorSource(tensors, path)
    out = {}
    _hybrid_stem(src, out)
    kernel, patch_size = torch_conv_to_projection(
        src.take("patch_embed.proj.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take_if_present(
        "patch_embed.proj.bias", 1
    )  # CLIP's has none
    prefix = _tokens(src, out)
    posemb = out.get("patch_encoder/position_embedding")
    if position_embedding_tokens is None and posemb is not None:
        position_embedding_tokens = position_tokens_of(
            posemb.shape[1], prefix, path, source_grid
        )
    if "norm_pre.weight" in src:
        torch_norm(src, "norm_pre", out, "norm_pre")
    _blocks(src, out)
    if "fc_norm.weight" in src:  # average pooling: the norm after it
        torch_norm(src, "fc_norm", out, "fc_norm")
    if "norm.weight" in src or "fc_norm/gamma" not in out:
        torch_norm(src, "norm", out, "encoder_norm")
    _attention_pool(src, out)
    _heads(src, out)
    out["rope/frequencies"] = src.take_if_present("rope.freqs", 4)
    return src.checkpoint(
        out,
        "timm",
        patch_size=patch_size,
        position_embedding_tokens=position_embedding_tokens if prefix else None,
        layout_defaults=layout,
        adjacent_rope_pairs=layout.get("rope_type") in ("cat", "mixed"),
        perception_encoder=_perception_encoder(tensors),
    )


#: The `ViT` arguments of Perception Encoder core (timm's
#: `vit_pe_core_*`: `Eva` with `attn_type="rope"`, RoPE `"cat"` with
#: `rope_grid_offset=1`, `rope_grid_indexing="xy"`, temperature 10000,
#: `ref_feat_shape` its pretraining grid, absolute embeddings for the
#: class token and the patches, `use_pre_transformer_norm`, LayerNorm
#: epsilon 1e-5, exact GELU (CLIP's tower layout, not OpenAI CLIP's quick
#: GELU), `global_pool="map"` over every token with 8 heads, and a `head`
#: that is the image projection) that its tensors do not record.
PE_DEFAULTS = {
    "position_embedding": "rope",
    "activation": "gelu",
    "rope_type": "cat",
    "rope_theta": 10000.0,
    "rope_grid_offset": 1.0,
    "rope_with_learned": True,
    "layer_norm_epsilon": 1e-5,
    "pool_include_prefix": True,
    "pooling_num_heads": 8,
    "classifier_activation": None,
}

#: Naver's RoPE-ViT (timm's `vit_*_patch16_rope_*`): RoPE `"cat"` on the
#: patch indices with temperature 100 (`"mixed"`: learned frequencies,
#: initialised from temperature 10), LayerNorm epsilon 1e-6; `_ape` adds
#: absolute embeddings for the patches only.
NAVER_DEFAULTS = {
    "position_embedding": "rope",
    "rope_type": "cat",
    "rope_theta": 100.0,
    "layer_norm_epsilon": 1e-6,
}


def _perception_encoder(tensors):
    """Perception Encoder core's `layout_defaults` for a file in its
    layout (absolute embeddings, `norm_pre`, no patch-embedding bias and
    an attention-pooling head), else `None`. A timm `VisionTransformer`
    with `pre_norm` and `global_pool="map"` has the same tensors: the
    reading is decided later (`Checkpoint.perception_encoder`)."""
    if "patch_embed.proj.bias" in tensors or not all(
        k in tensors
        for k in ("pos_embed", "norm_pre.weight", "attn_pool.q.weight")
    ):
        return None
    entries = np.shape(tensors["pos_embed"])[1] - ("cls_token" in tensors)
    side = math.isqrt(entries)
    return {**PE_DEFAULTS, "rope_reference_grid": (side, side)}


def _eva_layout(tensors, path):
    """The `layout_defaults` of timm's `Eva` layouts (DINOv3, Naver's
    RoPE-ViT), `{}` for timm's `VisionTransformer`'s (and Perception
    Encoder core's tensors, which are one's too); refuses the other `Eva`
    layouts (EVA-02)."""
    if not any(_EVA.match(k) for k in tensors):
        return {}
    if "reg_token" in tensors and not (
        "pos_embed" in tensors or "rope.freqs" in tensors
    ):
        return dict(DINOV3_DEFAULTS)
    if "reg_token" not in tensors and _patches_only(tensors):
        mixed = "rope.freqs" in tensors
        return {
            **NAVER_DEFAULTS,
            **({"rope_type": "mixed", "rope_theta": 10.0} if mixed else {}),
            **({"rope_with_learned": True} if "pos_embed" in tensors else {}),
        }
    raise ValueError(
        f"{path} is a timm Eva checkpoint in none of the layouts keras_vit "
        "reads: DINOv3's (reg_token, no pos_embed, no rope.freqs), "
        "Perception Encoder core's and Naver's RoPE-ViT's (vit_*_rope_*: no "
        "reg_token, pos_embed for the patches only if any). EVA-02's "
        "(rotary embeddings with absolute embeddings for the class token "
        "too) is not read."
    )


def _patches_only(tensors):
    """Whether the file has no absolute embeddings, or (Naver's `_ape`,
    timm's `no_embed_class=True`) a square grid of them for the patches
    only."""
    if "pos_embed" not in tensors:
        return True
    entries = np.shape(tensors["pos_embed"])[1]
    return math.isqrt(entries) ** 2 == entries
