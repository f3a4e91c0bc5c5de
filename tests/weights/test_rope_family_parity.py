"""Perception Encoder core and Naver's RoPE-ViT read from timm files.

tests/golden/make_rope_family_checkpoints.py (developer-side: torch,
timm) made tiny models of timm's `vit_pe_core_tiny_patch16_384` (RoPE
"cat" on patch indices + 1 rescaled onto its pretraining grid, absolute
embeddings, `norm_pre`, attention pooling over every token with 8 heads)
and Naver's `vit_small_patch16_rope{,_ape,_mixed,_mixed_ape}_224` with
every weight perturbed, and recorded their tokens and logits at 16 px and
at 12x20 (timm resampling the absolute embeddings bicubically,
antialiased). Here, without torch, keras_vit builds the model the file
implies and must give the same numbers.
"""

import dataclasses
import json
import os
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

import keras_vit
from keras_vit import cli
from keras_vit import export
from keras_vit.training import recipe
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint
from keras_vit.weights import timm_folder

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
ATOL = 1e-5
NAMES = ("pe", "naver", "naver_ape", "naver_mixed", "naver_mixed_ape")
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
#: The resampling of timm's `resample_abs_pos_embed`.
TIMM_RESAMPLING = {"interpolation": "bicubic_pytorch", "antialias": True}


def files(name):
    path = os.path.join(GOLDEN, f"rope_{name}")
    with np.load(path + ".expected.npz") as data:
        return path + ".safetensors", {k: data[k] for k in data.files}


def build(name, checkpoint=None, **kwargs):
    """The model the file implies, at 16 px unless told (a file without
    absolute embeddings records no size)."""
    path, expected = files(name)
    kwargs.setdefault("image_size", 16)
    if name == "pe":  # its tensors are a VisionTransformer's too: say it
        kwargs.setdefault("position_embedding", "rope")
    model = convert.model_for_checkpoint(
        checkpoint or read_checkpoint(path),
        num_heads=2,
        normalization=IMAGENET,
        classifier_activation=None,
        **TIMM_RESAMPLING,
        **kwargs,
    )
    return model, expected


def _close(model, expected, suffix):
    images = expected["images" + suffix]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model.forward_features(images)),
        expected["tokens" + suffix],
        atol=ATOL,
        rtol=0,
    )
    np.testing.assert_allclose(
        model.predict(images, verbose=0),
        expected["logits" + suffix],
        atol=ATOL,
        rtol=0,
    )


@pytest.mark.parametrize(
    "name, rope_type, theta, learned",
    [
        ("pe", "cat", 10000.0, True),
        ("naver", "cat", 100.0, False),
        ("naver_ape", "cat", 100.0, True),
        ("naver_mixed", "mixed", 10.0, False),
        ("naver_mixed_ape", "mixed", 10.0, True),
    ],
)
def test_the_file_gives_the_architecture(name, rope_type, theta, learned):
    checkpoint = read_checkpoint(files(name)[0]).decided_by("rope")
    implied = convert.architecture(checkpoint)
    assert implied["position_embedding"] == "rope"
    assert implied["rope_type"] == rope_type
    assert implied["rope_theta"] == theta
    assert implied.get("rope_with_learned", False) == learned
    assert checkpoint.adjacent_rope_pairs
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    if name == "pe":
        assert implied["rope_grid_offset"] == 1.0
        assert implied["rope_reference_grid"] == (4, 4)
        assert implied["pooling"] == "map" and implied["pool_include_prefix"]
        assert implied["pooling_num_heads"] == 8
        assert implied["norm_pre"] and not implied["patch_bias"]
        assert implied["layer_norm_epsilon"] == 1e-5
        # CLIP's tower layout (norm_pre, no patch bias), exact GELU: not
        # reported as a CLIP file that may need quick GELU.
        assert implied["activation"] == "gelu"
    else:
        assert implied["pooling"] == "token"
        assert implied["layer_norm_epsilon"] == 1e-6
    if name.endswith("_ape"):
        assert implied["position_embedding_tokens"] == "patches"


@pytest.mark.parametrize("name", NAMES)
def test_outputs_match_at_the_size_and_another(name):
    model, expected = build(name)
    _close(model, expected, "")
    wide, _ = build(name, image_size=(12, 20))
    _close(wide, expected, "_wide")


def test_a_dynamic_size_model_without_a_table():
    """Nothing to resample: one model takes both sizes."""
    model, expected = build("naver_mixed", dynamic_image_size=True)
    for suffix in ("", "_wide"):
        _close(model, expected, suffix)


def test_the_column_order_matters():
    """Read without reordering the query and key columns (timm's
    adjacent pairs taken as halves), the outputs are another model's."""
    path, expected = files("naver")
    checkpoint = dataclasses.replace(
        read_checkpoint(path), adjacent_rope_pairs=False
    )
    model, _ = build("naver", checkpoint)
    outputs = model.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - expected["logits"])) > 1e-3


