"""What a Hub repo's own files say about its model: the reader of a
snapshot folder's `config.json` (and `preprocessor_config.json`), as the
`keras_vit.ViT` arguments it gives. Reads files only; downloads nothing.

Two publishers' layouts:

- timm (`save_for_hf`): `architecture` (a timm model name), `num_classes`,
  `label_names`, `model_args` (only what differs from the architecture's
  own arguments) and `pretrained_cfg` (`input_size`, `mean`, `std`,
  `crop_pct`, `interpolation`, `crop_mode`). The architectures' own
  arguments are `TIMM_ARCHITECTURES`, captured from timm 1.0.31's entry
  points (`tests/golden/make_timm_architectures.py`): its
  `VisionTransformer`s, its DeiTs (`distilled`: `VisionTransformerDistilled`,
  a distillation token and a second head; DeiT III: `no_embed_class`,
  LayerScale), and its DINOv3 / EUPE `Eva`s in `Eva`'s names
  (2-D RoPE, no position embedding table; pooled by the class token,
  as keras_vit's DINOv3 presets, where timm's `Eva` averages).
- transformers (`save_pretrained`): `model_type` with the config class's
  fields, nested in `vision_config` for the two-tower CLIP and SigLIP
  models, and the image processor's `preprocessor_config.json`
  (`image_mean`, `image_std`, `size`, `crop_size`, `do_center_crop`,
  `resample`). A field left at its class default is not written;
  `TRANSFORMERS_DEFAULTS` holds those defaults (transformers 5.25's
  `models/*/configuration_*.py`), `_PROCESSOR_DEFAULTS` the image
  processors' (a repo without the file: its class defaults).

`read(folder)` returns a `HubConfig`: the architecture (arguments that
change the answer and that an override may not contradict), the settings
an override may change (resolution, head, class names, normalisation,
resize), and how the publisher's library resamples position embeddings.
"""

import dataclasses
import json
import math
import numbers
import os
import pathlib

from keras_vit import options
from keras_vit.data import resize
from keras_vit.weights.huggingface import transformers_resampling

CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor_config.json"

#: timm's ViT architectures by name: their entry point's `model_args`
#: (`norm_eps` for a LayerNorm of another epsilon than timm's 1e-6).
TIMM_ARCHITECTURES = json.loads(
    (pathlib.Path(__file__).parent / "timm_architectures.json").read_text()
)

#: timm `Eva`'s train-time RoPE coordinate augmentations (off in its
#: DINOv3 entry points), as `ViT` names them too.
_ROPE_AUGMENTATION = (
    "rope_shift_coords",
    "rope_jitter_coords",
    "rope_rescale_coords",
)

#: timm's `VisionTransformer` defaults of the arguments read here (and
#: `Eva`'s coordinate augmentations).
TIMM_DEFAULTS = {
    "mlp_ratio": 4.0,
    "class_token": True,
    "reg_tokens": 0,
    "global_pool": "token",
    "init_values": None,
    "no_embed_class": False,
    "pre_norm": False,
    "fc_norm": None,
    "qk_norm": False,
    "act_layer": "gelu",
    "norm_eps": 1e-6,
    "img_size": 224,
    "in_chans": 3,
    "qkv_bias": True,
    "distilled": False,
    **dict.fromkeys(_ROPE_AUGMENTATION),
}

#: timm `Eva` (an architecture with `use_rot_pos_emb`: DINOv3, Perception
#: Encoder core, Naver's RoPE-ViT): its defaults where they are not
#: `VisionTransformer`'s, and its arguments' names in `VisionTransformer`'s.
EVA_DEFAULTS = {
    "global_pool": "avg",
    "attn_type": "eva",
    "use_abs_pos_emb": True,
    "use_rot_pos_emb": False,
    "rope_type": "cat",
    "rope_temperature": 10000.0,
    "rope_rotate_half": False,
    "rope_grid_offset": 0.0,
    "rope_grid_indexing": "ij",
    "ref_feat_shape": None,
    "use_pre_transformer_norm": False,
    "attn_pool_num_heads": None,
    "attn_pool_mlp_ratio": None,
    "num_reg_tokens": 0,
    "use_fc_norm": None,
}
_EVA_NAMES = {
    "num_reg_tokens": "reg_tokens",
    "use_fc_norm": "fc_norm",
    "rope_temperature": "rope_theta",
    "use_pre_transformer_norm": "pre_norm",
}
#: Per `rope_type`, the `Eva` arguments keras_vit builds at one value only:
#: DINOv3's rotates halves of its centred coordinates, without absolute
#: embeddings; timm's `"cat"` and `"mixed"` rotate adjacent pairs (read by
#: reordering the columns) of column-then-row indices (`"xy"`).
_EVA_ONLY = {
    "dinov3": {
        "rope_rotate_half": True,
        "use_abs_pos_emb": False,
        "rope_grid_indexing": "ij",
    },
    "cat": {"rope_rotate_half": False, "rope_grid_indexing": "xy"},
    "mixed": {"rope_rotate_half": False, "rope_grid_indexing": "xy"},
}

