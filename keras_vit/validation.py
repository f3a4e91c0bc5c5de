"""Eager argument checks shared by the layers and the model.

Every check raises `ValueError` naming the argument and the value received,
so a bad argument fails at construction, never deep inside TensorFlow.
"""

import numbers


def positive_int(name, value):
    """Returns `value` as an `int`, or raises if it is not an integer >= 1."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < 1
    ):
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )
    return int(value)


def non_negative_int(name, value):
    """Returns `value` as an `int`, or raises if it is not an integer >= 0
    (a seed, a count that may be zero)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < 0
    ):
        raise ValueError(
            f"`{name}` must be an integer >= 0. Received: {name}={value!r}"
        )
    return int(value)


def optional_positive_int(name, value):
    """Like `positive_int`, but `None` passes through."""
    return None if value is None else positive_int(name, value)


def rate(name, value):
    """Returns `value` as a `float` in [0, 1), or raises."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0.0 <= value < 1.0
    ):
        raise ValueError(
            f"`{name}` must be a number in [0, 1). Received: {name}={value!r}"
        )
    return float(value)


def fraction(name, value, zero=True):
    """Returns `value` as a `float` in [0, 1] (in (0, 1] without `zero`),
    or raises."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (0.0 <= value if zero else 0.0 < value)
        or not value <= 1.0
    ):
        interval = "[0, 1]" if zero else "(0, 1]"
        raise ValueError(
            f"`{name}` must be a number in {interval}. Received: {name}={value!r}"
        )
    return float(value)


def positive_float(name, value):
    """Returns `value` as a finite `float` > 0, or raises."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 < value < float("inf")
    ):
        raise ValueError(
            f"`{name}` must be a positive number. Received: {name}={value!r}"
        )
    return float(value)


def non_negative_float(name, value):
    """Returns `value` as a finite `float` >= 0, or raises."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 <= value < float("inf")
    ):
        raise ValueError(
            f"`{name}` must be a number >= 0. Received: {name}={value!r}"
        )
    return float(value)


def boolean(name, value):
    """Returns `value` if it is a `bool`, or raises."""
    if not isinstance(value, bool):
        raise ValueError(
            f"`{name}` must be True or False. Received: {name}={value!r}"
        )
    return value


def one_of(name, value, choices):
    """Returns `value` if it is one of `choices`, or raises."""
    if not any(value is c or (type(value) is type(c) and value == c)
               for c in choices):
        raise ValueError(
            f"`{name}` must be one of {list(choices)}. "
            f"Received: {name}={value!r}"
        )
    return value


def size_2d(name, value):
    """Returns `(height, width)` from an int or a pair of positive ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(
            f"`{name}` must be an int or a (height, width) pair of ints. "
            f"Received: {name}={value!r}"
        )
    try:
        return tuple(positive_int(name, v) for v in value)
    except ValueError:
        raise ValueError(
            f"`{name}` must hold positive integers. Received: {name}={value!r}"
        ) from None


def vit(model, action):
    """Raises `ValueError` unless `model` is a `keras_vit.ViT`; `action`
    says what needs one (e.g. "load_weights")."""
    from keras_vit.model import ViT

    if not isinstance(model, ViT):
        backbone = getattr(model, "backbone", None)
        hint = (
            f" (for a {type(model).__name__}, pass its `backbone`)"
            if isinstance(backbone, ViT) else ""
        )
        raise ValueError(
            f"{action} takes a keras_vit.ViT{hint}. Received: model={model!r}"
        )
    return model


def refuse_quantized(model, action, instead):
    """Raises `ValueError` if `model` was quantized by `model.quantize()`:
    `action` (e.g. "save_npz writes float checkpoints") cannot take it;
    `instead` says what to do."""
    quantized = [
        layer.path or layer.name
        for layer in model._flatten_layers()
        if layer.quantization_mode is not None
    ]
    if quantized:
        raise ValueError(
            f"The model's layers were quantized in Keras (`model.quantize()`: "
            f"{', '.join(quantized[:3])}{' ...' if len(quantized) > 3 else ''}), "
            f"and {action}: {instead}. Received: model={model.name!r}"
        )
