"""Make the tiny reference checkpoints of the modern ViT families.

DEVELOPER-SIDE ONLY, like make_checkpoints.py (whose helpers it imports):
it needs torch and timm, which keras_vit does not depend on; it is not run
by the test suite or by CI. The tests (tests/weights/test_family_parity.py)
only read the small files it writes, which are committed. Run it from the
repository root (no network access is needed; no weights are downloaded):

    /path/to/venv/bin/python tests/golden/make_family_checkpoints.py

Last run with: torch 2.14.1+cu130 (CPU), timm 1.0.31, safetensors 0.8.0,
numpy 2.4.6, Python 3.11.7. Deterministic (fixed seeds, one CPU thread);
it writes next to itself.

Every model is timm's own class with the options of the family's
published models (timm/models/vision_transformer.py and deit.py), made
tiny: 16x16 images, patch 4 (a 4x4 grid), width 16, depth 2, 2 heads,
MLP 32 (mlp_ratio 2), qkv bias, LayerNorm eps 1e-6 (CLIP: 1e-5):

* ``deit_distilled``: ``VisionTransformerDistilled`` (``dist_token``,
  ``head_dist``; eval: the two heads' mean), 5 classes.
* ``deit3``: ``no_embed_class=True`` (pos_embed covers the 16 patches
  only), ``init_values=1e-6`` (LayerScale), 5 classes.
* ``dinov2``: ``init_values=1e-5``, pos_embed covers the class token and
  the grid (17), no head (``num_classes=0``: features).
* ``dinov2_reg``: as dinov2 with ``reg_tokens=4, no_embed_class=True``
  (pos_embed covers the 16 patches only).
* ``clip``: ``pre_norm=True`` (``norm_pre``; patch embedding without
  bias), LayerNorm eps 1e-5, ``act_layer='quick_gelu'``, an 8-wide head
  (CLIP's projection).
* ``siglip``: ``class_token=False, global_pool='map'`` (the MAP head:
  ``attn_pool.*``), ``act_layer='gelu_tanh'`` (big_vision trained SigLIP
  with flax's ``nn.gelu``, tanh-approximated by default; timm's later
  SigLIP models set it, its ``vit_base_patch16_siglip_224`` omits it),
  no head (features).
* ``qknorm_gap``: ``qk_norm=True``, ``reg_tokens=2``,
  ``global_pool='avg'`` (so ``fc_norm`` and no final ``norm``), 5
  classes: the options that no family above has.
* ``map_reg``: ``class_token=False, reg_tokens=4, global_pool='map'``,
  5 classes (``vit_so150m_patch16_reg4_map_256``'s options): the MAP
  head leaves the registers out (``pool_include_prefix=False``).
* ``map_cls``: a class token and ``global_pool='map'``, 5 classes: the
  MAP head leaves the class token out.
* ``cls_avg``: a class token kept with ``global_pool='avg',
  fc_norm=False`` (the final ``norm`` before the mean of the patches), 5
  classes: a file that reads as class-token pooling; keras_vit needs
  ``pooling='gap'``.

Every parameter is moved away from its initialisation (as
make_checkpoints.py: + N(0, 0.1), N(0, 0.2) for norms), eval mode. Model
input ``images / 127.5 - 1`` in NCHW; outputs float32.

Files, for each NAME:

* ``family_NAME.timm.safetensors``: ``model.state_dict()``.
* ``family_NAME.expected.npz`` (compressed): ``images`` (2, 16, 16, 3)
  in [0, 255]; ``logits`` = ``model(x)`` (the features where there is no
  head); ``images_24`` (2, 24, 24, 3) and ``logits_24``: the same weights
  in the same class built at 24 px, its pos_embed resampled from the
  checkpoint's by timm's ``resample_abs_pos_embed`` to the 6x6 grid with
  ``interpolation='bilinear', antialias=False`` (half-pixel bilinear, as
  keras_vit's ``interpolation="bilinear"``), the prefix entries (where
  pos_embed has them) kept.
* ``family_manifest.json``: every file, its configuration and shapes.
"""

import json
import sys
from functools import partial
from pathlib import Path

