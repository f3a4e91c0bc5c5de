"""The public keras_vit layers."""

from keras_vit.layers.attention import MultiHeadSelfAttention
from keras_vit.layers.attention_pooling import AttentionPooling
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.layers.layer_scale import LayerScale
from keras_vit.layers.patch_encoder import PatchEncoder
from keras_vit.layers.patches import Patches
from keras_vit.layers.pooling import TokenPooling
from keras_vit.layers.resnet_stem import ResNetBottleneck
from keras_vit.layers.resnet_stem import ResNetStem
from keras_vit.layers.resnet_stem import StdConv2D
from keras_vit.layers.transformer_block import TransformerBlock

__all__ = [
    "AttentionPooling",
    "LayerNorm",
    "LayerScale",
    "MultiHeadSelfAttention",
    "PatchEncoder",
    "Patches",
    "ResNetBottleneck",
    "ResNetStem",
    "StdConv2D",
    "TokenPooling",
    "TransformerBlock",
]
