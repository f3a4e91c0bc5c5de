"""Make the tiny reference checkpoints of Perception Encoder core and
Naver's RoPE-ViT (timm's `Eva` with `"cat"` and `"mixed"` RoPE).

DEVELOPER-SIDE ONLY, like make_dinov3_checkpoints.py: it needs torch and
timm, which keras_vit does not depend on; the test suite
(tests/weights/test_rope_family_parity.py) reads only the small files it
writes, which are committed. Run from the repository root (no network;
nothing is downloaded):

    /path/to/venv/bin/python tests/golden/make_rope_family_checkpoints.py
    /path/to/venv/bin/python tests/golden/make_rope_family_checkpoints.py \
        --full DIR        # the full-size architectures, into DIR

Last run with torch 2.14.1 (CPU), timm 1.0.31. Deterministic (fixed
seeds, one CPU thread).

Each model is timm's own architecture function (`vit_pe_core_tiny_patch16_384`,
`vit_small_patch16_rope_224`, `..._rope_ape_224`, `..._rope_mixed_224`,
`..._rope_mixed_ape_224`) with every parameter moved away from its
initialisation (+ N(0, 0.1), N(0, 0.2) for norms), in eval mode, built
with `dynamic_img_size=True` so that one model gives the outputs at its
own size and at another (timm then computes the rotary table of each
grid, with Perception Encoder's rescale onto its `ref_feat_shape`, and
resamples the absolute embeddings bicubically, antialiased).
Tiny: patch 4, width 32, depth 2, 2 heads (head width 16), MLP 64, 16 px
8 classes (PE: `ref_feat_shape` 4x4, its tiny pretraining grid, and
MLP 128, as its attention pooling's MLP: PE's ratio 4 for both).

Files, for each NAME (`pe`, `naver`, `naver_ape`, `naver_mixed`,
`naver_mixed_ape`):

* ``rope_NAME.safetensors``: ``model.state_dict()``.
* ``rope_NAME.expected.npz``: ``images`` (2, 16, 16, 3) in [0, 255] (the
  model input is ``(images / 255 - mean) / std``, ImageNet's);
  ``tokens`` (``forward_features``), ``logits`` (``forward``); and the
  same at a non-square size, ``images_wide`` (2, 12, 20, 3),
  ``tokens_wide``, ``logits_wide``.

With ``--full DIR`` the full-size architectures (PE T/S at 384 px and
256x320, PE B at 224 px and 160x288, Naver's S/16 at 224 px and 160x288)
are written there instead, batch 1, with the outputs in float64 too
(``tokens64``, ``logits64``, ...: the model cast with ``.double()``, its
rotary table still computed in float32 as timm does), for
`tests/golden/check_rope_family_full.py` (not shipped).
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import timm
import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
TINY = dict(patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2)

#: name: (timm architecture, tiny extra arguments)
MODELS = {
    "pe": (
        "vit_pe_core_tiny_patch16_384",
        {"ref_feat_shape": (4, 4), "mlp_ratio": 4},
    ),
    "naver": ("vit_small_patch16_rope_224", {}),
    "naver_ape": ("vit_small_patch16_rope_ape_224", {}),
    "naver_mixed": ("vit_small_patch16_rope_mixed_224", {}),
    "naver_mixed_ape": ("vit_small_patch16_rope_mixed_ape_224", {}),
}

#: name: (architecture, own size, other size) of the full-size check.
FULL = {
    "pe_t": ("vit_pe_core_tiny_patch16_384", 384, (256, 320)),
    "pe_s": ("vit_pe_core_small_patch16_384", 384, (256, 320)),
    "pe_b": ("vit_pe_core_base_patch16_224", 224, (160, 288)),
    "naver_s": ("vit_small_patch16_rope_224", 224, (160, 288)),
    "naver_s_ape": ("vit_small_patch16_rope_ape_224", 224, (160, 288)),
    "naver_s_mixed": ("vit_small_patch16_rope_mixed_224", 224, (160, 288)),
    "naver_s_mixed_ape": (
        "vit_small_patch16_rope_mixed_ape_224",
        224,
        (160, 288),
    ),
}


def check(ok, message):
    if not ok:  # unlike assert, also under python -O
        raise SystemExit(f"make_rope_family_checkpoints.py: FAILED: {message}")


def perturb_(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if "norm" in name else 0.1
            p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))


def images(seed, height, width, batch):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 255, (batch, height, width, 3)).astype(np.float32)


def to_input(x, dtype=np.float32):
    x = (x.astype(dtype) / 255 - MEAN.astype(dtype)) / STD.astype(dtype)
    return torch.from_numpy(x.transpose(0, 3, 1, 2))


def outputs(model, x, dtype=np.float32):
    with torch.no_grad():
        tokens = model.forward_features(to_input(x, dtype))
        logits = model.forward_head(tokens)
    return tokens.numpy(), logits.numpy()


def write(directory, name, arch, size, wide, extra, batch):
    torch.manual_seed(0)
    model = timm.create_model(
        arch, pretrained=False, img_size=size, dynamic_img_size=True, **extra
    )
    perturb_(model, 1)
    model.eval()
    arrays = {"images": images(3, size, size, batch)}
    arrays["images_wide"] = images(4, *wide, batch)
    arrays["tokens"], arrays["logits"] = outputs(model, arrays["images"])
    arrays["tokens_wide"], arrays["logits_wide"] = outputs(
        model, arrays["images_wide"]
    )
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if batch == 1:  # full size: float64 too (timm's rotary table and
        # resampling stay float32), where float32's rounding is large
        model.double()
        for suffix in ("", "_wide"):
            arrays["tokens64" + suffix], arrays["logits64" + suffix] = outputs(
                model, arrays["images" + suffix], np.float64
            )
    check(
        not any(k.startswith("rope.") and k != "rope.freqs" for k in state),
        f"{name}: no rotary table in the file",
    )
    save_file(state, str(directory / f"rope_{name}.safetensors"))
    np.savez_compressed(directory / f"rope_{name}.expected.npz", **arrays)
    print(name, {k: v.shape for k, v in arrays.items()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.full is None:
        for name, (arch, extra) in MODELS.items():
            extra = {**TINY, "num_classes": 8, **extra}
            write(HERE, name, arch, 16, (12, 20), extra, batch=2)
    else:
        for name, (arch, size, wide) in FULL.items():
            write(args.full, name, arch, size, wide, {}, batch=1)
    print("versions:", sys.version.split()[0], torch.__version__)


if __name__ == "__main__":
    main()
