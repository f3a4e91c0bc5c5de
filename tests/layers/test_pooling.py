import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches


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


def test_token_pooling_traces_with_an_unknown_token_count():
    import tensorflow as tf

    tokens = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    for width in (3, None):
        layer = keras_vit.layers.TokenPooling("token")
        fn = tf.function(
            layer, input_signature=[tf.TensorSpec((None, None, width))]
        )
        np.testing.assert_array_equal(fn(tokens).numpy(), tokens[:, 0])
    symbolic = keras_vit.layers.TokenPooling()(keras.Input((None, 3)))
    assert symbolic.shape == (None, 3)


def test_gap_with_no_token_after_the_prefix_is_refused():
    # The mean of no tokens is NaN: refused, named, eagerly and symbolically.
    for tokens, prefix in ((1, 1), (3, 5), (2, 2)):
        layer = keras_vit.layers.TokenPooling("gap", num_prefix_tokens=prefix)
        match = (
            rf"num_prefix_tokens={prefix} for tokens of shape "
            rf"\(2, {tokens}, 3\)"
        )
        with pytest.raises(ValueError, match=match):
            layer(np.ones((2, tokens, 3), "float32"))
        with pytest.raises(ValueError, match=f"num_prefix_tokens={prefix}"):
            keras_vit.layers.TokenPooling("gap", prefix)(
                keras.Input((tokens, 3))
            )
    # Built on enough tokens, then called on too few.
    layer = keras_vit.layers.TokenPooling("gap", num_prefix_tokens=1)
    layer(np.ones((2, 4, 3), "float32"))
    with pytest.raises(ValueError, match="num_prefix_tokens=1"):
        layer(np.ones((2, 1, 3), "float32"))
    with pytest.raises(ValueError, match="pooling='token'.*none"):
        keras_vit.layers.TokenPooling("token")(np.ones((2, 0, 3), "float32"))


def test_too_few_tokens_are_refused_when_their_count_is_known_only_at_run_time():  # noqa: E501
    # Traced over (B, None, D), "gap" of no patch tokens returned NaN and
    # "token" of no token an empty batch, silently.
    import tensorflow as tf

    for pooling, prefix, tokens in (
        ("gap", 3, 3),
        ("gap", 1, 0),
        ("token", 1, 0),
    ):
        layer = keras_vit.layers.TokenPooling(pooling, num_prefix_tokens=prefix)
        fn = tf.function(
            layer, input_signature=[tf.TensorSpec((None, None, 3))]
        )
        np.testing.assert_allclose(
            fn(np.ones((2, 4, 3), "float32")).numpy(), 1.0
        )
        # (TensorFlow's message escapes the quotes.)
        received = (
            f"num_prefix_tokens={prefix} for " if pooling == "gap" else ""
        )
        match = (
            rf"pooling=.*{pooling}.*Received: {received}a token count of\] "
            rf"\[{tokens}\]"
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match=match):
            fn(np.ones((2, tokens, 3), "float32"))
