"""DINOv3 (2-D RoPE) read from timm and transformers files, from goldens.

tests/golden/make_dinov3_checkpoints.py (developer-side: torch, timm,
transformers) made tiny DINOv3s with every weight perturbed, in timm's
`Eva` layout (`vit_small_patch16_dinov3`: no qkv bias; `..._qkvb`: query
and value biases) and transformers' `DINOv3ViTModel` (query and value
biases, no key bias), each also with the SwiGLU MLP of DINOv3's S+ and
H+ (`timm_splus`: timm's `swiglu_align_to` rounding 73 up to 80;
`hf_gated`: `DINOv3ViTGatedMLP`), and recorded their tokens and
class-token features at 16 px and at 12x20 (a non-square grid, from the
same weights). Here, without torch, keras_vit builds the model the file
implies and must give the same numbers.
"""

import os

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

import keras_vit
from keras_vit import cli
from keras_vit import export
from keras_vit import visualize
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
ATOL = 1e-5
NAMES = ("timm_s", "timm_s_qkvb", "hf", "timm_splus", "hf_gated")
#: What `ViT`'s arguments the normalisation is (the goldens' inputs).
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


def files(name):
    path = os.path.join(GOLDEN, f"dinov3_{name}")
    with np.load(path + ".expected.npz") as data:
        return path + ".safetensors", {k: data[k] for k in data.files}


def build(name, **kwargs):
    path, expected = files(name)
    model = convert.model_for_checkpoint(
        read_checkpoint(path), num_heads=2, normalization=IMAGENET, **kwargs
    )
    return model, expected


@pytest.mark.parametrize("name", NAMES)
def test_the_file_gives_the_architecture(name):
    checkpoint = read_checkpoint(files(name)[0])
    implied = convert.architecture(checkpoint)
    assert implied["position_embedding"] == "rope"
    assert implied["rope_theta"] == 100.0
    assert implied["layer_norm_epsilon"] == 1e-5
    assert implied["num_register_tokens"] == 4
    assert implied["pooling"] == "token"  # upstream's, not timm's "avg"
    assert implied.get("qkv_bias", True) == (
        name not in ("timm_s", "timm_splus")
    )
    gated = name in ("timm_splus", "hf_gated")  # S+ / H+'s SwiGLU
    assert implied.get("use_gated_mlp", False) == gated
    assert implied.get("activation", "gelu") == ("silu" if gated else "gelu")
    assert checkpoint.unexpected == [] and checkpoint.missing == []


@pytest.mark.parametrize("name", NAMES)
def test_outputs_match_at_the_size_and_another(name):
    model, expected = build(name, dynamic_image_size=True)
    for suffix in ("", "_wide"):
        images = expected["images" + suffix]
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(model.forward_features(images)),
            expected["tokens" + suffix],
            atol=ATOL,
            rtol=0,
        )
        np.testing.assert_allclose(
            model.predict(images, verbose=0),
            expected["pooled" + suffix],
            atol=ATOL,
            rtol=0,
        )


def test_a_fixed_size_model_at_the_other_size():
    """Built at 12x20, nothing resampled: the rotary table is the grid's."""
    model, expected = build("hf", image_size=(12, 20))
    np.testing.assert_allclose(
        model.predict(expected["images_wide"], verbose=0),
        expected["pooled_wide"],
        atol=ATOL,
        rtol=0,
    )


def test_the_key_bias_is_zero_and_matters_with_rope():
    """transformers' file has no key bias (and timm's qkvb keeps it at
    zero): read as zeros. Under RoPE a key bias is rotated with each
    key's position, so it changes the attention (without RoPE it would
    add the same logit to every key of a query): a wrong reading shows."""
    model, expected = build("hf", image_size=16)
    bias = model.get_layer("block_0").attention.qkv.bias
    width = model.hidden_dim
    assert np.all(keras.ops.convert_to_numpy(bias)[width : 2 * width] == 0)
    values = keras.ops.convert_to_numpy(bias).copy()
    values[width : 2 * width] = 1.0
    bias.assign(values)
    outputs = model.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - expected["pooled"])) > 1e-3


def test_round_trip_in_safe_mode(tmp_path):
    model, expected = build("timm_s", dynamic_image_size=True)
    path = str(tmp_path / "dinov3.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert loaded.position_embedding == "rope" and not loaded.qkv_bias
    np.testing.assert_allclose(
        loaded.predict(expected["images_wide"], verbose=0),
        expected["pooled_wide"],
        atol=ATOL,
        rtol=0,
    )


def test_intermediates_have_the_registers_and_patches():
    model, expected = build("timm_s", image_size=16)
    outputs = model.intermediates_model()(expected["images"])
    blocks, attention = outputs["block_outputs"], outputs["attention_weights"]
    assert len(blocks) == 2 and blocks[0].shape == (2, 21, 32)
    assert attention[-1].shape == (2, 2, 21, 21)


def _changed(tmp_path, name, drop=(), **add):
    """A copy of golden `name`'s file without `drop`, with `add`."""
    tensors = load_file(files(name)[0])
    for key in drop:
        del tensors[key]
    tensors.update(add)
    path = str(tmp_path / f"{name}.safetensors")
    save_file(tensors, path)
    return path


@pytest.mark.parametrize(
    "drop, add, match",
    [
        # EVA-02: RoPE with absolute embeddings for the class token too.
        (
            ("reg_token",),
            {"pos_embed": np.zeros((1, 17, 32), "float32")},
            "EVA-02",
        ),
        # Registers with absolute embeddings or learned frequencies: no
        # timm model has them (Naver's RoPE-ViT, which has these names
        # without registers, loads: test_rope_family_parity.py).
        ((), {"pos_embed": np.zeros((1, 16, 32), "float32")}, "none of"),
        ((), {"rope.freqs": np.zeros((2, 2, 8), "float32")}, "none of"),
    ],
)
def test_other_eva_rope_layouts_are_refused(tmp_path, drop, add, match):
    path = _changed(tmp_path, "timm_s_qkvb", drop, **add)
    with pytest.raises(ValueError, match=match):
        read_checkpoint(path)


def test_rope_vit_builders_take_the_options():
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=32,
        num_layers=1,
        num_heads=2,
        mlp_dim=64,
        position_embedding="rope",
        rope_theta=10.0,
        qkv_bias=False,
        include_top=False,
    )
    assert model.get_layer("rope").rope_theta == 10.0
    assert model.get_layer("block_0").attention.qkv.bias is None