def test_another_rotation_is_refused():
    path = files("naver")[0]
    with pytest.raises(ValueError, match="rope_type='cat'"):
        build("naver", rope_type="dinov3")
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=32,
        num_layers=2,
        num_heads=2,
        mlp_dim=64,
        num_classes=8,
        layer_scale_init=1e-5,
    )
    with pytest.raises(ValueError, match="position_embedding='rope'"):
        keras_vit.load_weights(model, path)


@pytest.mark.parametrize("name", ("pe", "naver_mixed_ape"))
def test_round_trip_in_safe_mode(tmp_path, name):
    model, expected = build(name, image_size=(12, 20))
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.rope_type == model.rope_type
    assert loaded.rope_reference_grid == model.rope_reference_grid
    _close(loaded, expected, "_wide")


def test_mixed_frequencies_train_without_weight_decay():
    """Naver's learned frequencies are a trainable weight, exempt from
    weight decay as in timm (`no_weight_decay`)."""
    model, expected = build("naver_mixed")
    optimizer = recipe.make_optimizer(weight_decay=0.1)
    optimizer.build(model.trainable_variables)
    frequencies = model.get_layer("rope").frequencies
    assert not optimizer._use_weight_decay(frequencies)
    before = keras.ops.convert_to_numpy(frequencies).copy()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer, loss)
    model.fit(expected["images"], np.arange(2), epochs=1, verbose=0)
    assert not np.array_equal(before, keras.ops.convert_to_numpy(frequencies))


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"rope_grid_offset": 1.0}, "rope_grid_offset"),
        ({"rope_reference_grid": (4, 4)}, "rope_reference_grid"),
        ({"rope_grid_offset": -1.0, "rope_type": "cat"}, "rope_grid_offset"),
        ({"rope_type": "axial"}, "rope_type"),
        ({"rope_type": "cat", "position_embedding": "learned"}, "rope_type"),
        ({"rope_with_learned": True, "position_embedding": "none"}, "rope"),
        ({"pooling_num_heads": 4}, "pooling_num_heads"),
        ({"pooling": "map", "pooling_num_heads": 0}, "pooling_num_heads"),
    ],
)
def test_the_options_are_checked(arguments, match):
    base = dict(
        image_size=16,
        patch_size=4,
        hidden_dim=32,
        num_layers=1,
        num_heads=2,
        mlp_dim=64,
        position_embedding="rope",
    )
    with pytest.raises(ValueError, match=match):
        keras_vit.ViT(**{**base, **arguments})


#: The tiny goldens' timm architectures and the `model_args` that made
#: them tiny, as a Hub repo's config.json records them.
HUB = {
    "pe": (
        "vit_pe_core_tiny_patch16_384",
        {"mlp_ratio": 4, "ref_feat_shape": [4, 4]},
    ),
    "naver": ("vit_small_patch16_rope_224", {"mlp_ratio": 2}),
    "naver_ape": ("vit_small_patch16_rope_ape_224", {"mlp_ratio": 2}),
    "naver_mixed": ("vit_small_patch16_rope_mixed_224", {"mlp_ratio": 2}),
    "naver_mixed_ape": (
        "vit_small_patch16_rope_mixed_ape_224",
        {"mlp_ratio": 2},
    ),
}


