import keras
import numpy as np

import keras_vit
from tests import reference
from tests.test_case import assert_config_round_trip
from tests.test_case import assert_output_shape_matches


def test_matches_hand_computation_and_keras():
    x = np.array([[1.0, 2.0, 3.0, 6.0]], "float32")
    layer = keras_vit.layers.LayerNorm(epsilon=1e-6)
    layer.build(x.shape)
    gamma = np.array([1.0, 2.0, 0.5, -1.0], "float32")
    beta = np.array([0.0, 1.0, -1.0, 0.5], "float32")
    layer.set_weights([gamma, beta])
    # mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5
    normed = (x - 3.0) / np.sqrt(3.5 + 1e-6)
    np.testing.assert_allclose(layer(x).numpy(), normed * gamma + beta, rtol=1e-6)

    ref = keras.layers.LayerNormalization(epsilon=1e-6)
    ref.build(x.shape)
    ref.set_weights([gamma, beta])
    np.testing.assert_allclose(layer(x).numpy(), ref(x).numpy(), rtol=1e-5)


def test_mixed_precision_computes_in_float32():
    # Inputs already in bfloat16 (as the residual stream is under
    # mixed_bfloat16); the statistics must be accurate to float32 so that
    # the only error left is rounding the output to bfloat16.
    x = np.random.default_rng(0).normal(3.0, 1.0, size=(2, 3, 1024))
    x = keras.ops.cast(x, "bfloat16")
    layer = keras_vit.layers.LayerNorm(dtype="mixed_bfloat16")
    out = layer(x)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    exact = reference.layer_norm(x.numpy().astype("float64"), 1.0, 0.0)
    err = np.abs(out.numpy().astype("float64") - exact)
    assert np.all(err <= np.abs(exact) * 2.0**-8 + 1e-6)


def test_config_round_trip():
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    layer = keras_vit.layers.LayerNorm(epsilon=1e-5, name="ln")
    assert_config_round_trip(layer, x)
    assert_output_shape_matches(layer, x)