#: timm `model_args` that change nothing keras_vit computes, or that the
#: config says elsewhere (`num_classes`, `global_pool` beside them).
_TIMM_IGNORED = (
    "dynamic_img_size",
    "drop_rate",
    "drop_path_rate",
    "num_classes",
)

#: timm `global_pool` -> keras_vit `pooling`.
_TIMM_POOLING = {"token": "token", "avg": "gap", "map": "map"}

#: Each transformers vision config class's defaults, by `model_type`
#: (transformers 5.25: `ViTConfig` and the same fields of `DeiTConfig`,
#: `Dinov2Config`,
#: `Dinov2WithRegistersConfig`, `CLIPVisionConfig`, `SiglipVisionConfig`,
#: `DINOv3ViTConfig`).
_VIT_DEFAULTS = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
    "image_size": 224,
    "patch_size": 16,
}
TRANSFORMERS_DEFAULTS = {
    "vit": _VIT_DEFAULTS,
    "deit": _VIT_DEFAULTS,  # `DeiTConfig`'s are `ViTConfig`'s
    "dinov2": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "mlp_ratio": 4,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-6,
        "image_size": 224,
        "patch_size": 14,
        "use_swiglu_ffn": False,
    },
    "dinov2_with_registers": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "mlp_ratio": 4,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-6,
        "image_size": 224,
        "patch_size": 16,
        "use_swiglu_ffn": False,
        "num_register_tokens": 4,
    },
    "clip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 32,
        "hidden_act": "quick_gelu",
        "layer_norm_eps": 1e-5,
    },
    "siglip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 16,
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-6,
        "vision_use_head": True,
    },
    "dinov3_vit": {
        "hidden_size": 384,
        "intermediate_size": 1536,
        "num_hidden_layers": 12,
        "num_attention_heads": 6,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-5,
        "rope_theta": 100.0,
        "image_size": 224,
        "patch_size": 16,
        "query_bias": True,
        "key_bias": False,
        "value_bias": True,
        "proj_bias": True,
        "mlp_bias": True,
        "layerscale_value": 1.0,
        "use_gated_mlp": False,
        "num_register_tokens": 0,
        "pos_embed_shift": None,
        "pos_embed_jitter": None,
        "pos_embed_rescale": 2.0,
    },
}
#: The two-tower models, whose image tower's config is `vision_config`.
_TWO_TOWER = {"clip": "clip_vision_model", "siglip": "siglip_vision_model"}

#: transformers `hidden_act` -> keras_vit `activation`.
_TRANSFORMERS_ACTIVATION = {
    "gelu": "gelu",
    "quick_gelu": "quick_gelu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "silu": "silu",
}

#: `DINOv3ViTConfig`'s bias fields of the fused `qkv` projection.
_QKV = ("query", "key", "value")

#: timm's resampling of position embeddings; also given for
#: `DINOv3ViTModel`, whose RoPE leaves no table to resample.
_TIMM_RESAMPLING = {"interpolation": "bicubic_pytorch", "antialias": True}
#: PIL's resampling codes (`resample` in a processor config); `null`
#: resamples bilinearly, as transformers' image processors do.
_PIL_RESAMPLE = {2: "bilinear", 3: "bicubic", None: "bilinear"}

_IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
#: timm's data config where `pretrained_cfg` leaves a field out, null or
#: empty (timm 1.0.31 `timm.data.resolve_data_config`; `input_size`,
#: where absent or null: the model's `in_chans` and `img_size`).
_TIMM_DATA_DEFAULTS = {
    **_IMAGENET,
    "interpolation": "bicubic",
    "crop_pct": 0.875,
    "crop_mode": "center",
}
_SQUARE_224 = {"height": 224, "width": 224}
_HALF = {"image_mean": (0.5,) * 3, "image_std": (0.5,) * 3}
#: `BitImageProcessor` (DINOv2's) and `CLIPImageProcessor`: OpenAI CLIP's
#: mean and std, the shorter side to 224 then a 224 centre crop.
_CLIP_PROCESSOR = {
    "image_mean": (0.48145466, 0.4578275, 0.40821073),
    "image_std": (0.26862954, 0.26130258, 0.27577711),
    "resample": 3,
    "size": {"shortest_edge": 224},
    "crop_size": _SQUARE_224,
    "do_center_crop": True,
}
#: Each `model_type`'s image processor's class defaults, which a
#: `preprocessor_config.json` (or its absence) leaves as they are
#: (transformers 5.25 `models/*/image_processing_*.py`: `ViT`, `DeiT`,
#: `Bit`, `CLIP`, `Siglip`, `DINOv3ViT` `ImageProcessor`).
_PROCESSOR_DEFAULTS = {
    "vit": {**_HALF, "resample": 2, "size": _SQUARE_224},
    "deit": {
        **_HALF,
        "resample": 3,
        "size": {"height": 256, "width": 256},
        "crop_size": _SQUARE_224,
        "do_center_crop": True,
    },
    "dinov2": _CLIP_PROCESSOR,
    "dinov2_with_registers": _CLIP_PROCESSOR,
    "clip_vision_model": _CLIP_PROCESSOR,
    "siglip_vision_model": {**_HALF, "resample": 3, "size": _SQUARE_224},
    "dinov3_vit": {
        "image_mean": _IMAGENET["mean"],
        "image_std": _IMAGENET["std"],
        "resample": 2,
        "size": _SQUARE_224,
    },
}

#: The `ViT` arguments a user's value may not contradict: they change
#: what the weights compute.
FIXED = (
    "patch_size",
    "hidden_dim",
    "num_layers",
    "num_heads",
    "mlp_dim",
    "activation",
    "layer_norm_epsilon",
    "class_token",
    "num_register_tokens",
    "pooling",
    "norm_pre",
    "patch_bias",
    "fc_norm",
    "qk_norm",
    "position_embedding_tokens",
    "qkv_bias",
    "position_embedding",
    "rope_theta",
    "use_gated_mlp",
    "distillation",
)


@dataclasses.dataclass(frozen=True)
class HubConfig:
    """A snapshot's configuration as `keras_vit.ViT` arguments.

    Attributes:
        source: `"timm"` or `"transformers"`.
        name: the timm architecture or the transformers `model_type`.
        arguments: the `ViT` arguments the files give (architecture,
            resolution, head, `normalization`, `image_resize`,
            `class_names`).
        resampling: `{"interpolation", "antialias"}`: how the publisher's
            library resamples the position embeddings to another size.
    """

    source: str
    name: str
    arguments: dict
    resampling: dict


def read(folder):
    """The `HubConfig` of the snapshot `folder`.

    Raises:
        ValueError: naming the file and field, for a missing or malformed
            `config.json`, an unknown architecture or `model_type`, or a
            field keras_vit cannot build.
    """
    config = load(folder)
    if "architecture" in config:
        return _timm(config, folder)
    if is_transformers(config):
        processor = _json(folder, PREPROCESSOR_FILE, required=False)
        return _transformers(config, processor or {}, folder)
    raise ValueError(
        f"{_where(folder, CONFIG_FILE)} names neither a timm `architecture` "
        "nor a transformers `model_type`. Received: keys "
        f"{sorted(config)[:20]}"
    )


def load(folder):
    """The snapshot `folder`'s `config.json`, a dict, or `ValueError`."""
    return _json(folder, CONFIG_FILE, required=True)


def is_transformers(config):
    """Whether `config` (`load`'s) is transformers', whose repos carry
    the image processor's `preprocessor_config.json` (timm's: none)."""
    return "architecture" not in config and "model_type" in config


