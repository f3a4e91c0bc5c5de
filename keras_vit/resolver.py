"""The one resolver from what names a model to the model: a builder name
(`"ViT_B16"`), a variant (`"B/16"`), a preset's unique name, a `.keras`
file, a checkpoint (`.npz`, `.safetensors`, `.weights.h5`), a training
run's folder, a Hub repo (`hf://ORG/NAME[@REVISION]` or its snapshot
folder), or a `keras.Model` itself.

`resolve_model` is what `keras-vit`'s MODEL, `keras_vit.export`'s
`model=` and `TrainConfig.model.name` come to. `locate` is its first
step, the seam where a source is turned into something on this machine:
a run folder into its `model.keras` (the CLI keeps that path to find the
run's class names beside it), and a Hub id (`hf://ORG/NAME`) into its
snapshot folder in the Hub cache; everything after `locate` reads local
files or names only.
"""

import os

import keras

from keras_vit import builders
from keras_vit import registry
from keras_vit.model_argument import RUN_MODEL_FILE
from keras_vit.models.vit import LOADING_ARGUMENTS
from keras_vit.models.vit import ViT
from keras_vit.models.vit import refuse_loading_arguments
from keras_vit.weights import hub
from keras_vit.weights import loading
from keras_vit.weights import reader
from keras_vit.weights.convert import model_for_checkpoint

#: The files `resolve_model` makes a model of.
MODEL_FILES = (".keras", ".weights.h5", ".npz", ".safetensors")


def locate(model, weights=None, name="model", also=None):
    """`model` as a local path or a name: a training run's folder is its
    `model.keras`; a name or file is returned as it is. A preset named in
    `weights` with a model file or folder is refused here, before anything
    is read or downloaded.

    Args:
        model: what names the model (see `resolve_model`).
        weights: the weights to load into it, checked against `model`.
            Defaults to `None`.
        name: str, the argument's name for errors. Defaults to `"model"`.
        also: str, another kind of folder the caller takes, checked before
            this call (`"a SavedModel exported by keras_vit (no
            keras_vit.json)"`), for the error. Defaults to `None`.

    Returns:
        A str: the path of a file or of a Hub snapshot folder (an
        `hf://ORG/NAME[@REVISION]` id's, fetched into the Hub cache), or a
        name.

    Raises:
        ValueError: for an empty or non-text `model`, a folder that holds
            no `model.keras`, or a preset in `weights` with a file.
    """
    if not isinstance(model, (str, os.PathLike)) or not os.fspath(model):
        raise ValueError(
            "Expected a builder, variant or preset name, a model or weights "
            f"file ({', '.join(MODEL_FILES)}) or a training run's folder. "
            f"Received: {name}={model!r}"
        )
    path = os.fspath(model)
    check_weights(path, weights, name)
    if hub.is_source(path):  # an `hf://` id fetched, a snapshot checked
        if weights is not None:
            raise ValueError(
                f"A Hub repo brings its own weights; pass weights=None. "
                f"Received: {name}={path!r}, weights={weights!r}"
            )
        return hub.snapshot(path)
    if not os.path.isdir(path):
        return path
    found = os.path.join(path, RUN_MODEL_FILE)
    if os.path.isfile(found):
        return found
    kinds = f"neither {also} nor" if also else "not"
    raise ValueError(
        f"The folder is {kinds} a training run's folder (it holds no "
        f"{RUN_MODEL_FILE}). Received: {name}={path!r}"
    )


def check_weights(path, weights, name="model"):
    """Raises for a preset in `weights` with a `model` that is a file or
    folder: a preset is a builder's weights (`ViT_B16 --weights
    augreg_in21k`), and a model file brings its own architecture. A value
    with no extension and no folder that names no file is taken for a
    preset (every weights file has an extension)."""
    if weights is None or not os.path.exists(path):
        return
    text = os.fspath(weights)
    if os.path.exists(text) or os.path.splitext(text)[1] or os.sep in text:
        return
    raise ValueError(
        "`weights` applies to builder names only when it names a preset "
        f"(ViT_B16 --weights {text}, or the preset's unique name as the "
        "model): a model file or folder brings its own architecture and "
        f"takes a weights file only. Received: {name}={path!r}, "
        f"weights={text!r}"
    )


