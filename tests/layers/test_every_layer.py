"""Every public layer, in a small model: .keras round trip in safe mode,
an XLA-compiled fit step, and mixed-precision forward passes; on its own:
argument checks, tracing with unknown dimensions, and Keras's own layer test
harness (on TensorFlow and on JAX)."""

import inspect
import json
import math
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras.src.testing import TestCase

import keras_vit
from keras_vit import layers as L
from tests.helpers import backend_env
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


def _model(name, dtype=None):
    """A small classifier around one public layer, images (16, 16, 3) in."""
    images = keras.Input((16, 16, 3))
    x = images
    if name == "Patches":
        x = L.Patches(4, dtype=dtype)(x)  # (B, 16, 48)
    elif name == "StdConv2D":
        x = L.StdConv2D(8, 3, strides=2, padding="same", dtype=dtype)(x)
    elif name == "ResNetBottleneck":
        x = L.ResNetBottleneck(
            16, strides=2, projection=True, groups=4, dtype=dtype
        )(x)
    elif name == "ResNetStem":
        x = L.ResNetStem([1], width=4, groups=4, dtype=dtype)(x)
    else:
        x = L.Patches(4, dtype=dtype)(x)
        x = L.PatchEncoder(16, dtype=dtype)(x)  # (B, 17, 16) tokens
        if name == "TransformerBlock":
            x = L.TransformerBlock(
                2, 32, dropout_rate=0.1, drop_path_rate=0.1, dtype=dtype
            )(x)
        elif name == "MultiHeadSelfAttention":
            x = L.MultiHeadSelfAttention(2, dropout_rate=0.1, dtype=dtype)(x)
        elif name == "LayerNorm":
            x = L.LayerNorm(dtype=dtype)(x)
        elif name == "LayerScale":
            x = L.LayerScale(0.5, dtype=dtype)(x)
        elif name == "AttentionPooling":
            x = L.AttentionPooling(2, 32, dtype=dtype)(x)
        elif name == "TokenPooling":
            x = L.TokenPooling("token", dtype=dtype)(x)
    if len(x.shape) == 4:
        x = keras.layers.GlobalAveragePooling2D(dtype=dtype)(x)
    elif len(x.shape) == 3:
        x = keras.layers.GlobalAveragePooling1D(dtype=dtype)(x)
    outputs = keras.layers.Dense(3, dtype="float32")(x)
    return keras.Model(images, outputs)


NAMES = [
    "AttentionPooling",
    "Patches",
    "PatchEncoder",
    "TransformerBlock",
    "MultiHeadSelfAttention",
    "LayerNorm",
    "LayerScale",
    "TokenPooling",
    "StdConv2D",
    "ResNetBottleneck",
    "ResNetStem",
]


def test_every_public_layer_is_covered():
    assert set(NAMES) == set(keras_vit.layers.__all__)


