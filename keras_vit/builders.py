"""Named builders (`ViT_B16(...)` and friends), and `build`, which makes a
model of any name or file.

The builders are made from the registry (`keras_vit.registry.BUILDERS`):
each is `ViT.from_variant` with the variant's name filled in, and its
docstring names the variant's numbers and presets; keyword arguments
override the variant's numbers (`ViT_B16(patch_size=8)` is a ViT-B/8).
"""

import os

import keras

from keras_vit import registry
from keras_vit.models.vit import LOADING_ARGUMENTS
from keras_vit.models.vit import ViT
from keras_vit.models.vit import refuse_loading_arguments
from keras_vit.weights import loading
from keras_vit.weights import reader
from keras_vit.weights.convert import model_for_checkpoint

_DOC = """Builds a ViT-{variant} (arXiv 2010.11929): {hidden_dim} wide, {num_layers} blocks, {num_heads} heads, MLP {mlp_dim}, {tokens}.

    Presets (`weights=`; short or unique names, `keras_vit.list_presets("{builder}")`):
{presets}

    Args:
        num_classes: int, classes of the head. Defaults to `None`: the
            class count of the preset that `weights` names (its own head),
            else `1000`.
        weights: `None` for random initialisation, a preset name (above),
            or a weights file (`.npz`, `.safetensors`, `.weights.h5`,
            `.keras`); see `keras_vit.load_weights`. Defaults to `None`.
        **kwargs: any `keras_vit.ViT` argument (`image_size`,
            `include_top`, `pooling`, `dropout_rate`, `dtype`, ...); these
            override the variant's own numbers. With `weights`, also
            `interpolation` and `antialias`: how the position embeddings
            are resampled to another `image_size`, as
            `keras_vit.ViT.from_preset` and `keras_vit.load_weights` take
            them (`interpolation="bicubic", antialias=True`: timm's and
            DINOv2's, onto a smaller grid too).

    Returns:
        A `keras_vit.ViT` model. It takes RGB pixel values in [0, 255] at
        224 x 224 (or the preset's resolution) unless `image_size` /
        `include_preprocessing` say otherwise.

    Example:

    >>> model = keras_vit.{builder}(num_classes=10)
    >>> model.compile("adamw", "sparse_categorical_crossentropy")
    >>> tuned = keras_vit.{builder}(num_classes=37, weights="{preset}")
"""  # noqa: E501 (filled in, its first lines are the builders' summaries)

#: builder name -> variant name, in the order `keras-vit models` lists them
#: (the registry's table).
BUILDERS = registry.BUILDERS


def _build(builder, num_classes, weights, kwargs):
    """What every builder does: `ViT.from_variant` of its variant."""
    variant = BUILDERS[builder]
    kwargs.setdefault("name", registry.model_name(variant))
    if num_classes is not None:  # else the preset's head (loading
        # fills it in: `registry.presets.head_arguments`), else 1000
        kwargs["num_classes"] = num_classes
    return ViT.from_variant(variant, weights=weights, **kwargs)


def _doc(builder, variant):
    numbers = registry.get_variant(variant)
    stem = numbers.get("stem")
    tokens = (
        f"{numbers['patch_size']}x{numbers['patch_size']} patches"
        if stem is None
        else "1x1 patches of a ResNet stem with units "
        f"{tuple(stem['block_units'])} (a hybrid)"
    )
    presets = [p for p in registry.PRESETS if p["variant"] == variant]
    listed = "\n".join(
        f"        `{p['name']}` (`{p['unique_name']}`): {p['image_size']} px, "
        f"{p['num_classes']} classes, {p['params']:,} parameters."
        for p in presets
    )
    return _DOC.format(
        variant=variant,
        builder=builder,
        preset=presets[0]["name"] if presets else "path/to/weights.npz",
        presets=listed or "        none (`weights=` takes a file).",
        tokens=tokens,
        **{k: v for k, v in numbers.items() if k not in ("patch_size", "stem")},
    )


# The builders, one `def` each (found by an IDE and by `help`); their
# docstrings are written from the registry below, and a test holds their
# names to `BUILDERS`.


def ViT_Ti16(num_classes=None, weights=None, **kwargs):
    return _build("ViT_Ti16", num_classes, weights, kwargs)


def ViT_S16(num_classes=None, weights=None, **kwargs):
    return _build("ViT_S16", num_classes, weights, kwargs)


def ViT_S32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_S32", num_classes, weights, kwargs)


def ViT_B8(num_classes=None, weights=None, **kwargs):
    return _build("ViT_B8", num_classes, weights, kwargs)


def ViT_B16(num_classes=None, weights=None, **kwargs):
    return _build("ViT_B16", num_classes, weights, kwargs)


def ViT_B32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_B32", num_classes, weights, kwargs)


def ViT_L16(num_classes=None, weights=None, **kwargs):
    return _build("ViT_L16", num_classes, weights, kwargs)


def ViT_L32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_L32", num_classes, weights, kwargs)


def ViT_H14(num_classes=None, weights=None, **kwargs):
    return _build("ViT_H14", num_classes, weights, kwargs)


def ViT_R50_B16(num_classes=None, weights=None, **kwargs):
    return _build("ViT_R50_B16", num_classes, weights, kwargs)


def ViT_R50_L32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_R50_L32", num_classes, weights, kwargs)


