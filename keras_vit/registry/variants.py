"""The one table of ViT variants, named as in the paper ("B/16"), and the
named builders that stand for them.

A variant name is `"<width>/<patch size>"`: the width sets the Transformer's
size (Table 1 of the paper, plus the "Ti" and "S" sizes of DeiT / AugReg),
the number after the slash the patch size in pixels. Hybrids are
`"R50+B/16"`: a ResNet stem, and the number is the stem's stride.

A builder's name is `"ViT_"` and the variant's name without its `/` (and
`+` as `_`): `"ViT_B16"`, `"ViT_R50_B16"`; the model it builds is named the
same in lower case (`model_name`, `"vit_b16"`), which is also how a preset's
unique name begins (`keras_vit.registry.presets`).

`"Test/8"` is no paper's: a two-block ViT 16 wide, for tests and quick
checks that need a real, registered name (as timm's `test_vit`); it has no
builder and no preset, so the model tables leave it out.
"""

#: name -> (hidden_dim, num_layers, num_heads, mlp_dim), Table 1 of the paper.
WIDTHS = {
    "Ti": (192, 12, 3, 768),
    "S": (384, 12, 6, 1536),
    "B": (768, 12, 12, 3072),
    "L": (1024, 24, 16, 4096),
    "H": (1280, 32, 16, 5120),
}

PATCH_SIZES = (8, 14, 16, 32)


def _numbers(width, patch_size):
    dims = WIDTHS[width]
    return {
        "patch_size": patch_size,
        "hidden_dim": dims[0],
        "num_layers": dims[1],
        "num_heads": dims[2],
        "mlp_dim": dims[3],
    }


#: The released hybrids: "R50+B/16" is a ViT-B on the stride-16 map of a
#: ResNet-50 whose stage 4 is removed and stage 3 has 9 units (paper,
#: Section 4.1); the "/32" ones keep 4 stages (stride 32). The ViT cuts the
#: map into 1x1 patches.
HYBRID_STEMS = {
    "R50+B/16": ("B", (3, 4, 9)),
    "R50+L/32": ("L", (3, 4, 6, 3)),
    "R26+B/32": ("B", (2, 2, 2, 2)),
    "R26+S/32": ("S", (2, 2, 2, 2)),
}

#: The tiny variant for tests: "Test/8" -> its numbers (no paper's).
TEST_VARIANTS = {
    "Test/8": {
        "patch_size": 8,
        "hidden_dim": 16,
        "num_layers": 2,
        "num_heads": 2,
        "mlp_dim": 32,
    },
}

#: Every variant: "B/16" -> the `keras_vit.ViT` arguments it stands for.
VARIANTS = {
    **{
        f"{width}/{patch}": _numbers(width, patch)
        for width in WIDTHS
        for patch in PATCH_SIZES
    },
    **{
        name: {
            **_numbers(width, 1),
            "stem": {"block_units": list(units), "width": 64},
        }
        for name, (width, units) in HYBRID_STEMS.items()
    },
    **TEST_VARIANTS,
}


def get_variant(name):
    """Returns a copy of the `keras_vit.ViT` arguments of variant `name`.

    Args:
        name: a variant name such as `"B/16"` (see `VARIANTS`).

    Returns:
        A dict with `patch_size`, `hidden_dim`, `num_layers`, `num_heads`
        and `mlp_dim`.

    Example:

    >>> keras_vit.registry.get_variant("B/16")["hidden_dim"]
    768
    """
    # A list or dict is unhashable: `in` would raise a bare TypeError.
    if not isinstance(name, str) or name not in VARIANTS:
        raise ValueError(
            f"Unknown ViT variant. Expected one of {sorted(VARIANTS)}. "
            f"Received: variant={name!r}"
        )
    return dict(VARIANTS[name])


def find_variant(
    patch_size, hidden_dim, num_layers, num_heads, mlp_dim, stem=None
):
    """The name of the variant with exactly these numbers, or `None`."""
    numbers = {
        "patch_size": patch_size,
        "hidden_dim": hidden_dim,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "mlp_dim": mlp_dim,
    }
    if stem is not None:
        if not isinstance(stem, dict) or "class_name" in stem:
            return None  # a custom stem is no released variant
        numbers["stem"] = {
            "block_units": list(stem.get("block_units", ())),
            "width": stem.get("width", 64),
        }
    for name, variant in VARIANTS.items():
        if variant == numbers:
            return name
    return None


#: builder name -> variant name, in the order `keras-vit models` lists them
#: (`keras_vit.builders` makes one function of each).
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

#: variant name -> its builder's name, for the variants that have one.
BUILDER_OF = {variant: builder for builder, variant in BUILDERS.items()}

#: builder name -> the parameter count of the model it builds by default
#: (224 x 224 input, 1000-class head), which `keras-vit models` lists
#: without building models (tests/test_registry.py counts the built ones).
PARAMS = {
    "ViT_Ti16": 5_717_416,
    "ViT_S16": 22_050_664,
    "ViT_S32": 22_878_952,
    "ViT_B8": 86_576_872,
    "ViT_B16": 86_567_656,
    "ViT_B32": 88_224_232,
    "ViT_L16": 304_326_632,
    "ViT_L32": 306_535_400,
    "ViT_H14": 632_045_800,
    "ViT_R50_B16": 98_659_112,
    "ViT_R50_L32": 328_994_856,
    "ViT_R26_B32": 101_383_976,
    "ViT_R26_S32": 36_431_912,
}


def model_name(variant):
    """The default name of a model of `variant`: `"B/16"` -> `"vit_b16"`."""
    return "vit_" + variant.replace("/", "").replace("+", "_").lower()
