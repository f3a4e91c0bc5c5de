"""Pretrained and saved weights: presets, format readers, exact loading.

`load_weights(model, weights)` loads into a built model; `ViT.from_preset`
and every builder's `weights=` build the model for the weights first
(`from_preset.prepare`). The presets are data in `keras_vit.registry`
(`keras_vit.list_presets()`).
"""

from keras_vit.weights.checkpoint import Checkpoint
from keras_vit.weights.loading import DEFAULT_INTERPOLATION
from keras_vit.weights.loading import load_checkpoint
from keras_vit.weights.loading import load_weights
from keras_vit.weights.npz import save_npz
from keras_vit.weights.reader import read_checkpoint
from keras_vit.weights.timm_folder import save_timm

__all__ = [
    "Checkpoint",
    "DEFAULT_INTERPOLATION",
    "load_checkpoint",
    "load_weights",
    "read_checkpoint",
    "save_npz",
    "save_timm",
]