def _where(folder, name):
    return os.path.join(os.fspath(folder), name)


def _json(folder, name, required):
    path = _where(folder, name)
    if not os.path.isfile(path):
        if required:
            raise ValueError(
                f"The snapshot folder has no {name}. Received: {folder!r}"
            )
        return None
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file)
    # ValueError: JSONDecodeError, UnicodeDecodeError, an integer of more
    # digits than Python converts; RecursionError: nesting too deep.
    except (OSError, ValueError, RecursionError) as error:
        raise ValueError(f"Cannot read {path}: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f"{path} must hold a JSON object. Received: {type(value).__name__}"
        )
    return value


def _field(config, key, kind, where, default=None):
    """`config[key]` (or `default`), checked to be a `kind`."""
    value = config.get(key, default)
    ok = isinstance(value, kind) and not (
        isinstance(value, bool) and bool not in _tuple(kind)
    )
    if not ok:
        raise ValueError(
            f"{where}: `{key}` must be a {_names(kind)}. Received: "
            f"{key}={value!r}"
        )
    return value


def _tuple(kind):
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind):
    return " or ".join(k.__name__ for k in _tuple(kind))


def _timm(config, folder):
    where = _where(folder, CONFIG_FILE)
    name = _field(config, "architecture", str, where)
    if name not in TIMM_ARCHITECTURES:
        raise ValueError(
            f"{where}: keras_vit does not know the timm architecture "
            f"{name!r} (it knows {len(TIMM_ARCHITECTURES)} ViTs, e.g. "
            "vit_base_patch16_224, vit_small_patch14_reg4_dinov2). "
            f"Received: architecture={name!r}"
        )
    given = _field(config, "model_args", dict, where, default={})
    own = TIMM_ARCHITECTURES[name]
    defaults = {
        **TIMM_DEFAULTS,
        **(EVA_DEFAULTS if "use_rot_pos_emb" in own else {}),
    }
    args = {**defaults, **own}
    for key, value in given.items():
        if key in _TIMM_IGNORED:
            continue
        if key not in defaults and key not in own:
            raise ValueError(
                f"{where}: keras_vit cannot build the timm model argument "
                f"`{key}`. Received: model_args={given!r}"
            )
        args[key] = value
    rope = {}
    if "use_rot_pos_emb" in args:
        args, rope = _eva(args, where)
    arguments = {**_timm_arguments(args, where), **rope}
    pretrained = _field(config, "pretrained_cfg", dict, where, default={})
    arguments.update(_timm_preprocessing(pretrained, args, where))
    num_classes = _field(config, "num_classes", int, where, default=1000)
    if num_classes < 0:
        raise ValueError(
            f"{where}: `num_classes` must be 0 (no head) or more. "
            f"Received: num_classes={num_classes!r}"
        )
    arguments["include_top"] = num_classes > 0
    if num_classes > 0:
        arguments["num_classes"] = num_classes
    if config.get("label_names") is not None and num_classes > 0:
        # (Their count is checked against the weights' head:
        # `hub.refuse_misfit`.)
        arguments["class_names"] = _field(config, "label_names", list, where)
    return HubConfig("timm", name, arguments, dict(_TIMM_RESAMPLING))


