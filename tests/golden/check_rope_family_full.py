"""Check keras_vit against the full-size Perception Encoder core and Naver
RoPE-ViT architectures.

DEVELOPER-SIDE ONLY, not run by the test suite (the files are 22-350 MB).
`make_rope_family_checkpoints.py --full DIR` (torch, timm) writes timm's
`vit_pe_core_{tiny,small}_patch16_384`, `vit_pe_core_base_patch16_224`
and `vit_small_patch16_rope{,_ape,_mixed,_mixed_ape}_224` with perturbed
weights and their outputs at the checkpoint's size and another
(non-square) one; this script, in keras_vit's environment, reads each
file with the architecture it implies, at each size (timm's resampling of
the absolute embeddings: bicubic, antialiased), and prints the largest
difference of the tokens and the logits (PE: its image projection), in
float32 and (a float64 model against timm's cast to float64) in float64.
It fails above 1e-4 in float64, or in float32 above 1e-4 times the
largest output (timm's own float32 and float64 outputs differ by as much
where perturbed weights make large activations: PE B/16's logits reach
130):

    python tests/golden/check_rope_family_full.py DIR
"""

import sys
from pathlib import Path

import numpy as np

from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
#: name: heads (the fused-QKV file does not record them)
HEADS = {
    "pe_t": 3,
    "pe_s": 6,
    "pe_b": 12,
    "naver_s": 6,
    "naver_s_ape": 6,
    "naver_s_mixed": 6,
    "naver_s_mixed_ape": 6,
}


def main(folder):
    worst = 0.0
    for name, heads in HEADS.items():
        checkpoint = read_checkpoint(str(folder / f"rope_{name}.safetensors"))
        # PE core's tensors are a VisionTransformer's too: say which.
        checkpoint = checkpoint.read_as(name.startswith("pe_"))
        expected = np.load(folder / f"rope_{name}.expected.npz")
        for suffix in ("", "_wide"):
            for dtype, key in (("float32", ""), ("float64", "64")):
                diffs = _differences(
                    checkpoint, heads, expected, suffix, dtype, key
                )
                scale = 1.0
                if dtype == "float32":
                    scale = max(
                        np.max(np.abs(expected[k + suffix]))
                        for k in ("tokens", "logits")
                    )
                print(
                    name, suffix or "own size", dtype, "tokens, logits:", diffs
                )
                worst = max(worst, *(d / max(scale, 1.0) for d in diffs))
    if worst > 1e-4:
        raise SystemExit(f"check_rope_family_full.py: FAILED: {worst} > 1e-4")
    print("largest difference (float32: relative to the largest output)", worst)


def _differences(checkpoint, heads, expected, suffix, dtype, key):
    images = expected["images" + suffix]
    model = convert.model_for_checkpoint(
        checkpoint,
        num_heads=heads,
        normalization=IMAGENET,
        classifier_activation=None,
        image_size=images.shape[1:3],
        interpolation="bicubic_pytorch",
        antialias=True,
        dtype=dtype,
    )
    images = images.astype(dtype)
    tokens = np.asarray(model.forward_features(images))
    logits = model.predict(images, verbose=0)
    return [
        float(np.max(np.abs(tokens - expected[f"tokens{key}{suffix}"]))),
        float(np.max(np.abs(logits - expected[f"logits{key}{suffix}"]))),
    ]


if __name__ == "__main__":
    main(Path(sys.argv[1]))
