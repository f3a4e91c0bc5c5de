import keras
import numpy as np
import pytest

import keras_vit
from tests import reference
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches


def test_matches_hand_computation_and_keras():
    x = np.array([[1.0, 2.0, 3.0, 6.0]], "float32")
    layer = keras_vit.layers.LayerNorm(epsilon=1e-6)
    layer.build(x.shape)
    gamma = np.array([1.0, 2.0, 0.5, -1.0], "float32")
    beta = np.array([0.0, 1.0, -1.0, 0.5], "float32")
    layer.set_weights([gamma, beta])
    # mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5
    normed = (x - 3.0) / np.sqrt(3.5 + 1e-6)
    np.testing.assert_allclose(
        layer(x).numpy(), normed * gamma + beta, rtol=1e-6
    )

    ref = keras.layers.LayerNormalization(epsilon=1e-6)
    ref.build(x.shape)
    ref.set_weights([gamma, beta])
    np.testing.assert_allclose(layer(x).numpy(), ref(x).numpy(), rtol=1e-5)


def test_mixed_precision_computes_in_float32():
    # Inputs already in bfloat16 (as the residual stream is under
    # mixed_bfloat16); the statistics, the scale and the offset must be
    # float32 so that the only error left is rounding the output to
    # bfloat16 (a scale rounded to bfloat16 first doubles it).
    rng = np.random.default_rng(0)
    x = keras.ops.cast(rng.normal(3.0, 1.0, size=(2, 3, 1024)), "bfloat16")
    layer = keras_vit.layers.LayerNorm(dtype="mixed_bfloat16")
    layer.build(x.shape)
    gamma, beta = rng.normal(1.0, 0.3, (2, 1024)).astype("float32")
    layer.set_weights([gamma, beta])
    out = layer(x)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    exact = reference.layer_norm(x.numpy().astype("float64"), gamma, beta)
    err = np.abs(out.numpy().astype("float64") - exact)
    assert np.all(err <= np.abs(exact) * 2.0**-8 + 1e-6)


def test_config_round_trip():
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    layer = keras_vit.layers.LayerNorm(epsilon=1e-5, name="ln")
    assert_config_round_trip(layer, x)
    assert_output_shape_matches(layer, x)


def _gradients(layer, x, upstream):
    import tensorflow as tf

    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x) * upstream)
    return tape.gradient(loss, [x, *layer.trainable_weights])


def test_closed_form_gradient_matches_autodiff_of_keras_layer_norm():
    # The backward pass is written out by hand; it must equal automatic
    # differentiation of Keras's own layer, for the input and both weights,
    # also when the rows have a large mean (as ViT residual streams do).
    rng = np.random.default_rng(0)
    x = (
        rng.normal(size=(3, 5, 64)) * rng.uniform(0.1, 4.0, (3, 5, 1))
        + rng.normal(0.0, 20.0, (3, 5, 1))
    ).astype("float32")
    upstream = rng.normal(size=x.shape).astype("float32")
    gamma = rng.normal(size=64).astype("float32")
    beta = rng.normal(size=64).astype("float32")
    ours = keras_vit.layers.LayerNorm(epsilon=1e-6)
    ref = keras.layers.LayerNormalization(epsilon=1e-6)
    for layer in (ours, ref):
        layer.build(x.shape)
        layer.set_weights([gamma, beta])
    for got, want, name in zip(
        _gradients(ours, x, upstream),
        _gradients(ref, x, upstream),
        ("inputs", "gamma", "beta"),
    ):
        scale = np.abs(want.numpy()).max()
        np.testing.assert_allclose(
            got.numpy(), want.numpy(), atol=1e-5 * scale, err_msg=name
        )


def test_closed_form_gradient_is_finite_for_constant_rows():
    # A constant row has zero variance: the gradient is epsilon-bounded,
    # not NaN.
    x = np.full((2, 8), 3.0, "float32")
    layer = keras_vit.layers.LayerNorm()
    grads = _gradients(layer, x, np.ones_like(x))
    assert all(np.all(np.isfinite(g.numpy())) for g in grads)


def test_a_built_layer_refuses_another_width_by_name():
    layer = keras_vit.layers.LayerNorm()
    layer(np.zeros((2, 3, 8), "float32"))
    assert layer(np.zeros((5, 8), "float32")).shape == (5, 8)  # any rank
    with pytest.raises(
        ValueError, match=r"axis -1 of input shape to have value 8"
    ):
        layer(np.zeros((2, 3, 9), "float32"))