def _eva(args, where):
    """timm `Eva` arguments in `VisionTransformer`'s names, and the `ViT`
    arguments of its rotary embedding and pooling."""
    kind = args["rope_type"]
    if not args["use_rot_pos_emb"] or kind not in _EVA_ONLY:
        raise ValueError(
            f"{where}: keras_vit builds timm's Eva with rotary embeddings of "
            f"rope_type {', '.join(map(repr, _EVA_ONLY))} only. Received: "
            f"use_rot_pos_emb={args['use_rot_pos_emb']!r}, "
            f"rope_type={kind!r}"
        )
    for key, value in _EVA_ONLY[kind].items():
        if args[key] != value:
            raise ValueError(
                f"{where}: keras_vit builds timm's Eva with rope_type="
                f"{kind!r} and {key}={value!r} only. Received: "
                f"{key}={args[key]!r}"
            )
    ratio = args["attn_pool_mlp_ratio"]
    if ratio is not None and ratio != args["mlp_ratio"]:
        raise ValueError(
            f"{where}: keras_vit's attention pooling has the blocks' MLP "
            f"width. Received: attn_pool_mlp_ratio={ratio!r} and "
            f"mlp_ratio={args['mlp_ratio']!r}"
        )
    rope = {"rope_type": kind}
    if kind == "cat":
        rope["rope_grid_offset"] = float(args["rope_grid_offset"])
        if args["ref_feat_shape"] is not None:
            shape = args["ref_feat_shape"]
            rope["rope_reference_grid"] = (
                (shape, shape) if isinstance(shape, int) else tuple(shape)
            )
    if kind != "dinov3" and args["use_abs_pos_emb"]:
        rope["rope_with_learned"] = True
    if args["global_pool"] == "map":  # Eva pools every token
        rope["pool_include_prefix"] = True
        if args["attn_pool_num_heads"] is not None:
            rope["pooling_num_heads"] = args["attn_pool_num_heads"]
    names = {
        _EVA_NAMES.get(key, key): value
        for key, value in args.items()
        if key in TIMM_DEFAULTS or key in _EVA_NAMES or key not in EVA_DEFAULTS
    }
    return names, rope


def _timm_arguments(args, where):
    """timm `VisionTransformer` arguments -> `ViT` arguments."""
    pooling = _TIMM_POOLING.get(args["global_pool"])
    activation = args["act_layer"]
    if pooling is None or activation not in options.ACTIVATIONS:
        raise ValueError(
            f"{where}: keras_vit has no equivalent of global_pool="
            f"{args['global_pool']!r} / act_layer={activation!r}"
        )
    width = _field(args, "embed_dim", int, where)
    arguments = {
        "patch_size": args["patch_size"],
        "hidden_dim": width,
        "num_layers": args["depth"],
        "num_heads": args["num_heads"],
        "mlp_dim": _mlp_dim(width, _ratio(args, "mlp_ratio", where), where),
        "activation": activation,
        "layer_norm_epsilon": args["norm_eps"],
        "class_token": args["class_token"],
        "num_register_tokens": args["reg_tokens"],
        "pooling": pooling,
        "norm_pre": args["pre_norm"],
        "patch_bias": not args["pre_norm"],
        "fc_norm": pooling == "gap"
        if args["fc_norm"] is None
        else args["fc_norm"],
        "qk_norm": args["qk_norm"],
        "qkv_bias": args["qkv_bias"],
        "distillation": args["distilled"],
        "num_channels": args["in_chans"],
    }
    if "rope_theta" in args:
        arguments["position_embedding"] = "rope"
        arguments["rope_theta"] = args["rope_theta"]
    for key in _ROPE_AUGMENTATION:  # `Eva`'s names are `ViT`'s
        if args.get(key) is not None:
            arguments[key] = args[key]
    if args["init_values"] is not None:
        arguments["layer_scale_init"] = args["init_values"]
    if args.get("swiglu_mlp"):
        # timm's `EvaBlock`: a SiLU-gated MLP of `int(D * mlp_ratio)`,
        # rounded up to a multiple of `swiglu_align_to` (S+, H+: 8).
        align = args.get("swiglu_align_to") or 1
        width = -(-arguments["mlp_dim"] // align) * align
        arguments.update(use_gated_mlp=True, activation="silu", mlp_dim=width)
    prefix = args["class_token"] or args["reg_tokens"]
    if args["no_embed_class"] and prefix:
        arguments["position_embedding_tokens"] = "patches"
    return arguments


def _ratio(config, key, where, default=None):
    """`config[key]` (or `default`), checked to be a finite number > 0."""
    value = config.get(key, default)
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{where}: `{key}` must be a finite positive number. Received: "
            f"{key}={value!r}"
        )
    return value


def _mlp_dim(width, ratio, where):
    """`int(width * ratio)`, as timm and transformers compute it."""
    if not math.isfinite(width * ratio):
        raise ValueError(
            f"{where}: the MLP width, hidden size x `mlp_ratio`, is not a "
            f"number. Received: mlp_ratio={ratio!r}"
        )
    return int(width * ratio)


