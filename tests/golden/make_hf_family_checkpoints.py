"""Make the tiny Hugging Face transformers checkpoints of DINOv2 (with and
without registers), CLIP's and SigLIP's image towers.

DEVELOPER-SIDE ONLY, like make_family_checkpoints.py (the timm layouts of
the same families): it needs torch and transformers, which keras_vit does
not depend on; it is not run by the test suite or by CI. The tests
(tests/weights/test_hf_family_parity.py) only read the small files it
writes, which are committed. Run it from the repository root (no network
access is needed; no weights are downloaded):

    /path/to/venv/bin/python tests/golden/make_hf_family_checkpoints.py

Last run with: torch 2.14.1+cu130 (CPU), transformers 5.24.0, safetensors
0.8.0, numpy 2.4.6, Python 3.11.7. Deterministic (fixed seeds, one CPU
thread, eager attention); it writes next to itself.

Every model is transformers' own class with its config's defaults for the
family (activation, LayerNorm epsilon), made tiny: 16x16 images, patch 4
(a 4x4 grid), width 16, 2 layers, 2 heads, MLP 32:

* ``dinov2``: ``Dinov2Model``.
* ``dinov2_reg``: ``Dinov2WithRegistersModel``, 4 registers.
* ``clip``: ``CLIPVisionModel`` (quick GELU, eps 1e-5).
* ``clip_proj``: ``CLIPVisionModelWithProjection``, ``projection_dim=8``
  (its file is prefixed ``vision_model.``, as a full ``CLIPModel``'s).
* ``siglip``: ``SiglipVisionModel`` (gelu_pytorch_tanh, the MAP head).
* ``siglip_cls``: ``SiglipForImageClassification``, 5 classes: its
  ``classifier`` on the mean of ``last_hidden_state`` (the MAP head's
  weights are in the file, unused).

Every parameter is moved away from its initialisation (+ N(0, 0.1),
N(0, 0.2) for norms), eval mode. Model input ``images / 127.5 - 1`` in
NCHW; outputs float32.

Files, for each NAME:

* ``family_NAME.hf.safetensors``: the ``model.safetensors`` that
  ``model.save_pretrained`` writes, unchanged.
* ``family_NAME.hf.expected.npz`` (compressed): ``images`` (2, 16, 16, 3)
  in [0, 255] and the model's ``last_hidden_state``, ``pooler_output``
  (and ``image_embeds`` for clip_proj) on them; ``images_24`` (2, 24, 24,
  3) and the same outputs ``*_24`` of the same class built at 24 px, its
  position embeddings resampled from the checkpoint's to the 6x6 grid with
  ``torch.nn.functional.interpolate(mode='bilinear', align_corners=False,
  antialias=False)`` (as keras_vit's ``interpolation="bilinear"``), the
  class token's entry kept; and ``*_interpolated_24``: the 16 px model's
  own outputs on ``images_24`` with ``interpolate_pos_encoding=True``
  (DINOv2 always interpolates): transformers resamples bicubically with
  PyTorch's cubic (a = -0.75), which keras_vit's ``"bicubic"``
  (TensorFlow's, a = -0.5) is not.
* ``hf_family_manifest.json``: every file, its configuration and shapes.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
VERSIONS = {
    "python": sys.version.split()[0],
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "safetensors": safetensors.__version__,
    "numpy": np.__version__,
}
TINY = dict(
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    patch_size=4,
)
T = transformers
FAMILIES = {
    "dinov2": (T.Dinov2Model, T.Dinov2Config, dict(mlp_ratio=2)),
    "dinov2_reg": (
        T.Dinov2WithRegistersModel,
        T.Dinov2WithRegistersConfig,
        dict(mlp_ratio=2, num_register_tokens=4),
    ),
    "clip": (T.CLIPVisionModel, T.CLIPVisionConfig, {}),
    "clip_proj": (
        T.CLIPVisionModelWithProjection,
        T.CLIPVisionConfig,
        dict(projection_dim=8),
    ),
    "siglip": (T.SiglipVisionModel, T.SiglipVisionConfig, {}),
    "siglip_cls": (T.SiglipForImageClassification, T.SiglipConfig, {}),
}
#: `SiglipForImageClassification`'s `SiglipConfig`: its text tower (not in
#: the file) tiny too, and 5 classes.
TEXT = dict(
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
)
#: The position embeddings' name and whether a class token's entry leads.
POSEMB = {
    "dinov2": ("embeddings.position_embeddings", True),
    "dinov2_reg": ("embeddings.position_embeddings", True),
    "clip": ("embeddings.position_embedding.weight", True),
    "clip_proj": ("vision_model.embeddings.position_embedding.weight", True),
    "siglip": ("embeddings.position_embedding.weight", False),
    "siglip_cls": ("vision_model.embeddings.position_embedding.weight", False),
}


def check(ok, message):
    if not ok:  # unlike assert, also under python -O
        raise SystemExit(f"make_hf_family_checkpoints.py: FAILED: {message}")


def to_numpy(t):
    return t.detach().cpu().numpy().astype(np.float32)


def new_model(name, image_size, seed=0):
    cls, config_cls, options = FAMILIES[name]
    torch.manual_seed(seed)
    if config_cls is T.SiglipConfig:
        vision = dict(image_size=image_size, **TINY)
        config = config_cls(
            vision_config=vision, text_config=TEXT, num_labels=5
        )
        config.vision_config._attn_implementation = "eager"
    else:
        config = config_cls(image_size=image_size, **TINY, **options)
    config._attn_implementation = "eager"
    return cls(config).eval()


def perturb_(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if "norm" in name else 0.1
            p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))


def images(size, seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(2, size, size, 3)).astype(np.float32)
    x = torch.from_numpy(pixels / 127.5 - 1).permute(0, 3, 1, 2).contiguous()
    return pixels, x


def resampled(table, has_class):
    """`table` ((1, ) T, D) from the 4x4 to the 6x6 grid, bilinearly."""
    shape = table.shape
    table = table.reshape(-1, shape[-1])
    head, grid = (table[:1], table[1:]) if has_class else (table[:0], table)
    grid = grid.reshape(1, 4, 4, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(
        grid, size=(6, 6), mode="bilinear", align_corners=False, antialias=False
    )
    grid = grid.permute(0, 2, 3, 1).reshape(36, -1)
    return torch.cat([head, grid]).reshape(*shape[:-2], -1, shape[-1])


OUTPUTS = ("last_hidden_state", "pooler_output", "image_embeds", "logits")


def outputs(model, x, suffix="", **kwargs):
    result = model(pixel_values=x, **kwargs)
    return {
        f"{k}{suffix}": to_numpy(getattr(result, k))
        for k in OUTPUTS
        if getattr(result, k, None) is not None
    }


@torch.no_grad()
def at_24(name, model):
    big = new_model(name, 24)
    state = dict(model.state_dict())
    key, has_class = POSEMB[name]
    key = key.removeprefix("vision_model.") if key not in state else key
    state[key] = resampled(state[key], has_class)
    big.load_state_dict(state)
    return big.eval()


@torch.no_grad()
def make(name, seed, manifest):
    model = new_model(name, 16)
    perturb_(model, seed)
    pixels, x = images(16, seed)
    pixels_24, x_24 = images(24, seed + 100)
    arrays = {"images": pixels, "images_24": pixels_24}
    arrays.update(outputs(model, x))
    arrays.update(outputs(at_24(name, model), x_24, "_24"))
    dinov2 = name.startswith("dinov2")  # it always interpolates
    interpolate = {} if dinov2 else {"interpolate_pos_encoding": True}
    arrays.update(outputs(model, x_24, "_interpolated_24", **interpolate))
    pooled = [arrays[k] for k in OUTPUTS[1:] if k in arrays][0]
    check(float(pooled.std()) > 0.1, f"{name}: outputs too flat")
    fname = f"family_{name}.hf.safetensors"
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        shutil.copyfile(Path(tmp) / "model.safetensors", HERE / fname)
    with safetensors.safe_open(HERE / fname, "np") as f:
        shapes = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    cls, _, options = FAMILIES[name]
    config = model.config
    manifest[fname] = dict(
        description="transformers save_pretrained's model.safetensors",
        config=dict(
            class_name=f"{cls.__module__}.{cls.__name__}",
            image_size=16,
            **TINY,
            **options,
            hidden_act=getattr(config, "vision_config", config).hidden_act,
            layer_norm_eps=getattr(
                config, "vision_config", config
            ).layer_norm_eps,
        ),
        arrays=dict(sorted(shapes.items())),
    )
    fname = f"family_{name}.hf.expected.npz"
    arrays = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
    with open(HERE / fname, "wb") as f:
        np.savez_compressed(f, **arrays)
    manifest[fname] = dict(
        description="inputs in [0, 255] NHWC (model input images / 127.5 - "
        "1, NCHW) and the model's outputs at 16 px, at 24 px (built at 24 "
        "px, position embeddings resampled bilinearly: *_24) and with "
        "transformers' own bicubic interpolate_pos_encoding "
        "(*_interpolated_24)",
        arrays={k: list(v.shape) for k, v in arrays.items()},
    )


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    manifest = {}
    for seed, name in enumerate(FAMILIES, start=61):
        print(name)
        make(name, seed, manifest)
    out = {
        "about": "Tiny Hugging Face transformers checkpoints of the modern "
        "ViT families made by make_hf_family_checkpoints.py (developer-side, "
        "needs torch/transformers).",
        "versions": VERSIONS,
        "files": dict(sorted(manifest.items())),
    }
    path = HERE / "hf_family_manifest.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    total = sum((HERE / f).stat().st_size for f in manifest)
    print(f"{total:>8}  total")
    check(total < 300_000, "family golden files are too large")


if __name__ == "__main__":
    main()
