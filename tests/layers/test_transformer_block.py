import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from tests import reference
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


def _block(**kwargs):
    kwargs.setdefault("num_heads", 4)
    kwargs.setdefault("mlp_dim", 24)
    return keras_vit.layers.TransformerBlock(**kwargs)


def test_matches_numpy_reference():
    x = rng.normal(size=(2, 7, 16)).astype("float32")
    layer = _block()
    layer(x)
    randomize_weights(layer, scale=0.3)
    out, weights = layer(x, return_attention_scores=True)
    ref_out, ref_weights = reference.block(
        x.astype("float64"), reference.block_weights(layer), 4
    )
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-4)
    np.testing.assert_allclose(weights.numpy(), ref_weights, atol=1e-5)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(layer(x).numpy(), out.numpy())


def test_symbolic_call_with_attention_scores():
    inputs = keras.Input((7, 16))
    out, weights = _block()(inputs, return_attention_scores=True)
    assert out.shape == (None, 7, 16)
    assert weights.shape == (None, 4, 7, 7)
    assert weights.dtype == "float32"


def test_dropout_only_in_training():
    x = rng.normal(size=(4, 5, 16)).astype("float32")
    layer = _block(
        dropout_rate=0.5, attention_dropout_rate=0.5, drop_path_rate=0.5
    )
    np.testing.assert_array_equal(
        layer(x).numpy(), layer(x, training=False).numpy()
    )
    assert not np.allclose(layer(x, training=True).numpy(), layer(x).numpy())


def test_drop_path_drops_whole_examples():
    # Stochastic depth keeps or drops a residual branch for a whole example,
    # rescaling kept ones by 1 / keep.
    layer = _block(drop_path_rate=0.5)
    layer(np.zeros((1, 3, 16), "float32"))
    branch = np.ones((64, 3, 16), "float32")
    out = layer.drop_path(branch, training=True).numpy()
    per_example = out.reshape(64, -1)
    for row in per_example:
        assert np.all(row == 0.0) or np.allclose(row, 2.0)
    kept = np.mean(per_example[:, 0] > 0)
    assert 0.25 < kept < 0.75


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_softmax_in_float32(policy):
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    layer = _block(dtype=policy)
    out, weights = layer(x, return_attention_scores=True)
    assert keras.backend.standardize_dtype(weights.dtype) == "float32"
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert np.isfinite(out.numpy().astype("float32")).all()
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)


def test_bad_arguments():
    for kwargs, match in (
        ({"num_heads": 0}, "num_heads=0"),
        ({"mlp_dim": -1}, "mlp_dim=-1"),
        ({"dropout_rate": 1.0}, "dropout_rate=1.0"),
        ({"attention_dropout_rate": -0.1}, "attention_dropout_rate=-0.1"),
        ({"drop_path_rate": 2}, "drop_path_rate=2"),
        ({"layer_norm_epsilon": 0}, "layer_norm_epsilon=0"),
    ):
        with pytest.raises(ValueError, match=match):
            _block(**kwargs)
    with pytest.raises(ValueError, match="num_heads=4 for width 10"):
        _block()(np.zeros((1, 3, 10), "float32"))


def test_config_round_trip_and_output_shape():
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    layer = _block(
        dropout_rate=0.1,
        attention_dropout_rate=0.2,
        drop_path_rate=0.3,
        layer_norm_epsilon=1e-5,
        name="blk",
    )
    assert_config_round_trip(layer, x)
    assert_output_shape_matches(layer, x)


def test_gated_mlp_by_hand():
    # Width 2, one gated unit; the attention branch zeroed. norm2 takes
    # the token (3, -3) to (1, -1); the gate reads the first feature (1),
    # the value the second (-1): silu(1) * -1 = -1 / (1 + e^-1), which
    # mlp_fc2 writes as (1, 2) times it onto the residual.
    layer = _block(
        num_heads=1, mlp_dim=1, use_gated_mlp=True, activation="silu"
    )
    x = np.array([[[3.0, -3.0]]], "float32")
    layer(x)
    assert layer.mlp_fc1.kernel.shape == (2, 2)
    assert layer.mlp_fc2.kernel.shape == (1, 2)
    for variable in layer.attention.weights:
        variable.assign(np.zeros(variable.shape))
    layer.mlp_fc1.kernel.assign([[1.0, 0.0], [0.0, 1.0]])
    layer.mlp_fc1.bias.assign([0.0, 0.0])
    layer.mlp_fc2.kernel.assign([[1.0, 2.0]])
    layer.mlp_fc2.bias.assign([0.0, 0.0])
    product = -1.0 / (1.0 + np.exp(-1.0))  # -0.7310586
    np.testing.assert_allclose(
        layer(x).numpy(), [[[3 + product, -3 + 2 * product]]], atol=1e-5
    )


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_gated_mlp_matches_numpy_reference_and_round_trips(activation):
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    layer = _block(mlp_dim=12, use_gated_mlp=True, activation=activation)
    layer(x)
    randomize_weights(layer, scale=0.3)
    ref_out, _ = reference.block(
        x.astype("float64"), reference.block_weights(layer), 4, 1e-6, activation
    )
    np.testing.assert_allclose(layer(x).numpy(), ref_out, atol=1e-4)
    # Training takes the same gated path (not the fused GELU of the
    # plain MLP).
    np.testing.assert_allclose(
        layer(x, training=True).numpy(), ref_out, atol=1e-4
    )
    assert_config_round_trip(layer, x)
    with pytest.raises(ValueError, match="use_gated_mlp='yes'"):
        _block(use_gated_mlp="yes")


def test_gated_mlp_trains_with_remat_and_mixed_precision():
    x = rng.normal(size=(2, 5, 16)).astype("float32")
    grads = {}
    for remat in (False, True):
        layer = _block(
            mlp_dim=12, use_gated_mlp=True, activation="silu", remat=remat
        )
        layer(x)
        keras.utils.set_random_seed(1)
        randomize_weights(layer, scale=0.3)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x, training=True) ** 2)
        grads[remat] = tape.gradient(loss, layer.mlp_fc1.kernel).numpy()
    np.testing.assert_allclose(grads[True], grads[False], rtol=1e-5)
    assert np.abs(grads[False]).max() > 0
    half = _block(use_gated_mlp=True, activation="silu", dtype="mixed_bfloat16")
    out = half(x, training=True)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert np.isfinite(out.numpy().astype("float32")).all()
