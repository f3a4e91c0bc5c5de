"""The model that an export, a verification, a latency benchmark,
`inspect`, `predict` or few-shot evaluation runs: `keras_vit.resolver`'s
model, with a masked-patch pre-training model refused."""

import keras

from keras_vit import resolver
from keras_vit.training.masked_patches import MaskedPatchPrediction


def inference_model(
    model, weights=None, image_size=None, num_classes=None, name="model"
):
    """Returns `keras_vit.resolver.resolve_model`'s model of `model`,
    refusing a masked-patch pre-training model (whose outputs are
    per-patch colour classes) before any weight is loaded into it.

    Args:
        model: a `keras.Model`, or a name, file or folder (see
            `keras_vit.resolver.resolve_model`).
        weights: `None`, a preset name or a weights file, loaded into the
            model. Defaults to `None`.
        image_size: int or `(height, width)`, for a name or a checkpoint
            only. Defaults to `None`: the builder's (or the weights').
        num_classes: int, for a name or a checkpoint only. Defaults to
            `None`: the weights' class count, else 1000.
        name: str, the argument's name for errors. Defaults to `"model"`.

    Example:

    >>> model = inference_model("ViT_Ti16", image_size=32, num_classes=10)
    >>> model = inference_model("runs/digits")
    """
    sizes = {"image_size": image_size, "num_classes": num_classes}
    if isinstance(model, keras.Model):
        _refuse_pretraining(model, model.name, name)
        return resolver.resolve_model(model, weights, name, **sizes)
    path = resolver.locate(model, weights, name)
    # A model file is built without the weights: a pre-training model is
    # refused first.
    keras_file = path.endswith(".keras")
    loaded = resolver.resolve_model(
        path, None if keras_file else weights, name, **sizes
    )
    _refuse_pretraining(loaded, model, name)
    if keras_file and weights is not None:
        resolver.resolve_model(loaded, weights, name)
    return loaded


def _refuse_pretraining(model, source, name):
    if isinstance(model, MaskedPatchPrediction):
        raise ValueError(
            "This is a masked-patch-prediction pre-training model, whose "
            "outputs are per-patch colour classes: export, verify, inspect or "
            "benchmark its backbone (`backbone.keras`, written beside a "
            "`keras-vit train --objective masked-patches` run's model.keras) "
            f"or the classifier fine-tuned from it. Received: {name}={source!r}"
        )