import numpy as np
import safetensors
import timm
import torch
from safetensors.torch import save_file
from timm.layers import resample_abs_pos_embed
from timm.models.deit import VisionTransformerDistilled
from timm.models.vision_transformer import VisionTransformer

HERE = Path(__file__).resolve().parent
VERSIONS = {
    "python": sys.version.split()[0],
    "torch": torch.__version__,
    "timm": timm.__version__,
    "safetensors": safetensors.__version__,
    "numpy": np.__version__,
}


class base:  # noqa: N801  make_checkpoints.py's helpers (it needs transformers)
    @staticmethod
    def check(ok, message):
        if not ok:  # unlike assert, also under python -O
            raise SystemExit(f"make_family_checkpoints.py: FAILED: {message}")

    @staticmethod
    def max_diff(a, b):
        return float(np.max(np.abs(np.float64(a) - np.float64(b))))

    @staticmethod
    def to_numpy(t):
        return t.detach().cpu().numpy().astype(np.float32)

    @staticmethod
    def shapes(arrays):
        return {k: list(np.shape(v)) for k, v in arrays.items()}

    @staticmethod
    def perturb_(model, seed):
        """Every parameter moved away from its initialisation, seeded."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                std = 0.2 if "norm" in name else 0.1
                p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))

    @staticmethod
    def write_npz(filename, arrays, compressed=False):
        arrays = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
        with open(HERE / filename, "wb") as f:  # exact name, no added suffix
            (np.savez_compressed if compressed else np.savez)(f, **arrays)
        return arrays


TINY = dict(patch_size=4, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2)
FAMILIES = {
    "deit_distilled": (VisionTransformerDistilled, dict(num_classes=5)),
    "deit3": (
        VisionTransformer,
        dict(num_classes=5, no_embed_class=True, init_values=1e-6),
    ),
    "dinov2": (VisionTransformer, dict(num_classes=0, init_values=1e-5)),
    "dinov2_reg": (
        VisionTransformer,
        dict(
            num_classes=0, init_values=1e-5, reg_tokens=4, no_embed_class=True
        ),
    ),
    "clip": (
        VisionTransformer,
        dict(
            num_classes=8,
            pre_norm=True,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-5),
            act_layer="quick_gelu",
        ),
    ),
    "siglip": (
        VisionTransformer,
        dict(
            num_classes=0,
            class_token=False,
            global_pool="map",
            act_layer="gelu_tanh",
        ),
    ),
    "qknorm_gap": (
        VisionTransformer,
        dict(num_classes=5, qk_norm=True, reg_tokens=2, global_pool="avg"),
    ),
    "map_reg": (
        VisionTransformer,
        dict(num_classes=5, class_token=False, reg_tokens=4, global_pool="map"),
    ),
    "map_cls": (VisionTransformer, dict(num_classes=5, global_pool="map")),
    "cls_avg": (
        VisionTransformer,
        dict(num_classes=5, global_pool="avg", fc_norm=False),
    ),
}
check = base.check


def new_model(name, img_size, seed=0):
    cls, options = FAMILIES[name]
    torch.manual_seed(seed)
    return cls(img_size=img_size, **TINY, **options).eval()


def check_structure(name, model):
    """The family's traits, as the published models have them."""
    sd = model.state_dict()
    traits = {
        "deit_distilled": lambda: (
            "dist_token" in sd and "head_dist.weight" in sd
        ),
        "deit3": lambda: (
            model.pos_embed.shape[1] == 16 and "blocks.0.ls1.gamma" in sd
        ),
        "dinov2": lambda: (
            model.pos_embed.shape[1] == 17 and "blocks.0.ls2.gamma" in sd
        ),
        "dinov2_reg": lambda: (
            model.pos_embed.shape[1] == 16
            and sd["reg_token"].shape == (1, 4, 16)
        ),
        "clip": lambda: (
            "norm_pre.weight" in sd
            and "patch_embed.proj.bias" not in sd
            and model.norm.eps == 1e-5
        ),
        "siglip": lambda: "attn_pool.latent" in sd and "cls_token" not in sd,
        "qknorm_gap": lambda: (
            "fc_norm.weight" in sd
            and "norm.weight" not in sd
            and "blocks.0.attn.q_norm.weight" in sd
        ),
        "map_reg": lambda: (
            "attn_pool.latent" in sd
            and "cls_token" not in sd
            and sd["reg_token"].shape == (1, 4, 16)
            and not model.pool_include_prefix
        ),
        "map_cls": lambda: (
            "attn_pool.latent" in sd
            and "cls_token" in sd
            and not model.pool_include_prefix
        ),
        "cls_avg": lambda: (
            "cls_token" in sd
            and "norm.weight" in sd
            and "fc_norm.weight" not in sd
        ),
    }
    check(traits[name](), f"{name}: not the family's structure")
    x = torch.linspace(-4, 4, 11)
    want = {  # every other family: the exact GELU
        "clip": x * torch.sigmoid(1.702 * x),
        "siglip": torch.nn.functional.gelu(x, approximate="tanh"),
    }.get(name, torch.nn.functional.gelu(x))
    acts = [model.blocks[0].mlp.act]
    if getattr(model, "attn_pool", None) is not None:  # the MAP head's MLP
        acts.append(model.attn_pool.mlp.act)
    for act in acts:
        check(base.max_diff(act(x), want) < 1e-7, f"{name}: activation")


