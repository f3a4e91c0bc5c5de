"""What a model name stands for: a builder, a variant or a preset."""

import collections

from keras_vit.registry import presets
from keras_vit.registry import variants

#: What `resolve` finds: the builder's name (`None` for a variant that has
#: no builder), the variant's name, and the preset record (`None` unless
#: the name is a preset's unique name).
Resolved = collections.namedtuple("Resolved", ["builder", "variant", "preset"])


def resolve(model, name="model"):
    """Resolves a model name: a builder, a variant or a preset's unique name.

    Args:
        model: a builder name (`"ViT_B16"`), a variant (`"B/16"`, any of
            `keras_vit.registry.VARIANTS`) or a preset's unique name
            (`"vit_b16_augreg_in21k_ft_in1k"`, see `keras_vit.list_presets`).
        name: str, the argument's name for the error. Defaults to
            `"model"`.

    Returns:
        A `Resolved(builder, variant, preset)`.

    Raises:
        ValueError: for any other value, listing the choices; a preset's
            short name says which unique names it stands for.

    Example:

    >>> keras_vit.registry.resolve("ViT_B16").variant
    'B/16'
    """
    if isinstance(model, str):
        if model in variants.BUILDERS:
            return Resolved(model, variants.BUILDERS[model], None)
        if model in variants.VARIANTS:
            return Resolved(variants.BUILDER_OF.get(model), model, None)
        preset = presets.named_preset(model)
        if preset is not None:
            variant = preset["variant"]
            return Resolved(variants.BUILDER_OF.get(variant), variant, preset)
    short = [p["unique_name"] for p in presets.PRESETS if p["name"] == model]
    hint = (
        f" {model!r} is a short preset name: pass it as the weights of a "
        f"builder, or name one of {short}."
        if short
        else ""
    )
    raise ValueError(
        "Unknown model. Expected a builder name "
        f"({', '.join(variants.BUILDERS)}), a variant "
        f"({', '.join(variants.VARIANTS)}) or a preset's unique name (see "
        "keras_vit.list_presets(), or `keras-vit presets` on the command "
        f"line).{hint} Received: {name}={model!r}"
    )
