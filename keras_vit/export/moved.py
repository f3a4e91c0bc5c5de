"""Names of `keras_vit.export` that moved, reachable at the old home for a
release with a `DeprecationWarning` that names the new one.

A module lists what left it and sets `__getattr__ = deprecated_names(...)`;
Python calls that only for names the module no longer defines.
"""

import sys
import warnings


def deprecated_names(module_name, moved):
    """A module `__getattr__` serving the names that moved out of it.

    Args:
        module_name: the old home, the module's `__name__`.
        moved: `{old name: (module, new name)}`: the new home, a module
            object the caller imported (so the dependency is seen), or
            `None` for a name renamed inside `module_name` itself.

    Returns:
        A function to assign to the module's `__getattr__`.

    Example:

    >>> __getattr__ = deprecated_names(
    ...     __name__, {"convert": (None, "tflite_bytes")}
    ... )
    """

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(
                f"module {module_name!r} has no attribute {name!r}"
            )
        module, new_name = moved[name]
        module = sys.modules[module_name] if module is None else module
        warnings.warn(
            f"`{module_name}.{name}` is deprecated and will be removed in the "
            f"next release; use `{module.__name__}.{new_name}`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(module, new_name)

    return __getattr__
