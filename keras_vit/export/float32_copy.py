"""The float32 copy of a model trained under a mixed precision policy,
which the exporters convert, and the Keras normalisation layers that
quantized TFLite graphs cannot take."""

import keras

from keras_vit.models.vit import ViT


def _layers(model):
    """Every layer of `model`, nested layers and models included."""
    return list(model._flatten_layers(include_self=True, recursive=True))


def keras_norm_layers(model):
    """The paths of `model`'s layers that are Keras's own
    `LayerNormalization` or `GroupNormalization` (not subclasses such as
    keras_vit's): their `ops.moments` and `-mean * inv` leave float NEG /
    SQUARE ops in a fully int8-quantized TFLite graph and fail int16x8
    quantization, where keras_vit's `LayerNorm` and the ResNet stem's
    `GroupNorm` convert cleanly."""
    kinds = (keras.layers.LayerNormalization, keras.layers.GroupNormalization)
    return sorted(
        f"{getattr(layer, 'path', layer.name)} ({type(layer).__name__})"
        for layer in _layers(model)
        if type(layer) in kinds
    )


def non_float32_dtypes(model):
    """The dtypes other than float32 that `model`'s layers compute in (e.g.
    `["bfloat16"]` under `mixed_bfloat16`); empty for a float32 model."""
    dtypes = {
        keras.backend.standardize_dtype(layer.compute_dtype)
        for layer in _layers(model)
    }
    return sorted(dtypes - {"float32"})


def float32_model(model):
    """`model` itself if it computes in float32, else a float32 copy.

    LiteRT and ONNX Runtime on CPU take float32 graphs (ONNX Runtime has no
    bfloat16 kernels; LiteRT's own `quantize="float16"` is the phone's
    reduced precision), so a model trained under a mixed policy
    (`mixed_bfloat16` on a TPU or a recent GPU, `mixed_float16` on an
    older GPU) is exported as the same model computing in float32. Mixed
    policies keep the variables in float32, so the copy holds exactly the
    trained values; it computes more precisely than the original, not
    less. A keras_vit model is rebuilt from its config with
    `dtype="float32"`; any other functional or sequential model is cloned
    layer by layer with `dtype="float32"`.

    Raises:
        ValueError: if the model cannot be rebuilt (a subclassed model).
    """
    dtypes = non_float32_dtypes(model)
    if not dtypes:
        return model

    try:
        if isinstance(model, ViT):
            copy = type(model).from_config(
                {**model.get_config(), "dtype": "float32"}
            )
        else:
            copy = keras.models.clone_model(
                model, clone_function=_float32_layer
            )
        copy.set_weights(model.get_weights())
    except Exception as error:  # noqa: BLE001 - clone_model's errors vary
        raise ValueError(
            f"Model {model.name!r} computes in {', '.join(dtypes)}, and the "
            f"export needs a float32 model, which could not be rebuilt from it "
            f"({type(error).__name__}: {str(error)[:300]}). Rebuild the model "
            "with dtype='float32' and copy its weights (model.get_weights())."
        ) from None
    left = non_float32_dtypes(copy)
    if left:
        raise ValueError(
            f"Model {model.name!r} computes in {', '.join(dtypes)}, and a "
            f"float32 copy of it still computes in {', '.join(left)}. Rebuild "
            "the model with dtype='float32' and copy its weights."
        )
    return copy


def _float32_layer(layer):
    if isinstance(layer, keras.Model):  # a nested model (a user's stem)
        return float32_model(layer)
    config = layer.get_config()
    config["dtype"] = "float32"
    return layer.__class__.from_config(config)
