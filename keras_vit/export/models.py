"""The model to export or compare against (a model, or a name or file that
`keras_vit.builders.build` resolves), and what exports ask of it."""

import functools
import os

import keras
import numpy as np

from keras_vit import builders
from keras_vit.data import images
from keras_vit.data import resize
from keras_vit.models.config import activation_kind
from keras_vit.models.preprocessing import scale_and_offset
from keras_vit.models.vit import ViT
from keras_vit.training.masked_patches import MaskedPatchPrediction
from keras_vit.weights import load_weights


def load_model(model, weights=None, image_size=None, num_classes=None):
    """Returns a `keras.Model` for an export, a verification or a benchmark.

    A `keras.Model` is taken as is; anything else is built by
    `keras_vit.builders.build`, the one resolver of model names and files.

    Args:
        model: a `keras.Model` (returned as is), or what
            `keras_vit.builders.build` takes: the path of a `.keras` file
            (loaded with `safe_mode=True`) or of a checkpoint, a builder name
            such as `"ViT_B16"`, a variant name such as `"B/16"`, or a
            preset's unique name.
        weights: `None`, a preset name or a weights file, loaded into the
            model (see `keras_vit.load_weights`). Defaults to `None`.
        image_size: int or `(height, width)`, for a name or a checkpoint
            only. Defaults to `None`: the builder's (or the weights').
        num_classes: int, for a name or a checkpoint only. Defaults to
            `None`: the weights' class count, else 1000.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = load_model("ViT_Ti16", image_size=32, num_classes=10)
    >>> model = load_model("runs/digits/model.keras")
    """
    if isinstance(model, keras.Model):
        _refuse_pretraining(model, model.name)
        # Refused before any weight is loaded into the caller's model.
        _no_shape_overrides(model, image_size, num_classes)
        if weights is not None:
            load_weights(model, weights)
        return model
    kwargs = {}
    if image_size is not None:
        kwargs["image_size"] = image_size
    if num_classes is not None:
        kwargs["num_classes"] = num_classes
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(
        ".keras"
    ):
        # Built without the weights: a pre-training model is refused first.
        loaded = builders.build(model, **kwargs)
        _refuse_pretraining(loaded, os.fspath(model))
        if weights is not None:
            load_weights(loaded, weights)
        return loaded
    return builders.build(model, weights=weights, **kwargs)


def _refuse_pretraining(model, name):

    if isinstance(model, MaskedPatchPrediction):
        raise ValueError(
            "This is a masked-patch-prediction pre-training model, whose "
            "outputs are per-patch colour classes: export, verify, inspect or "
            "benchmark its backbone (`backbone.keras`, written beside a "
            "`keras-vit train --objective masked-patches` run's model.keras) "
            f"or the classifier fine-tuned from it. Received: model={name!r}"
        )


def _no_shape_overrides(model, image_size, num_classes):
    for arg, value in (
        ("image_size", image_size),
        ("num_classes", num_classes),
    ):
        if value is not None:
            raise ValueError(
                f"`{arg}` applies to a builder, variant or preset name or a "
                f"checkpoint, not to a built model. Received: {arg}={value!r} "
                f"for model={getattr(model, 'name', model)!r}"
            )


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


def input_spec(model):
    """`(height, width, channels)` of a single-image-input model.

    A `ViT(dynamic_image_size=True)` takes any size; its exports (TFLite,
    ONNX, OpenVINO: fixed sizes) and verification are at its `image_size`,
    where its graph resamples nothing (a SavedModel keeps any size:
    `saved_model.build_archive`).

    Raises:
        ValueError: if the model does not take one `(B, H, W, C)` input of
            known size.
    """
    if getattr(model, "dynamic_image_size", False) is True:
        return (*model.image_size, model.num_channels)
    shapes = model.input_shape
    if isinstance(shapes, list) or len(shapes) != 4 or None in shapes[1:]:
        raise ValueError(
            "Export needs a model with one (batch, height, width, channels) "
            f"image input of known size. Received: model {model.name!r} with "
            f"input shape {shapes}"
        )
    return tuple(int(s) for s in shapes[1:])


def check_pixels(model, batch_size):
    """Random float32 pixels in [0, 255] (seed 0), `(batch_size, height,
    width, channels)` (a batch of 2 for a dynamic one), which the ONNX and
    OpenVINO exports are checked against Keras on."""
    height, width, channels = input_spec(model)
    x = np.random.default_rng(0).uniform(
        0, 255, (batch_size or 2, height, width, channels)
    )
    return x.astype("float32")


def output_kind(model):
    """What the model returns: `"probabilities"`, `"logits"`, `"features"`
    or `"outputs"` (another activation's). The SavedModel's output key, the
    sidecar's `output.kind`, the verification's limits and whether
    `keras-vit predict` takes a softmax all follow it."""
    if getattr(model, "include_top", True) is False:
        return "features"
    return activation_kind(getattr(model, "classifier_activation", "softmax"))


def weight_bytes(model):
    """The bytes of `model`'s weights as they are held (int8 kernels of a
    Keras-quantized model take one byte a value)."""
    import tensorflow as tf

    return sum(
        int(np.prod(w.shape))
        * tf.as_dtype(keras.backend.standardize_dtype(w.dtype)).size
        for w in model.weights
    )


def placeholder_class_names(num_classes):
    """`["class_0", "class_1", ...]`: the names of a model's outputs where
    none are known (no `labels`, no training run's)."""
    return [f"class_{i}" for i in range(num_classes)]


