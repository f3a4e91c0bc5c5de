"""DINOv3's train-time RoPE coordinate augmentations (`shift_coords`,
`jitter_coords`, `rescale_coords` of `keras_vit.layers.rotary`, `ViT`'s
`rope_*_coords`): off at inference, drawn within their ranges in
training, seeded, serialised, and the same on JAX."""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers.rotary import RotaryEmbedding
from keras_vit.layers.rotary import rope_table
from tests.helpers import randomize_weights
from tests.helpers import run_on_jax

AUGMENTED = dict(
    rope_shift_coords=0.25, rope_jitter_coords=1.5, rope_rescale_coords=2.0
)
PATCHES = np.zeros((1, 3, 4, 8), "float32")


def _model(**kwargs):
    """Random weights: a fresh model's zero class token and biases would
    attend alike to every key, rotated or not."""
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        mlp_dim=32,
        include_top=False,
        position_embedding="rope",
        **kwargs,
    )
    randomize_weights(model)
    return model


def _layer(**kwargs):
    return RotaryEmbedding(head_dim=8, num_prefix_tokens=1, **kwargs)


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_inference_is_unchanged():
    plain, augmented = _model(), _model(**AUGMENTED)
    augmented.set_weights(plain.get_weights())
    images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3))
    expected = plain.predict(images, verbose=0)
    np.testing.assert_array_equal(
        augmented.predict(images, verbose=0), expected
    )
    eager = _numpy(plain(images, training=False))
    np.testing.assert_array_equal(
        _numpy(augmented(images, training=False)), eager
    )
    # With none given, training gives the inference table too.
    np.testing.assert_array_equal(
        _numpy(_layer()(PATCHES, training=True)),
        _numpy(rope_table(3, 4, 8, 100.0, 1)),
    )
    trained = _numpy(augmented(images, training=True))
    assert np.abs(trained - eager).max() > 1e-4


def test_a_layer_without_augmentations_has_no_generator():
    assert _layer().seed_generator is None
    assert not _model().non_trainable_variables  # nothing new to save


@pytest.mark.parametrize(
    "kwargs, check",
    [
        (
            {"shift_coords": 0.3},
            lambda shift, scale: (
                np.all(np.abs(shift) <= 0.3) and np.all(scale == 1)
            ),
        ),
        (  # per axis, log-uniform in [1/j, j]
            {"jitter_coords": 1.5},
            lambda shift, scale: (
                np.all(shift == 0)
                and np.all(np.abs(np.log(scale)) <= math.log(1.5) + 1e-6)
            ),
        ),
        (  # one factor for both axes
            {"rescale_coords": 2.0},
            lambda shift, scale: (
                np.all(shift == 0)
                and scale[0] == scale[1]
                and abs(np.log(scale[0])) <= math.log(2.0) + 1e-6
            ),
        ),
    ],
)
def test_draws_are_within_their_ranges(kwargs, check):
    layer = _layer(seed=1, **kwargs)
    draws = [[_numpy(d) for d in layer._draws("float32")] for _ in range(200)]
    assert all(check(shift, scale) for shift, scale in draws)
    # They vary from step to step and fill the range.
    values = np.array([np.concatenate(d) for d in draws])
    assert np.ptp(values, axis=0).max() > 0.5 * (
        kwargs.get("shift_coords", 0) * 2 or math.log(max(kwargs.values())) * 2
    )


def test_the_training_table_is_the_drawn_coordinates():
    """The shift is added, then the jitter and rescale multiply, as timm's
    `_apply_coord_augs`: the table equals `rope_table` of the draws of a
    layer seeded alike, and differs from one call to the next."""
    kwargs = dict(shift_coords=0.2, jitter_coords=1.3, rescale_coords=1.7)
    layer, twin = _layer(seed=7, **kwargs), _layer(seed=7, **kwargs)
    shift, scale = (_numpy(d) for d in twin._draws("float32"))
    # (y + s) * scale, by hand for the first patch: y = -2/3, x = -3/4.
    table = _numpy(layer(PATCHES, training=True))
    expected = rope_table(3, 4, 8, 100.0, 1, shift=shift, scale=scale)
    np.testing.assert_allclose(table, _numpy(expected), atol=1e-6)
    y = (-2 / 3 + shift[0]) * scale[0]
    np.testing.assert_allclose(table[1, 0], np.sin(2 * np.pi * y), atol=1e-5)
    np.testing.assert_array_equal(table[0], [0] * 8 + [1] * 8)  # prefix
    assert np.abs(_numpy(layer(PATCHES, training=True)) - table).max() > 1e-3
    np.testing.assert_array_equal(
        _numpy(layer(PATCHES, training=False)),
        _numpy(rope_table(3, 4, 8, 100.0, 1)),
    )


