"""Writes `resize_timm.expected.npz`: timm's evaluation crop of the sample
photo (PIL decoding, `transforms_imagenet_eval` without its tensor steps),
the reference that `keras_vit.data.resize` is checked against
(tests/data/test_resize.py).

Developer-side, never in CI: run it with timm installed,
`python tests/golden/make_resize_references.py` (timm 1.0.31, torch
2.14.1, Pillow as pinned there).
"""

import pathlib

import numpy as np
import PIL.Image
import timm
from timm.data import transforms_factory

HERE = pathlib.Path(__file__).resolve().parent
PHOTO = HERE.parents[1] / "keras_vit" / "data" / "samples" / "cat.jpg"

#: `(image_size, crop_pct, interpolation)`: timm's crops for its 224 px
#: (0.9) and 384 px ViTs (1.0, here at 224 px), DeiT's paper crop at
#: another size with bilinear, and a non-square input.
CASES = (
    (224, 0.9, "bicubic"),
    (224, 1.0, "bicubic"),
    (160, 0.875, "bilinear"),
    ((224, 160), 0.9, "bicubic"),
)

#: The transforms that turn the PIL image into a tensor: left out, so the
#: reference is timm's pixels before normalisation.
TENSOR_STEPS = ("ToTensor", "MaybeToTensor", "Normalize")


def case_key(image_size, crop_pct, interpolation):
    """The `.npz` key of one case (the test builds the same)."""
    rows, cols = (
        image_size if isinstance(image_size, tuple) else (image_size,) * 2
    )
    return f"{rows}x{cols}_{crop_pct}_{interpolation}"


def main():
    image = PIL.Image.open(PHOTO).convert("RGB")
    out = {}
    for image_size, crop_pct, interpolation in CASES:
        transform = transforms_factory.transforms_imagenet_eval(
            img_size=image_size,
            crop_pct=crop_pct,
            interpolation=interpolation,
        )
        pixels = image
        for step in transform.transforms:
            if type(step).__name__ in TENSOR_STEPS:
                break
            pixels = step(pixels)
        out[case_key(image_size, crop_pct, interpolation)] = np.asarray(
            pixels, "uint8"
        )
    target = HERE / "resize_timm.expected.npz"
    np.savez_compressed(target, timm_version=timm.__version__, **out)
    print(f"wrote {target}: {sorted(out)}")


if __name__ == "__main__":
    main()
