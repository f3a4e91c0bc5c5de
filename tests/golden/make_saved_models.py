"""Make the `.keras` files saved by an earlier keras_vit, and their outputs.

Saved models must keep loading when the package's code moves (the model's
home, its constructor, its training fixes): `tests/test_saved_models.py`
loads these files, written by keras_vit 0.x at commit 65268ba (before the
model moved from `keras_vit/model.py` to `keras_vit/models/`), and checks
that they compute what they computed then.

Run from the repository root (deterministic, a few seconds on a CPU):

    python tests/golden/make_saved_models.py

Files:

* ``saved_vit.keras``: a tiny `keras_vit.ViT` (32x32 images, 8x8 patches,
  width 16, 2 blocks, a pre-logits layer, 5 classes), weights randomised.
* ``saved_hybrid.keras``: a tiny hybrid (a one-unit ResNet stem, 1x1
  patches, global average pooling, no class token), weights randomised.
* ``saved_mpp.keras``: a `keras_vit.training.MaskedPatchPrediction` around
  a tiny ViT without a head, weights randomised.
* ``saved_models.expected.npz``: ``images`` (2, 32, 32, 3), and the
  outputs of each model (``vit``, ``hybrid``; ``mpp_tokens``: the MPP
  backbone's output tokens).
"""

import os

import numpy as np

import keras_vit

HERE = os.path.dirname(os.path.abspath(__file__))


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(scale=0.2, size=w.shape).astype(w.dtype))


def main():
    images = (
        np.random.default_rng(0)
        .integers(0, 256, (2, 32, 32, 3))
        .astype("float32")
    )
    vit = keras_vit.ViT(
        image_size=32,
        patch_size=8,
        hidden_dim=16,
        num_layers=2,
        num_heads=2,
        mlp_dim=32,
        num_classes=5,
        representation_size=8,
        name="saved_vit",
    )
    hybrid = keras_vit.ViT(
        image_size=32,
        patch_size=1,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        mlp_dim=32,
        num_classes=3,
        pooling="gap",
        stem={"block_units": [1], "width": 4, "groups": 4},
        name="saved_hybrid",
    )
    backbone = keras_vit.ViT(
        image_size=32,
        patch_size=8,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        mlp_dim=32,
        include_top=False,
        name="mpp_backbone",
    )
    mpp = keras_vit.training.MaskedPatchPrediction(backbone, seed=1)
    mpp(images[:1])
    outputs = {"images": images}
    for key, model, seed in (
        ("vit", vit, 1),
        ("hybrid", hybrid, 2),
        ("mpp", mpp, 3),
    ):
        _randomize(model, seed)
        model.save(os.path.join(HERE, f"saved_{key}.keras"))
    outputs["vit"] = vit.predict(images, verbose=0)
    outputs["hybrid"] = hybrid.predict(images, verbose=0)
    outputs["mpp_tokens"] = backbone.predict(images, verbose=0)
    np.savez_compressed(
        os.path.join(HERE, "saved_models.expected.npz"), **outputs
    )


if __name__ == "__main__":
    main()
