"""A `keras_vit.ViT` written as a timm Hub folder: `config.json` and
`model.safetensors` in the layout timm's `save_for_hf` writes, so that
`timm.create_model("local-dir:FOLDER")` (or the folder pushed to the Hub,
`"hf-hub:ORG/NAME"`) builds the same model with the same outputs, and
keras_vit reads it back (`hf://`, or the folder).

The inverse of `keras_vit.weights.timm` for the models timm's
`VisionTransformer` holds: LayerNorm of epsilon 1e-6 or 1e-5 (the
architecture named in `config.json` gives it), GELU, tanh GELU, quick
GELU or SiLU, class token and registers, LayerScale, QK-norm, `norm_pre`,
`fc_norm`, token / average / MAP pooling, learned position embeddings,
the qkv bias or none, any channel count. Others (a hybrid stem,
distillation, a gated MLP, a pre-logits layer, other position
embeddings) are refused by name.
"""

import json
import math
import os

import numpy as np
import safetensors.numpy

from keras_vit import files
from keras_vit import patch_grid
from keras_vit.models import model_checks

#: The timm architecture named for each LayerNorm epsilon (every other
#: argument is written in `model_args`).
_ARCHITECTURE = {
    1e-6: "vit_base_patch16_224",
    1e-5: "vit_base_patch16_clip_224",
}
_POOLING = {"token": "token", "gap": "avg", "map": "map"}


def _refusals(model):
    """What of `model` timm's `VisionTransformer` has no place for."""
    checks = (
        (model.stem is not None, "a hybrid stem"),
        (model.distillation, "distillation=True"),
        (model.use_gated_mlp, "use_gated_mlp=True"),
        (model.representation_size is not None, "a pre-logits layer"),
        (model.position_embedding != "learned", "position_embedding"),
        (model.layer_norm_epsilon not in _ARCHITECTURE, "layer_norm_epsilon"),
        (model.norm_pre == model.patch_bias, "norm_pre without patch_bias"),
        (model.pool_include_prefix, "pool_include_prefix=True"),
        (_mlp_ratio(model) is None, "mlp_dim / hidden_dim"),
        (model.image_size[0] != model.image_size[1], "a non-square image"),
    )
    return [what for failed, what in checks if failed]


def _mlp_ratio(model):
    """The `mlp_ratio` that timm's `int(embed_dim * mlp_ratio)` (and
    keras_vit's reader) turns back into `mlp_dim`: the quotient, else,
    where its product rounds down below `mlp_dim`, the next float above
    it; `None` where neither does."""
    ratio = model.mlp_dim / model.hidden_dim
    for candidate in (ratio, math.nextafter(ratio, math.inf)):
        if int(model.hidden_dim * candidate) == model.mlp_dim:
            return candidate
    return None


def _config(model):
    """`config.json`: the architecture, `model_args`, head and labels,
    and `pretrained_cfg` (input size, normalisation, resize)."""
    num_classes = model.num_classes if model.include_top else 0
    model_args = {
        "patch_size": model.patch_size,
        "embed_dim": model.hidden_dim,
        "depth": model.num_layers,
        "num_heads": model.num_heads,
        "mlp_ratio": _mlp_ratio(model),
        "img_size": model.image_size[0],
        "class_token": model.class_token,
        "reg_tokens": model.num_register_tokens,
        "no_embed_class": model.position_embedding_tokens == "patches",
        "global_pool": _POOLING[model.pooling],
        "fc_norm": model.fc_norm,
        "pre_norm": model.norm_pre,
        "qk_norm": model.qk_norm,
        "act_layer": model.activation,
        "init_values": model.layer_scale_init,
        "num_classes": num_classes,
    }
    # Where they differ from timm's defaults (the goldens omit them).
    if not model.qkv_bias:
        model_args["qkv_bias"] = False
    if model.num_channels != 3:
        model_args["in_chans"] = model.num_channels
    norm = model.preprocessing.normalization or {
        "mean": (0.5,) * 3,
        "std": (0.5,) * 3,
    }
    resize = model.preprocessing.image_resize
    config = {
        "architecture": _ARCHITECTURE[model.layer_norm_epsilon],
        "num_classes": num_classes,
        "global_pool": model_args["global_pool"],
        "model_args": model_args,
        "pretrained_cfg": {
            "input_size": [model.num_channels, *model.image_size],
            "mean": list(norm["mean"]),
            "std": list(norm["std"]),
            "crop_pct": resize["crop_pct"] or 1.0,
            "crop_mode": "center" if resize["crop_pct"] else "squash",
            "interpolation": resize["interpolation"],
            "num_classes": num_classes,
        },
    }
    if model.preprocessing.class_names is not None:
        config["label_names"] = list(model.preprocessing.class_names)
    return config


