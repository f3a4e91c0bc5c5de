"""Pretrained and saved weights: presets, format readers, exact loading.

`load_weights(model, weights)` is the entry point (the `weights=` argument
of every builder calls it); `list_presets()` lists the named checkpoints.
"""

from keras_vit.weights.checkpoint import Checkpoint
from keras_vit.weights.loading import DEFAULT_INTERPOLATION
from keras_vit.weights.loading import load_checkpoint
from keras_vit.weights.loading import load_weights
from keras_vit.weights.original import save_npz
from keras_vit.weights.presets import PRESETS
from keras_vit.weights.presets import list_presets
from keras_vit.weights.reader import read_checkpoint

__all__ = [
    "Checkpoint",
    "DEFAULT_INTERPOLATION",
    "PRESETS",
    "list_presets",
    "load_checkpoint",
    "load_weights",
    "read_checkpoint",
    "save_npz",
]
