import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import kernels
from keras_vit.layers import layer_norm
from tests import reference
from tests.helpers import TINY
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches
from tests.helpers import xla_kernel_op_kinds


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


def test_a_float64_layer_computes_in_float64():
    # Statistics in float32 rounded 1 + 1e-9 to 1: the rows came out zeros.
    x = np.array([[1.0, 1.0 + 1e-9, 1.0 + 2e-9]])
    for epsilon in (1e-6, 1e-30):
        layer = keras_vit.layers.LayerNorm(epsilon, dtype="float64")
        layer.build(x.shape)
        gamma, beta = np.array([1.0, 1.0 + 1e-12, 2.0]), np.array([0, 1e-12, 0])
        layer.set_weights([gamma, beta])
        out = layer(x)
        assert keras.backend.standardize_dtype(out.dtype) == "float64"
        exact = reference.layer_norm(x, gamma, beta, epsilon)
        np.testing.assert_allclose(out.numpy(), exact, rtol=1e-6, atol=1e-15)
    # With an epsilon below the variance (4e-19): +-sqrt(3/2), doubled.
    np.testing.assert_allclose(
        out.numpy(), [[-1.2247449, 1e-12, 2.4494897]], rtol=1e-6, atol=1e-6
    )


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
    # not NaN. Its normalised row is 0 and its deviation sqrt(epsilon), so
    # dx = (g - mean(g)) / sqrt(epsilon), d_gamma = 0, d_beta = sum(g).
    x = np.full((2, 8), 3.0, "float32")
    upstream = np.random.default_rng(0).normal(size=x.shape).astype("f4")
    layer = keras_vit.layers.LayerNorm(epsilon=1e-6)
    d_x, d_gamma, d_beta = (g.numpy() for g in _gradients(layer, x, upstream))
    centered = upstream - upstream.mean(-1, keepdims=True)
    np.testing.assert_allclose(d_x, centered / np.sqrt(1e-6), rtol=1e-3)
    np.testing.assert_allclose(d_gamma, 0.0, atol=1e-6)
    np.testing.assert_allclose(d_beta, upstream.sum(0), rtol=1e-6)


def test_a_built_layer_refuses_another_width_by_name():
    layer = keras_vit.layers.LayerNorm()
    layer(np.zeros((2, 3, 8), "float32"))
    assert layer(np.zeros((5, 8), "float32")).shape == (5, 8)  # any rank
    with pytest.raises(
        ValueError, match=r"axis -1 of input shape to have value 8"
    ):
        layer(np.zeros((2, 3, 9), "float32"))


def _xla_kernels(fn, *args):
    """The op kinds of each function XLA must compile in `fn`'s graph."""
    import tensorflow as tf

    graph = tf.function(fn).get_concrete_function(*args).graph
    return xla_kernel_op_kinds(graph)


def test_a_bfloat16_step_without_xla_takes_the_layer_as_one_xla_kernel():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = keras.ops.cast(rng.normal(3.0, 2.0, size=(2, 5, 64)), "bfloat16")
    layer = keras_vit.layers.LayerNorm(dtype="mixed_bfloat16")
    layer.build(x.shape)
    layer.set_weights(list(rng.normal(1.0, 0.3, (2, 64)).astype("float32")))

    def step(x, training=False, xla=False):
        with kernels.compiled_step(layer, xla=xla):
            return layer(x, training=training)

    assert any("Rsqrt" in kinds for kinds in _xla_kernels(step, x))
    # Called directly (an export's trace), in a training step (the
    # closed-form gradient), under XLA or in float32: the plain graph.
    assert not _xla_kernels(lambda x: layer(x), x)
    assert not _xla_kernels(lambda x: step(x, training=True), x)
    assert not _xla_kernels(lambda x: step(x, xla=True), x)
    in_float32 = keras_vit.layers.LayerNorm()
    with kernels.compiled_step(in_float32, xla=False):
        assert not _xla_kernels(in_float32, keras.ops.cast(x, "float32"))

    fused = tf.function(step)(x)
    plain = layer(x)
    assert fused.dtype == plain.dtype == tf.bfloat16
    # The same function to float32 rounding, then rounded to bfloat16: at
    # most one bfloat16 step apart.
    fused, plain = (t.numpy().astype("float64") for t in (fused, plain))
    assert np.all(np.abs(fused - plain) <= np.abs(plain) * 2.0**-7 + 1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_bfloat16_predict_and_evaluate_without_xla_take_the_fused_layer_norm(
    monkeypatch, jit_compile
):
    calls = []
    real = layer_norm.fused_forward

    def spy(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(layer_norm, "fused_forward", spy)
    model = keras_vit.ViT(**TINY, dtype="mixed_bfloat16")
    rng = np.random.default_rng(0)
    for weight in model.weights:  # the head's and norms' are 0 or 1
        if weight.path.endswith(("head/kernel", "gamma", "beta")):
            weight.assign(rng.normal(0.5, 0.5, size=weight.shape))
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    x = rng.uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    want = model(x).numpy()
    assert not calls  # a direct call: the plain graph
    got = model.predict(x, verbose=0)
    # Two LayerNorms a block and the encoder's, where XLA does not compile
    # the step whole.
    assert len(calls) == (0 if jit_compile else 2 * TINY["num_layers"] + 1)
    # A LayerNorm's output may round to the other neighbouring bfloat16.
    np.testing.assert_allclose(got, want, rtol=0.02, atol=0.02)
    calls.clear()
    model.evaluate(x, np.zeros(2, "int32"), verbose=0)
    assert len(calls) == (0 if jit_compile else 2 * TINY["num_layers"] + 1)
