import numpy as np
import pytest

import keras_vit
from tests import reference
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches
from tests.helpers import randomize_weights


def _reference_weights(layer):
    """The layer's weights as `reference.attention` takes them."""
    return {
        "qkv_kernel": layer.qkv.kernel.numpy(),
        "qkv_bias": layer.qkv.bias.numpy(),
        "proj_kernel": layer.proj.kernel.numpy(),
        "proj_bias": layer.proj.bias.numpy(),
        "relative": (
            layer.relative_position_embedding.numpy()
            if layer.relative_positions
            else None
        ),
    }


def test_matches_numpy_reference_and_config():
    x = np.random.default_rng(0).normal(size=(2, 6, 12)).astype("float32")
    layer = keras_vit.layers.MultiHeadSelfAttention(num_heads=3, name="mhsa")
    layer(x)
    randomize_weights(layer, scale=0.3)
    out, weights = layer(x, return_attention_scores=True)
    ref = _reference_weights(layer)
    ref_out, ref_weights = reference.attention(x.astype("float64"), ref, 3)
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-4)
    np.testing.assert_allclose(weights.numpy(), ref_weights, atol=1e-5)
    assert_config_round_trip(layer, x)
    assert_output_shape_matches(layer, x)


def test_qkv_initialisation_is_xavier_per_projection():
    layer = keras_vit.layers.MultiHeadSelfAttention(num_heads=4)
    layer(np.zeros((1, 2, 256), "float32"))
    kernel = layer.qkv.kernel.numpy()
    assert kernel.shape == (256, 768)
    limit = np.sqrt(6.0 / (256 + 256))  # xavier for one (D, D) projection
    assert np.abs(kernel).max() <= limit
    assert np.abs(kernel).max() > 0.95 * limit


# One token: a softmax over one key, which Keras warns about (rightly here).
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")
@pytest.mark.parametrize("tokens", [1, 2, 6])
def test_relative_positions_match_numpy_reference_and_config(tokens):
    x = np.random.default_rng(0).normal(size=(2, tokens, 12)).astype("float32")
    layer = keras_vit.layers.MultiHeadSelfAttention(
        num_heads=3, relative_positions=tokens
    )
    layer(x)
    assert tuple(layer.relative_position_embedding.shape) == (
        2 * tokens - 1,
        12,
    )
    randomize_weights(layer, scale=0.3)
    out, weights = layer(x, return_attention_scores=True)
    ref = _reference_weights(layer)
    assert ref["relative"] is not None
    ref_out, ref_weights = reference.attention(x.astype("float64"), ref, 3)
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-4)
    np.testing.assert_allclose(weights.numpy(), ref_weights, atol=1e-5)
    # The relative term matters: without it the outputs differ.
    if tokens > 1:
        plain, _ = reference.attention(
            x.astype("float64"), {**ref, "relative": None}, 3
        )
        assert np.abs(plain - ref_out).max() > 1e-2
    assert_config_round_trip(layer, x)
    assert_output_shape_matches(layer, x)


def test_relative_positions_reject_another_sequence_length():
    layer = keras_vit.layers.MultiHeadSelfAttention(2, relative_positions=5)
    with pytest.raises(ValueError, match=r"relative_positions=5.*\(1, 7, 8\)"):
        layer(np.zeros((1, 7, 8), "float32"))
    with pytest.raises(ValueError, match="relative_positions=0"):
        keras_vit.layers.MultiHeadSelfAttention(2, relative_positions=0)


def test_a_built_layer_refuses_another_length_or_width_by_name():
    # Once built, other inputs failed deep in a reshape (InvalidArgumentError).
    layer = keras_vit.layers.MultiHeadSelfAttention(2, relative_positions=5)
    layer(np.zeros((1, 5, 8), "float32"))
    with pytest.raises(
        ValueError, match=r"axis 1 of input shape to have value 5.*\(1, 7, 8\)"
    ):
        layer(np.zeros((1, 7, 8), "float32"))
    block = keras_vit.layers.TransformerBlock(2, 8, relative_positions=5)
    block(np.zeros((1, 5, 8), "float32"))
    with pytest.raises(
        ValueError, match=r"axis 1 of input shape to have value 5.*\(1, 3, 8\)"
    ):
        block(np.zeros((1, 3, 8), "float32"))
    plain = keras_vit.layers.MultiHeadSelfAttention(2)
    plain(np.zeros((1, 5, 8), "float32"))
    assert plain(np.zeros((2, 9, 8), "float32")).shape == (
        2,
        9,
        8,
    )  # any length
    with pytest.raises(
        ValueError, match=r"axis -1 of input shape to have value 8"
    ):
        plain(np.zeros((1, 5, 6), "float32"))


@pytest.mark.parametrize(
    "layer",
    [
        lambda: keras_vit.layers.MultiHeadSelfAttention(num_heads=3),
        lambda: keras_vit.layers.AttentionPooling(num_heads=3, mlp_dim=8),
    ],
    ids=["attention", "attention_pooling"],
)
def test_heads_must_divide_the_token_width(layer):
    with pytest.raises(ValueError, match="num_heads=3 for width 16"):
        layer()(np.zeros((1, 4, 16), "float32"))
