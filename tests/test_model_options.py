"""The architecture options beyond the paper's ViT (DeiT, DeiT III, DINOv2,
CLIP, SigLIP): each against the NumPy reference, in the config, through a
`.keras` file in safe mode, and checked by name."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from tests import model_runs_on_jax
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
        {"use_gated_mlp": True, "activation": "silu"},
        {"use_gated_mlp": True, "layer_scale_init": 0.5, "pooling": "map"},
        ALL_OPTIONS,
        {"pooling": "map"},
        {"pooling": "map", "class_token": True, "num_register_tokens": 2},
        {
            "pooling": "map",
            "class_token": True,
            "num_register_tokens": 2,
            "pool_include_prefix": True,
        },
        {"pooling": "map", "include_top": False, **ALL_OPTIONS},
        # DINOv3's: RoPE on the patches only, after QK-norm where it is.
        {
            "position_embedding": "rope",
            "num_register_tokens": 2,
            "qkv_bias": False,
            "qk_norm": True,
        },
        {
            "position_embedding": "rope",
            "rope_theta": 7.0,
            "image_size": (16, 40),
        },
    ],
    ids=lambda kwargs: "-".join(f"{k}={v}" for k, v in kwargs.items()),
)
def test_matches_numpy_reference(kwargs):
    _check_reference(kwargs)


def _check_reference(kwargs):
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
    for kwargs in (
        ALL_OPTIONS,
        {"pooling": "gap", "fc_norm": True},
        {"use_gated_mlp": True, "activation": "silu"},
    ):
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
        ({"use_gated_mlp": "yes"}, "use_gated_mlp='yes'"),
        ({"patch_bias": "no"}, "patch_bias='no'"),
        ({"norm_pre": None}, "norm_pre=None"),
        ({"fc_norm": True}, "fc_norm=True and pooling='token'"),
        ({"num_register_tokens": -1}, "num_register_tokens=-1"),
        ({"num_register_tokens": 1.5}, "num_register_tokens=1.5"),
        (
            {"pool_include_prefix": True, "pooling": "gap"},
            "pool_include_prefix=True and pooling='gap'",
        ),
        ({"pool_include_prefix": 1, "pooling": "map"}, "pool_include_prefix=1"),
        (
            {"position_embedding_tokens": "class"},
            "position_embedding_tokens='class'",
        ),
        ({"rope_theta": 0}, "rope_theta=0"),
        ({"rope_theta": float("inf")}, "rope_theta=inf"),
        ({"qkv_bias": "yes"}, "qkv_bias='yes'"),
        (  # a head 6 wide cannot be rotated in 2-D pairs of pairs
            {"position_embedding": "rope", "hidden_dim": 12, "num_heads": 2},
            "multiple of 4. Received: hidden_dim=12 and num_heads=2",
        ),
    ],
)
def test_bad_options_name_the_argument_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _tiny(**kwargs)


@pytest.mark.parametrize(
    "activation", ["gelu", "gelu_tanh", "quick_gelu", "silu"]
)
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


@pytest.mark.parametrize(
    "kwargs",
    [
        {"position_embedding_tokens": "patches"},
        {"position_embedding_tokens": "patches", "pooling": "gap"},
        {"num_register_tokens": 3},
        {"num_register_tokens": 2, "pooling": "gap"},
        {"num_register_tokens": 2, "class_token": False, "pooling": "gap"},
        {"num_register_tokens": 4, "position_embedding_tokens": "patches"},
        {"num_register_tokens": 1, "position_embedding": "relative"},
    ],
    ids=lambda kwargs: "-".join(f"{k}={v}" for k, v in kwargs.items()),
)
def test_prefix_token_options_match_numpy_reference(kwargs):
    _check_reference(kwargs)


def test_prefix_tokens_are_counted_in_one_place():
    model = _tiny(num_register_tokens=3, include_top=False, pooling=None)
    assert model.num_prefix_tokens == 4
    tokens = model(random_images((1, 32, 32, 3)))
    assert tokens.shape == (1, 4 + 16, 16)
    names = {w.path: w for w in model.weights}
    assert names["patch_encoder/register_tokens"].shape == (1, 3, 16)
    # The learned position embeddings cover the prefix too, or the
    # patches only.
    assert names["patch_encoder/position_embedding"].shape == (1, 20, 16)
    patches = _tiny(num_register_tokens=3, position_embedding_tokens="patches")
    posemb = patches.get_layer("patch_encoder").pos_embedding
    assert posemb.shape == (1, 16, 16)
    # position_embeddings() still has an entry (zeros) per prefix token.
    full = patches.get_layer("patch_encoder").position_embeddings()
    assert full.shape == (1, 20, 16)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(full)[0, :4], 0)
    out = _tiny(num_register_tokens=2).intermediates_model()(
        random_images((1, 32, 32, 3))
    )
    assert out["attention_weights"][0].shape == (1, 2, 19, 19)


def test_gap_with_registers_averages_the_patches_only():
    model = _tiny(num_register_tokens=2, pooling="gap", include_top=False)
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    tokens = model.forward_features(images).numpy()
    assert model.num_prefix_tokens == 2  # no class token with "gap"
    np.testing.assert_allclose(
        model(images).numpy(), tokens[:, 2:].mean(1), atol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_register_tokens": 2},
        {"num_register_tokens": 2, "position_embedding_tokens": "patches"},
    ],
)
def test_prefix_options_resample_to_another_grid(kwargs, tmp_path):
    model = _tiny(**kwargs)
    randomize_weights(model)
    path = os.path.join(tmp_path, "m.weights.h5")
    model.save_weights(path)
    big = _tiny(**kwargs, image_size=(48, 64))
    with pytest.warns(UserWarning, match="resampled from a 4x4 to a 6x8"):
        keras_vit.load_weights(big, path)
    encoder = big.get_layer("patch_encoder")
    expected = keras_vit.patch_grid.resample_position_embeddings(
        model.get_layer("patch_encoder").pos_embedding.numpy(),
        (6, 8),
        source_grid=(4, 4),
        num_prefix_tokens=encoder.position_prefix_tokens,
        interpolation="bilinear_align_corners",  # the loader's default
    )
    np.testing.assert_allclose(
        encoder.pos_embedding.numpy(), np.asarray(expected), atol=1e-6
    )
    np.testing.assert_array_equal(
        encoder.registers.numpy(),
        model.get_layer("patch_encoder").registers.numpy(),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_register_tokens": 2},
        {"num_register_tokens": 2, "pooling": "gap"},  # registers, no class
        {"num_register_tokens": 3, "position_embedding_tokens": "patches"},
    ],
)
def test_maps_over_patches_leave_the_registers_out(kwargs):
    from keras_vit import visualize

    model = _tiny(**kwargs, image_size=(32, 48))
    randomize_weights(model, scale=0.3)
    images = random_images((2, 32, 48, 3))
    result = visualize.attention_rollout(model, images, registers=True)
    assert result.maps.shape == (2, 4, 6)
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2)), 1.0, atol=1e-6)
    assert result.class_attention.shape == (2, 2, 2, 4, 6)
    prefix, registers = model.num_prefix_tokens, model.num_register_tokens
    matrix = visualize.rollout(
        visualize.attention_weights(model, images), prefix
    )
    rows = matrix[:, 0] if model.class_token else matrix[:, prefix:].mean(1)
    np.testing.assert_allclose(
        result.register_rollout, rows[:, prefix - registers : prefix]
    )
    assert visualize.attention_rollout(model, images).register_rollout is None
    distances = visualize.mean_attention_distance(model, images)
    assert distances.shape == (2, 2) and np.all(distances > 0)
    similarity = visualize.position_embedding_similarity(model)
    assert similarity.shape == (4, 6, 4, 6)
    np.testing.assert_allclose(
        similarity.reshape(24, 24).diagonal(), 1.0, atol=1e-6
    )


def test_a_checkpoint_of_prefix_options_builds_its_own_model():
    from keras_vit.weights import convert

    model = _tiny(
        num_register_tokens=3,
        position_embedding_tokens="patches",
        classifier_activation=None,
    )
    randomize_weights(model)
    # As a format that records no grid (timm's) reads into: square grids.
    checkpoint = keras_vit.weights.Checkpoint(
        tensors={w.path: w.numpy() for w in model.weights},
        source="timm",
        path="m.safetensors",
        patch_size=8,
        position_embedding_tokens="patches",  # as its reader would say
    )
    assert checkpoint.num_prefix_tokens == 4
    assert checkpoint.position_prefix_tokens == 0
    built = convert.model_for_checkpoint(
        checkpoint, num_heads=2, classifier_activation=None
    )
    assert built.num_register_tokens == 3
    assert built.position_embedding_tokens == "patches"
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        built(images).numpy(), model(images).numpy(), atol=1e-6
    )


def test_map_pooling_attends_from_one_probe_with_the_models_heads():
    model = _tiny(pooling="map", image_size=(16, 24))
    pool = model.get_layer("pooling")
    assert isinstance(pool, keras_vit.layers.AttentionPooling)
    assert model.class_token is False  # as SigLIP's
    paths = {w.path: w.shape for w in model.weights}
    assert paths["pooling/probe"] == (1, 1, 16)
    assert paths["pooling/key_value/kernel"] == (16, 32)
    assert paths["pooling/mlp_fc1/kernel"] == (16, 32)
    randomize_weights(model, scale=0.3)
    tokens = model.forward_features(random_images((2, 16, 24, 3)))
    features, weights = pool(tokens, return_attention_scores=True)
    assert features.shape == (2, 16) and weights.shape == (2, 2, 6)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-6)
    _, expected = reference.map_head(tokens.numpy().astype("float64"), pool, 2)
    np.testing.assert_allclose(weights.numpy(), expected, atol=1e-5)


def test_map_pooling_leaves_the_prefix_tokens_out_as_timm():
    # timm's VisionTransformer.pool drops the class token and registers
    # before attn_pool (pool_include_prefix=False): the probe attends to
    # the patches only, and its attention maps are zero on the prefix.
    from keras_vit import visualize

    model = _tiny(pooling="map", class_token=True, num_register_tokens=2)
    randomize_weights(model, scale=0.3)
    assert model.get_layer("pooling").num_prefix_tokens == 3
    images = random_images((2, 32, 32, 3))
    tokens = model.forward_features(images)
    _, weights = model.get_layer("pooling")(
        tokens, return_attention_scores=True
    )
    assert weights.shape == (2, 2, 16)
    result = visualize.attention_rollout(model, images)
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2)), 1.0, atol=1e-6)
    # With the prefix included, the probe reads the class and register
    # tokens too: other outputs from the same weights.
    included = keras_vit.ViT.from_config(
        {**model.get_config(), "pool_include_prefix": True}
    )
    included.set_weights(model.get_weights())
    assert included.get_layer("pooling").num_prefix_tokens == 0
    assert np.max(np.abs(included(images) - model(images))) > 1e-3


def test_a_map_config_saved_before_the_prefix_was_left_out_keeps_it():
    model = _tiny(pooling="map", class_token=True)
    config = model.get_config()
    del config["pool_include_prefix"]  # as written by earlier versions
    assert keras_vit.ViT.from_config(config).pool_include_prefix is True
    config["pooling"] = "gap"
    assert keras_vit.ViT.from_config(config).pool_include_prefix is False


def test_map_pooling_round_trips_and_trains(tmp_path):
    model = _tiny(pooling="map", layer_scale_init=0.1)
    randomize_weights(model)
    path = os.path.join(tmp_path, "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.get_config() == model.get_config()
    images = random_images((4, 32, 32, 3))
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())
    loaded.compile("adam", "sparse_categorical_crossentropy")
    before = loaded.get_layer("pooling").probe.numpy().copy()
    loaded.fit(images, np.arange(4) % 5, epochs=1, verbose=0)
    assert not np.array_equal(before, loaded.get_layer("pooling").probe.numpy())


def test_the_new_tokens_and_scales_get_no_weight_decay():
    from keras_vit.training import recipe

    model = _tiny(num_register_tokens=2, pooling="map", layer_scale_init=0.1)
    optimizer = recipe.make_optimizer(weight_decay=0.1)
    optimizer.build(model.trainable_variables)
    decayed = {
        w.path
        for w in model.trainable_variables
        if optimizer._use_weight_decay(w)
    }
    for path in (
        "patch_encoder/register_tokens",
        "pooling/probe",
        "block_0/ls1/gamma",
    ):
        assert path not in decayed
    assert "pooling/key_value/kernel" in decayed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"distillation": True},
        {"distillation": True, "classifier_activation": None},
        {"distillation": True, "include_top": False},
        {"distillation": True, "num_register_tokens": 2},
        {
            "distillation": True,
            "position_embedding_tokens": "patches",
            "layer_scale_init": 0.2,
        },
    ],
    ids=lambda kwargs: "-".join(f"{k}={v}" for k, v in kwargs.items()),
)
def test_distillation_matches_numpy_reference(kwargs):
    _check_reference(kwargs)


def test_distillation_token_and_head_and_both_outputs_in_training():
    model = _tiny(distillation=True, classifier_activation=None)
    assert model.num_prefix_tokens == 2
    paths = {w.path for w in model.weights}
    assert {"patch_encoder/distillation_token", "head_dist/kernel"} <= paths
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    averaged = model(images).numpy()
    # Dropout-free, so training only changes the output's form (and, to
    # float32 rounding, the attention's softmax: training takes it through
    # `layers/_attention_core.attend`, whose ops differ).
    np.testing.assert_allclose(
        model(images, training=True), averaged, rtol=1e-5, atol=1e-6
    )
    model.distilled_training = True
    cls, dist = model(images, training=True)
    np.testing.assert_allclose((cls + dist) / 2, averaged, atol=1e-6)
    assert not np.allclose(cls, dist)
    np.testing.assert_array_equal(model(images).numpy(), averaged)
    with pytest.raises(ValueError, match="distilled_training=True"):
        _tiny().distilled_training = True
    # fit with one label trains both heads (on their mean).
    model.distilled_training = False
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(True))
    before = model.get_layer("head_dist").kernel.numpy().copy()
    model.fit(images, np.array([0, 1]), epochs=1, verbose=0)
    assert not np.array_equal(before, model.get_layer("head_dist").kernel)


def test_distillation_round_trips_and_is_checked(tmp_path):
    model = _tiny(distillation=True, num_register_tokens=1)
    randomize_weights(model)
    path = os.path.join(tmp_path, "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.get_config() == model.get_config()
    images = random_images((2, 32, 32, 3))
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())
    for kwargs, match in (
        ({"pooling": "gap"}, "pooling='gap'"),
        ({"representation_size": 8}, "representation_size=8"),
        ({"distillation": "yes"}, "distillation='yes'"),
    ):
        with pytest.raises(ValueError, match=match):
            _tiny(**{"distillation": True, **kwargs})


JAX_SCRIPT = r"""
import json, sys
import numpy as np
import keras
import keras_vit

