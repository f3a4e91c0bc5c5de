"""Hub repos: the config reader (`keras_vit.weights.hub_config`), snapshot
folders and `hf://` ids through `huggingface_hub`'s own cache, offline.

The snapshots in tests/golden/hub/ are tiny copies of ten real repos,
written by timm's `save_for_hf` and transformers' `save_pretrained`, with
the publisher's library's outputs (tests/golden/make_hub_snapshots.py).
"""

import http.server
import json
import pathlib
import shutil
import sys
import threading
import types
import warnings

import keras
import numpy as np
import pytest
import safetensors.numpy

import keras_vit
from keras_vit import cli
from keras_vit import extras
from keras_vit import resolver
from keras_vit.benchmark import throughput
from keras_vit.registry import presets
from keras_vit.weights import hub
from keras_vit.weights import hub_config
from keras_vit.weights import timm_folder
from tests.helpers import TINY
from tests.helpers import fewer_digits

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "hub"
SNAPSHOTS = (
    "timm_dinov2_reg4",
    "dinov2_small",
    "clip_b16",
    "siglip_b16",
    "timm_dinov3_small",
    "dinov3_vits16",
    "timm_deit_distilled",
    "timm_deit3_small",
    "deit_small_distilled",
    "clip_laion_b16",
    "timm_dinov3_splus",
    "dinov3_vits16plus",
)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: tests/golden/hub/timm_dinov3_splus's `model_args`.
SPLUS_ARGS = dict(embed_dim=16, depth=2, num_heads=2, global_pool="token")


def _folder(tmp_path, config, processor=None):
    (tmp_path / "config.json").write_text(json.dumps(config))
    if processor is not None:
        text = json.dumps(processor)
        (tmp_path / "preprocessor_config.json").write_text(text)
    return tmp_path


def _pixels(model):
    size = model.image_size[0]
    rng = np.random.default_rng(0)
    return rng.random((1, size, size, 3), np.float32) * 255


# The reader alone: what each publisher's config leaves at its defaults.


def test_timm_architecture_gives_its_own_arguments(tmp_path):
    config = {
        "architecture": "vit_small_patch14_reg4_dinov2",
        "num_classes": 0,
        "pretrained_cfg": {"input_size": [3, 518, 518], "crop_pct": 1.0},
    }
    read = hub_config.read(_folder(tmp_path, config))
    args = read.arguments
    assert (args["hidden_dim"], args["num_heads"], args["mlp_dim"]) == (
        384,
        6,
        1536,
    )
    assert args["num_register_tokens"] == 4
    assert args["layer_scale_init"] == 1e-5
    assert args["position_embedding_tokens"] == "patches"
    assert args["image_size"] == 518
    assert args["include_top"] is False
    assert read.resampling == {
        "interpolation": "bicubic_pytorch",
        "antialias": True,
    }


def test_timm_clip_and_siglip_defaults(tmp_path):
    clip = hub_config.read(
        _folder(tmp_path, {"architecture": "vit_base_patch16_clip_224"})
    ).arguments
    assert clip["layer_norm_epsilon"] == 1e-5
    assert clip["norm_pre"] and not clip["patch_bias"]
    quick = hub_config.read(
        _folder(
            tmp_path, {"architecture": "vit_base_patch16_clip_quickgelu_224"}
        )
    ).arguments
    assert quick["activation"] == "quick_gelu"
    siglip = hub_config.read(
        _folder(tmp_path, {"architecture": "vit_base_patch16_siglip_224"})
    ).arguments
    assert siglip["pooling"] == "map" and not siglip["class_token"]


