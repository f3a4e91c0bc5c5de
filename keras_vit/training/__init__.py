"""Training with `tf.distribute`: strategy, recipe, resumable runs."""

from keras_vit.training.callbacks import NonFiniteLossError
from keras_vit.training.config import DataConfig
from keras_vit.training.config import ModelConfig
from keras_vit.training.config import ObjectiveConfig
from keras_vit.training.config import OptimizerConfig
from keras_vit.training.config import RunConfig
from keras_vit.training.config import ScaleConfig
from keras_vit.training.config import TrainConfig
from keras_vit.training.masked_patches import MaskedPatchPrediction
from keras_vit.training.masked_patches import mean_color_classes
from keras_vit.training.recipe import WarmupDecay
from keras_vit.training.recipe import make_optimizer
from keras_vit.training.strategy import make_strategy
from keras_vit.training.strategy import resolve_kind
from keras_vit.training.train import TrainResult
from keras_vit.training.train import train

__all__ = [
    "DataConfig",
    "MaskedPatchPrediction",
    "ModelConfig",
    "NonFiniteLossError",
    "ObjectiveConfig",
    "OptimizerConfig",
    "RunConfig",
    "ScaleConfig",
    "TrainConfig",
    "TrainResult",
    "WarmupDecay",
    "make_optimizer",
    "make_strategy",
    "mean_color_classes",
    "resolve_kind",
    "train",
]