def images(size, seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(2, size, size, 3)).astype(np.float32)
    x = torch.from_numpy(pixels / 127.5 - 1).permute(0, 3, 1, 2).contiguous()
    return pixels, x


@torch.no_grad()
def at_24(name, model):
    """The same weights at 24 px, pos_embed resampled bilinearly."""
    big = new_model(name, 24)
    state = dict(model.state_dict())
    prefix = 0 if model.no_embed_class else model.num_prefix_tokens
    state["pos_embed"] = resample_abs_pos_embed(
        state["pos_embed"],
        new_size=(6, 6),
        old_size=(4, 4),
        num_prefix_tokens=prefix,
        interpolation="bilinear",
        antialias=False,
    )
    big.load_state_dict(state)
    return big.eval()


@torch.no_grad()
def make(name, seed, manifest):
    model = new_model(name, 16)
    check_structure(name, model)
    base.perturb_(model, seed)
    pixels, x = images(16, seed)
    logits = model(x)
    pixels_24, x_24 = images(24, seed + 100)
    logits_24 = at_24(name, model)(x_24)
    check(float(logits.std()) > 0.1, f"{name}: outputs too flat")
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    fname = f"family_{name}.timm.safetensors"
    save_file(state, str(HERE / fname))
    cls, options = FAMILIES[name]
    config = dict(
        class_name=f"{cls.__module__}.{cls.__name__}",
        img_size=16,
        **TINY,
        **{k: str(v) if callable(v) else v for k, v in options.items()},
    )
    manifest[fname] = dict(
        description="timm model.state_dict() (safetensors.torch.save_file)",
        config=config,
        arrays=base.shapes(state),
    )
    fname = f"family_{name}.expected.npz"
    arrays = base.write_npz(
        fname,
        dict(
            images=pixels,
            logits=base.to_numpy(logits),
            images_24=pixels_24,
            logits_24=base.to_numpy(logits_24),
        ),
        True,
    )
    manifest[fname] = dict(
        description="inputs in [0, 255] NHWC (model input images / 127.5 - "
        "1, NCHW) and timm's model(x), at 16 px and at 24 px (pos_embed "
        "resampled: bilinear, antialias=False)",
        arrays=base.shapes(arrays),
    )


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    manifest = {}
    for seed, name in enumerate(FAMILIES, start=31):
        print(name)
        make(name, seed, manifest)
    out = {
        "about": "Tiny timm checkpoints of the modern ViT families made by "
        "make_family_checkpoints.py (developer-side, needs torch/timm).",
        "versions": VERSIONS,
        "files": dict(sorted(manifest.items())),
    }
    (HERE / "family_manifest.json").write_text(json.dumps(out, indent=1) + "\n")
    total = sum((HERE / f).stat().st_size for f in manifest)
    print(f"{total:>8}  total")
    check(total < 400_000, "family golden files are too large")


if __name__ == "__main__":
    main()
