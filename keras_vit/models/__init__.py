"""The model: `ViT` (`vit`)."""

from keras_vit.models.vit import ViT

__all__ = ["ViT"]
