"""Named builders (`ViT_B16(...)` and friends); `keras_vit.resolver`
makes a model of any name or file.

The builders are made from the registry (`keras_vit.registry.BUILDERS`):
each is `ViT.from_variant` with the variant's name filled in, and its
docstring names the variant's numbers and presets; keyword arguments
override the variant's numbers (`ViT_B16(patch_size=8)` is a ViT-B/8).
"""

from keras_vit import registry
from keras_vit.models.vit import ViT

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