def takes_pixels(model):
    """Whether the model takes RGB pixel values in [0, 255] itself."""
    return bool(getattr(model, "include_preprocessing", True))


def normalization(model):
    """The normalisation of the model's weights' inputs (a `keras_vit.ViT`'s
    `normalization`: `None`, the paper's [-1, 1], or `{"mean", "std"}` on
    [0, 1] pixels); `None` for other models."""
    return getattr(model, "normalization", None)


def normalize_pixels(pixels, normalization):
    """[0, 255] RGB pixels normalised as `normalization` says: `None`, the
    paper's `pixels / 127.5 - 1`, or `{"mean", "std"}` on [0, 1] pixels (a
    `keras_vit.ViT`'s `normalization`, or an export's metadata
    `input.normalization`). The same float32 multiply-add as the model's
    own `rescaling` layer (`scale_and_offset`, the one source
    of the numbers), so a model built with `include_preprocessing=False`
    sees exactly what its `include_preprocessing=True` twin computes."""
    scale, offset = scale_and_offset(normalization)
    pixels = np.asarray(pixels, "float32")
    return pixels * np.asarray(scale, "float32") + np.asarray(offset, "float32")


def inputs_from_pixels(model):
    """The function that turns [0, 255] RGB pixels `(N, H, W, C)` into what
    `model` takes: float32 pixels as they are for a model that normalises
    them itself (`takes_pixels`), else `normalize_pixels` with its
    `normalization`. The conversion of every image file and NumPy batch
    fed to a model (`keras-vit predict` and `inspect`, few-shot
    evaluation, an export's calibration and verification); training's
    `tf.data` pipelines do the same multiply-add in the graph
    (`keras_vit.training.train._as_model_inputs`), from the same numbers.

    Raises:
        ValueError: for a model that takes already-normalised inputs and
            records no normalisation (not a `keras_vit.ViT`): feeding it
            pixels, or guessing, would give wrong answers silently.
    """
    if takes_pixels(model):
        return _float32
    if not hasattr(model, "normalization"):
        raise ValueError(
            "The model takes already-normalised inputs "
            "(include_preprocessing=False) and records no `normalization`, "
            "so image files and datasets cannot be turned into its inputs: "
            "pass arrays of its inputs, or use a model built with "
            "include_preprocessing=True. Received: model="
            f"{model.name!r} with include_preprocessing=False"
        )
    return functools.partial(
        normalize_pixels, normalization=normalization(model)
    )


def _float32(pixels):
    return np.asarray(pixels, "float32")


def input_range(model):
    """`(low, high)` of what `model` takes for [0, 255] pixels: `(0, 255)`
    for a model that takes pixels; for a `keras_vit.ViT` built with
    `include_preprocessing=False`, the range of `inputs_from_pixels` over
    every channel (`(-1, 1)` for the paper's), widened by 0.1% of its span
    for the rounding of a caller's own normalisation; `None` when
    unknown (not a `keras_vit.ViT`)."""
    if takes_pixels(model):
        return (0.0, 255.0)
    if not hasattr(model, "normalization"):
        return None
    # (2, 1) broadcast over the channels of a per-channel normalisation.
    ends = normalize_pixels(np.array([[0.0], [255.0]]), normalization(model))
    low, high = float(ends.min()), float(ends.max())
    margin = 1e-3 * (high - low)
    return (low - margin, high + margin)


#: SavedModel signature names: float32 inputs, uint8 pixels, and encoded
#: image files (JPEG, PNG, GIF, BMP bytes; TF Serving's REST API takes them
#: base64-encoded as `{"b64": ...}`).
FLOAT_SIGNATURE = "serving_default"
UINT8_SIGNATURE = "serving_uint8"
BYTES_SIGNATURE = "serving_bytes"

#: The input name of `BYTES_SIGNATURE` (the others take `images`).
BYTES_INPUT = "image_bytes"


def decoded_files(model, image_bytes):
    """A `[batch]` string tensor of image files as `model`'s float32
    `[batch, H, W, 3]` pixels: each decoded and resized at its input size
    as its `image_resize` says (`keras_vit.data.images.decoded_model_pixels`,
    as `load_image_files` reads files), in a graph: the SavedModel's
    `serving_bytes` signature runs it, and its verification the same."""
    import tensorflow as tf

    height, width, channels = input_spec(model)
    image_resize = resize.of_model(model)
    return tf.map_fn(
        lambda contents: images.decoded_model_pixels(
            contents, (height, width), image_resize
        ),
        image_bytes,
        fn_output_signature=tf.TensorSpec((height, width, channels), "float32"),
    )


def saved_model_signatures(model):
    """`{name: input dtype}` of a SavedModel export of `model` (written by
    `keras_vit.export.saved_model`, checked by `verify_saved_model`):
    `serving_default` takes float32 inputs; `serving_uint8` takes uint8
    pixels (a decoded JPEG as it is) and `serving_bytes` encoded image
    files (`"string"`: decoded and resized inside, as the model's
    `image_resize` says), both only for a model that takes [0, 255] RGB
    pixels: the normalised inputs of one built with
    `include_preprocessing=False` do not fit in uint8 (-1 would wrap to
    255), normalising inside the signature would be a second copy of the
    model's preprocessing, and a grayscale model's luma is left to the
    caller."""
    signatures = {FLOAT_SIGNATURE: "float32"}
    if takes_pixels(model):
        signatures[UINT8_SIGNATURE] = "uint8"
        if input_spec(model)[-1] == 3:
            signatures[BYTES_SIGNATURE] = "string"
    return signatures
