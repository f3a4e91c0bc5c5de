"""Helpers of the export tests."""

import os

import numpy as np

from tests.helpers import TINY

#: The tiny ViT of the export tests: `TINY` (16 patches of 8x8 pixels)
#: twice as wide, so that its MLP kernels (32 x 64) hold the 1,024 values
#: below which the TFLite converter leaves a tensor unquantized; 10
#: classes, as the digits that exports verify on have.
TINY_EXPORT = dict(TINY, hidden_dim=32, mlp_dim=64, num_classes=10)


def listing(folder):
    """Every file under `folder` (to check nothing was left behind)."""
    return sorted(
        os.path.relpath(os.path.join(root, f), folder)
        for root, _, names in os.walk(folder)
        for f in names
    )


def digits_npz(path, image_size=32, n=20):
    from keras_vit.export import load_images

    images = load_images("digits", (image_size, image_size), limit=n)
    np.savez(path, images=images.images, labels=images.labels)
    return str(path)
