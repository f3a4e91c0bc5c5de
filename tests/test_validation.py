"""The shared argument checks: finite numbers, floating dtype policies."""

import math

import keras
import numpy as np
import pytest

from keras_vit import arg_checks

NON_FINITE = [
    math.inf,
    -math.inf,
    math.nan,
    np.float32("inf"),
    np.float64("nan"),
    10**400,
]


@pytest.mark.parametrize(
    "check",
    [
        arg_checks.finite_positive_float,
        arg_checks.finite_non_negative_float,
        arg_checks.positive_float,  # the older names, same checks
        arg_checks.non_negative_float,
        arg_checks.rate,
        arg_checks.fraction,
        arg_checks.epsilon,
    ],
)
def test_number_checks_refuse_inf_and_nan(check):
    for value in NON_FINITE:
        with pytest.raises(ValueError, match=r"`x`.*Received: x="):
            check("x", value)


def test_number_checks_keep_finite_values():
    assert arg_checks.positive_float("x", 3) == 3.0
    assert arg_checks.finite_positive_float("x", np.float32(0.5)) == 0.5
    assert arg_checks.non_negative_float("x", 0) == 0.0
    assert arg_checks.rate("x", 0.5) == 0.5
    assert arg_checks.fraction("x", 1) == 1.0
    assert arg_checks.epsilon("x", 1e-12) == 1e-12
    for value in (0, -1e-6, True, "1e-6", None):
        with pytest.raises(ValueError, match="x="):
            arg_checks.positive_float("x", value)


def test_an_epsilon_must_survive_float32():
    # float32 turns 1e39 into inf and 1e-300 into 0 (1e-39 is subnormal,
    # flushed to 0 under XLA): the layers compute in float32.
    for value in (1e39, 1e-39, 1e-300):
        with pytest.raises(
            ValueError, match="float32.*Received: layer_norm_epsilon="
        ):
            arg_checks.epsilon("layer_norm_epsilon", value)


FLOATING = [
    None,
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "mixed_float16",
    "mixed_bfloat16",
    keras.DTypePolicy("float16"),
    "int8_from_float32",
    {"class_name": "DTypePolicy", "config": {"name": "float32"}},
    keras.dtype_policies.DTypePolicyMap("mixed_bfloat16"),
]


def test_floating_policies_pass():
    for dtype in FLOATING:
        assert arg_checks.float_dtype_policy("dtype", dtype) is dtype


def _int_map():
    policies = keras.dtype_policies.DTypePolicyMap("float32")
    policies["vit/head"] = keras.DTypePolicy("int32")
    return policies


def test_other_policies_are_refused():
    for dtype in [
        "int32",
        "uint8",
        "int64",
        "bool",
        "string",
        "int8_from_int32",
        keras.DTypePolicy("int32"),
        keras.DTypePolicy("uint8"),
        keras.dtype_policies.DTypePolicyMap("int32"),
        _int_map(),
        "nonsense",
        3,
    ]:
        with pytest.raises(
            ValueError,
            match=r"`dtype` must be a floating-point "
            r"dtype policy.*Received: dtype=",
        ):
            arg_checks.float_dtype_policy("dtype", dtype)


def test_a_global_integer_policy_is_refused_and_said_so():
    keras.config.set_dtype_policy("int32")  # conftest restores float32
    with pytest.raises(ValueError, match=r"global policy.*'int32'.*dtype=None"):
        arg_checks.float_dtype_policy("dtype", None)


def test_quantized_policies_can_be_refused():
    with pytest.raises(
        ValueError, match=r"model.quantize.*dtype='int8_from_float32'"
    ):
        arg_checks.float_dtype_policy(
            "dtype", "int8_from_float32", quantized=False
        )
    # A quantized model's map (its config) is fine.
    policies = keras.dtype_policies.DTypePolicyMap("float32")
    policies["vit/head"] = keras.dtype_policies.get("int8_from_float32")
    assert (
        arg_checks.float_dtype_policy("dtype", policies, quantized=False)
        is policies
    )


def test_non_negative_int():
    assert arg_checks.non_negative_int("n", 0) == 0
    assert arg_checks.non_negative_int("n", np.int64(3)) == 3
    for value in (-1, 1.0, True, None, "2"):
        with pytest.raises(
            ValueError, match=f"`n` must be a non-negative integer.*n={value!r}"
        ):
            arg_checks.non_negative_int("n", value)


def test_int_below():
    assert arg_checks.int_below("n", np.int64(3), 2**63) == 3
    assert arg_checks.int_below("n", 2**63 - 1, 2**63) == 2**63 - 1
    with pytest.raises(ValueError) as info:
        arg_checks.int_below("n", 2**63, 2**63, why="an int64")
    assert str(info.value) == (
        "`n` must be an integer >= 0 and below 2**63 (an int64). Received: "
        f"n={2**63}"
    )
    for value in (0, 10, 1.0, True, None):
        with pytest.raises(
            ValueError,
            match=rf"integer >= 1 and below 10\. Received: n={value!r}",
        ):
            arg_checks.int_below("n", value, 10, minimum=1)
