"""Make the references of position embeddings resampled onto a smaller grid.

DEVELOPER-SIDE ONLY, like make_family_checkpoints.py (whose models it
imports): it needs torch and timm, which keras_vit does not depend on; it
is not run by the test suite or by CI. The tests
(tests/weights/test_resample_on_load.py) only read the small files it
writes, which are committed. Run it from the repository root (no network
access is needed; no weights are downloaded):

    /path/to/venv/bin/python tests/golden/make_resample_references.py

Last run with: torch 2.14.1+cu130 (CPU), timm 1.0.31, safetensors 0.8.0,
numpy 2.4.6, Python 3.11.7. Deterministic (fixed seeds, one CPU thread);
it writes next to itself.

timm's loaders, and DINOv2 used below its 518 px, resample position
embeddings with `timm.layers.resample_abs_pos_embed`'s defaults: bicubic
with antialiasing (`torch.nn.functional.interpolate(mode="bicubic",
antialias=True)`, as transformers' `Dinov2WithRegistersModel` too). Onto
a smaller grid the antialiasing changes them (onto a larger one it does
nothing), so these references shrink the grid:

* ``resample.expected.npz`` (compressed), for each CASE below:
  ``CASE/posemb`` the input (1, prefix + rows * cols, 8), normal random,
  and ``CASE/timm`` timm's ``resample_abs_pos_embed(posemb, new_size,
  old_size=..., num_prefix_tokens=prefix)`` with its defaults. CASES:
  ``8x8_to_5x5`` (a class token), ``8x8_to_3x6`` (a non-square target),
  ``6x8_to_4x3`` (a non-square source), ``patches_8x8_to_5x5`` (no prefix
  entry, as DeiT III and DINOv2 with registers), ``4x4_to_6x6`` (a larger
  grid, where antialiasing filters nothing; PyTorch's antialiased bicubic
  is the cubic of a = -0.5, TensorFlow's, its plain one a = -0.75).
* ``resample_family.expected.npz`` (compressed): the committed
  ``family_dinov2.timm.safetensors`` and ``family_dinov2_reg.timm.
  safetensors`` (16 px, a 4x4 grid) in their timm class built at 12 px
  (3x3) and at 8x12 px (2x3), pos_embed resampled as timm's loaders do
  (defaults above): ``NAME/images_SIZE`` (2, h, w, 3) in [0, 255] and
  ``NAME/features_SIZE``, timm's ``model(images / 127.5 - 1)``.
* ``resample_manifest.json``: the cases, shapes and library versions.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from timm.layers import resample_abs_pos_embed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_family_checkpoints as family  # noqa: E402

#: name: (prefix entries, source grid, target grid)
CASES = {
    "8x8_to_5x5": (1, (8, 8), (5, 5)),
    "8x8_to_3x6": (1, (8, 8), (3, 6)),
    "6x8_to_4x3": (1, (6, 8), (4, 3)),
    "patches_8x8_to_5x5": (0, (8, 8), (5, 5)),
    "4x4_to_6x6": (1, (4, 4), (6, 6)),
}
#: The families (their committed files) and the sizes they are run at.
FAMILIES = ("dinov2", "dinov2_reg")
SIZES = {"12": (12, 12), "8x12": (8, 12)}
check = family.base.check


def posemb_cases():
    rng = np.random.default_rng(7)
    arrays = {}
    for name, (prefix, source, target) in CASES.items():
        posemb = rng.normal(size=(1, prefix + source[0] * source[1], 8))
        posemb = posemb.astype(np.float32)
        resampled = resample_abs_pos_embed(
            torch.from_numpy(posemb),
            new_size=target,
            old_size=source,
            num_prefix_tokens=prefix,
        )
        plain = resample_abs_pos_embed(
            torch.from_numpy(posemb),
            new_size=target,
            old_size=source,
            num_prefix_tokens=prefix,
            antialias=False,
        )
        resampled, plain = map(family.base.to_numpy, (resampled, plain))
        # Onto a smaller grid, the reference tells antialiasing apart.
        shrinks = target[0] < source[0] or target[1] < source[1]
        differ = family.base.max_diff(resampled, plain) > 1e-1
        check(differ or not shrinks, f"{name}: antialiasing's effect")
        arrays[f"{name}/posemb"] = posemb
        arrays[f"{name}/timm"] = resampled
    return arrays


@torch.no_grad()
def family_outputs(name, seed):
    state = load_file(str(HERE / f"family_{name}.timm.safetensors"))
    arrays = {}
    for size_name, (h, w) in SIZES.items():
        model = family.new_model(name, (h, w))
        prefix = 0 if model.no_embed_class else model.num_prefix_tokens
        resized = dict(state)
        resized["pos_embed"] = resample_abs_pos_embed(
            state["pos_embed"],
            new_size=(h // 4, w // 4),
            old_size=(4, 4),
            num_prefix_tokens=prefix,
        )
        model.load_state_dict(resized)
        rng = np.random.default_rng(seed)
        pixels = rng.integers(0, 256, size=(2, h, w, 3)).astype(np.float32)
        x = torch.from_numpy(pixels / 127.5 - 1).permute(0, 3, 1, 2)
        arrays[f"{name}/images_{size_name}"] = pixels
        arrays[f"{name}/features_{size_name}"] = family.base.to_numpy(
            model(x.contiguous())
        )
    return arrays


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    manifest = {}
    arrays = family.base.write_npz(
        "resample.expected.npz", posemb_cases(), True
    )
    manifest["resample.expected.npz"] = dict(
        description="CASE/posemb and CASE/timm: timm's resample_abs_pos_embed "
        "(bicubic, antialias=True: its defaults) of it; CASE: (prefix "
        "entries, source grid, target grid)",
        cases={k: [v[0], list(v[1]), list(v[2])] for k, v in CASES.items()},
        arrays=family.base.shapes(arrays),
    )
    outputs = {}
    for seed, name in enumerate(FAMILIES, start=71):
        outputs.update(family_outputs(name, seed))
    outputs = family.base.write_npz(
        "resample_family.expected.npz", outputs, True
    )
    manifest["resample_family.expected.npz"] = dict(
        description="family_NAME.timm.safetensors in its timm class at "
        "SIZE px, pos_embed resampled by resample_abs_pos_embed's "
        "defaults (bicubic, antialias=True); inputs in [0, 255] NHWC, "
        "model input images / 127.5 - 1 (NCHW); features: model(x)",
        sizes={k: list(v) for k, v in SIZES.items()},
        arrays=family.base.shapes(outputs),
    )
    out = {
        "about": "Position embeddings resampled onto smaller grids by timm, "
        "made by make_resample_references.py (developer-side, needs "
        "torch/timm).",
        "versions": family.VERSIONS,
        "files": manifest,
    }
    (HERE / "resample_manifest.json").write_text(
        json.dumps(out, indent=1) + "\n"
    )
    total = sum((HERE / f).stat().st_size for f in manifest)
    print(f"{total:>8}  total")
    check(total < 100_000, "resample golden files are too large")


if __name__ == "__main__":
    main()
