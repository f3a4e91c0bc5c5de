"""Every public layer, in a small model: .keras round trip in safe mode,
an XLA-compiled fit step, and mixed-precision forward passes."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import layers as L

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
        x = L.ResNetBottleneck(16, strides=2, projection=True, groups=4, dtype=dtype)(x)
    elif name == "ResNetStem":
        x = L.ResNetStem([1], width=4, groups=4, dtype=dtype)(x)
    else:
        x = L.Patches(4, dtype=dtype)(x)
        x = L.PatchEncoder(16, dtype=dtype)(x)  # (B, 17, 16) tokens
        if name == "TransformerBlock":
            x = L.TransformerBlock(2, 32, dropout_rate=0.1, drop_path_rate=0.1, dtype=dtype)(x)
        elif name == "MultiHeadSelfAttention":
            x = L.MultiHeadSelfAttention(2, dropout_rate=0.1, dtype=dtype)(x)
        elif name == "LayerNorm":
            x = L.LayerNorm(dtype=dtype)(x)
        elif name == "TokenPooling":
            x = L.TokenPooling("token", dtype=dtype)(x)
    if len(x.shape) == 4:
        x = keras.layers.GlobalAveragePooling2D(dtype=dtype)(x)
    elif len(x.shape) == 3:
        x = keras.layers.GlobalAveragePooling1D(dtype=dtype)(x)
    outputs = keras.layers.Dense(3, dtype="float32")(x)
    return keras.Model(images, outputs)


NAMES = ["Patches", "PatchEncoder", "TransformerBlock", "MultiHeadSelfAttention",
         "LayerNorm", "TokenPooling", "StdConv2D", "ResNetBottleneck", "ResNetStem"]


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
    model.compile(keras.optimizers.Adam(1e-2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    x = rng.uniform(0, 1, (4, 16, 16, 3)).astype("float32")
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(x, np.arange(4) % 3, epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert any(not np.array_equal(b, w.numpy())
               for b, w in zip(before, model.trainable_weights))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("name", NAMES)
def test_mixed_precision_forward(name, policy):
    model = _model(name, dtype=policy)
    out = model(rng.uniform(0, 1, (2, 16, 16, 3)).astype("float32"))
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert np.isfinite(out.numpy()).all()