def _hub_folder(folder, name, **model_args):
    """A timm Hub folder of golden `name`: its config.json (the tiny
    `model_args`, and `model_args` over them) and model.safetensors."""
    architecture, tiny = HUB[name]
    config = {
        "architecture": architecture,
        "num_classes": 8,
        "model_args": {
            "patch_size": 4,
            "embed_dim": 32,
            "depth": 2,
            "num_heads": 2,
            "img_size": 16,
            **tiny,
            **model_args,
        },
        "pretrained_cfg": {
            "input_size": [3, 16, 16],
            "mean": list(IMAGENET["mean"]),
            "std": list(IMAGENET["std"]),
            "crop_pct": 1.0,
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(files(name)[0], folder / "model.safetensors")
    return str(folder)


@pytest.mark.parametrize("name", NAMES)
def test_a_hub_folder_builds_the_model_from_its_config(tmp_path, name):
    """A timm Hub folder (config.json + model.safetensors): the model is
    the config's architecture, the file loads into it and gives timm's
    numbers, with nothing passed but the classifier activation."""
    expected = files(name)[1]
    _hub_folder(tmp_path, name)
    model = keras_vit.ViT.from_preset(str(tmp_path), classifier_activation=None)
    assert model.position_embedding == "rope"
    _close(model, expected, "")


@pytest.mark.parametrize(
    "name, model_args, match",
    [
        ("pe", {"attn_pool_mlp_ratio": 2.0}, "attn_pool_mlp_ratio=2.0"),
        ("naver", {"rope_rotate_half": True}, "rope_rotate_half=True"),
        ("naver", {"rope_grid_indexing": "ij"}, "rope_grid_indexing='ij'"),
        ("naver", {"rope_type": "mrope"}, "rope_type='mrope'"),
    ],
)
def test_a_hub_config_keras_vit_cannot_build_is_refused(
    tmp_path, name, model_args, match
):
    folder = _hub_folder(tmp_path, name, **model_args)
    with pytest.raises(ValueError, match=match):
        keras_vit.ViT.from_preset(folder)


def _pe_g14(tmp_path):
    """The tiny PE file in PE G/14's layout: no class token."""
    tensors = load_file(files("pe")[0])
    del tensors["cls_token"]
    tensors["pos_embed"] = tensors["pos_embed"][:, 1:]
    path = str(tmp_path / "pe_g.safetensors")
    save_file(tensors, path)
    return path


def test_perception_encoder_without_a_class_token_is_refused(tmp_path):
    """PE G/14: its attention pooling's MLP is narrower than its blocks',
    which keras_vit does not build; the message says so, and its Hub
    config is refused for that too."""
    with pytest.raises(ValueError, match="G/14.* is not supported"):
        read_checkpoint(_pe_g14(tmp_path)).decided_by("rope")
    folder = tmp_path / "hub"
    folder.mkdir()
    _hub_folder(folder, "pe")
    config = json.loads((folder / "config.json").read_text())
    config["architecture"] = "vit_pe_core_gigantic_patch14_448"
    config["model_args"]["class_token"] = False
    config["model_args"].pop("mlp_ratio")  # G/14's own, 5.83
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="attn_pool_mlp_ratio"):
        keras_vit.ViT.from_preset(str(folder))


def test_a_bare_perception_encoder_file_is_refused_as_ambiguous(tmp_path):
    """PE core's tensors are a VisionTransformer's with norm_pre, no patch
    bias and MAP pooling: without a model, a config or the caller's
    position_embedding, nothing guesses; each refusal names the way
    out."""
    path = files("pe")[0]
    match = "Perception Encoder core.*VisionTransformer.*--position-embedding"
    with pytest.raises(ValueError, match=match):
        convert.architecture(read_checkpoint(path))
    with pytest.raises(ValueError, match=match):
        convert.convert(path, str(tmp_path / "pe.keras"), num_heads=2)
    with pytest.raises(ValueError, match=match):
        keras_vit.ViT.from_preset(path, num_heads=2)
    assert not os.listdir(tmp_path)


def test_the_way_out_loads_a_bare_perception_encoder_file(tmp_path):
    """`keras-vit convert --position-embedding rope` reads it as PE core,
    and so does a PE model built first: timm's numbers."""
    path, expected = files("pe")
    output = str(tmp_path / "pe.keras")
    flags = ["--num-heads", "2", "--classifier-activation", "none"]
    flags += ["--mean", *map(str, IMAGENET["mean"])]
    flags += ["--std", *map(str, IMAGENET["std"]), "--quiet"]
    command = ["convert", path, "--output", output]
    assert cli.main([*command, "--position-embedding", "rope", *flags]) == 0
    converted = keras.saving.load_model(output, safe_mode=True)
    _close(converted, expected, "")
    model = keras_vit.ViT.from_config(converted.get_config())
    keras_vit.load_weights(model, path)
    _close(model, expected, "")


def test_a_plain_vit_in_the_same_layout_round_trips(tmp_path):
    """keras_vit's own ViT with norm_pre, no patch bias and MAP pooling,
    written by save_timm: its folder's config and a model built first
    both read it as a VisionTransformer, exactly (not as PE core)."""
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=32,
        num_layers=1,
        num_heads=2,
        mlp_dim=64,
        num_classes=3,
        norm_pre=True,
        patch_bias=False,
        pooling="map",
        layer_norm_epsilon=1e-5,
    )
    folder = str(tmp_path / "plain")
    timm_folder.save_timm(model, folder)
    images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3))
    want = model.predict(images, verbose=0)
    loaded = keras_vit.ViT.from_preset(folder)
    assert loaded.position_embedding == "learned"
    np.testing.assert_allclose(
        loaded.predict(images, verbose=0), want, atol=1e-6
    )
    again = keras_vit.ViT.from_config(model.get_config())
    keras_vit.load_weights(again, os.path.join(folder, "model.safetensors"))
    np.testing.assert_allclose(
        again.predict(images, verbose=0), want, atol=1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ("pe", "naver_mixed_ape"))
def test_exports_to_tflite_verified_in_one_partition(tmp_path, name):
    """A fixed-size model's rotary tables (Naver's mixed: from its learned
    frequencies) are constants of the graph: builtin ops only, one XNNPACK
    partition, checked against Keras."""
    model, _ = build(name)
    path = str(tmp_path / f"{name}.tflite")
    result = export.export_tflite(model, path, num_verify_images=4)
    assert result.report.passed and result.report.xnnpack_partitions == 1