def _per_channel(value, key, where, channels):
    """A mean or std of the files as a tuple: one number, or a list of
    them (one number applies to every channel, as timm and transformers
    apply it)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"{where}: `{key}` must be a number or a list of numbers, one "
            f"per channel. Received: {key}={value!r}"
        )
    if len(value) == 1 and isinstance(channels, int):
        value = list(value) * channels
    return tuple(value)


def _timm_preprocessing(pretrained, args, where):
    """`pretrained_cfg` -> `image_size`, `normalization`, `image_resize`,
    each field falling back as timm's do (`_TIMM_DATA_DEFAULTS`)."""
    data = {
        key: pretrained.get(key) or value
        for key, value in _TIMM_DATA_DEFAULTS.items()
    }
    size = pretrained.get("input_size")
    if size is None:
        img_size = args["img_size"]
        if isinstance(img_size, int):
            img_size = [img_size, img_size]
        size = [args["in_chans"], *img_size]
    if not isinstance(size, list) or len(size) != 3:
        raise ValueError(
            f"{where}: `pretrained_cfg['input_size']` must be [C, H, W]. "
            f"Received: input_size={size!r}"
        )
    if data["crop_mode"] not in ("center", "squash"):
        raise ValueError(
            f"{where}: keras_vit resizes by a centre crop or squashing. "
            f"Received: pretrained_cfg['crop_mode']={data['crop_mode']!r}"
        )
    if data["interpolation"] not in resize.INTERPOLATIONS:
        raise ValueError(
            f"{where}: keras_vit resizes images by "
            f"{' or '.join(resize.INTERPOLATIONS)} interpolation only. "
            "Received: "
            f"pretrained_cfg['interpolation']={data['interpolation']!r}"
        )
    return {
        "image_size": size[1] if size[1] == size[2] else size[1:],
        "normalization": {
            key: _per_channel(data[key], key, where, args["in_chans"])
            for key in ("mean", "std")
        },
        "image_resize": {
            "crop_pct": None
            if data["crop_mode"] == "squash"
            else data["crop_pct"],
            "interpolation": data["interpolation"],
            "antialias": True,
        },
    }


def _transformers(config, processor, folder):
    where = _where(folder, CONFIG_FILE)
    model_type = _field(config, "model_type", str, where)
    labels = config
    if model_type in _TWO_TOWER:
        config = _field(config, "vision_config", dict, where, default={})
        model_type = _TWO_TOWER[model_type]
    elif model_type in ("clip", "siglip"):
        model_type = f"{model_type}_vision_model"
    if model_type not in TRANSFORMERS_DEFAULTS:
        raise ValueError(
            f"{where}: keras_vit reads these transformers model types: "
            f"{', '.join(sorted({*TRANSFORMERS_DEFAULTS, *_TWO_TOWER}))}. "
            f"Received: model_type={model_type!r}"
        )
    args = {**TRANSFORMERS_DEFAULTS[model_type], **config}
    arguments = _transformers_arguments(model_type, args, where)
    checked = _checked_processor(
        {**_PROCESSOR_DEFAULTS[model_type], **processor},
        _where(folder, PREPROCESSOR_FILE),
        args.get("num_channels", 3),
    )
    arguments.update(_processor_settings(checked, args["image_size"]))
    if not {"size", "crop_size"} & set(processor):
        # The class's sizes are for its default resolution: the config's
        # is the model's (its crop fraction stays the class's).
        arguments["image_size"] = args["image_size"]
    names = _class_names(labels.get("id2label"), where)
    if names is not None:
        arguments["class_names"] = names
    resampling = (
        dict(_TIMM_RESAMPLING)
        if model_type == "dinov3_vit"
        else transformers_resampling(model_type)
    )
    return HubConfig("transformers", model_type, arguments, resampling)


