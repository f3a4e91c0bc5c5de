"""keras_vit: the Vision Transformer (arXiv 2010.11929) for Keras 3."""

from keras_vit import data
from keras_vit import evaluation
from keras_vit import layers
from keras_vit import patch_grid
from keras_vit import registry

# training also registers the optimizer and schedule of trained .keras files.
from keras_vit import training
from keras_vit import visualize
from keras_vit import weights
from keras_vit.builders import ViT_B8
from keras_vit.builders import ViT_B16
from keras_vit.builders import ViT_B32
from keras_vit.builders import ViT_H14
from keras_vit.builders import ViT_L16
from keras_vit.builders import ViT_L32
from keras_vit.builders import ViT_R26_B32
from keras_vit.builders import ViT_R26_S32
from keras_vit.builders import ViT_R50_B16
from keras_vit.builders import ViT_R50_L32
from keras_vit.builders import ViT_S16
from keras_vit.builders import ViT_S32
from keras_vit.builders import ViT_Ti16
from keras_vit.data.imagenet import imagenet_class_names
from keras_vit.data.sample_images import sample_image_path
from keras_vit.layers import LayerNorm
from keras_vit.layers import MultiHeadSelfAttention
from keras_vit.layers import PatchEncoder
from keras_vit.layers import Patches
from keras_vit.layers import ResNetBottleneck
from keras_vit.layers import ResNetStem
from keras_vit.layers import StdConv2D
from keras_vit.layers import TokenPooling
from keras_vit.layers import TransformerBlock
from keras_vit.models.vit import ViT
from keras_vit.registry import list_presets
from keras_vit.version import __version__
from keras_vit.weights import load_weights

__all__ = [
    "LayerNorm",
    "MultiHeadSelfAttention",
    "PatchEncoder",
    "ResNetBottleneck",
    "ResNetStem",
    "StdConv2D",
    "Patches",
    "TokenPooling",
    "TransformerBlock",
    "ViT",
    "ViT_B8",
    "ViT_B16",
    "ViT_B32",
    "ViT_H14",
    "ViT_L16",
    "ViT_L32",
    "ViT_R26_B32",
    "ViT_R26_S32",
    "ViT_R50_B16",
    "ViT_R50_L32",
    "ViT_S16",
    "ViT_S32",
    "ViT_Ti16",
    "__version__",
    "imagenet_class_names",
    "layers",
    "list_presets",
    "load_weights",
    "patch_grid",
    "registry",
    "sample_image_path",
    "data",
    "evaluation",
    "training",
    "visualize",
    "weights",
]
