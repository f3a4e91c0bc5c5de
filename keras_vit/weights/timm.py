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

PyTorch `Linear` weights are `(out, in)`: transposed here. timm's fused
`qkv` output is ordered [query heads | key heads | value heads], the same as
keras_vit's.
"""

from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import torch_conv_to_projection
from keras_vit.weights.checkpoint import transpose

#: A key only timm's naming has; `read_safetensors` uses it to tell timm
#: files from Hugging Face transformers files.
SIGNATURE = "patch_embed.proj.weight"


def _norm(src, prefix, out, name):
    out[f"{name}/gamma"] = src.take(f"{prefix}.weight", 1)
    out[f"{name}/beta"] = src.take(f"{prefix}.bias", 1)


def _linear(src, prefix, out, name):
    out[f"{name}/kernel"] = transpose(src.take(f"{prefix}.weight", 2))
    out[f"{name}/bias"] = src.take(f"{prefix}.bias", 1)


def read_timm(tensors, path):
    """Converts a timm ViT state dict (name → array) to a `Checkpoint`."""
    src = TensorSource(tensors, path)
    out = {}
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
        _norm(src, f"{prefix}.norm1", out, f"{name}/norm1")
        _linear(src, f"{prefix}.attn.qkv", out, f"{name}/attention/qkv")
        _linear(src, f"{prefix}.attn.proj", out, f"{name}/attention/proj")
        _norm(src, f"{prefix}.norm2", out, f"{name}/norm2")
        _linear(src, f"{prefix}.mlp.fc1", out, f"{name}/mlp_fc1")
        _linear(src, f"{prefix}.mlp.fc2", out, f"{name}/mlp_fc2")
        i += 1
    _norm(src, "norm", out, "encoder_norm")
    if "head.weight" in src:
        _linear(src, "head", out, "head")
    return src.checkpoint(out, "timm", patch_size=patch_size)
