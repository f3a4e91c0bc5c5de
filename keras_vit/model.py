"""Deprecated: the model moved to `keras_vit.models` (`keras_vit.models.vit`).

This module stays for one release so that old imports keep working;
import `keras_vit.ViT` or `keras_vit.models.ViT` instead.
"""

import warnings

from keras_vit.models.vit import KERAS_APPLICATIONS_ARGUMENTS
from keras_vit.models.vit import MODEL_POSITION_EMBEDDINGS
from keras_vit.models.vit import ViT

warnings.warn(
    "keras_vit.model is deprecated and will be removed in the next release: "
    "the model moved to keras_vit.models (import keras_vit.ViT or "
    "keras_vit.models.ViT).",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["KERAS_APPLICATIONS_ARGUMENTS", "MODEL_POSITION_EMBEDDINGS", "ViT"]
