"""Check keras_vit against the full-size DINOv3 architectures.

DEVELOPER-SIDE ONLY, not run by the test suite (the files are 88-350 MB).
`make_dinov3_checkpoints.py --full DIR` (torch, timm, transformers) writes
timm's `vit_small_patch16_dinov3`, `vit_base_patch16_dinov3`,
`vit_small_patch16_dinov3_qkvb` and transformers' `DINOv3ViTModel` (its
ViT-S/16 defaults, 4 registers) with perturbed weights and their outputs
at 256 px and 192x320; this script, in keras_vit's environment, reads each
file with the architecture it implies (`dynamic_image_size=True`, one
model for both sizes) and prints the largest difference of the tokens and
the class-token features; it fails above 1e-4:

    python tests/golden/check_dinov3_full.py DIR
"""

import sys
from pathlib import Path

import numpy as np

from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
HEADS = {"timm_s": 6, "timm_b": 12, "timm_s_qkvb": 6, "hf": 6}


def main(folder):
    worst = 0.0
    for name, heads in HEADS.items():
        model = convert.model_for_checkpoint(
            read_checkpoint(str(folder / f"dinov3_{name}.safetensors")),
            num_heads=heads,
            normalization=IMAGENET,
            dynamic_image_size=True,
        )
        expected = np.load(folder / f"dinov3_{name}.expected.npz")
        for suffix in ("", "_wide"):
            images = expected["images" + suffix]
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
    main(Path(sys.argv[1]))