def _transformers_arguments(model_type, args, where):
    """A transformers vision config's fields -> `ViT` arguments."""
    activation = _TRANSFORMERS_ACTIVATION.get(
        _field(args, "hidden_act", str, where)
    )
    if activation is None:
        raise ValueError(
            f"{where}: keras_vit has no activation {args['hidden_act']!r}; "
            f"it has {sorted(_TRANSFORMERS_ACTIVATION)}. Received: "
            f"hidden_act={args['hidden_act']!r}"
        )
    if args.get("use_gated_mlp") and model_type != "dinov3_vit":
        raise ValueError(
            f"{where}: keras_vit reads this model's plain MLP only. "
            f"Received: use_gated_mlp={args['use_gated_mlp']!r}"
        )
    width = _field(args, "hidden_size", int, where)
    mlp = (
        _mlp_dim(width, _ratio(args, "mlp_ratio", where, default=4), where)
        if args.get("intermediate_size") is None
        else _field(args, "intermediate_size", int, where)
    )
    if args.get("use_swiglu_ffn"):  # dinov2-giant: `Dinov2SwiGLUFFN`
        # transformers 5.25 models/dinov2/modeling_dinov2.py: 2/3 of
        # int(D * mlp_ratio), rounded up to a multiple of 8; SiLU gate.
        mlp = (int(int(width * args.get("mlp_ratio", 4)) * 2 / 3) + 7) // 8 * 8
        activation = "silu"
    arguments = {
        "patch_size": _field(args, "patch_size", int, where),
        "hidden_dim": width,
        "num_layers": _field(args, "num_hidden_layers", int, where),
        "num_heads": _field(args, "num_attention_heads", int, where),
        "mlp_dim": int(mlp),
        "activation": activation,
        "layer_norm_epsilon": float(_ratio(args, "layer_norm_eps", where)),
    }
    if args.get("use_swiglu_ffn") or args.get("use_gated_mlp"):
        # DINOv3ViTGatedMLP: `intermediate_size` wide, `hidden_act` gate.
        arguments["use_gated_mlp"] = True
    if model_type == "deit":  # its reader reads distilled DeiTs only
        arguments["distillation"] = True
    if model_type.startswith("dinov2"):
        arguments["layer_scale_init"] = 1e-5
        arguments["include_top"] = False
    if model_type == "dinov2_with_registers":
        arguments["num_register_tokens"] = args["num_register_tokens"]
        arguments["position_embedding_tokens"] = "patches"
    if model_type == "clip_vision_model":
        arguments.update(norm_pre=True, patch_bias=False)
    if model_type == "siglip_vision_model":
        arguments["class_token"] = False
        arguments["pooling"] = "map" if args["vision_use_head"] else "gap"
    if model_type == "dinov3_vit":
        arguments.update(_dinov3_arguments(args, where))
    return arguments


def _dinov3_arguments(args, where):
    """`DINOv3ViTConfig`'s own fields: RoPE, LayerScale, registers, and
    the query / key / value biases as one `qkv_bias` (a bias left out of
    the file is read as zeros)."""
    for key in ("proj_bias", "mlp_bias"):
        if not args[key]:
            raise ValueError(
                f"{where}: keras_vit's attention output and MLP have "
                f"biases. Received: {key}={args[key]!r}"
            )
    return {
        "position_embedding": "rope",
        "rope_theta": args["rope_theta"],
        "qkv_bias": any(args[f"{part}_bias"] for part in _QKV),
        "layer_scale_init": args["layerscale_value"],
        "num_register_tokens": args["num_register_tokens"],
        "include_top": False,
        # Train-time only (DINOv3ViTRopePositionEmbedding in training).
        "rope_shift_coords": args["pos_embed_shift"],
        "rope_jitter_coords": args["pos_embed_jitter"],
        "rope_rescale_coords": args["pos_embed_rescale"],
    }


#: The sizes of an image processor, and what their dicts may hold.
_PROCESSOR_SIZES = ("size", "crop_size")
_SIZE_KEYS = ("height", "width", "shortest_edge", "longest_edge")


