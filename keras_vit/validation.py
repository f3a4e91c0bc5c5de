"""Deprecated: the argument checks moved to `keras_vit.arg_checks` (in a
package where "validation" also means held-out data), and `vit` /
`refuse_quantized`, which check a model, to `keras_vit.models.checks`
(`require_vit`, `refuse_quantized`).

The old names still work for one release, with a `DeprecationWarning`.
"""

import warnings

from keras_vit import arg_checks as _arg_checks

#: Names that check a model: `keras_vit.models.checks`'s (old -> new).
_MODEL_CHECKS = {"vit": "require_vit", "refuse_quantized": "refuse_quantized"}


def __getattr__(name):
    if name in _MODEL_CHECKS:
        # Deprecated path only: the model sits above these checks, so it is
        # imported when an old name asks for it, never by the package.
        from keras_vit.models import checks

        new = f"keras_vit.models.checks.{_MODEL_CHECKS[name]}"
        found = getattr(checks, _MODEL_CHECKS[name])
    elif not name.startswith("__") and hasattr(_arg_checks, name):
        new = f"keras_vit.arg_checks.{name}"
        found = getattr(_arg_checks, name)
    else:
        raise AttributeError(
            f"module 'keras_vit.validation' has no attribute {name!r}"
        )
    warnings.warn(
        f"keras_vit.validation.{name} moved to {new}; the old path will be "
        "removed in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return found
