"""The architecture options beyond the paper's ViT (DeiT, DeiT III, DINOv2,
CLIP, SigLIP): each against the NumPy reference, in the config, through a
`.keras` file in safe mode, and checked by name."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from tests import reference
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)

#: Every option on at once (those that go together).
ALL_OPTIONS = dict(
    activation="quick_gelu",
    layer_scale_init=0.1,
    qk_norm=True,
    patch_bias=False,
    norm_pre=True,
)


def _tiny(**kwargs):
    return keras_vit.ViT(**{**TINY, **kwargs})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"activation": "quick_gelu"},
        {"activation": "gelu_tanh"},
        {"qk_norm": True},
        {"patch_bias": False},
        {"norm_pre": True},
        {"pooling": "gap", "fc_norm": True},
        {"layer_scale_init": 0.5},
        ALL_OPTIONS,
    ],
    ids=lambda kwargs: "-".join(f"{k}={v}" for k, v in kwargs.items()),
)
def test_matches_numpy_reference(kwargs):
    model = _tiny(**kwargs)
    randomize_weights(model, scale=0.3)
    images = random_images((2, *model.image_size, 3))
    out = model.predict(images, verbose=0)
    np.testing.assert_allclose(out, reference.vit(images, model), atol=1e-4)


def test_the_options_add_their_weights_under_timms_names():
    model = _tiny(**ALL_OPTIONS)
    paths = {w.path for w in model.weights}
    for path in (
        "block_0/ls1/gamma",
        "block_1/ls2/gamma",
        "block_0/attention/q_norm/gamma",
        "block_0/attention/k_norm/beta",
        "norm_pre/gamma",
    ):
        assert path in paths
    assert "patch_encoder/projection/bias" not in paths
    gap = _tiny(pooling="gap", fc_norm=True)
    names = [layer.name for layer in gap.layers]
    assert "encoder_norm" not in names
    assert names.index("fc_norm") == names.index("pooling") + 1
    # forward_features gives the tokens before the (moved) norm, as timm's.
    tokens = gap.forward_features(random_images((1, 32, 32, 3)))
    assert tokens.shape == (1, 16, 16)


def test_layer_scale_starts_at_its_init_value():
    model = _tiny(layer_scale_init=1e-5)
    for w in model.weights:
        if "/ls" in w.path:
            np.testing.assert_array_equal(w.numpy(), np.full(16, 1e-5, "f"))


def test_options_round_trip_through_config_and_keras_file(tmp_path):
    for kwargs in (ALL_OPTIONS, {"pooling": "gap", "fc_norm": True}):
        model = _tiny(**kwargs)
        randomize_weights(model)
        config = model.get_config()
        for name, value in kwargs.items():
            assert config[name] == value
        assert keras_vit.ViT.from_config(config).get_config() == config
        path = os.path.join(tmp_path, "vit.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
        assert loaded.get_config() == config
        images = random_images((2, 32, 32, 3))
        np.testing.assert_array_equal(
            loaded(images).numpy(), model(images).numpy()
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "relu"}, "activation='relu'"),
        ({"layer_scale_init": 0}, "layer_scale_init=0"),
        ({"layer_scale_init": float("nan")}, "layer_scale_init=nan"),
        ({"qk_norm": 1}, "qk_norm=1"),
        ({"patch_bias": "no"}, "patch_bias='no'"),
        ({"norm_pre": None}, "norm_pre=None"),
        ({"fc_norm": True}, "fc_norm=True and pooling='token'"),
    ],
)
def test_bad_options_name_the_argument_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _tiny(**kwargs)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "quick_gelu"])
def test_block_options_match_the_reference(activation):
    x = rng.normal(size=(2, 7, 16)).astype("float32")
    layer = keras_vit.layers.TransformerBlock(
        4, 24, activation=activation, layer_scale_init=0.3, qk_norm=True
    )
    layer(x)
    randomize_weights(layer, scale=0.3)
    out, weights = layer(x, return_attention_scores=True)
    ref_out, ref_weights = reference.block(
        x.astype("float64"),
        reference.block_weights(layer),
        4,
        activation=activation,
    )
    np.testing.assert_allclose(out.numpy(), ref_out, atol=1e-4)
    np.testing.assert_allclose(weights.numpy(), ref_weights, atol=1e-5)