@pytest.mark.parametrize("name", NAMES)
def test_keras_file_round_trip_in_safe_mode(name, tmp_path):
    model = _model(name)
    for w in model.weights:
        w.assign(rng.normal(scale=0.2, size=w.shape).astype(w.dtype))
    x = rng.uniform(0, 1, (2, 16, 16, 3)).astype("float32")
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_xla_fit_step(name):
    model = _model(name)
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    x = rng.uniform(0, 1, (4, 16, 16, 3)).astype("float32")
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(x, np.arange(4) % 3, epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert any(
        not np.array_equal(b, w.numpy())
        for b, w in zip(before, model.trainable_weights)
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("name", NAMES)
def test_mixed_precision_forward(name, policy):
    # The layer itself computes in the policy's dtype on float32 variables,
    # and the model stays close to its float32 twin (the model's float32
    # Dense output says nothing of the layer by its dtype).
    model = _model(name, dtype=policy)
    randomize_weights(model, scale=0.1)
    compute = policy.removeprefix("mixed_")
    (layer,) = [lay for lay in model.layers if type(lay).__name__ == name]
    assert layer.compute_dtype == compute
    assert {w.dtype for w in layer.weights} <= {"float32"}
    images = rng.uniform(0, 1, (2, 16, 16, 3)).astype("float32")
    inner = keras.Model(model.inputs, layer.output)
    assert keras.backend.standardize_dtype(inner(images).dtype) == compute
    out = model(images).numpy()
    assert np.isfinite(out).all()
    twin = _model(name)
    twin.set_weights(model.get_weights())
    expected = twin(images).numpy()
    np.testing.assert_allclose(out, expected, atol=0.1 * np.abs(expected).max())


# === Arguments, shapes and Keras's own layer harness ===

#: Per public layer: cases of (constructor arguments, an input shape, the
#: output shape). The first case's arguments are the layer's required ones.
LAYERS = {
    "Patches": [
        ({"patch_size": 4}, (2, 8, 8, 3), (2, 4, 48)),
        ({"patch_size": 4, "flatten": False}, (2, 8, 8, 3), (2, 2, 2, 48)),
    ],
    "PatchEncoder": [
        ({"hidden_dim": 8}, (2, 4, 12), (2, 5, 8)),
        ({"hidden_dim": 8}, (2, 2, 2, 12), (2, 5, 8)),
        # 2D embeddings of a flat sequence need its grid.
        (
            {
                "hidden_dim": 8,
                "position_embedding": "learned2d",
                "class_token": False,
                "grid_size": (2, 2),
            },
            (2, 4, 12),
            (2, 4, 8),
        ),
        (
            {
                "hidden_dim": 8,
                "position_embedding": "sincos2d",
                "grid_size": (2, 2),
            },
            (2, 4, 12),
            (2, 5, 8),
        ),
        (
            {
                "hidden_dim": 8,
                "num_register_tokens": 2,
                "position_embedding_tokens": "patches",
                "patch_bias": False,
            },
            (2, 2, 2, 12),
            (2, 7, 8),
        ),
    ],
    "TransformerBlock": [
        ({"num_heads": 2, "mlp_dim": 8}, (2, 5, 8), (2, 5, 8)),
        (
            {
                "num_heads": 2,
                "mlp_dim": 8,
                "dropout_rate": 0.1,
                "attention_dropout_rate": 0.1,
                "drop_path_rate": 0.1,
            },
            (2, 5, 8),
            (2, 5, 8),
        ),
        (
            {
                "num_heads": 2,
                "mlp_dim": 8,
                "dropout_rate": 0.1,
                "attention_dropout_rate": 0.1,
                "drop_path_rate": 0.1,
                "remat": True,
            },
            (2, 5, 8),
            (2, 5, 8),
        ),
        (
            {"num_heads": 2, "mlp_dim": 8, "relative_positions": 5},
            (2, 5, 8),
            (2, 5, 8),
        ),
        (
            {
                "num_heads": 2,
                "mlp_dim": 8,
                "activation": "quick_gelu",
                "layer_scale_init": 0.1,
                "qk_norm": True,
            },
            (2, 5, 8),
            (2, 5, 8),
        ),
    ],
    "MultiHeadSelfAttention": [
        ({"num_heads": 2}, (2, 5, 8), (2, 5, 8)),
        (
            {"num_heads": 2, "dropout_rate": 0.1, "relative_positions": 5},
            (2, 5, 8),
            (2, 5, 8),
        ),
        ({"num_heads": 2, "qk_norm": True}, (2, 5, 8), (2, 5, 8)),
    ],
    "LayerNorm": [({}, (2, 5, 8), (2, 5, 8))],
    "LayerScale": [({}, (2, 5, 8), (2, 5, 8))],
    "AttentionPooling": [
        ({"num_heads": 2, "mlp_dim": 8}, (2, 5, 8), (2, 8)),
        (
            {"num_heads": 4, "mlp_dim": 8, "activation": "gelu_tanh"},
            (2, 3, 8),
            (2, 8),
        ),
    ],
    "TokenPooling": [
        ({}, (2, 5, 8), (2, 8)),
        ({"pooling": "gap", "num_prefix_tokens": 0}, (2, 5, 8), (2, 8)),
    ],
    "StdConv2D": [
        ({"filters": 4, "kernel_size": 3}, (2, 8, 8, 3), (2, 6, 6, 4)),
        (
            {"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"},
            (2, 8, 8, 3),
            (2, 4, 4, 4),
        ),
    ],
    "ResNetBottleneck": [
        ({"filters": 16, "groups": 4}, (2, 4, 4, 16), (2, 4, 4, 16)),
        (
            {"filters": 16, "strides": 2, "projection": True, "groups": 4},
            (2, 8, 8, 3),
            (2, 4, 4, 16),
        ),
    ],
    "ResNetStem": [
        (
            {"block_units": [1, 1], "width": 4, "groups": 4},
            (2, 16, 16, 3),
            (2, 2, 2, 32),
        )
    ],
}
CASES = [(name, *case) for name, cases in LAYERS.items() for case in cases]
CASE_IDS = [
    f"{name}-{i}" for name, cases in LAYERS.items() for i in range(len(cases))
]


def test_every_public_layer_has_cases():
    assert set(LAYERS) == set(keras_vit.layers.__all__)


def _float_arguments(cls):
    """The constructor arguments of `cls` whose default is a float."""
    return [
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if isinstance(p.default, float)
    ]


@pytest.mark.parametrize("name", NAMES)
def test_float_arguments_must_be_finite_and_in_range(name):
    cls = getattr(L, name)
    required = LAYERS[name][0][0]
    floats = _float_arguments(cls)
    assert floats or name in ("Patches", "PatchEncoder", "TokenPooling")
    for argument in floats:
        for value in (math.inf, -math.inf, math.nan, 1e39):
            with pytest.raises(
                ValueError, match=re.escape(f"Received: {argument}={value!r}")
            ):
                cls(**required, **{argument: value})


@pytest.mark.parametrize("name", NAMES)
def test_integer_dtype_policies_are_refused(name):
    # An integer policy builds integer weights and truncates activations.
    cls = getattr(L, name)
    required = LAYERS[name][0][0]
    for dtype in ("int32", "uint8", keras.DTypePolicy("int32")):
        with pytest.raises(
            ValueError, match=r"`dtype` must be a floating.*dtype="
        ):
            cls(**required, dtype=dtype)
    keras.config.set_dtype_policy("int32")  # the conftest fixture restores it
    with pytest.raises(ValueError, match=r"global policy.*dtype=None"):
        cls(**required)


def _unknown(shape):
    """`shape` with every axis but the last unknown."""
    return (None,) * (len(shape) - 1) + (shape[-1],)


@pytest.mark.parametrize("name, kwargs, shape, out_shape", CASES, ids=CASE_IDS)
def test_traces_with_unknown_batch_and_token_counts(
    name, kwargs, shape, out_shape
):
    import tensorflow as tf

    layer = getattr(L, name)(**kwargs)
    x = rng.normal(size=shape).astype("float32")
    expected = keras.ops.convert_to_numpy(layer(x))
    assert expected.shape == out_shape
    for training in (False, True):
        # Traced and called in this iteration, with this `training`.
        fn = tf.function(
            lambda t: layer(t, training=training),  # noqa: B023
            input_signature=[tf.TensorSpec(_unknown(shape), "float32")],
        )
        out = fn(x).numpy()
        assert out.shape == out_shape
        if not training:
            np.testing.assert_allclose(out, expected, atol=1e-5)
    # Built on unknown dims too (symbolically), its output shape is the
    # layer's compute_output_shape.
    fresh = getattr(L, name)(**kwargs)
    if name == "PatchEncoder" and "grid_size" not in kwargs:
        fresh = L.PatchEncoder(
            **kwargs, grid_size=(2, 2)
        )  # learned: needs the grid
    symbolic = fresh(keras.Input(batch_shape=_unknown(shape)))
    assert tuple(symbolic.shape) == tuple(
        fresh.compute_output_shape(_unknown(shape))
    )
    assert keras.ops.convert_to_numpy(fresh(x)).shape == out_shape


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_last_dimension_is_refused_by_name(name):
    if name in ("Patches", "TokenPooling"):  # no weights of that width
        return
    kwargs, shape, _ = LAYERS[name][0]
    batch_shape = (*_unknown(shape)[:-1], None)
    with pytest.raises(
        ValueError, match=r"needs inputs whose last dimension.*known"
    ):
        getattr(L, name)(**kwargs)(keras.Input(batch_shape=batch_shape))


class _KerasHarness(TestCase):
    def runTest(self):  # unittest needs one; the harness is called directly
        pass


def run_keras_layer_test(name, kwargs, shape, out_shape):
    """Keras's own harness: serialization round trip, build and symbolic
    calls (weights, seed generators), eager call, compute_output_shape and
    compute_output_spec against the output, a compiled training step, and
    mixed_float16 (output dtypes, float32 variables)."""
    _KerasHarness().run_layer_test(
        getattr(L, name),
        kwargs,
        input_shape=shape,
        expected_output_shape=out_shape,
        expected_output_dtype="float32",
        supports_masking=False,
    )


@pytest.mark.parametrize("name, kwargs, shape, out_shape", CASES, ids=CASE_IDS)
def test_keras_layer_test_harness(name, kwargs, shape, out_shape):
    run_keras_layer_test(name, kwargs, shape, out_shape)


#: The cases the harness runs on JAX: every case with dropout (seeds on
#: JAX), and each other layer's first case, but for the layers that run
#: inside one of those, as their own training steps' jax.jit would run
#: them: a layer's first case where a case of it with dropout runs (the
#: same calls and dropout's), and StdConv2D and ResNetBottleneck, of
#: which the ResNetStem's first case is made. (Every case runs on
#: TensorFlow: `test_keras_layer_test_harness`.)
JAX_CASE_IDS = [
    case_id
    for case_id, (name, kwargs, *_) in zip(CASE_IDS, CASES)
    if "dropout_rate" in kwargs
    or (
        case_id.endswith("-0")
        and name not in ("StdConv2D", "ResNetBottleneck")
        and not any("dropout_rate" in case[0] for case in LAYERS[name])
    )
]


def test_every_layer_runs_the_harness_on_jax_itself_or_inside_another():
    # The stem is made of the left-out layers; the dropout cases hold
    # their layer's first case's arguments.
    stem = L.ResNetStem(**LAYERS["ResNetStem"][0][0])
    stem.build(LAYERS["ResNetStem"][0][1])
    inside = {type(layer).__name__ for layer in stem._flatten_layers()}
    assert {"StdConv2D", "ResNetBottleneck"} <= inside
    ran = {case_id.rsplit("-", 1)[0] for case_id in JAX_CASE_IDS}
    assert ran | inside >= set(NAMES)
    for case_id, (name, kwargs, *_) in zip(CASE_IDS, CASES):
        if case_id in JAX_CASE_IDS and "dropout_rate" in kwargs:
            assert LAYERS[name][0][0].items() <= kwargs.items()


JAX_HARNESS = r"""
import json, keras
from tests.layers import test_every_layer as t

failures = {}
for case_id, case in zip(t.CASE_IDS, t.CASES):
    if case_id not in t.JAX_CASE_IDS:
        continue
    try:
        t.run_keras_layer_test(*case)
    except Exception as error:
        failures[case_id] = f"{type(error).__name__}: {str(error)[:300]}"
print(json.dumps({"backend": keras.backend.backend(), "failures": failures}))
"""


@pytest.mark.slow
def test_keras_layer_test_harness_on_jax():
    # The harness's compiled training step is a jax.jit there (the default
    # jit_compile); remat with dropout crashed it (UnexpectedTracerError).
    pytest.importorskip("jax")
    env = backend_env("jax")
    process = subprocess.run(
        [sys.executable, "-c", JAX_HARNESS],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert result == {"backend": "jax", "failures": {}}