def _checked_processor(processor, where, channels):
    """`preprocessor_config.json`'s fields, checked and in one form: the
    sizes as dicts (a `[height, width]` list, as transformers'
    `get_size_dict` reads it), the mean and std as tuples (`do_normalize:
    false` as mean 0, std 1); refused by name where keras_vit would feed
    the model other values than the processor: a non-square size, pixels
    not rescaled by 1/255."""
    processor = dict(processor)
    for key in _PROCESSOR_SIZES:
        value = processor.get(key)
        if isinstance(value, list) and len(value) == 2:
            value = dict(zip(("height", "width"), value))
        elif value is not None and not isinstance(value, dict):
            _field(processor, key, int, where)
            # Older processors' `size: 224`: the shorter side where a
            # crop follows, else the height and width.
            crop_follows = key == "size" and processor.get("do_center_crop")
            value = (
                {"shortest_edge": value}
                if crop_follows
                else {"height": value, "width": value}
            )
        if value is not None:
            _check_size(value, key, where)
            processor[key] = value
    if processor.get("do_normalize", True) is False:
        processor["image_mean"], processor["image_std"] = 0.0, 1.0
    for key in ("image_mean", "image_std"):
        processor[key] = _per_channel(processor[key], key, where, channels)
    rescale = _ratio(processor, "rescale_factor", where, default=1 / 255)
    if (
        processor.get("do_rescale", True) is False
        or abs(255 * rescale - 1) > 1e-6
    ):
        raise ValueError(
            f"{where}: keras_vit feeds pixels rescaled to [0, 1] (by 1/255). "
            f"Received: do_rescale={processor.get('do_rescale')!r}, "
            f"rescale_factor={rescale!r}"
        )
    resample = processor.get("resample")
    if resample not in tuple(_PIL_RESAMPLE):
        raise ValueError(
            f"{where}: keras_vit resizes images by bilinear or bicubic "
            f"interpolation only (PIL's 2 and 3). Received: "
            f"resample={resample!r}"
        )
    return processor


def _check_size(size, key, where):
    """A processor's `size` or `crop_size` dict: positive integers, a
    height and width or a shortest edge, square."""
    for name, value in size.items():
        if name not in _SIZE_KEYS:
            raise ValueError(
                f"{where}: `{key}` holds {', '.join(_SIZE_KEYS)}. "
                f"Received: {key}={size!r}"
            )
        _field(size, name, int, where)
        if value <= 0:
            raise ValueError(
                f"{where}: `{key}['{name}']` must be positive. Received: "
                f"{key}={size!r}"
            )
    has_pair = "height" in size and "width" in size
    if not has_pair and ("shortest_edge" not in size or key == "crop_size"):
        raise ValueError(
            f"{where}: `{key}` must give a height and width or a shortest "
            f"edge. Received: {key}={size!r}"
        )
    if has_pair and size["height"] != size["width"]:
        raise ValueError(
            f"{where}: keras_vit reads square processor sizes only. "
            f"Received: {key}={size!r}"
        )


def _processor_settings(processor, config_size):
    """A processor's fields (`_checked_processor`'s, over its class
    defaults) -> `image_size` (the size the processor feeds: its crop,
    else its resize), `normalization`, `image_resize`."""
    size = processor.get("size") or {}
    crop = processor.get("crop_size") or {}
    edge = size.get("shortest_edge") or min(
        size.get("height", 0), size.get("width", 0)
    )
    if processor.get("do_center_crop") and crop and edge:
        # (A resize to height x width then a crop, as DeiTImageProcessor
        # does, is read as the crop of the shorter side: the same for a
        # square image.)
        image_size = crop.get("height", config_size)
        crop_pct = image_size / edge
    else:
        image_size, crop_pct = size.get("height", config_size), None
    return {
        "image_size": image_size,
        "normalization": {
            "mean": processor["image_mean"],
            "std": processor["image_std"],
        },
        "image_resize": {
            "crop_pct": crop_pct,
            "interpolation": _PIL_RESAMPLE[processor["resample"]],
            "antialias": True,
        },
    }


def _class_names(id2label, where):
    """`id2label` in index order, or `None` for none or transformers'
    placeholders (`LABEL_0`, `LABEL_1`, ...)."""
    if not id2label:
        return None
    if not isinstance(id2label, dict):
        raise ValueError(
            f"{where}: `id2label` must map indices to names. Received: "
            f"id2label={id2label!r}"
        )
    try:
        indices = sorted(id2label, key=int)
    except ValueError:
        indices = None
    if indices is None or [int(i) for i in indices] != list(
        range(len(indices))
    ):
        raise ValueError(
            f"{where}: `id2label`'s keys must be the indices 0, 1, ... "
            f"of the classes. Received: {sorted(id2label)[:10]}"
        )
    names = [id2label[key] for key in indices]
    if names == [f"LABEL_{i}" for i in range(len(names))]:
        return None
    return names