def test_timm_model_args_and_labels_override(tmp_path):
    config = {
        "architecture": "vit_base_patch16_224",
        "num_classes": 2,
        "label_names": ["cat", "dog"],
        "model_args": {"global_pool": "avg", "num_heads": 8},
        "pretrained_cfg": {"mean": [0.5] * 3, "std": [0.5] * 3},
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["pooling"] == "gap" and args["fc_norm"]
    assert args["num_heads"] == 8
    assert args["class_names"] == ["cat", "dog"]
    assert args["num_classes"] == 2
    assert args["normalization"] == {"mean": (0.5,) * 3, "std": (0.5,) * 3}


@pytest.mark.parametrize(
    "architecture, qkv_bias",
    [
        ("vit_small_patch16_dinov3", False),
        ("vit_tiny_patch16_dinov3_qkvb", True),
    ],
)
def test_timm_dinov3_is_the_presets_architecture(
    tmp_path, architecture, qkv_bias
):
    config = {
        "architecture": architecture,
        "num_classes": 0,
        "pretrained_cfg": {"input_size": [3, 256, 256], "crop_pct": 1.0},
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    expected = {**presets.DINOV3_ARGUMENTS, "qkv_bias": qkv_bias}
    assert {k: args[k] for k in expected} == expected
    assert args["pooling"] == "token" and not args["fc_norm"]
    assert args["image_size"] == 256
    assert args["image_resize"]["crop_pct"] == 1.0


def test_timm_dinov3_takes_eva_model_args(tmp_path):
    config = {
        "architecture": "vit_base_patch16_dinov3",
        "model_args": {"global_pool": "avg", "num_reg_tokens": 0},
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["pooling"] == "gap" and not args["fc_norm"]
    assert args["num_register_tokens"] == 0
    config["model_args"] = {"use_abs_pos_emb": True}
    with pytest.raises(ValueError, match="use_abs_pos_emb=True"):
        hub_config.read(_folder(tmp_path, config))


def test_rope_augmentations_follow_the_config(tmp_path):
    """transformers' DINOv3ViTConfig rescales by 2 in training unless its
    config says otherwise; timm's DINOv3 entry points augment nothing
    unless `model_args` says so. Inference is the same either way."""
    read = hub_config.read(_folder(tmp_path, {"model_type": "dinov3_vit"}))
    assert read.arguments["rope_rescale_coords"] == 2.0
    assert read.arguments["rope_shift_coords"] is None
    config = {"model_type": "dinov3_vit", "pos_embed_shift": 0.1}
    config.update(pos_embed_jitter=1.2, pos_embed_rescale=None)
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["rope_shift_coords"] == 0.1
    assert args["rope_jitter_coords"] == 1.2
    assert args["rope_rescale_coords"] is None
    config = {"architecture": "vit_small_patch16_dinov3"}
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert "rope_rescale_coords" not in args
    config["model_args"] = {"rope_rescale_coords": 2.0}
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["rope_rescale_coords"] == 2.0
    model = keras_vit.ViT.from_preset(
        str(GOLDEN / "dinov3_vits16"), rope_rescale_coords=None
    )
    assert model.rope_rescale_coords is None  # a setting, not the file's


def test_transformers_dinov3_defaults_and_biases(tmp_path):
    # transformers 5.25 configuration_dinov3_vit.py `DINOv3ViTConfig`.
    read = hub_config.read(_folder(tmp_path, {"model_type": "dinov3_vit"}))
    args = read.arguments
    assert (args["hidden_dim"], args["num_heads"], args["mlp_dim"]) == (
        384,
        6,
        1536,
    )
    assert args["position_embedding"] == "rope" and args["rope_theta"] == 100
    assert args["layer_norm_epsilon"] == 1e-5
    assert args["layer_scale_init"] == 1.0
    assert args["num_register_tokens"] == 0
    assert args["qkv_bias"] and args["include_top"] is False
    assert args["normalization"] == {
        "mean": (0.485, 0.456, 0.406),
        "std": (0.229, 0.224, 0.225),
    }
    # DINOv3ViTImageProcessor's defaults: 224x224, bilinear.
    assert args["image_size"] == 224
    assert args["image_resize"]["interpolation"] == "bilinear"
    config = {
        "model_type": "dinov3_vit",
        "query_bias": False,
        "value_bias": False,
        "rope_theta": 50.0,
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert not args["qkv_bias"] and args["rope_theta"] == 50.0


@pytest.mark.parametrize(
    "config, width",
    [  # timm: int(D * mlp_ratio) up to a multiple of swiglu_align_to;
        # transformers: intermediate_size as it is.
        ({"architecture": "vit_small_plus_patch16_dinov3"}, 1536),
        ({"architecture": "vit_huge_plus_patch16_dinov3_qkvb"}, 5120),
        (
            {
                "architecture": "vit_small_plus_patch16_dinov3",
                "model_args": {"embed_dim": 16, "mlp_ratio": 4.3},
            },
            72,
        ),
        (
            {
                "model_type": "dinov3_vit",
                "use_gated_mlp": True,
                "hidden_act": "silu",
                "intermediate_size": 68,
            },
            68,
        ),
    ],
)
def test_dinov3_plus_is_gated(tmp_path, config, width):
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["use_gated_mlp"] and args["activation"] == "silu"
    assert args["mlp_dim"] == width


@pytest.mark.parametrize(
    "model_type, expected",
    [
        # transformers 5.25 configuration_*.py class defaults.
        ("dinov2", dict(patch_size=14, activation="gelu", mlp_dim=3072)),
        ("clip", dict(patch_size=32, activation="quick_gelu", norm_pre=True)),
        ("siglip", dict(patch_size=16, activation="gelu_tanh", pooling="map")),
        ("dinov2_with_registers", dict(num_register_tokens=4)),
        ("vit", dict(patch_size=16, layer_norm_epsilon=1e-12, mlp_dim=3072)),
        ("deit", dict(layer_norm_epsilon=1e-12, distillation=True)),
    ],
)
def test_transformers_class_defaults(tmp_path, model_type, expected):
    args = hub_config.read(
        _folder(tmp_path, {"model_type": model_type})
    ).arguments
    assert args["hidden_dim"] == 768 and args["num_heads"] == 12
    for name, value in expected.items():
        assert args[name] == value, name


def test_transformers_processor_gives_size_and_crop(tmp_path):
    config = {"model_type": "dinov2", "image_size": 518, "id2label": {}}
    processor = {
        "size": {"shortest_edge": 256},
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
        "resample": 3,
        "image_mean": [0.1, 0.2, 0.3],
        "image_std": [0.4, 0.5, 0.6],
    }
    args = hub_config.read(_folder(tmp_path, config, processor)).arguments
    assert args["image_size"] == 224
    assert args["image_resize"]["crop_pct"] == 224 / 256
    assert args["image_resize"]["interpolation"] == "bicubic"
    assert args["normalization"]["std"] == (0.4, 0.5, 0.6)


@pytest.mark.parametrize(
    "model_type, processor, expected",
    [
        # No file: the class defaults (transformers 5.25), the crop too,
        # at the config's resolution.
        ("clip", {}, (224, 1.0, "bicubic", 0.48145466)),
        ("dinov2", {}, (224, 1.0, "bicubic", 0.48145466)),  # Bit's
        ("deit", {}, (224, 224 / 256, "bicubic", 0.5)),
        ("vit", {}, (224, None, "bilinear", 0.5)),
        # Older processors' int sizes: the shorter side where a crop
        # follows, else the height and width.
        (
            "vit",
            {"size": 256, "crop_size": 224, "do_center_crop": True},
            (224, 224 / 256, "bilinear", 0.5),
        ),
        ("clip", {"size": 384, "do_center_crop": False}, (384, None)),
    ],
)
def test_processor_class_defaults_under_the_file(
    tmp_path, model_type, processor, expected
):
    args = hub_config.read(
        _folder(tmp_path, {"model_type": model_type}, processor or None)
    ).arguments
    resize = args["image_resize"]
    found = (
        args["image_size"],
        resize["crop_pct"],
        resize["interpolation"],
        args["normalization"]["mean"][0],
    )
    assert found[: len(expected)] == expected


def test_processor_resize_then_crop_feeds_the_crop(tmp_path):
    # DeiTImageProcessor's class defaults: resize to 256x256, crop 224.
    processor = {
        "size": {"height": 256, "width": 256},
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
    }
    config = {"model_type": "deit"}
    args = hub_config.read(_folder(tmp_path, config, processor)).arguments
    assert args["image_size"] == 224
    assert args["image_resize"]["crop_pct"] == 224 / 256
    assert args["normalization"]["mean"] == (0.5,) * 3  # the class's


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_timm_interpolation_is_read(tmp_path, interpolation):
    config = {
        "architecture": "vit_base_patch16_224",
        "pretrained_cfg": {"interpolation": interpolation},
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["image_resize"]["interpolation"] == interpolation


@pytest.mark.parametrize("empty", [None, "", []])
def test_timm_empty_data_fields_fall_back_as_timm_does(tmp_path, empty):
    """`timm.data.resolve_data_config` takes each of these fields only
    where it is set and not empty, else its default."""
    keys = ("interpolation", "mean", "std", "crop_pct", "crop_mode")
    config = {
        "architecture": "vit_base_patch16_224",
        "pretrained_cfg": dict.fromkeys(keys, empty),
    }
    args = hub_config.read(_folder(tmp_path, config)).arguments
    assert args["image_resize"] == {
        "crop_pct": 0.875,
        "interpolation": "bicubic",
        "antialias": True,
    }
    assert args["normalization"]["mean"] == (0.485, 0.456, 0.406)
    assert args["normalization"]["std"] == (0.229, 0.224, 0.225)
    assert args["image_size"] == 224


@pytest.mark.parametrize("interpolation", ["nearest", "lanczos", "random"])
def test_timm_interpolation_keras_vit_lacks_is_refused(tmp_path, interpolation):
    config = {
        "architecture": "vit_base_patch16_224",
        "pretrained_cfg": {"interpolation": interpolation},
    }
    with pytest.raises(
        ValueError, match=f"bilinear or bicubic.*{interpolation}"
    ):
        hub_config.read(_folder(tmp_path, config))


def test_id2label_names_but_not_placeholders(tmp_path):
    labels = {"1": "dog", "0": "cat", "2": "emu"}
    config = {"model_type": "dinov2", "id2label": labels}
    read = hub_config.read(_folder(tmp_path, config))
    assert read.arguments["class_names"] == ["cat", "dog", "emu"]
    config["id2label"] = {"0": "LABEL_0", "1": "LABEL_1"}
    read = hub_config.read(_folder(tmp_path, config))
    assert "class_names" not in read.arguments


@pytest.mark.parametrize(
    "config, named",
    [
        ({"architecture": "vit_nonesuch_patch16_224"}, "vit_nonesuch"),
        ({"model_type": "bert"}, "model_type='bert'"),
        ({"hello": 1}, "neither"),
        ({"model_type": "dinov2", "use_gated_mlp": True}, "use_gated"),
        ({"model_type": "dinov3_vit", "mlp_bias": False}, "mlp_bias=False"),
        ({"model_type": "clip", "vision_config": []}, "vision_config"),
        (
            {"architecture": "vit_base_patch16_224", "model_args": {"x": 1}},
            "`x`",
        ),
    ],
)
def test_unknown_or_malformed_config_is_named(tmp_path, config, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(")):
        hub_config.read(_folder(tmp_path, config))


def test_malformed_json_is_named(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        hub_config.read(tmp_path)


# Snapshot folders: the publisher's outputs, with no flag.


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_snapshot_folder_matches_publisher(name):
    folder = GOLDEN / name
    model = keras_vit.ViT.from_preset(str(folder))
    expected = np.load(folder / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)


@pytest.mark.parametrize(
    "name, distillation",
    [
        ("timm_deit_distilled", True),
        ("timm_deit3_small", False),
        ("deit_small_distilled", True),
    ],
)
def test_deit_snapshot_gives_the_publishers_logits_and_names(
    name, distillation
):
    folder = GOLDEN / name
    model = keras_vit.ViT.from_preset(str(folder), classifier_activation=None)
    assert model.distillation is distillation
    assert model.preprocessing.class_names == ("ant", "bee", "cat", "dog")
    if name == "timm_deit3_small":  # DeiT III: LayerScale, patches only
        assert model.position_embedding_tokens == "patches"
        assert model.layer_scale_init is not None
    expected = np.load(folder / "expected.npz")["logits"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)


def test_laion_and_openai_clip_are_told_apart_by_the_config(tmp_path):
    """LAION's and DataComp's CLIPs write `hidden_act: "gelu"`, OpenAI's
    `quick_gelu`: the config decides, with no flag and no note; the
    other activation is far off on the same weights."""
    laion = GOLDEN / "clip_laion_b16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "layout's default" note
        model = keras_vit.ViT.from_preset(str(laion))
    assert model.activation == "gelu"
    assert keras_vit.ViT.from_preset(str(GOLDEN / "clip_b16")).activation == (
        "quick_gelu"
    )
    expected = np.load(laion / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)
    folder = tmp_path / "snap"
    shutil.copytree(laion, folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"]["hidden_act"] = "quick_gelu"
    (folder / "config.json").write_text(json.dumps(config))
    other = keras_vit.ViT.from_preset(str(folder))
    assert np.abs(other(_pixels(other)) - expected).max() > 1e-3


def test_resolve_model_takes_a_snapshot_folder():
    model = resolver.resolve_model(str(GOLDEN / "clip_b16"))
    assert model.activation == "quick_gelu"
    assert model.layer_norm_epsilon == 1e-5
    assert model.classifier_activation is None


@pytest.mark.parametrize(
    "name, change",
    [
        (
            "timm_dinov3_small",
            {"architecture": "vit_small_patch16_dinov3_qkvb"},
        ),
        ("dinov3_vits16", {"num_register_tokens": 0}),
        ("dinov3_vits16", {"query_bias": False, "value_bias": False}),
        # A SwiGLU file under a plain config and the reverse, and under
        # another MLP ratio (16 * 4.0 = 64 wide; the file is 72).
        ("timm_dinov3_splus", {"architecture": "vit_small_patch16_dinov3"}),
        ("timm_dinov3_splus", {"model_args": dict(SPLUS_ARGS, mlp_ratio=4.0)}),
        ("dinov3_vits16plus", {"use_gated_mlp": False}),
        ("dinov3_vits16", {"use_gated_mlp": True, "hidden_act": "silu"}),
    ],
)
def test_dinov3_config_contradicting_its_file_is_refused(
    tmp_path, name, change
):
    folder = tmp_path / "snap"
    shutil.copytree(GOLDEN / name, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(change)
    (folder / "config.json").write_text(json.dumps(config))
    # Refused as the tensors' report, or before it where the config's
    # sizes alone contradict the file's.
    with pytest.raises(ValueError, match="do not fit|contradicts its weights"):
        keras_vit.ViT.from_preset(str(folder))


def test_contradicting_override_is_refused_by_name():
    with pytest.raises(ValueError, match="num_heads.*contradicts"):
        keras_vit.ViT.from_preset(str(GOLDEN / "siglip_b16"), num_heads=4)
    with pytest.raises(ValueError, match="activation"):
        resolver.resolve_model(str(GOLDEN / "clip_b16"), activation="gelu")


def test_overrides_new_head_and_size(tmp_path):
    folder = tmp_path / "snap"
    shutil.copytree(GOLDEN / "siglip_b16", folder)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": "a", "1": "b"}
    (folder / "config.json").write_text(json.dumps(config))
    model = keras_vit.ViT.from_preset(
        str(folder), num_classes=3, image_size=160
    )
    assert model.num_classes == 3 and model.include_top
    assert model.preprocessing.class_names is None
    assert model.image_size == (160, 160)


@pytest.mark.parametrize(
    "given, names",
    [
        ({}, ("ant", "bee", "cat", "dog")),
        ({"num_classes": 4}, ("ant", "bee", "cat", "dog")),  # same head
        ({"num_classes": 3}, None),  # a new head: no names
        ({"include_top": False}, None),
        ({"num_classes": 2, "class_names": ["x", "y"]}, ("x", "y")),
    ],
)
@pytest.mark.parametrize("name", ["timm_deit3_small", "deit_small_distilled"])
def test_one_rule_keeps_class_names_that_name_the_head(name, given, names):
    model = keras_vit.ViT.from_preset(str(GOLDEN / name), **given)
    assert model.preprocessing.class_names == names


@pytest.mark.parametrize(
    "name, key, names",
    [
        ("timm_deit3_small", "label_names", ["a", "b"]),
        ("deit_small_distilled", "id2label", {"0": "a", "1": "b"}),
    ],
)
def test_class_names_of_another_count_than_the_head_are_refused(
    tmp_path, name, key, names
):
    """One rule for timm's and transformers' names: they must name the
    4 outputs of the file's head, unless the caller chose the head."""
    folder = tmp_path / name
    shutil.copytree(GOLDEN / name, folder)
    config = json.loads((folder / "config.json").read_text())
    config[key] = names
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="names 2 classes.*has 4 outputs"):
        keras_vit.ViT.from_preset(str(folder))
    model = keras_vit.ViT.from_preset(str(folder), num_classes=2)
    assert model.preprocessing.class_names == ("a", "b")
    model = keras_vit.ViT.from_preset(str(folder), include_top=False)
    assert model.preprocessing.class_names is None


def test_include_top_alone_keeps_the_head_check(tmp_path):
    """`include_top=True` chooses no head: the config's class count must
    still be the file's."""
    folder = tmp_path / "snapshot"
    shutil.copytree(GOLDEN / "keras_to_timm_dinov2", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(num_classes=4, label_names=list("abcd"))
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="num_classes=4.*num_classes=3"):
        keras_vit.ViT.from_preset(str(folder), include_top=True)


def test_timm_label_names_become_class_names(tmp_path):
    folder = tmp_path / "snap"
    shutil.copytree(GOLDEN / "timm_dinov2_reg4", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(num_classes=2, label_names=["cat", "dog"])
    (folder / "config.json").write_text(json.dumps(config))
    model = keras_vit.ViT.from_preset(str(folder))  # a new head, named
    assert model.preprocessing.class_names == ("cat", "dog")
    config.update(num_classes=3)  # names of another count than that head
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="names 2 classes.*has 3 outputs"):
        keras_vit.ViT.from_preset(str(folder))


def test_snapshot_without_safetensors_is_refused(tmp_path):
    shutil.copy(GOLDEN / "clip_b16" / "config.json", tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(ValueError, match="pytorch_model.bin is never"):
        keras_vit.ViT.from_preset(str(tmp_path))


# hf:// ids, through huggingface_hub's own cache with HF_HUB_OFFLINE.


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A Hub cache in HF_HOME=tmp, in the real layout
    (`models--ORG--NAME/refs/main`, `snapshots/COMMIT/...`), offline;
    returns `add(repo, folder)`, and `add.root(repo)`: the repo's folder."""
    constants = pytest.importorskip("huggingface_hub.constants")
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    def root(repo):
        return cache / f"models--{repo.replace('/', '--')}"

    def add(repo, folder):
        shutil.copytree(
            folder,
            root(repo) / "snapshots" / COMMIT,
            ignore=shutil.ignore_patterns("expected.npz"),
        )
        (root(repo) / "refs").mkdir()
        (root(repo) / "refs" / "main").write_text(COMMIT)

    add.root = root
    return add


def test_hf_id_loads_from_the_hub_cache(hub_cache):
    hub_cache("google/siglip-base-patch16-224", GOLDEN / "siglip_b16")
    model = keras_vit.ViT.from_preset("hf://google/siglip-base-patch16-224")
    expected = np.load(GOLDEN / "siglip_b16" / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)
    pinned = resolver.locate(f"hf://google/siglip-base-patch16-224@{COMMIT}")
    assert pinned.endswith(COMMIT)


@pytest.mark.parametrize(
    "repo, name",
    [
        ("timm/vit_small_patch16_dinov3.lvd1689m", "timm_dinov3_small"),
        ("facebook/dinov3-vits16-pretrain-lvd1689m", "dinov3_vits16"),
        ("timm/vit_small_plus_patch16_dinov3.lvd1689m", "timm_dinov3_splus"),
    ],
)
def test_hf_id_loads_dinov3(hub_cache, repo, name):
    hub_cache(repo, GOLDEN / name)
    model = keras_vit.ViT.from_preset(f"hf://{repo}")
    assert model.position_embedding == "rope"
    expected = np.load(GOLDEN / name / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)


@pytest.mark.parametrize(
    "repo, name",
    [
        (
            "timm/deit_small_distilled_patch16_224.fb_in1k",
            "timm_deit_distilled",
        ),
        ("timm/deit3_small_patch16_224.fb_in1k", "timm_deit3_small"),
        ("facebook/deit-small-distilled-patch16-224", "deit_small_distilled"),
    ],
)
def test_hf_id_loads_deit(hub_cache, repo, name):
    hub_cache(repo, GOLDEN / name)
    model = keras_vit.ViT.from_preset(f"hf://{repo}")
    expected = np.load(GOLDEN / name / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)


def test_hf_id_missing_repo_or_file_names_the_id(hub_cache, tmp_path):
    with pytest.raises(ValueError, match="hf://nobody/nothing"):
        resolver.resolve_model("hf://nobody/nothing")
    partial = _without(tmp_path, "clip_b16", "model.safetensors")
    hub_cache("openai/clip-vit-base-patch16", partial)
    with pytest.raises(
        ValueError, match="cache .HF_HUB_OFFLINE.*model.safetensors.*patch16"
    ):
        resolver.resolve_model("hf://openai/clip-vit-base-patch16")


@pytest.mark.parametrize("name", ["config.json", "preprocessor_config.json"])
def test_hub_out_of_reach_refuses_what_the_cache_lacks(monkeypatch, name):
    """Online, with the Hub out of reach, a file the cache lacks is
    refused even where it is optional: a processor config left out would
    change the model's input."""
    client = pytest.importorskip("huggingface_hub")
    errors = pytest.importorskip("huggingface_hub.errors")
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def download(repo, filename, **kwargs):
        if filename != name:
            return str(GOLDEN / "siglip_b16" / filename)
        try:
            raise ConnectionError("[Errno 111] Connection refused")
        except ConnectionError as cause:
            raise errors.LocalEntryNotFoundError("not cached") from cause

    monkeypatch.setattr(client, "hf_hub_download", download)
    with pytest.raises(
        ValueError, match=f"Cannot reach the Hub for {name}.*Connection refused"
    ):
        hub.snapshot("hf://google/siglip-base-patch16-224")


def _without(tmp_path, name, *left_out):
    """A copy of golden snapshot `name` without the files `left_out`."""
    folder = tmp_path / f"{name}_partial"
    shutil.copytree(
        GOLDEN / name, folder, ignore=shutil.ignore_patterns(*left_out)
    )
    return folder


def test_processor_config_the_cache_lacks_is_refused(hub_cache, tmp_path):
    """A transformers repo cached without its processor config is refused
    (its input would be the class defaults', not the repo's), unless the
    cache recorded the Hub's 404 for it: then the class defaults are the
    processor's."""
    repo = "facebook/deit-small-distilled-patch16-224"
    folder = _without(tmp_path, "deit_small_distilled", "preprocessor*")
    hub_cache(repo, folder)
    with pytest.raises(ValueError, match="no preprocessor_config.json"):
        keras_vit.ViT.from_preset(f"hf://{repo}")
    marker = hub_cache.root(repo) / ".no_exist" / COMMIT
    marker.mkdir(parents=True)
    (marker / "preprocessor_config.json").touch()
    model = keras_vit.ViT.from_preset(f"hf://{repo}")
    assert model.image_resize["crop_pct"] == 224 / 256
    assert model.normalization["mean"] == (0.5,) * 3  # the class's


@pytest.mark.parametrize("name", ["timm_deit3_small", "sharded"])
def test_cached_repo_loads_with_the_hub_out_of_reach(
    hub_cache, tmp_path, monkeypatch, name
):
    """Online, the Hub refusing connections: a timm repo (no processor
    config to ask for) and a sharded repo (its index tried before its
    absent whole file is refused) load from the cache."""
    constants = pytest.importorskip("huggingface_hub.constants")
    http = pytest.importorskip("huggingface_hub.utils._http")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # The client's retries of an uncached file, without their waits.
    clock = types.SimpleNamespace(sleep=lambda seconds: None)
    monkeypatch.setattr(http, "time", clock)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    template = "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    source = "clip_b16" if name == "sharded" else name
    folder = GOLDEN / source
    if name == "sharded":
        folder = _sharded(tmp_path / "sharded", folder)
    hub_cache("org/repo", folder)
    model = keras_vit.ViT.from_preset("hf://org/repo")
    expected = np.load(GOLDEN / source / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)


@pytest.mark.parametrize(
    "text", ["hf://", "hf://one", "hf://a/b/c", "hf://a/b@", "hf:///b"]
)
def test_malformed_hf_id_is_refused(text):
    with pytest.raises(ValueError, match="hf://ORG/NAME"):
        hub.snapshot(text)


def test_hf_id_without_the_client_names_the_hub_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(extras.MissingExtraError, match=r"\[hub\]"):
        hub.snapshot("hf://openai/clip-vit-base-patch16")


# The command line: every MODEL goes through `resolver.locate`.


def test_cli_convert_and_predict_take_an_hf_id(hub_cache, tmp_path, capsys):
    hub_cache("openai/clip-vit-base-patch16", GOLDEN / "clip_b16")
    output = tmp_path / "clip.keras"
    assert (
        cli.main(
            [
                "convert",
                "hf://openai/clip-vit-base-patch16",
                "--output",
                str(output),
                "--quiet",
            ]
        )
        == 0
    )
    loaded = keras.saving.load_model(output, compile=False)
    assert loaded.activation == "quick_gelu"
    expected = np.load(GOLDEN / "clip_b16" / "expected.npz")["output"]
    np.testing.assert_allclose(loaded(_pixels(loaded)), expected, atol=1e-4)
    image = tmp_path / "image.png"
    keras.utils.save_img(image, np.zeros((32, 32, 3), np.uint8))
    code = cli.main(
        ["predict", "hf://openai/clip-vit-base-patch16", str(image)]
    )
    assert code == 0, capsys.readouterr().err


def test_cli_convert_fetches_each_file_once(hub_cache, tmp_path, monkeypatch):
    client = pytest.importorskip("huggingface_hub")
    fetched = []
    download = client.hf_hub_download

    def counting(repo, filename, **kwargs):
        fetched.append(filename)
        return download(repo, filename, **kwargs)

    monkeypatch.setattr(client, "hf_hub_download", counting)
    hub_cache("openai/clip-vit-base-patch16", GOLDEN / "clip_b16")
    output = str(tmp_path / "clip.keras")
    argv = ["convert", "hf://openai/clip-vit-base-patch16", "--output", output]
    assert cli.main([*argv, "--quiet"]) == 0
    assert sorted(fetched) == [
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
    ]


def test_cli_convert_reads_the_config_beside_a_file(tmp_path, capsys):
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copy(GOLDEN / "siglip_b16" / name, tmp_path)
    weights = tmp_path / "siglip.safetensors"
    shutil.copy(GOLDEN / "siglip_b16" / "model.safetensors", weights)
    output = tmp_path / "siglip.keras"
    argv = ["convert", str(weights), "--output", str(output), "--quiet"]
    assert cli.main(argv) == 0
    loaded = keras.saving.load_model(output, compile=False)
    assert loaded.activation == "gelu_tanh" and loaded.pooling == "map"
    assert "assumed" not in capsys.readouterr().err
    refused = ["convert", str(weights), "--output", str(tmp_path / "x.keras")]
    assert cli.main([*refused, "--num-heads", "4"]) == 2
    assert "num_heads" in capsys.readouterr().err


#: A tiny DeiT III repo (4 named classes) for the commands below.
DEIT3 = "timm/deit3_small_patch16_224.fb_in1k"


@pytest.fixture
def deit3_id(hub_cache, tmp_path):
    """`hf://` id of the tiny DeiT III in a filled cache (offline)."""
    hub_cache(DEIT3, GOLDEN / "timm_deit3_small")
    return f"hf://{DEIT3}"


def _image(path, size=40):
    pixels = np.random.default_rng(1).integers(0, 255, (size, size, 3))
    keras.utils.save_img(path, pixels.astype(np.uint8))
    return str(path)


@pytest.mark.slow
def test_cli_export_takes_an_hf_id_and_carries_its_names(deit3_id, tmp_path):
    out = tmp_path / "deit3.tflite"
    argv = ["export", deit3_id, "--format", "tflite", "--output", str(out)]
    assert cli.main([*argv, "--image-size", "32", "--num-images", "2"]) == 0
    spec = json.loads(out.with_suffix(".json").read_text())
    assert spec["class_names"] == ["ant", "bee", "cat", "dog"]
    assert spec["input"]["height"] == 32


def test_cli_inspect_takes_an_hf_id(deit3_id, tmp_path):
    figures = tmp_path / "figures"
    image = _image(tmp_path / "img.png")
    argv = ["inspect", deit3_id, "--image", image, "--output", str(figures)]
    assert cli.main(argv) == 0
    assert (figures / "index.html").is_file()


def test_cli_few_shot_takes_an_hf_id(deit3_id, monkeypatch, capsys):
    fewer_digits(monkeypatch, train=40, test=20)
    argv = ["few-shot", deit3_id, "--dataset", "digits", "--shots", "1"]
    assert cli.main([*argv, "--seeds", "1", "--quiet"]) == 0
    assert "linear few-shot on digits" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_train_weights_takes_an_hf_id(deit3_id, tmp_path, capsys):
    """`train --weights hf://...` builds the repo's architecture (no
    `--model` asks for none); a name given must agree with it."""
    photos = tmp_path / "photos"
    for i, label in enumerate(("cat", "dog", "cat", "dog")):
        (photos / label).mkdir(parents=True, exist_ok=True)
        _image(photos / label / f"{i}.png", size=16)
    argv = ["train", "--weights", deit3_id, "--dataset", f"folder:{photos}"]
    argv += ["--image-size=32", "--batch-size=2", "--epochs=1"]
    argv += ["--mixed-precision=off", "--jit-compile=off", "--verbose=0"]
    output = tmp_path / "run"
    assert cli.main([*argv, "--output", str(output)]) == 0
    model = keras.saving.load_model(output / "model.keras", safe_mode=True)
    assert (model.hidden_dim, model.num_layers) == (16, 2)
    assert model.position_embedding_tokens == "patches"  # DeiT III's
    assert model.preprocessing.class_names == ("cat", "dog")
    for name in ("B/16", "ViT_Ti16"):  # the default's name, given, too
        other = ["--model", name, "--output", str(tmp_path / name[-2:])]
        assert cli.main([*argv, *other]) == 2
        assert "hidden_dim" in capsys.readouterr().err


def test_benchmark_model_takes_a_hub_repo_and_overrides(hub_cache):
    hub_cache("google/siglip-base-patch16-224", GOLDEN / "siglip_b16")
    variant, arguments = throughput.model_arguments(
        "hf://google/siglip-base-patch16-224:pooling=gap"
    )
    assert arguments["hidden_dim"] == 16 and arguments["pooling"] == "gap"
    assert arguments["activation"] == "gelu_tanh"
    assert "include_top" not in arguments and "image_size" not in arguments
    vit = throughput.keras_vit_model(str(GOLDEN / "clip_b16"), image_size=32)
    assert vit.num_heads == 2 and vit.activation == "quick_gelu"


# The download itself, against a stand-in for the Hub on 127.0.0.1.


class _Hub(http.server.BaseHTTPRequestHandler):
    """Serves `/ORG/NAME/resolve/REV/FILE` from `files` (a dict of
    `"ORG/NAME/FILE"` to a folder), as the Hub answers: the commit, an
    ETag and the size in the headers; `cut` names a file whose body ends
    early, as an interrupted download does."""

    files = {}
    cut = None
    gated = ()

    def _refuse(self, status, code):
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _answer(self, body):
        parts = self.path.split("/")
        key = "/".join([*parts[1:3], *parts[5:]])
        folder = self.files.get(key)
        if "/".join(parts[1:3]) in self.gated:
            return self._refuse(401, "GatedRepo")
        if parts[3:4] != ["resolve"] or folder is None:
            return self._refuse(404, "EntryNotFound")
        data = (folder / parts[-1]).read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hash(data) & 0xFFFFFFFF:x}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(
                data[: len(data) // 2] if key == self.cut else data
            )

    def do_HEAD(self):  # noqa: N802 - http.server's name
        self._answer(body=False)

    def do_GET(self):  # noqa: N802 - http.server's name
        self._answer(body=True)

    def log_message(self, *args):
        pass


@pytest.fixture
def hub_server(tmp_path, monkeypatch):
    """A stand-in Hub at HF_ENDPOINT=http://127.0.0.1:PORT, online, with
    an empty cache in tmp; returns `(handler, cache)`."""
    constants = pytest.importorskip("huggingface_hub.constants")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(_Hub, "files", {})
    monkeypatch.setattr(_Hub, "cut", None)
    monkeypatch.setattr(_Hub, "gated", ())
    yield _Hub, cache
    server.shutdown()
    server.server_close()


def _serve(handler, repo, folder):
    for name in (
        "config.json",
        "preprocessor_config.json",
        "model.safetensors",
    ):
        if (folder / name).exists():
            handler.files[f"{repo}/{name}"] = folder


def test_hf_id_downloads_from_hf_endpoint(hub_server):
    handler, cache = hub_server
    _serve(handler, "google/siglip-base-patch16-224", GOLDEN / "siglip_b16")
    model = keras_vit.ViT.from_preset("hf://google/siglip-base-patch16-224")
    expected = np.load(GOLDEN / "siglip_b16" / "expected.npz")["output"]
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)
    snapshot = cache / "models--google--siglip-base-patch16-224" / "snapshots"
    assert (snapshot / COMMIT / "model.safetensors").is_file()


def test_hf_id_without_a_processor_config_downloads(hub_server):
    """A timm repo has no preprocessor_config.json: the Hub's 404 for it
    is no error."""
    handler, _ = hub_server
    repo = "timm/deit3_small_patch16_224.fb_in1k"
    _serve(handler, repo, GOLDEN / "timm_deit3_small")
    model = keras_vit.ViT.from_preset(f"hf://{repo}")
    expected = np.load(GOLDEN / "timm_deit3_small" / "expected.npz")
    np.testing.assert_allclose(
        model(_pixels(model)), expected["output"], atol=1e-4
    )


def test_interrupted_download_leaves_nothing_behind(hub_server):
    handler, cache = hub_server
    _serve(handler, "openai/clip-vit-base-patch16", GOLDEN / "clip_b16")
    handler.cut = "openai/clip-vit-base-patch16/model.safetensors"
    with pytest.raises(ValueError, match="clip-vit-base-patch16"):
        keras_vit.ViT.from_preset("hf://openai/clip-vit-base-patch16")
    # The client removes the partial blob: no weights, whole or half.
    found = [p.name for p in cache.rglob("*") if p.is_file()]
    assert "model.safetensors" not in found
    assert not [name for name in found if name.endswith(".incomplete")]
    data = (GOLDEN / "clip_b16" / "model.safetensors").read_bytes()
    assert f"{hash(data) & 0xFFFFFFFF:x}" not in found  # its blob
    with pytest.raises(ValueError, match="hf://nobody/nothing"):
        keras_vit.ViT.from_preset("hf://nobody/nothing")


def test_repo_of_google_npz_is_refused_by_id_and_loads_as_a_file(hub_server):
    """A repo with only a Google .npz checkpoint has no config.json: the
    id is refused, saying how to load it; the file, fetched, loads."""
    handler, _ = hub_server
    handler.files["google/vit-npz/vit_token.npz"] = GOLDEN.parent
    with pytest.raises(ValueError, match="no config.json(.|\n)*Google .npz"):
        keras_vit.ViT.from_preset("hf://google/vit-npz")
    client = pytest.importorskip("huggingface_hub")
    path = client.hf_hub_download("google/vit-npz", "vit_token.npz")
    model = resolver.resolve_model(path, classifier_activation=None)
    expected = np.load(GOLDEN.parent / "vit_token.expected.npz")
    np.testing.assert_allclose(
        model(expected["images"]), expected["logits"], atol=1e-4
    )


def _sharded(folder, source):
    """`source`'s snapshot with its weights in two shards and an index,
    as transformers' `save_pretrained` writes a large model."""
    folder.mkdir()
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copy(source / name, folder)
    tensors = safetensors.numpy.load_file(source / "model.safetensors")
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[::2], names[1::2])):
        shard = f"model-0000{i + 1}-of-00002.safetensors"
        safetensors.numpy.save_file(
            {k: tensors[k] for k in part}, folder / shard
        )
        weight_map.update(dict.fromkeys(part, shard))
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def test_sharded_safetensors_load_by_folder_and_id(tmp_path, hub_cache):
    folder = _sharded(tmp_path / "sharded", GOLDEN / "clip_b16")
    expected = np.load(GOLDEN / "clip_b16" / "expected.npz")["output"]
    model = keras_vit.ViT.from_preset(str(folder))
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)
    hub_cache("openai/clip-vit-base-patch16", folder)
    model = keras_vit.ViT.from_preset("hf://openai/clip-vit-base-patch16")
    np.testing.assert_allclose(model(_pixels(model)), expected, atol=1e-4)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ValueError, match="model-00002-of-00002.*missing"):
        keras_vit.ViT.from_preset(str(folder))


def test_shard_index_naming_another_folder_is_refused(tmp_path):
    folder = _sharded(tmp_path / "sharded", GOLDEN / "clip_b16")
    index = {"weight_map": {"x": "../model.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="must name files beside it"):
        keras_vit.ViT.from_preset(str(folder))


def test_gated_repo_without_a_token_says_so(hub_server):
    handler, _ = hub_server
    handler.gated = ("facebook/dinov3-vits16-pretrain-lvd1689m",)
    with pytest.raises(ValueError, match="gated.*HF_TOKEN"):
        keras_vit.ViT.from_preset(
            "hf://facebook/dinov3-vits16-pretrain-lvd1689m"
        )


def test_config_contradicting_the_weights_loads_nothing(tmp_path):
    folder = tmp_path / "snap"
    shutil.copytree(GOLDEN / "siglip_b16", folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"]["num_hidden_layers"] = 3
    (folder / "config.json").write_text(json.dumps(config))
    # Refused before the model is built (a huge depth is not allocated).
    with pytest.raises(ValueError, match="num_layers=3, the weights num_la"):
        keras_vit.ViT.from_preset(str(folder))


# And back out: a keras_vit model as a timm folder.

#: The keras_vit models written as timm folders in tests/golden/hub/
#: (tests/golden/make_timm_folders.py), which timm itself loads with the
#: same outputs (tests/golden/check_timm_folders.py, run with timm).
TIMM_FOLDERS = {
    "keras_to_timm_dinov2": (
        "timm_dinov2_reg4",
        dict(num_classes=3, class_names=["ant", "bee", "cat"]),
    ),
    "keras_to_timm_clip": ("clip_b16", {}),
}


def timm_source_model(name):
    """The model written as the timm folder `name`: a snapshot's model,
    "fine-tuned" (its head's weights drawn from a fixed seed)."""
    source, kwargs = TIMM_FOLDERS[name]
    model = keras_vit.ViT.from_preset(
        str(GOLDEN / source), classifier_activation=None, **kwargs
    )
    rng = np.random.default_rng(7)
    for variable in model.get_layer("head").weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    return model


@pytest.mark.parametrize("name", sorted(TIMM_FOLDERS))
def test_timm_folder_is_what_save_timm_writes_and_reads_back(name, tmp_path):
    model = timm_source_model(name)
    timm_folder.save_timm(model, tmp_path / "out")
    shipped = GOLDEN / name
    written = safetensors.numpy.load_file(tmp_path / "out/model.safetensors")
    expected = safetensors.numpy.load_file(shipped / "model.safetensors")
    assert sorted(written) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(written[key], value, err_msg=key)
    config = json.loads((tmp_path / "out/config.json").read_text())
    assert config == json.loads((shipped / "config.json").read_text())
    back = keras_vit.ViT.from_preset(
        str(tmp_path / "out"),
        classifier_activation=None,  # timm's logits
    )
    outputs = np.load(shipped / "expected.npz")["output"]
    np.testing.assert_allclose(back(_pixels(back)), outputs, atol=1e-4)
    assert back.preprocessing.class_names == model.preprocessing.class_names


def test_save_timm_refuses_what_timm_has_no_place_for(tmp_path):
    model = keras_vit.ViT(**TINY, distillation=True, layer_norm_epsilon=1e-3)
    with pytest.raises(ValueError, match="distillation.*layer_norm_epsilon"):
        timm_folder.save_timm(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_save_timm_writes_an_mlp_ratio_that_gives_the_width_back(tmp_path):
    # 120 / 88 * 88 is 119.99...: timm's int(D * mlp_ratio) built 119.
    model = keras_vit.ViT(**{**TINY, "hidden_dim": 88, "mlp_dim": 120})
    timm_folder.save_timm(model, tmp_path / "timm")
    config = json.loads((tmp_path / "timm" / "config.json").read_text())
    assert int(88 * config["model_args"]["mlp_ratio"]) == 120
    loaded = keras_vit.ViT.from_preset(str(tmp_path / "timm"))
    assert loaded.mlp_dim == 120


def test_transformers_vit_classifier_snapshot(tmp_path):
    """A `ViTForImageClassification` repo: its `config.json` and file as
    `save_pretrained` wrote them (tests/golden/make_checkpoints.py), no
    processor config: ViTImageProcessor's mean and std of 0.5."""
    golden = GOLDEN.parent
    shutil.copy(golden / "vit_token.hf.config.json", tmp_path / "config.json")
    shutil.copy(
        golden / "vit_token.hf.safetensors", tmp_path / "model.safetensors"
    )
    model = keras_vit.ViT.from_preset(str(tmp_path), classifier_activation=None)
    assert model.layer_norm_epsilon == 1e-6 and model.num_heads == 4
    assert model.preprocessing.class_names is None  # LABEL_i placeholders
    expected = np.load(golden / "vit_token.hf.expected.npz")
    np.testing.assert_allclose(
        model(expected["images"]), expected["logits"], atol=1e-4
    )


@pytest.mark.parametrize(
    "given, expected",
    [
        # Nothing given: the publisher's (timm's antialiased bicubic).
        ({}, {"interpolation": "bicubic_pytorch", "antialias": True}),
        # An antialias alone keeps the publisher's interpolation.
        (
            {"antialias": False},
            {"interpolation": "bicubic_pytorch", "antialias": False},
        ),
        # An interpolation given comes with keras_vit's default antialias,
        # not the repo's (which it may not take).
        (
            {"interpolation": "bilinear_align_corners"},
            {"interpolation": "bilinear_align_corners", "antialias": False},
        ),
    ],
)
def test_the_resampling_given_and_the_repos(given, expected, monkeypatch):
    from keras_vit.weights import loading

    seen = {}
    load = loading.load_checkpoint

    def spy(model, checkpoint, **resize):
        seen.update(resize)
        return load(model, checkpoint, **resize)

    monkeypatch.setattr(loading, "load_checkpoint", spy)
    folder = str(GOLDEN / "timm_dinov2_reg4")
    keras_vit.ViT.from_preset(folder, image_size=70, **given)
    assert seen == expected
