"""Deprecated: moved to `keras_vit.patch_grid` (a module named `ops` had
to be renamed by every importer that also used `keras.ops`).

`keras_vit.ops.resample_position_embeddings` and the other names still
work for one release, with a `DeprecationWarning`; they are
`keras_vit.patch_grid`'s own objects.
"""

import warnings

from keras_vit import patch_grid as _patch_grid


def __getattr__(name):
    if name.startswith("__") or not hasattr(_patch_grid, name):
        raise AttributeError(
            f"module 'keras_vit.ops' has no attribute {name!r}"
        )
    warnings.warn(
        f"keras_vit.ops.{name} moved to keras_vit.patch_grid.{name}; the old "
        "path will be removed in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_patch_grid, name)
