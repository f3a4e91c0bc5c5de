"""Checks of a model handed to the package: that it is a `keras_vit.ViT`,
that Keras did not quantize it. Argument checks of plain values are
`keras_vit.arg_checks`'s.

Below the model class (`keras_vit.models.vit`), whose weights loading
calls these checks: a `ViT` is told by the `ViTConfig` it was built from.
"""

import keras

from keras_vit.models.config import ViTConfig


def is_vit(model):
    """Whether `model` is a `keras_vit.ViT` (or a subclass): a Keras model
    built from a `ViTConfig`."""
    return isinstance(model, keras.Model) and isinstance(
        getattr(model, "vit_config", None), ViTConfig
    )


def require_vit(model, action):
    """Raises `ValueError` unless `model` is a `keras_vit.ViT`; `action`
    says what needs one (e.g. "load_weights")."""
    if not is_vit(model):
        backbone = getattr(model, "backbone", None)
        hint = (
            f" (for a {type(model).__name__}, pass its `backbone`)"
            if is_vit(backbone)
            else ""
        )
        raise ValueError(
            f"{action} takes a keras_vit.ViT{hint}. Received: model={model!r}"
        )
    return model


def quantized_layers(model):
    """The paths (or names) of `model`'s layers that `model.quantize()`
    quantized; empty for a float model."""
    return [
        layer.path or layer.name
        for layer in model._flatten_layers()
        if layer.quantization_mode is not None
    ]


def refuse_quantized(model, action, instead):
    """Raises `ValueError` if `model` was quantized by `model.quantize()`:
    `action` (e.g. "save_npz writes float checkpoints") cannot take it;
    `instead` says what to do."""
    quantized = quantized_layers(model)
    if quantized:
        raise ValueError(
            f"The model's layers were quantized in Keras (`model.quantize()`: "
            f"{', '.join(quantized[:3])}"
            f"{' ...' if len(quantized) > 3 else ''}), "
            f"and {action}: {instead}. Received: model={model.name!r}"
        )
