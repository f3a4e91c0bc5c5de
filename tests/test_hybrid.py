"""Hybrid ViTs: a CNN stem feeds the transformer (paper, Section 3.1)."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
VIT = dict(
    patch_size=1,
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    mlp_dim=64,
    num_classes=5,
    classifier_activation=None,
)
# The golden models' stems (tests/golden/make_hybrid_checkpoints.py): timm's
# ResNetV2 as its hybrids build it, at tiny widths.
STEMS = {
    "hybrid_r2s": dict(
        image_size=32,
        stem={"block_units": [1, 1], "width": 8, "root_width": 16, "groups": 4},
    ),
    "hybrid_r4s": dict(
        image_size=64,
        stem={
            "block_units": [1, 1, 1, 1],
            "width": 8,
            "root_width": 16,
            "stage_filters": [32, 32, 32, 32],
            "groups": 4,
        },
    ),
}

# timm's parameter counts at 224 px with a 1000-class head.
TIMM_PARAMS = {
    "ViT_R50_B16": 98_659_112,
    "ViT_R50_L32": 328_994_856,
    "ViT_R26_B32": 101_383_976,
    "ViT_R26_S32": 36_431_912,
}


@pytest.mark.parametrize("name", sorted(TIMM_PARAMS))
def test_parameter_counts_match_timm(name):
    with keras.StatelessScope(initialize_variables=False):
        model = getattr(keras_vit, name)()
    assert model.count_params() == TIMM_PARAMS[name]
    assert model.grid_size == ((14, 14) if name == "ViT_R50_B16" else (7, 7))


@pytest.mark.parametrize("name", sorted(STEMS))
@pytest.mark.parametrize("fmt", ["npz", "timm.safetensors"])
def test_golden_parity(name, fmt):
    with np.load(os.path.join(GOLDEN, f"{name}.expected.npz")) as data:
        ref = {k: data[k] for k in data.files}
    model = keras_vit.ViT.from_preset(
        os.path.join(GOLDEN, f"{name}.{fmt}"), **VIT, **STEMS[name]
    )
    np.testing.assert_allclose(
        model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
    )
    # The stem alone: the backbone's feature map.
    stem = model.get_layer("resnet_stem")
    backbone = stem(model.get_layer("rescaling")(ref["images"])).numpy()
    np.testing.assert_allclose(backbone, ref["backbone"], atol=1e-4)


def test_hybrid_checkpoint_resolution_defaults():
    model = keras_vit.ViT.from_preset(
        os.path.join(GOLDEN, "hybrid_r4s.npz"),
        **VIT,
        stem=STEMS["hybrid_r4s"]["stem"],
    )
    assert model.image_size == (64, 64)  # 2x2 grid x stride 32


def test_keras_application_as_stem(tmp_path):
    stem = keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(64, 64, 3), alpha=0.35
    )
    model = keras_vit.ViT(
        **{**TINY, "image_size": 64, "patch_size": 1}, stem=stem
    )
    assert model.grid_size == (2, 2)  # MobileNetV2 has stride 32
    assert model.stem_layer is stem
    images = random_images((2, 64, 64, 3))
    out = model(images).numpy()
    assert out.shape == (2, TINY["num_classes"])
    path = str(tmp_path / "hybrid.keras")
    randomize_weights(model, scale=0.05)
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(
        loaded(images).numpy(), model(images).numpy(), atol=1e-5
    )


def test_stem_layer_is_the_stem_or_none(tmp_path):
    model = keras_vit.ViT(**{**VIT, **STEMS["hybrid_r2s"]})
    stem = model.stem_layer
    assert isinstance(stem, keras_vit.layers.ResNetStem)
    assert any(layer is stem for layer in model.layers)
    # The layer the patches come from: its map is the blocks' token grid.
    images = random_images((1, 32, 32, 3))
    assert tuple(stem(images).shape[1:3]) == model.grid_size
    path = str(tmp_path / "hybrid.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.stem_layer.get_config() == stem.get_config()
    with pytest.raises(AttributeError):
        model.stem_layer = None
    plain = keras_vit.ViT(**{**VIT, "image_size": 32, "patch_size": 8})
    assert plain.stem_layer is None


def test_hybrid_config_and_keras_round_trip(tmp_path):
    model = keras_vit.ViT(
        image_size=32,
        **{**VIT, "classifier_activation": "softmax"},
        stem=STEMS["hybrid_r2s"]["stem"],
    )
    randomize_weights(model, scale=0.1)
    config = model.get_config()
    assert config["stem"]["block_units"] == [1, 1]
    clone = keras_vit.ViT.from_config(config)
    clone.set_weights(model.get_weights())
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        clone(images).numpy(), model(images).numpy(), atol=1e-5
    )
    path = str(tmp_path / "r.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(
        loaded(images).numpy(), model(images).numpy(), atol=1e-5
    )
    inter = model.intermediates_model()(images)
    assert inter["attention_weights"][0].shape == (2, 4, 17, 17)


def test_xla_train_step():
    model = keras_vit.ViT(
        image_size=32,
        **{**VIT, "classifier_activation": "softmax"},
        stem=STEMS["hybrid_r2s"]["stem"],
    )
    model.compile("adamw", "sparse_categorical_crossentropy", jit_compile=True)
    images, labels = random_images((4, 32, 32, 3)), np.arange(4) % 5
    before = model.get_layer("resnet_stem").root_conv.kernel.numpy().copy()
    losses = [model.train_on_batch(images, labels) for _ in range(3)]
    assert np.isfinite(losses).all()
    assert not np.array_equal(
        before, model.get_layer("resnet_stem").root_conv.kernel.numpy()
    )


def test_bad_stems():
    with pytest.raises(ValueError, match="stem=42"):
        keras_vit.ViT(image_size=32, **VIT, stem=42)
    with pytest.raises(ValueError, match="stem="):
        keras_vit.ViT(image_size=32, **VIT, stem={"blocks": [1]})
    with pytest.raises(ValueError, match="feature map"):
        keras_vit.ViT(
            image_size=32,
            **{**VIT, "patch_size": 3},
            stem=STEMS["hybrid_r2s"]["stem"],
        )


@pytest.mark.parametrize("quantize", ["none", "dynamic"])
def test_hybrid_exports_to_tflite_with_builtin_ops_only(tmp_path, quantize):
    from keras_vit import export
    from keras_vit.export import graph

    model = keras_vit.ViT(
        image_size=32,
        **{**VIT, "classifier_activation": "softmax"},
        stem=STEMS["hybrid_r2s"]["stem"],
    )
    randomize_weights(model, scale=0.1)
    path = str(tmp_path / "hybrid.tflite")
    # Verified before it is written: builtin ops only, weights present, and
    # outputs equal to Keras's under LiteRT's kernels.
    export.export_tflite(model, path, quantize=quantize, num_verify_images=8)
    ops = graph.op_histogram(path)
    assert "CONV_2D" in ops and "MAX_POOL_2D" in ops
    assert not any(op.startswith("Flex") or op == "CUSTOM" for op in ops)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stem_group_norm_is_kerass_function_with_its_weights(dtype):
    # The stem's GroupNorm is written to quantize cleanly; it must stay
    # Keras's GroupNormalization (the checkpoints' layer) in every number
    # and weight name.
    from keras_vit.layers.resnet_stem import GroupNorm

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(2, 5, 6, 16)) * 3 + 1).astype(dtype)
    gamma, beta = rng.normal(size=(2, 16)).astype(dtype)
    ours = GroupNorm(groups=4, epsilon=1e-5, name="n", dtype=dtype)
    theirs = keras.layers.GroupNormalization(
        groups=4, epsilon=1e-5, name="n", dtype=dtype
    )
    for layer in (ours, theirs):
        layer.build(x.shape)
        layer.set_weights([gamma, beta])
    assert [w.path for w in ours.weights] == [w.path for w in theirs.weights]
    groups = x.astype("float64").reshape(2, 5, 6, 4, 4)
    mean = groups.mean(axis=(1, 2, 4), keepdims=True)
    var = ((groups - mean) ** 2).mean(axis=(1, 2, 4), keepdims=True)
    expected = ((groups - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)
    expected = expected * gamma + beta
    tolerance = 1e-6 if dtype == "float32" else 1e-12
    scale = np.abs(expected).max()
    np.testing.assert_allclose(ours(x), expected, atol=tolerance * scale)
    np.testing.assert_allclose(ours(x), theirs(x), atol=2 * tolerance * scale)


@pytest.mark.slow
@pytest.mark.parametrize("quantize", ["int8", "int16x8"])
def test_hybrid_quantizes_to_integers_only(tmp_path, quantize):
    # Keras's GroupNormalization left float NEG / SQUARE ops in an int8
    # file and failed int16x8.
    from keras_vit import export
    from keras_vit.export import graph

    model = keras_vit.ViT(
        image_size=32,
        **{**VIT, "classifier_activation": "softmax"},
        stem=STEMS["hybrid_r2s"]["stem"],
    )
    randomize_weights(model, scale=0.1)
    # Decisive classes: a random head's near-uniform probabilities tie,
    # and their top-1 flips on quantization noise.
    head = model.get_layer("head")
    head.kernel.assign(head.kernel * 30.0)
    path = str(tmp_path / "hybrid.tflite")
    result = export.export_tflite(
        model,
        path,
        quantize=quantize,
        representative_data="digits",
        num_calibration_images=20,
        num_verify_images=8,
    )
    assert result.metadata["quantization"] == quantize
    assert graph.read_graph(path).float_ops() == {}
