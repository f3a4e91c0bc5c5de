"""Pretrained and saved weights: presets, format readers, exact loading.

`load_weights(model, weights)` loads into a built model; `ViT.from_preset`
and every builder's `weights=` build the model for the weights first
(`pretrained.prepare`). The presets are data in `keras_vit.registry`
(`keras_vit.list_presets()`); `keras_vit.weights.PRESETS` and
`keras_vit.weights.list_presets` are deprecated aliases for one release.
"""

import warnings

from keras_vit import registry
from keras_vit.weights.checkpoint import Checkpoint
from keras_vit.weights.loading import DEFAULT_INTERPOLATION
from keras_vit.weights.loading import load_checkpoint
from keras_vit.weights.loading import load_weights
from keras_vit.weights.original import save_npz
from keras_vit.weights.reader import read_checkpoint

__all__ = [
    "Checkpoint",
    "DEFAULT_INTERPOLATION",
    "load_checkpoint",
    "load_weights",
    "read_checkpoint",
    "save_npz",
]


def __getattr__(name):
    if name not in ("PRESETS", "list_presets"):
        raise AttributeError(
            f"module 'keras_vit.weights' has no attribute {name!r}"
        )
    warnings.warn(
        f"keras_vit.weights.{name} moved to keras_vit.registry.{name}; the "
        "old path will be removed in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(registry, name)