def ViT_R26_B32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_R26_B32", num_classes, weights, kwargs)


def ViT_R26_S32(num_classes=None, weights=None, **kwargs):
    return _build("ViT_R26_S32", num_classes, weights, kwargs)


for _name, _variant in BUILDERS.items():
    globals()[_name].__doc__ = _doc(_name, _variant)
del _name, _variant


def get_builder(name):
    """Returns the builder function called `name`, e.g. `"ViT_B16"`."""
    if name not in BUILDERS:
        raise ValueError(
            f"Unknown model builder. Expected one of {list(BUILDERS)}. "
            f"Received: model={name!r}"
        )
    return globals()[name]


#: The files `build` makes a model of.
MODEL_FILES = (".keras", ".weights.h5", ".npz", ".safetensors")


def build(model, weights=None, **kwargs):
    """Builds the model that a name or a file stands for.

    The one place where a model's name is turned into a model:
    `keras-vit`'s `--model`, `keras_vit.export`'s `model=` and
    `TrainConfig.model.name` all come here.

    Args:
        model: a builder name (`"ViT_B16"`), a variant (`"B/16"`), a
            preset's unique name (`"vit_b16_augreg_in21k_ft_in1k"`: the
            variant's builder with those weights and, unless given, their
            `num_classes`), or a file: a `.keras`
            model (loaded with `safe_mode=True`), or a checkpoint (`.npz`,
            `.safetensors`: the ViT it describes, as `keras-vit convert`
            builds it; `.weights.h5`, which records no architecture: a
            `ViT(**kwargs)` with the file loaded).
        weights: for a builder or variant: `None`, a preset name (short or
            unique) or a weights file; for a `.keras` file: weights loaded
            into it. Defaults to `None`.
        **kwargs: `keras_vit.ViT` arguments (`image_size`, `num_classes`,
            ...), for a name or a checkpoint file; not for a `.keras` file.
            Where weights are loaded (from `weights`, a preset's unique
            name or a checkpoint file), also `interpolation` and
            `antialias`, as `keras_vit.load_weights` takes them.

    Returns:
        The `keras.Model`.

    Raises:
        ValueError: for an unknown name (listing the choices), a file that
            does not exist or cannot be read, or arguments the model cannot
            take.

    Example:

    >>> model = keras_vit.builders.build("ViT_Ti16", num_classes=10)
    >>> model = keras_vit.builders.build("vit_s16_augreg_in21k_ft_in1k")
    >>> model = keras_vit.builders.build("runs/digits/model.keras")
    """
    if not isinstance(model, (str, os.PathLike)) or not os.fspath(model):
        raise ValueError(
            "`model` must be a builder, variant or preset name, or a model or "
            f"weights file ({', '.join(MODEL_FILES)}). Received: "
            f"model={model!r}"
        )
    name = os.fspath(model)
    if name.endswith(MODEL_FILES):
        return _from_file(name, weights, kwargs)
    builder, variant, preset = registry.resolve(name)
    if preset is not None:
        if weights is not None:
            raise ValueError(
                f"The preset {name!r} is its own weights; pass weights=None, "
                f"or its builder ({builder or variant}) with these weights. "
                f"Received: weights={weights!r}"
            )
        weights = name
        kwargs = {**registry.presets.head_arguments(preset), **kwargs}
    if builder is not None:
        return get_builder(builder)(weights=weights, **kwargs)
    return ViT.from_variant(variant, weights=weights, **kwargs)


def _from_file(path, weights, kwargs):
    """`build` for a file: a `.keras` model (with `weights` loaded into
    it), else a checkpoint's model. The resampling arguments
    (`LOADING_ARGUMENTS`) are checked before any file is read."""
    resampling = {k: kwargs.pop(k) for k in LOADING_ARGUMENTS if k in kwargs}
    if path.endswith(".keras"):  # (a checkpoint file is weights itself)
        refuse_loading_arguments(resampling, weights)
    resize = loading.checked_resampling(
        resampling.get("interpolation", loading.DEFAULT_INTERPOLATION),
        resampling.get("antialias", loading.DEFAULT_ANTIALIAS),
    )
    if path.endswith(".keras"):
        for arg, value in kwargs.items():
            raise ValueError(
                f"`{arg}` applies to a builder, variant or preset name or a "
                f"checkpoint, not to a .keras file. Received: {arg}={value!r} "
                f"for model={path!r}"
            )
        if not os.path.isfile(path):
            raise ValueError(
                f"The model file does not exist. Received: model={path!r}"
            )
        try:
            loaded = keras.saving.load_model(
                path, compile=False, safe_mode=True
            )
        except Exception as error:  # noqa: BLE001 - zipfile, h5py, json and Keras each raise their own
            raise ValueError(
                f"Cannot load the .keras file "
                f"({type(error).__name__}: {str(error)[:500]}). Received: "
                f"model={path!r}"
            ) from None
        if weights is not None:
            loading.load_weights(loaded, weights, **resize)
        return loaded
    if weights is not None:
        raise ValueError(
            f"The checkpoint {path!r} is the model's weights; pass "
            f"weights=None, or a builder name as the model. "
            f"Received: weights={weights!r}"
        )
    if reader.is_native(path):  # a .weights.h5 records no architecture
        return ViT.from_preset(path, **resize, **kwargs)
    return model_for_checkpoint(
        reader.read_checkpoint(path), **resize, **kwargs
    )
