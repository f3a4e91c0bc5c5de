"""Datasets and `tf.data` input pipelines for training and evaluation."""

from keras_vit.data.datasets import Dataset
from keras_vit.data.datasets import load
from keras_vit.data.pipeline import NO_AUGMENTATION
from keras_vit.data.pipeline import Augmentation
from keras_vit.data.pipeline import eval_pipeline
from keras_vit.data.pipeline import split_validation
from keras_vit.data.pipeline import train_pipeline

__all__ = [
    "Augmentation",
    "Dataset",
    "NO_AUGMENTATION",
    "eval_pipeline",
    "load",
    "split_validation",
    "train_pipeline",
]