def resolve_model(model, weights=None, name="model", **kwargs):
    """Returns the model that `model` stands for.

    Args:
        model: a `keras.Model` (returned as is, with `weights` loaded into
            it), a builder name (`"ViT_B16"`), a variant (`"B/16"`), a
            preset's unique name (`"vit_b16_augreg_in21k_ft_in1k"`: the
            variant's builder with those weights and, unless given, their
            `num_classes`), a training run's folder (its `model.keras`), or
            a file: a `.keras` model (loaded with `safe_mode=True`), or a
            checkpoint (`.npz`, `.safetensors`: the ViT it describes, as
            `keras-vit convert` builds it; `.weights.h5`, which records no
            architecture: a `ViT(**kwargs)` with the file loaded), or a
            Hub repo: `"hf://ORG/NAME[@REVISION]"` or a snapshot folder
            (`config.json`, `model.safetensors`), as
            `keras_vit.ViT.from_preset` builds it.
        weights: `None`, a preset name (short or unique, for a builder or
            variant) or a weights file, loaded into the model. Defaults to
            `None`.
        name: str, the argument's name for errors (`"reference"`).
            Defaults to `"model"`.
        **kwargs: `keras_vit.ViT` arguments (`image_size`, `num_classes`,
            ...), for a name or a checkpoint; not for a `.keras` file or a
            model. Where weights are loaded, also `interpolation` and
            `antialias`, as `keras_vit.load_weights` takes them.

    Returns:
        The `keras.Model`.

    Raises:
        ValueError: naming the argument and its value, for an unknown name
            (listing the choices), a file that does not exist or cannot be
            read, or arguments the model cannot take.

    Example:

    >>> model = resolve_model("ViT_Ti16", num_classes=10)
    >>> model = resolve_model("vit_s16_augreg_in21k_ft_in1k")
    >>> model = resolve_model("runs/digits")
    """
    if isinstance(model, keras.Model):
        _refuse_arguments(kwargs, "a built model", f"{name}={model.name!r}")
        if weights is not None:
            loading.load_weights(model, weights)
        return model
    path = locate(model, weights, name)
    for arg in ("image_size", "num_classes"):  # `None`: the model's own
        if kwargs.get(arg, 0) is None:
            del kwargs[arg]
    if path.endswith(MODEL_FILES):
        return _from_file(path, weights, name, kwargs)
    if hub.is_source(path):
        return ViT.from_preset(path, **kwargs)
    builder, variant, preset = registry.resolve(path, name)
    if preset is not None:
        if weights is not None:
            raise ValueError(
                f"The preset {path!r} is its own weights; pass weights=None, "
                f"or its builder ({builder or variant}) with these weights. "
                f"Received: weights={weights!r}"
            )
        weights = path
        kwargs = {**registry.presets.head_arguments(preset), **kwargs}
    if builder is not None:
        return builders.get_builder(builder)(weights=weights, **kwargs)
    return ViT.from_variant(variant, weights=weights, **kwargs)


def _refuse_arguments(kwargs, what, source):
    for arg, value in kwargs.items():
        if value is not None:
            raise ValueError(
                f"`{arg}` applies to a builder, variant or preset name or a "
                f"checkpoint, not to {what}. Received: {arg}={value!r} for "
                f"{source}"
            )


def _from_file(path, weights, name, kwargs):
    """`resolve_model` for a file: a `.keras` model (with `weights` loaded
    into it), else a checkpoint's model. The resampling arguments
    (`LOADING_ARGUMENTS`) are checked before any file is read."""
    resampling = {k: kwargs.pop(k) for k in LOADING_ARGUMENTS if k in kwargs}
    if path.endswith(".keras"):  # (a checkpoint file is weights itself)
        refuse_loading_arguments(resampling, weights)
    loading.given_resampling(**resampling)
    if path.endswith(".keras"):
        _refuse_arguments(kwargs, "a .keras file", f"{name}={path!r}")
        loaded = _keras_file(path, name)
        if weights is not None:
            loading.load_weights(loaded, weights, **resampling)
        return loaded
    if weights is not None:
        raise ValueError(
            f"The checkpoint {path!r} is the model's weights; pass "
            f"weights=None, or a builder name as the {name}. "
            f"Received: weights={weights!r}"
        )
    if hub.configured(path)[0] is not None:  # a config.json beside it
        return ViT.from_preset(path, **resampling, **kwargs)
    resize = loading.resampling(**resampling)  # the file brings none
    if reader.is_native(path):  # a .weights.h5 records no architecture
        return ViT.from_preset(path, **resize, **kwargs)
    return model_for_checkpoint(
        reader.read_checkpoint(path), **resize, **kwargs
    )


def _keras_file(path, name):
    if not os.path.isfile(path):
        raise ValueError(
            f"The model file does not exist. Received: {name}={path!r}"
        )
    try:
        return keras.saving.load_model(path, compile=False, safe_mode=True)
    except Exception as error:  # noqa: BLE001 - zipfile, h5py, json and Keras each raise their own
        raise ValueError(
            f"Cannot load the .keras file "
            f"({type(error).__name__}: {str(error)[:500]}). Received: "
            f"{name}={path!r}"
        ) from None