def test_a_model_without_rope_is_refused():
    """The file holds no position table, so its tensors fit a model
    without positions: refused by name, not loaded into another model."""
    path, _ = files("timm_s")
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=32,
        num_layers=2,
        num_heads=2,
        mlp_dim=64,
        include_top=False,
        position_embedding="none",
        num_register_tokens=4,
        layer_scale_init=1e-5,
        qkv_bias=False,
        layer_norm_epsilon=1e-5,
    )
    with pytest.raises(ValueError, match="position_embedding='none'"):
        keras_vit.load_weights(model, path)


def test_fine_tuning_at_another_size_with_a_new_head():
    """Built at 24 px with a 3-class head: the backbone's features are
    the dynamic model's at 24 px (nothing resampled), the head is new."""
    with pytest.warns(UserWarning, match="3-class head is zero-initialised"):
        tuned, _ = build("timm_s", image_size=24, num_classes=3)
    assert tuned.predict(np.zeros((1, 24, 24, 3)), verbose=0).shape == (1, 3)
    dynamic, _ = build("timm_s", dynamic_image_size=True)
    images = np.random.default_rng(5).uniform(0, 255, (2, 24, 24, 3))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(tuned.forward_features(images)),
        keras.ops.convert_to_numpy(dynamic.forward_features(images)),
        atol=1e-6,
    )


def test_rollout_leaves_the_registers_out():
    model, expected = build("hf", image_size=16)
    result = visualize.attention_rollout(
        model, expected["images"], registers=True
    )
    assert result.maps.shape == (2, 4, 4)
    assert result.register_rollout.shape == (2, 4)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, quantize",
    [
        ("timm_s", "none"),
        ("timm_s", "float16"),
        ("timm_s", "dynamic"),
        ("timm_s_qkvb", "none"),
    ],
)
def test_exports_to_tflite_verified_in_one_partition(tmp_path, name, quantize):
    """DINOv3-S's layout and EUPE's (`_qkvb`) as a phone takes them: the
    rotary table of a fixed-size model is a constant of the graph; builtin
    ops only, one XNNPACK partition, checked against Keras in float32,
    float16 and dynamic int8. The layouts differ only in the attention
    projection's bias, which no quantization mode treats apart from the
    other biases: EUPE's layout in float32 only."""
    from keras_vit.export import graph as graph_lib

    model, _ = build(name, image_size=16)
    path = str(tmp_path / f"dinov3_{quantize}.tflite")
    result = export.export_tflite(
        model, path, quantize=quantize, num_verify_images=4
    )
    assert result.report.passed and result.report.xnnpack_partitions == 1
    assert not graph_lib.read_graph(result.path).unsupported_ops()


def test_convert_says_what_it_assumed_and_the_file_reloads(tmp_path, capsys):
    path, expected = files("hf")
    output = str(tmp_path / "dinov3.keras")
    flags = ["--num-heads", "2", "--mean", "0.485", "0.456", "0.406"]
    flags += ["--std", "0.229", "0.224", "0.225", "--quiet"]
    assert cli.main(["convert", path, "--output", output, *flags]) == 0
    assert "rope_theta=100.0 (its layout's family)" in capsys.readouterr().err
    converted = keras.saving.load_model(output, safe_mode=True)
    assert converted.image_size == (224, 224)  # the file records no size
    assert converted.position_embedding == "rope"
    built, _ = build("hf", image_size=224)
    images = np.random.default_rng(6).uniform(0, 255, (1, 224, 224, 3))
    np.testing.assert_allclose(
        converted.predict(images, verbose=0),
        built.predict(images, verbose=0),
        atol=0,
    )


def test_a_misshaped_bias_is_reported_not_a_traceback(tmp_path):
    bias = np.zeros((2, 32), "float32")
    key = "model.layer.0.attention.q_proj.bias"
    path = _changed(tmp_path, "hf", (key,), **{key: bias})
    with pytest.raises(ValueError, match="q_proj.bias"):
        convert.model_for_checkpoint(read_checkpoint(path), num_heads=2)


def test_transformers_4_names_read_as_5(tmp_path):
    """transformers 4.56 saved the blocks as `layer.N`, 5 as
    `model.layer.N`: the same tensors under either name."""
    tensors = load_file(files("hf")[0])
    renamed = {k.removeprefix("model."): v for k, v in tensors.items()}
    assert "layer.0.norm1.weight" in renamed
    path = str(tmp_path / "dinov3_4.safetensors")
    save_file(renamed, path)
    old = read_checkpoint(path)
    new = read_checkpoint(files("hf")[0])
    assert old.tensors.keys() == new.tensors.keys()
    for key, value in new.tensors.items():
        np.testing.assert_array_equal(old.tensors[key], value)


def test_the_presets_take_what_the_readers_assume():
    # The registry keeps its own copy (it imports nothing above it).
    from keras_vit.registry import presets
    from keras_vit.weights.checkpoint import DINOV3_DEFAULTS

    assert DINOV3_DEFAULTS.items() <= presets.DINOV3_ARGUMENTS.items()