def test_a_dynamic_size_model_draws_for_each_grid():
    """The grid's sides are tensors there: the draws apply to them too."""
    model = _model(dynamic_image_size=True, **AUGMENTED)
    for shape in ((1, 16, 16, 3), (1, 12, 20, 3)):
        images = np.random.default_rng(3).uniform(0, 255, shape)
        plain = _numpy(model(images, training=False))
        trained = _numpy(model(images, training=True))
        assert np.all(np.isfinite(trained))
        assert np.abs(trained - plain).max() > 1e-4


def test_seeded():
    first = _numpy(_layer(seed=3, shift_coords=0.5)(PATCHES, training=True))
    again = _numpy(_layer(seed=3, shift_coords=0.5)(PATCHES, training=True))
    other = _numpy(_layer(seed=4, shift_coords=0.5)(PATCHES, training=True))
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 1e-4


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"rope_jitter_coords": 0.5}, "rope_jitter_coords=0.5"),
        ({"rope_rescale_coords": 0.9}, "rope_rescale_coords=0.9"),
        ({"rope_shift_coords": -0.1}, "rope_shift_coords=-0.1"),
        ({"rope_shift_coords": float("nan")}, "rope_shift_coords=nan"),
        ({"rope_jitter_coords": "2"}, "rope_jitter_coords='2'"),
        (
            {"rope_shift_coords": 0.1, "position_embedding": "learned"},
            "position_embedding='learned'",
        ),
        # DINOv3's augmentations, not Perception Encoder's or Naver's.
        ({"rope_shift_coords": 0.1, "rope_type": "cat"}, "rope_type='cat'"),
        # A RoPE setting on a model without RoPE would do nothing.
        (
            {"rope_theta": 1000.0, "position_embedding": "learned"},
            "position_embedding='learned' and rope_theta=1000.0",
        ),
    ],
)
def test_bad_values_are_refused_by_name(kwargs, named):
    arguments = {"position_embedding": "rope", **kwargs}
    with pytest.raises(ValueError, match=named):
        keras_vit.ViT(
            image_size=16,
            patch_size=4,
            hidden_dim=16,
            num_layers=1,
            num_heads=2,
            mlp_dim=32,
            **arguments,
        )


def test_round_trip_in_safe_mode(tmp_path):
    model = _model(**AUGMENTED)
    path = str(tmp_path / "augmented.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    for name, value in AUGMENTED.items():
        assert getattr(loaded, name) == value
    assert loaded.get_layer("rope").jitter_coords == 1.5
    images = np.random.default_rng(1).uniform(0, 255, (1, 16, 16, 3))
    np.testing.assert_array_equal(
        loaded.predict(images, verbose=0), model.predict(images, verbose=0)
    )


@pytest.mark.slow
def test_fit_draws_a_new_table_each_step():
    model = _model(**AUGMENTED)
    state = model.get_layer("rope").seed_generator.state
    before = _numpy(state).copy()
    model.compile(optimizer="sgd", loss="mse")
    images = np.random.default_rng(2).uniform(0, 255, (4, 16, 16, 3))
    model.fit(images, np.zeros((4, 16)), batch_size=2, epochs=1, verbose=0)
    assert not np.array_equal(_numpy(state), before)


JAX_SCRIPT = r"""
import json, sys
import keras, numpy as np
import keras_vit
model = keras_vit.ViT(image_size=16, patch_size=4, hidden_dim=16,
    num_layers=1, num_heads=2, mlp_dim=32, include_top=False,
    position_embedding="rope", rope_shift_coords=0.25,
    rope_jitter_coords=1.5, rope_rescale_coords=2.0)
rng = np.random.default_rng(0)
for w in model.weights:
    w.assign(rng.normal(scale=0.2, size=w.shape).astype(w.dtype))
images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3))
inference = [np.asarray(model(images, training=False)) for _ in range(2)]
training = [np.asarray(model(images, training=True)) for _ in range(2)]
model.compile(optimizer="sgd", loss="mse")
history = model.fit(images, np.zeros((2, 16)), epochs=2, verbose=0)
print(json.dumps({
    "backend": keras.backend.backend(),
    "inference_same": bool(np.array_equal(*inference)),
    "training_differs": float(np.abs(training[0] - training[1]).max()),
    "training_vs_inference": float(np.abs(training[0] - inference[0]).max()),
    "finite_loss": bool(np.all(np.isfinite(history.history["loss"]))),
}))
"""


@pytest.mark.slow
def test_on_jax():
    result = run_on_jax(JAX_SCRIPT)
    assert result["inference_same"] and result["finite_loss"]
    assert result["training_differs"] > 1e-4
    assert result["training_vs_inference"] > 1e-4
