"""Helpers of the export tests."""

import os

import numpy as np

#: The tiny ViT of the export tests: 16 patches of 8x8 pixels, width 32.
TINY_EXPORT = dict(
    image_size=32,
    patch_size=8,
    hidden_dim=32,
    num_layers=2,
    num_heads=2,
    mlp_dim=64,
    num_classes=10,
)


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
