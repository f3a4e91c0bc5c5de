"""Check keras_vit against the full-size DINOv3 architectures.

DEVELOPER-SIDE ONLY, not run by the test suite (the files are 88-350 MB).
`make_dinov3_checkpoints.py --full DIR` (torch, timm, transformers) writes
timm's `vit_small_patch16_dinov3`, `vit_base_patch16_dinov3`,
`vit_small_patch16_dinov3_qkvb`, `vit_large_patch16_dinov3`, the SwiGLU
`vit_small_plus_patch16_dinov3` and `vit_huge_plus_patch16_dinov3_qkvb`
(2 of its 32 blocks) and transformers' `DINOv3ViTModel` (its ViT-S/16
defaults, 4 registers; S+ and H+, 2 blocks, gated) with perturbed
weights and their outputs at 256 px and 192x320; this script, in
keras_vit's environment, reads each file with the architecture it
implies (`dynamic_image_size=True`, one model for both sizes) and prints
the largest difference of the tokens and the class-token features; it
fails above 1e-4:

    python tests/golden/check_dinov3_full.py DIR [NAME ...]
    python tests/golden/check_dinov3_full.py --float64 DIR64 timm_l

(`--float64`: the files of `make_dinov3_checkpoints.py --float64`, the
model built in float64.)
"""

import sys
from pathlib import Path

import numpy as np

from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
HEADS = {
    "timm_s": 6,
    "timm_b": 12,
    "timm_s_qkvb": 6,
    "hf": 6,
    "timm_l": 16,
    "timm_splus": 6,
    "timm_hplus_qkvb": 20,
    "hf_splus": 6,
    "hf_hplus": 20,
}


def main(folder, names, dtype="float32"):
    worst = 0.0
    for name in names or HEADS:
        heads = HEADS[name]
        model = convert.model_for_checkpoint(
            read_checkpoint(str(folder / f"dinov3_{name}.safetensors")),
            num_heads=heads,
            normalization=IMAGENET,
            dynamic_image_size=True,
            dtype=dtype,
        )
        expected = np.load(folder / f"dinov3_{name}.expected.npz")
        for suffix in ("", "_wide"):
            images = expected["images" + suffix].astype(dtype)
            tokens = np.asarray(model.forward_features(images))
            pooled = model.predict(images, verbose=0)
            diffs = [
                float(np.max(np.abs(tokens - expected["tokens" + suffix]))),
                float(np.max(np.abs(pooled - expected["pooled" + suffix]))),
            ]
            print(name, images.shape[1:3], "tokens, pooled:", diffs)
            worst = max(worst, *diffs)
    if worst > 1e-4:
        raise SystemExit(f"check_dinov3_full.py: FAILED: {worst} > 1e-4")
    print("largest difference", worst)


if __name__ == "__main__":
    wide = sys.argv[1] == "--float64"
    rest = sys.argv[2:] if wide else sys.argv[1:]
    main(Path(rest[0]), rest[1:], "float64" if wide else "float32")
