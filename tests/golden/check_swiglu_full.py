"""Check keras_vit against the full-width gated-MLP and SigLIP 2 models.

DEVELOPER-SIDE ONLY, not run by the test suite (the files are 230-350
MB). `make_swiglu_checkpoints.py --full DIR` (torch, timm, transformers)
writes timm's `vit_giant_patch14_dinov2` and transformers' `Dinov2Model`
with `facebook/dinov2-giant`'s config (both 2 blocks of the giant's 40:
1536 wide, 24 heads, the SwiGLU 4096 wide, patch 14, 518 px), a timm
`VisionTransformer` with `SwiGLU` at the same size, and timm's
`vit_base_patch16_siglip_224` (SigLIP 2's `.v2_webli` architecture), with
perturbed weights and their outputs, in float64. This script, in
keras_vit's environment, reads each file with the architecture it implies
(built in float64, as the reference ran) and prints
the largest difference of the tokens and the pooled features; it fails
above 1e-4:

    python tests/golden/check_swiglu_full.py DIR
"""

import sys
from pathlib import Path

import numpy as np

from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
HEADS = {
    "timm_giant": 24,
    "timm_swiglu": 24,
    "hf_giant": 24,
    "timm_siglip2": 12,
}


def main(folder):
    worst = 0.0
    for name, heads in HEADS.items():
        checkpoint = read_checkpoint(str(folder / f"swiglu_{name}.safetensors"))
        model = convert.model_for_checkpoint(
            checkpoint, num_heads=heads, normalization=IMAGENET, dtype="float64"
        )
        expected = np.load(folder / f"swiglu_{name}.expected.npz")
        images = expected["images"]
        tokens = np.asarray(model.forward_features(images))
        pooled = model.predict(images, verbose=0)
        diffs = [
            float(np.max(np.abs(tokens - expected["tokens"]))),
            float(np.max(np.abs(pooled - expected["pooled"]))),
        ]
        print(
            name,
            f"mlp_dim={model.mlp_dim} use_gated_mlp={model.use_gated_mlp}",
            f"image_size={model.image_size}",
            "tokens, pooled:",
            diffs,
        )
        worst = max(worst, *diffs)
    if worst > 1e-4:
        raise SystemExit(f"check_swiglu_full.py: FAILED: {worst} > 1e-4")
    print("largest difference", worst)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
