"""The gated (SwiGLU) MLP checkpoints and SigLIP 2 against timm and
transformers: DINOv2 giant's layouts (timm `SwiGLUPacked`, transformers
`Dinov2SwiGLUFFN`), timm's `SwiGLU` (`fc1_g`, `fc1_x`) and timm's SigLIP 2
architecture, from the tiny files of tests/golden/
make_swiglu_checkpoints.py (check_swiglu_full.py checks the full widths)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

import keras_vit
from keras_vit import export
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
GATED = ("timm_giant", "timm_swiglu", "hf_giant")


def _path(name):
    return os.path.join(GOLDEN, f"swiglu_{name}.safetensors")


def _expected(name):
    return np.load(os.path.join(GOLDEN, f"swiglu_{name}.expected.npz"))


def _build(path, **kwargs):
    return convert.model_for_checkpoint(
        read_checkpoint(str(path)),
        num_heads=2,
        normalization=IMAGENET,
        **kwargs,
    )


def _check_outputs(model, expected):
    images = expected["images"]
    np.testing.assert_allclose(
        np.asarray(model.forward_features(images)),
        expected["tokens"],
        atol=1e-4,
    )
    np.testing.assert_allclose(
        model.predict(images, verbose=0), expected["pooled"], atol=1e-4
    )


@pytest.mark.parametrize("name", [*GATED, "timm_siglip2"])
def test_the_files_load_exactly(name):
    _check_outputs(_build(_path(name)), _expected(name))


@pytest.mark.parametrize(
    "name, mlp_dim", [("timm_giant", 64), ("timm_swiglu", 48), ("hf_giant", 64)]
)
def test_the_file_gives_the_gated_architecture(name, mlp_dim):
    checkpoint = read_checkpoint(_path(name))
    assert checkpoint.use_gated_mlp and checkpoint.mlp_dim == mlp_dim
    assert "use_gated_mlp=True" in checkpoint.describe()
    model = convert.model_for_checkpoint(checkpoint, num_heads=2)
    assert model.use_gated_mlp and model.activation == "silu"
    assert model.mlp_dim == mlp_dim
    assert model.get_layer("block_0").mlp_fc1.kernel.shape == (24, 2 * mlp_dim)


def test_siglip2_reads_as_siglip():
    model = _build(_path("timm_siglip2"))
    assert model.pooling == "map" and not model.class_token
    assert not model.use_gated_mlp


def test_transformers_in_memory_names_load_the_same(tmp_path):
    # transformers 5 chunks `weights_in` into gate_proj and up_proj (the
    # gate first) and names `weights_out` down_proj.
    tensors = {}
    for key, value in load_file(_path("hf_giant")).items():
        if ".mlp.weights_in." in key:
            gate, up = np.split(value, 2, axis=0)
            tensors[key.replace("weights_in", "gate_proj")] = gate
            tensors[key.replace("weights_in", "up_proj")] = up
        else:
            tensors[key.replace("weights_out", "down_proj")] = value
    path = tmp_path / "in_memory.safetensors"
    save_file(tensors, str(path))
    _check_outputs(_build(path), _expected("hf_giant"))


def test_the_gate_and_value_are_not_interchangeable(tmp_path):
    # Swapping timm's fc1_g and fc1_x changes the outputs: the test above
    # would see a reader that packed them the wrong way round.
    tensors = load_file(_path("timm_swiglu"))
    swapped = {
        key.replace("fc1_g", "FC1")
        .replace("fc1_x", "fc1_g")
        .replace("FC1", "fc1_x"): value
        for key, value in tensors.items()
    }
    path = tmp_path / "swapped.safetensors"
    save_file(swapped, str(path))
    out = _build(path).predict(_expected("timm_swiglu")["images"], verbose=0)
    assert np.max(np.abs(out - _expected("timm_swiglu")["pooled"])) > 1e-2


def test_a_norm_inside_the_swiglu_is_reported_by_name(tmp_path):
    # EVA-02's scale_mlp: a LayerNorm inside the SwiGLU, which keras_vit's
    # gated MLP has no place for.
    tensors = load_file(_path("timm_swiglu"))
    tensors["blocks.0.mlp.norm.weight"] = np.ones(48, np.float32)
    path = tmp_path / "scale_mlp.safetensors"
    save_file(tensors, str(path))
    with pytest.raises(ValueError, match=r"blocks\.0\.mlp\.norm\.weight"):
        keras_vit.load_weights(_build(_path("timm_swiglu")), str(path))


def test_a_gated_file_into_a_plain_model_names_the_tensors():
    plain = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=24,
        num_layers=2,
        num_heads=2,
        mlp_dim=128,
        include_top=False,
        layer_scale_init=1e-5,
    )
    with pytest.raises(ValueError) as caught:
        keras_vit.load_weights(plain, _path("timm_giant"))
    message = str(caught.value)
    assert "use_gated_mlp=True" in message  # the checkpoint's
    assert "use_gated_mlp=False" in message  # the model's
    assert "block_0/mlp_fc2/kernel" in message


def test_a_gated_model_round_trips_in_safe_mode(tmp_path):
    model = _build(_path("timm_giant"))
    path = tmp_path / "giant.keras"
    model.save(path)

    loaded = keras.saving.load_model(path, safe_mode=True)
    images = _expected("timm_giant")["images"]
    np.testing.assert_array_equal(
        loaded.predict(images, verbose=0), model.predict(images, verbose=0)
    )


@pytest.mark.parametrize("prefix", ["", "vision_model."])
def test_a_siglip2_naflex_file_is_refused_by_name(tmp_path, prefix):
    # transformers' Siglip2VisionModel / Siglip2Model: a linear patch
    # embedding (width, 3 * 4 * 4) on flattened patches, a 16-entry table.
    tensors = {
        f"{prefix}embeddings.patch_embedding.weight": np.ones((32, 48), "f"),
        f"{prefix}embeddings.patch_embedding.bias": np.ones(32, "f"),
        f"{prefix}embeddings.position_embedding.weight": np.ones((16, 32), "f"),
    }
    path = tmp_path / "naflex.safetensors"
    save_file(tensors, str(path))
    with pytest.raises(ValueError, match=r"NaFlex .*shape \(32, 48\)"):
        read_checkpoint(str(path))


def test_a_gated_model_exports_to_tflite_verified_in_one_partition(tmp_path):
    """The gate's split and product are builtin ops: one XNNPACK
    partition, checked against Keras."""
    model = _build(_path("timm_giant"))
    path = str(tmp_path / "giant.tflite")
    result = export.export_tflite(model, path, num_verify_images=4)
    assert result.report.passed and result.report.xnnpack_partitions == 1


def test_a_gated_file_into_a_gated_model_of_another_gate_says_so():
    # The tensors fit a GELU-gated model too; the file's layout gates with
    # SiLU, which a note says rather than loading silently.
    model = _build(_path("timm_giant"), activation="gelu")
    with pytest.warns(UserWarning, match="activation='silu'"):
        keras_vit.load_weights(model, _path("timm_giant"))


def test_a_gated_models_own_weights_file_reloads(tmp_path):
    model = _build(_path("hf_giant"))
    path = str(tmp_path / "giant.weights.h5")
    model.save_weights(path)
    again = _build(_path("hf_giant"))
    for variable in again.weights:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    keras_vit.load_weights(again, path)
    images = _expected("hf_giant")["images"]
    np.testing.assert_array_equal(
        again.predict(images, verbose=0), model.predict(images, verbose=0)
    )


def test_an_npz_file_with_gated_shapes_is_not_read_as_gated(tmp_path):
    # The original layout has no gated MLP: an MlpBlock whose first Dense
    # is twice as wide as the second's input is a broken file.
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=8,
        num_layers=1,
        num_heads=2,
        mlp_dim=6,
        include_top=False,
        pooling="token",
    )
    path = str(tmp_path / "plain.npz")
    keras_vit.weights.save_npz(model, path)
    arrays = dict(np.load(path))
    mlp = "Transformer/encoderblock_0/MlpBlock_3/Dense_0/"
    arrays[mlp + "kernel"] = np.ones((8, 12), "f")
    arrays[mlp + "bias"] = np.ones(12, "f")
    np.savez(path, **arrays)
    checkpoint = read_checkpoint(path)
    assert not checkpoint.use_gated_mlp and checkpoint.mlp_dim == 12


def test_the_giants_snapshot_folder_loads_exactly(tmp_path):
    # facebook/dinov2-giant's config (use_swiglu_ffn, mlp_ratio 4) at the
    # golden's tiny width: the gated width and SiLU come from the config.
    folder = tmp_path / "dinov2-giant"
    folder.mkdir()
    shutil.copy(_path("hf_giant"), folder / "model.safetensors")
    config = {
        "model_type": "dinov2",
        "hidden_size": 24,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "patch_size": 4,
        "image_size": 16,
        "mlp_ratio": 4,
        "use_swiglu_ffn": True,
    }
    (folder / "config.json").write_text(json.dumps(config))
    # Its BitImageProcessor's config (ImageNet's mean/std, not the class's
    # CLIP defaults), at the golden's size.
    processor = {
        "image_processor_type": "BitImageProcessor",
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "size": {"shortest_edge": 16},
        "crop_size": {"height": 16, "width": 16},
        "resample": 3,
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(processor))
    model = keras_vit.ViT.from_preset(str(folder))
    assert (model.use_gated_mlp, model.mlp_dim) == (True, 64)
    assert model.activation == "silu"
    _check_outputs(model, _expected("hf_giant"))
