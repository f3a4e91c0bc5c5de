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
"""

import re

from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import torch_conv_to_projection
from keras_vit.weights.checkpoint import torch_linear
from keras_vit.weights.checkpoint import torch_norm

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


def read_timm(tensors, path):
    """Converts a timm ViT state dict (name → array) to a `Checkpoint`.

    Its position embeddings are taken to be on a square grid (see the
    module's docstring)."""
    src = TensorSource(tensors, path)
    out = {}
    _hybrid_stem(src, out)
    kernel, patch_size = torch_conv_to_projection(
        src.take("patch_embed.proj.weight", 4)
    )
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take("patch_embed.proj.bias", 1)
    cls = src.take_if_present("cls_token", 3)
    if cls is not None:
        out["patch_encoder/class_token"] = cls
    posemb = src.take_if_present("pos_embed", 3)
    if posemb is not None:
        out["patch_encoder/position_embedding"] = posemb
    i = 0
    while f"blocks.{i}.norm1.weight" in src:
        prefix, name = f"blocks.{i}", f"block_{i}"
        torch_norm(src, f"{prefix}.norm1", out, f"{name}/norm1")
        torch_linear(src, f"{prefix}.attn.qkv", out, f"{name}/attention/qkv")
        torch_linear(src, f"{prefix}.attn.proj", out, f"{name}/attention/proj")
        torch_norm(src, f"{prefix}.norm2", out, f"{name}/norm2")
        torch_linear(src, f"{prefix}.mlp.fc1", out, f"{name}/mlp_fc1")
        torch_linear(src, f"{prefix}.mlp.fc2", out, f"{name}/mlp_fc2")
        i += 1
    torch_norm(src, "norm", out, "encoder_norm")
    if "head.weight" in src or "head.bias" in src:  # half: reported missing
        torch_linear(src, "head", out, "head")
    return src.checkpoint(out, "timm", patch_size=patch_size)
