import numpy as np
import pytest

import keras_vit
from tests.test_case import assert_config_round_trip
from tests.test_case import assert_output_shape_matches


def test_token_and_gap():
    tokens = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    token = keras_vit.layers.TokenPooling("token")(tokens).numpy()
    np.testing.assert_array_equal(token, tokens[:, 0])
    gap = keras_vit.layers.TokenPooling("gap", num_prefix_tokens=1)(tokens)
    np.testing.assert_allclose(gap.numpy(), tokens[:, 1:].mean(1))
    gap0 = keras_vit.layers.TokenPooling("gap", num_prefix_tokens=0)(tokens)
    np.testing.assert_allclose(gap0.numpy(), tokens.mean(1))


def test_bad_arguments_and_config():
    with pytest.raises(ValueError, match="pooling='max'"):
        keras_vit.layers.TokenPooling("max")
    with pytest.raises(ValueError, match="num_prefix_tokens=0"):
        keras_vit.layers.TokenPooling("token", num_prefix_tokens=0)
    with pytest.raises(ValueError, match="num_prefix_tokens=-1"):
        keras_vit.layers.TokenPooling("gap", num_prefix_tokens=-1)
    tokens = np.ones((2, 4, 3), "float32")
    layer = keras_vit.layers.TokenPooling("gap", 1, name="pool")
    assert_config_round_trip(layer, tokens)
    assert_output_shape_matches(layer, tokens)