folder = sys.argv[1]
outputs = {}
for name, config in json.load(open(f"{folder}/configs.json")).items():
    model = keras_vit.ViT(**config)
    model.load_weights(f"{folder}/{name}.weights.h5")
    images = np.load(f"{folder}/images.npy")
    outputs[name] = np.asarray(model.predict(images, verbose=0)).tolist()
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(images, np.arange(len(images)) % 5, epochs=1, verbose=0)
print(json.dumps({"backend": keras.backend.backend(), "outputs": outputs}))
"""


#: The options `test_the_options_compute_the_same_on_jax` runs on JAX.
JAX_CONFIGS = {
    "token": {**TINY, **ALL_OPTIONS, "num_register_tokens": 2},
    "distilled": {
        **TINY,
        "distillation": True,
        "position_embedding_tokens": "patches",
    },
    "map": {**TINY, "pooling": "map", "activation": "gelu_tanh"},
    "gap": {**TINY, "pooling": "gap", "fc_norm": True},
    "gated": {**TINY, "use_gated_mlp": True, "activation": "silu"},
}


def jax_runs():
    """This module's run in `model_runs_on_jax`'s one JAX process."""
    return {"options": (JAX_SCRIPT, _prepare_for_jax)}


def _prepare_for_jax(folder):
    """Each of `JAX_CONFIGS` with random weights, and two images, in
    `folder`."""
    np.save(folder / "images.npy", random_images((2, 32, 32, 3)))
    for name, config in JAX_CONFIGS.items():
        model = keras_vit.ViT(**config)
        randomize_weights(model, scale=0.2)
        model.save_weights(folder / f"{name}.weights.h5")
    (folder / "configs.json").write_text(json.dumps(JAX_CONFIGS))


@pytest.mark.slow
def test_the_options_compute_the_same_on_jax(tmp_path_factory):
    """Each option's outputs on JAX are TensorFlow's (and it trains
    there)."""
    pytest.importorskip("jax")
    folder, result = model_runs_on_jax.ran(tmp_path_factory, "options")
    images = np.load(folder / "images.npy")
    for name, config in JAX_CONFIGS.items():
        model = keras_vit.ViT(**config)
        model.load_weights(folder / f"{name}.weights.h5")
        expected = model(images, training=False)
        np.testing.assert_allclose(result["outputs"][name], expected, atol=1e-5)


def test_masked_patch_prediction_predicts_the_patches_only():
    from keras_vit.training import MaskedPatchPrediction

    backbone = _tiny(num_register_tokens=2, distillation=True)
    assert backbone.num_prefix_tokens == 4
    out = MaskedPatchPrediction(backbone)(random_images((2, 32, 32, 3)))
    assert tuple(out["logits"].shape) == (2, 16, 512)
    assert tuple(out["corrupted"].shape) == (2, 16)