def _linear(w, ours, theirs, out):
    out[f"{theirs}.weight"] = w[f"{ours}/kernel"].T
    if f"{ours}/bias" in w:
        out[f"{theirs}.bias"] = w[f"{ours}/bias"]


def _norm(w, ours, theirs, out):
    out[f"{theirs}.weight"] = w[f"{ours}/gamma"]
    out[f"{theirs}.bias"] = w[f"{ours}/beta"]


def _block(w, i, out):
    ours, theirs = f"block_{i}", f"blocks.{i}"
    _norm(w, f"{ours}/norm1", f"{theirs}.norm1", out)
    _linear(w, f"{ours}/attention/qkv", f"{theirs}.attn.qkv", out)
    for norm in ("q_norm", "k_norm"):
        if f"{ours}/attention/{norm}/gamma" in w:
            _norm(w, f"{ours}/attention/{norm}", f"{theirs}.attn.{norm}", out)
    _linear(w, f"{ours}/attention/proj", f"{theirs}.attn.proj", out)
    _norm(w, f"{ours}/norm2", f"{theirs}.norm2", out)
    _linear(w, f"{ours}/mlp_fc1", f"{theirs}.mlp.fc1", out)
    _linear(w, f"{ours}/mlp_fc2", f"{theirs}.mlp.fc2", out)
    for scale in ("ls1", "ls2"):
        if f"{ours}/{scale}/gamma" in w:
            out[f"{theirs}.{scale}.gamma"] = w[f"{ours}/{scale}/gamma"]


def to_timm(model):
    """`model`'s weights as timm names them, and its `config.json`.

    Returns:
        `(tensors, config)`: a dict of timm's tensor names to float32
        arrays, and the `config.json` dict.

    Raises:
        ValueError: naming what of `model` timm's `VisionTransformer` has
            no place for, before anything is written.
    """
    model_checks.require_vit(model, "A timm folder (save_timm)")
    refused = _refusals(model)
    if refused:
        raise ValueError(
            "timm's VisionTransformer has no place for these settings of the "
            f"model: {', '.join(refused)}. Received: model {model.name!r}"
        )
    w = {v.path: np.asarray(v.numpy(), "float32") for v in model.weights}
    out = {}
    kernel = patch_grid.dense_to_conv_kernel(
        w["patch_encoder/projection/kernel"],
        model.patch_size,
        model.num_channels,
    )
    out["patch_embed.proj.weight"] = np.asarray(kernel).transpose(3, 2, 0, 1)
    if model.patch_bias:
        out["patch_embed.proj.bias"] = w["patch_encoder/projection/bias"]
    for ours, theirs in (
        ("class_token", "cls_token"),
        ("register_tokens", "reg_token"),
        ("position_embedding", "pos_embed"),
    ):
        if f"patch_encoder/{ours}" in w:
            out[theirs] = w[f"patch_encoder/{ours}"]
    if model.norm_pre:
        _norm(w, "norm_pre", "norm_pre", out)
    for i in range(model.num_layers):
        _block(w, i, out)
    for ours, theirs in (("encoder_norm", "norm"), ("fc_norm", "fc_norm")):
        if f"{ours}/gamma" in w:
            _norm(w, ours, theirs, out)
    if model.pooling == "map":
        out["attn_pool.latent"] = w["pooling/probe"]
        for ours, theirs in (
            ("query", "q"),
            ("key_value", "kv"),
            ("proj", "proj"),
            ("mlp_fc1", "mlp.fc1"),
            ("mlp_fc2", "mlp.fc2"),
        ):
            _linear(w, f"pooling/{ours}", f"attn_pool.{theirs}", out)
        _norm(w, "pooling/norm", "attn_pool.norm", out)
    if model.include_top:
        _linear(w, "head", "head", out)
    tensors = {k: np.ascontiguousarray(v) for k, v in out.items()}
    return tensors, _config(model)


def save_timm(model, folder, overwrite=False):
    """Writes `model` as a timm Hub folder (`config.json`,
    `model.safetensors`), through a temporary folder renamed into place.

    Args:
        model: a `keras_vit.ViT` that timm's `VisionTransformer` holds
            (see the module's docstring).
        folder: the folder to write; its parent must exist.
        overwrite: bool, whether an existing folder may be replaced.
            Defaults to `False`.

    Raises:
        ValueError: for a model timm has no place for, or an output that
            cannot be written, before anything is written.
    """
    folder = files.check_output_path(
        folder, "folder", directory=True, overwrite=overwrite
    )
    tensors, config = to_timm(model)
    with files.atomic_directory(folder) as temporary:
        safetensors.numpy.save_file(
            tensors, os.path.join(temporary, "model.safetensors")
        )
        with open(os.path.join(temporary, "config.json"), "w") as file:
            file.write(json.dumps(config, indent=2) + "\n")
