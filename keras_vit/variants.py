"""Deprecated: the variant table moved to `keras_vit.registry`.

`keras_vit.variants.VARIANTS`, `get_variant`, `find_variant`, `WIDTHS`,
`PATCH_SIZES` and `HYBRID_STEMS` still work for one release, with a
`DeprecationWarning`; they are the registry's own objects.
"""

import warnings

from keras_vit.registry import variants as _variants


def __getattr__(name):
    if name.startswith("__") or not hasattr(_variants, name):
        raise AttributeError(
            f"module 'keras_vit.variants' has no attribute {name!r}"
        )
    warnings.warn(
        f"keras_vit.variants.{name} moved to keras_vit.registry.{name}; the "
        "old path will be removed in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_variants, name)
