"""Named builders: `ViT_B16(...)` and friends, one line each.

Each builder is `ViT.from_variant` with the variant's name filled in;
keyword arguments override the variant's numbers (`ViT_B16(patch_size=8)`
is a ViT-B/8).
"""

from keras_vit.models.vit import ViT

_DOC = """Builds a ViT-{variant} (arXiv 2010.11929): {hidden_dim} wide, {num_layers} blocks, {num_heads} heads, MLP {mlp_dim}, {tokens}.

    Args:
        num_classes: int, classes of the head. Defaults to `1000`.
        weights: `None` for random initialisation, a preset name
            (`keras_vit.list_presets("{builder}")`), or a weights file
            (`.npz`, `.safetensors`, `.weights.h5`, `.keras`); see
            `keras_vit.load_weights`. Defaults to `None`.
        **kwargs: any `keras_vit.ViT` argument (`image_size`,
            `include_top`, `pooling`, `dropout_rate`, `dtype`, ...); these
            override the variant's own numbers.

    Returns:
        A `keras_vit.ViT` model. It takes RGB pixel values in [0, 255] at
        224 x 224 (or the preset's resolution) unless `image_size` /
        `include_preprocessing` say otherwise.

    Example:

    >>> model = keras_vit.{builder}(num_classes=10)
    >>> model.compile("adamw", "sparse_categorical_crossentropy")
    >>> tuned = keras_vit.{builder}(num_classes=37, weights="{preset}")
"""


def ViT_Ti16(num_classes=1000, weights=None, **kwargs):
    return _build("Ti/16", num_classes, weights, **kwargs)


def ViT_S16(num_classes=1000, weights=None, **kwargs):
    return _build("S/16", num_classes, weights, **kwargs)


def ViT_S32(num_classes=1000, weights=None, **kwargs):
    return _build("S/32", num_classes, weights, **kwargs)


def ViT_B8(num_classes=1000, weights=None, **kwargs):
    return _build("B/8", num_classes, weights, **kwargs)


def ViT_B16(num_classes=1000, weights=None, **kwargs):
    return _build("B/16", num_classes, weights, **kwargs)


def ViT_B32(num_classes=1000, weights=None, **kwargs):
    return _build("B/32", num_classes, weights, **kwargs)


def ViT_L16(num_classes=1000, weights=None, **kwargs):
    return _build("L/16", num_classes, weights, **kwargs)


def ViT_L32(num_classes=1000, weights=None, **kwargs):
    return _build("L/32", num_classes, weights, **kwargs)


def ViT_H14(num_classes=1000, weights=None, **kwargs):
    return _build("H/14", num_classes, weights, **kwargs)


def ViT_R50_B16(num_classes=1000, weights=None, **kwargs):
    return _build("R50+B/16", num_classes, weights, **kwargs)


def ViT_R50_L32(num_classes=1000, weights=None, **kwargs):
    return _build("R50+L/32", num_classes, weights, **kwargs)


def ViT_R26_B32(num_classes=1000, weights=None, **kwargs):
    return _build("R26+B/32", num_classes, weights, **kwargs)


def ViT_R26_S32(num_classes=1000, weights=None, **kwargs):
    return _build("R26+S/32", num_classes, weights, **kwargs)


#: builder name -> variant name, in the order `keras-vit models` lists them.
BUILDERS = {
    "ViT_Ti16": "Ti/16",
    "ViT_S16": "S/16",
    "ViT_S32": "S/32",
    "ViT_B8": "B/8",
    "ViT_B16": "B/16",
    "ViT_B32": "B/32",
    "ViT_L16": "L/16",
    "ViT_L32": "L/32",
    "ViT_H14": "H/14",
    "ViT_R50_B16": "R50+B/16",
    "ViT_R50_L32": "R50+L/32",
    "ViT_R26_B32": "R26+B/32",
    "ViT_R26_S32": "R26+S/32",
}


def _build(variant, num_classes, weights, **kwargs):
    kwargs.setdefault(
        "name", "vit_" + variant.replace("/", "").replace("+", "_").lower()
    )
    return ViT.from_variant(
        variant, num_classes=num_classes, weights=weights, **kwargs
    )


def get_builder(name):
    """Returns the builder function called `name`, e.g. `"ViT_B16"`."""
    if name not in BUILDERS:
        raise ValueError(
            f"Unknown model builder. Expected one of {list(BUILDERS)}. "
            f"Received: model={name!r}"
        )
    return globals()[name]


def _document():
    from keras_vit.variants import get_variant
    from keras_vit.weights.presets import preset_names

    for builder, variant in BUILDERS.items():
        numbers = get_variant(variant)
        stem = numbers.get("stem")
        tokens = (
            f"{numbers['patch_size']}x{numbers['patch_size']} patches"
            if stem is None
            else "1x1 patches of a ResNet stem with units "
            f"{tuple(stem['block_units'])} (a hybrid)"
        )
        names = preset_names(variant)
        globals()[builder].__doc__ = _DOC.format(
            variant=variant,
            builder=builder,
            preset=names[0] if names else "path/to/weights.npz",
            tokens=tokens,
            **{k: v for k, v in numbers.items() if k not in ("patch_size", "stem")},
        )


_document()
