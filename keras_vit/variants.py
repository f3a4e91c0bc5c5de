"""The one table of ViT variants, named as in the paper ("B/16").

A variant name is `"<width>/<patch size>"`: the width sets the Transformer's
size (Table 1 of the paper, plus the "Ti" and "S" sizes of DeiT / AugReg),
the number after the slash the patch size in pixels.
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

#: Every variant: "B/16" -> the `keras_vit.ViT` arguments it stands for.
VARIANTS = {
    f"{width}/{patch}": {
        "patch_size": patch,
        "hidden_dim": dims[0],
        "num_layers": dims[1],
        "num_heads": dims[2],
        "mlp_dim": dims[3],
    }
    for width, dims in WIDTHS.items()
    for patch in PATCH_SIZES
}


def get_variant(name):
    """Returns a copy of the `keras_vit.ViT` arguments of variant `name`.

    Args:
        name: a variant name such as `"B/16"` (see `VARIANTS`).

    Returns:
        A dict with `patch_size`, `hidden_dim`, `num_layers`, `num_heads`
        and `mlp_dim`.

    Example:

    >>> keras_vit.variants.get_variant("B/16")["hidden_dim"]
    768
    """
    if name not in VARIANTS:
        raise ValueError(
            f"Unknown ViT variant. Expected one of {sorted(VARIANTS)}. "
            f"Received: variant={name!r}"
        )
    return dict(VARIANTS[name])



def find_variant(patch_size, hidden_dim, num_layers, num_heads, mlp_dim):
    """The name of the variant with exactly these numbers, or `None`."""
    numbers = {
        "patch_size": patch_size,
        "hidden_dim": hidden_dim,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "mlp_dim": mlp_dim,
    }
    for name, variant in VARIANTS.items():
        if variant == numbers:
            return name
    return None
