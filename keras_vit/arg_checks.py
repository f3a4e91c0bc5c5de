"""Eager argument checks shared by the layers, the model and everything
above them (this was `keras_vit.validation`). A leaf: it imports no part of
the package, and Keras only inside the dtype-policy check.

Every check raises `ValueError` naming the argument and the value received,
so a bad argument fails at construction, never deep inside TensorFlow.
"""

import math
import numbers


def _finite_real(value):
    """Whether `value` is a real number (not a bool) that is neither
    infinite nor NaN (nor an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


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
    """Returns `value` as an `int`, or raises if it is not an integer >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < 0
    ):
        raise ValueError(
            f"`{name}` must be a non-negative integer. Received: "
            f"{name}={value!r}"
        )
    return int(value)


#: The bound of an int64 (TensorFlow's seeds, counts and positions).
INT64_BOUND = 2**63


def int_below(name, value, bound, minimum=0, why=None):
    """Returns `value` as an `int` in `[minimum, bound)`, or raises; `why`
    says where the bound comes from (e.g. "an int64 seed")."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not minimum <= value < bound
    ):
        shown = (
            f"2**{bound.bit_length() - 1}"
            if bound & (bound - 1) == 0
            else bound
        )
        reason = f" ({why})" if why else ""
        raise ValueError(
            f"`{name}` must be an integer >= {minimum} and below "
            f"{shown}{reason}. Received: {name}={value!r}"
        )
    return int(value)


def optional_positive_int(name, value):
    """Like `positive_int`, but `None` passes through."""
    return None if value is None else positive_int(name, value)


def rate(name, value):
    """Returns `value` as a `float` in [0, 1), or raises."""
    if not _finite_real(value) or not 0.0 <= value < 1.0:
        raise ValueError(
            f"`{name}` must be a number in [0, 1). Received: {name}={value!r}"
        )
    return float(value)


def fraction(name, value, zero=True):
    """Returns `value` as a `float` in [0, 1] (in (0, 1] without `zero`),
    or raises."""
    if (
        not _finite_real(value)
        or not (0.0 <= value if zero else 0.0 < value)
        or not value <= 1.0
    ):
        interval = "[0, 1]" if zero else "(0, 1]"
        raise ValueError(
            f"`{name}` must be a number in {interval}. Received: "
            f"{name}={value!r}"
        )
    return float(value)


def finite_positive_float(name, value):
    """Returns `value` as a `float` > 0 that is finite (not inf, not NaN),
    or raises."""
    if not _finite_real(value) or not value > 0:
        raise ValueError(
            f"`{name}` must be a finite positive number. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def finite_non_negative_float(name, value):
    """Returns `value` as a `float` >= 0 that is finite (not inf, not NaN),
    or raises."""
    if not _finite_real(value) or not value >= 0:
        raise ValueError(
            f"`{name}` must be a finite number >= 0. Received: {name}={value!r}"
        )
    return float(value)


#: The names these checks had first (both now refuse inf and NaN too).
positive_float = finite_positive_float
non_negative_float = finite_non_negative_float

#: The largest finite float32, and the smallest normal one (XLA and GPUs
#: may flush smaller ones to zero).
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_TINY = 1.1754943508222875e-38


def epsilon(name, value):
    """Returns `value` as a `float` for a normalisation epsilon: finite,
    > 0, and representable in float32 without becoming inf or 0 (where the
    layers compute), or raises."""
    return positive_float32(name, value)


def positive_float32(name, value):
    """Returns `value` as a `float` > 0 that float32 holds without it
    becoming inf or 0 (a number the layers compute with: an epsilon,
    RoPE's `rope_theta`), or raises."""
    value = finite_positive_float(name, value)
    if not _FLOAT32_TINY <= value <= _FLOAT32_MAX:
        raise ValueError(
            f"`{name}` must be a positive number that float32 holds "
            f"(between {_FLOAT32_TINY:g} and {_FLOAT32_MAX:g}). "
            f"Received: {name}={value!r}"
        )
    return value


def non_negative_float32(name, value):
    """Returns `value` as a `float` >= 0 that float32 holds without it
    becoming inf (RoPE's grid offset), or raises."""
    value = finite_non_negative_float(name, value)
    if value > _FLOAT32_MAX:
        raise ValueError(
            f"`{name}` must be a number >= 0 that float32 holds (at most "
            f"{_FLOAT32_MAX:g}). Received: {name}={value!r}"
        )
    return value


def float_dtype_policy(name, value, quantized=True):
    """Returns `value` if it names a dtype policy whose computations and
    variables are floating point, or raises.

    `value` is what a layer's `dtype` takes: `None` (the global policy), a
    dtype or policy name (`"float32"`, `"mixed_bfloat16"`), a
    `keras.DTypePolicy`, its config dict, or a `DTypePolicyMap` (every
    policy in it is checked). An integer, bool or string dtype (`"int32"`,
    `"uint8"`, `DTypePolicy("int32")`) would build integer weights and
    truncate every activation. With `quantized=False`, a quantized policy
    (`"int8_from_float32"`; not inside a map) is refused too.
    """
    # Keras is imported here, not at the top: the CLI imports these checks
    # and its `--help` does not load Keras.
    import keras

    try:
        policy = keras.dtype_policies.get(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be a floating-point dtype policy such as "
            f"'float32' or 'mixed_bfloat16' ({error}). Received: "
            f"{name}={value!r}"
        ) from None
    policies = [policy]
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        policies = [policy.default_policy, *policy.values()]
    for p in policies:
        floating = all(
            keras.backend.is_float_dtype(dtype)
            for dtype in (p.compute_dtype, p.variable_dtype)
        )
        if not floating or (
            not quantized and p is policy and p.quantization_mode is not None
        ):
            where = (
                " (the global policy, keras.config.dtype_policy())"
                if value is None
                else ""
            )
            hint = (
                "; for a quantized model build it in float and call "
                "`model.quantize(mode)`"
                if floating
                else ""
            )
            raise ValueError(
                f"`{name}` must be a floating-point dtype policy such as "
                f"'float32' or 'mixed_bfloat16'{where}, not {p.name!r}{hint}. "
                f"Received: {name}={value!r}"
            )
    return value


def known_last_dim(layer, input_shape, meaning):
    """Returns the last dimension of `input_shape`, or raises if it is
    unknown (`None`): `layer` (a name) builds weights of that width;
    `meaning` says what the dimension is ("the token width")."""
    dim = input_shape[-1]
    if dim is None:
        raise ValueError(
            f"{layer} needs inputs whose last dimension ({meaning}) is known: "
            f"its weights are built for it. Received: inputs of shape "
            f"{tuple(input_shape)}"
        )
    return dim


def head_width(num_heads, dim):
    """`dim // num_heads`, the width of each attention head.

    Raises:
        ValueError: if `num_heads` does not divide the token width `dim`.
    """
    if dim % num_heads:
        raise ValueError(
            "The token width must be divisible by num_heads. Received: "
            f"num_heads={num_heads} for width {dim}"
        )
    return dim // num_heads


def boolean(name, value):
    """Returns `value` if it is a `bool`, or raises."""
    if not isinstance(value, bool):
        raise ValueError(
            f"`{name}` must be True or False. Received: {name}={value!r}"
        )
    return value


def verbosity(name, value):
    """A Keras progress verbosity: `0` (silent), `1` (a progress bar) or `2`
    (one line at the end); `"auto"` is `1`, as in Keras's `Model.predict`.
    Returns the int, or raises."""
    if isinstance(value, str) and value == "auto":
        return 1
    if isinstance(value, bool) or value not in (0, 1, 2):
        raise ValueError(
            f"`{name}` must be 0, 1, 2 or 'auto'. Received: {name}={value!r}"
        )
    return int(value)


def one_of(name, value, choices):
    """Returns `value` if it is one of `choices`, or raises."""
    if not any(
        value is c or (type(value) is type(c) and value == c) for c in choices
    ):
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
