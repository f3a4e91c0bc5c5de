"""Parity with timm for the modern ViT families, from committed goldens.

tests/golden/make_family_checkpoints.py (developer-side: torch, timm) made
tiny timm models of each family (DeiT distilled, DeiT III, DINOv2 with and
without registers, CLIP, SigLIP, and QK-norm with average pooling) with
every weight perturbed, and recorded timm's outputs at 16 px and, with the
position embeddings resampled bilinearly, at 24 px. Here, without torch,
the files read by keras_vit, with the architecture taken from the file,
must give the same outputs to 1e-5 in float32 (`ATOL`).
"""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import cli
from keras_vit import resolver
from keras_vit.weights import convert
from keras_vit.weights import loading
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")

#: Timm's outputs to float32's (1e-7 here): the tanh GELU in place of
#: the exact one (they differ by under 5e-4) moves the tiny SigLIP's
#: features by 6e-5, which 1e-4 let through.
ATOL = 1e-5

#: What the files do not record: the head count, CLIP's activation and
#: LayerNorm epsilon, and SigLIP's activation.
FAMILIES = {
    "deit_distilled": {},
    "deit3": {},
    "dinov2": {},
    "dinov2_reg": {},
    "clip": {"activation": "quick_gelu", "layer_norm_epsilon": 1e-5},
    "siglip": {"activation": "gelu_tanh"},
    "qknorm_gap": {},
    "map_reg": {},
    "map_cls": {},
    # A class token with average pooling: the file reads as token pooling.
    "cls_avg": {"pooling": "gap"},
}

#: The architecture each file implies (`convert.architecture`).
IMPLIED = {
    "deit_distilled": {"distillation": True, "pooling": "token"},
    "deit3": {
        "layer_scale_init": convert.LAYER_SCALE_INIT,
        "position_embedding_tokens": "patches",
    },
    "dinov2": {"layer_scale_init": convert.LAYER_SCALE_INIT},
    "dinov2_reg": {
        "num_register_tokens": 4,
        "position_embedding_tokens": "patches",
    },
    "clip": {"norm_pre": True, "patch_bias": False},
    "siglip": {"pooling": "map", "class_token": False},
    "qknorm_gap": {"qk_norm": True, "fc_norm": True, "pooling": "gap"},
    "map_reg": {
        "pooling": "map",
        "class_token": False,
        "num_register_tokens": 4,
    },
    "map_cls": {"pooling": "map", "class_token": True},
    "cls_avg": {"pooling": "token", "class_token": True},
}


def files(name):
    path = os.path.join(GOLDEN, f"family_{name}")
    with np.load(path + ".expected.npz") as data:
        return path + ".timm.safetensors", {k: data[k] for k in data.files}


def build(name):
    path, expected = files(name)
    checkpoint = read_checkpoint(path)
    model = convert.model_for_checkpoint(
        checkpoint,
        num_heads=2,
        classifier_activation=None,
        **FAMILIES[name],
    )
    return checkpoint, model, expected


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_file_gives_the_architecture(name):
    checkpoint = read_checkpoint(files(name)[0])
    implied = convert.architecture(checkpoint)
    for key, value in IMPLIED[name].items():
        assert implied.get(key) == value, key
    assert checkpoint.unexpected == [] and checkpoint.missing == []


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_outputs_match_timm(name):
    _, model, expected = build(name)
    outputs = model.predict(expected["images"], verbose=0)
    np.testing.assert_allclose(outputs, expected["logits"], atol=ATOL, rtol=0)


def test_clip_needs_its_quick_gelu():
    """The activation is not in the file: the exact GELU gives other
    outputs (the goldens tell them apart)."""
    path, expected = files("clip")
    model = convert.model_for_checkpoint(
        read_checkpoint(path),
        num_heads=2,
        classifier_activation=None,
        layer_norm_epsilon=1e-5,
    )
    outputs = model.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - expected["logits"])) > 1e-3  # 10x tol


def test_a_class_token_file_trained_with_average_pooling_needs_telling(
    tmp_path,
):
    """timm's global_pool="avg" with fc_norm=False and the class token
    kept writes the same tensors as a class-token model: the file is read
    as pooling="token" (the weights guide says so), and pooling="gap"
    overrides that guess exactly (`keras-vit convert --pooling gap`)."""
    path, expected = files("cls_avg")
    guessed = convert.model_for_checkpoint(
        read_checkpoint(path), num_heads=2, classifier_activation=None
    )
    assert guessed.pooling == "token"
    outputs = guessed.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - expected["logits"])) > 1e-2
    _, told, _ = build("cls_avg")
    assert told.pooling == "gap" and told.class_token
    output = str(tmp_path / "cls_avg.keras")
    flags = ["--num-heads", "2", "--classifier-activation", "none"]
    command = ["convert", path, "--output", output, "--pooling", "gap"]
    assert cli.main([*command, *flags, "--quiet"]) == 0
    loaded = keras.saving.load_model(output, safe_mode=True)
    np.testing.assert_allclose(
        loaded.predict(expected["images"], verbose=0),
        expected["logits"],
        atol=ATOL,
        rtol=0,
    )


def test_siglip_needs_its_tanh_gelu():
    """SigLIP was trained with the tanh GELU (big_vision's flax nn.gelu);
    the exact one gives other outputs, by more than the tolerance."""
    path, expected = files("siglip")
    model = convert.model_for_checkpoint(
        read_checkpoint(path), num_heads=2, classifier_activation=None
    )
    assert model.activation == "gelu"
    outputs = model.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - expected["logits"])) > 4 * ATOL


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_outputs_match_timm_at_another_resolution(name):
    checkpoint, model, expected = build(name)
    config = {**model.get_config(), "image_size": (24, 24)}
    config.pop("name", None)
    bigger = keras_vit.ViT(**config)
    with pytest.warns(UserWarning, match="from a 4x4 to a 6x6 patch grid"):
        loading.load_checkpoint(bigger, checkpoint, interpolation="bilinear")
    outputs = bigger.predict(expected["images_24"], verbose=0)
    np.testing.assert_allclose(
        outputs, expected["logits_24"], atol=ATOL, rtol=0
    )


def _timm_file(tmp_path, name, positions):
    """The `name` golden with `positions` position embeddings."""
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    tensors = load_file(files(name)[0])
    tensors["pos_embed"] = np.zeros((1, positions, 16), "float32")
    path = str(tmp_path / f"{name}_{positions}.safetensors")
    save_file(tensors, path)
    return path


def test_position_embeddings_that_fit_both_readings_need_telling(tmp_path):
    # A class token and 4 registers: 9 entries are 3x3 patches, or 2x2
    # after the 5 prefix tokens.
    path = _timm_file(tmp_path, "dinov2_reg", 9)
    with pytest.raises(ValueError, match="position_embedding_tokens="):
        read_checkpoint(path)
    patches = read_checkpoint(path, position_embedding_tokens="patches")
    assert patches.position_prefix_tokens == 0
    assert patches.position_grid == (3, 3)
    every = read_checkpoint(path, position_embedding_tokens="all")
    assert every.position_prefix_tokens == 5
    assert every.position_grid == (2, 2)
    with pytest.raises(ValueError, match="position_embedding_tokens='some'"):
        read_checkpoint(path, position_embedding_tokens="some")


def test_position_embeddings_for_other_prefix_tokens_are_refused():
    # DeiT III's are for its 4x4 patches only: 16 entries. A model with the
    # default position_embedding_tokens="all" at a 3x5 grid has 1 + 15, the
    # same shape: it loaded silently, the first patch's entry becoming the
    # class token's.
    path, expected = files("deit3")
    _, model, _ = build("deit3")
    config = {**model.get_config(), "image_size": (12, 20)}
    for name in ("name", "position_embedding_tokens"):
        config.pop(name)
    wrong = keras_vit.ViT(**config)
    encoder = wrong.get_layer("patch_encoder")
    assert tuple(encoder.pos_embedding.shape) == (1, 16, 16)
    before = [w.numpy().copy() for w in wrong.weights]
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(wrong, path)
    message = str(info.value)
    assert "nothing was loaded" in message, message
    assert (
        "entries for 0 prefix tokens (position_embedding_tokens='patches') "
        "and the model's for 1 (position_embedding_tokens='all')" in message
    ), message
    for old, w in zip(before, wrong.weights):
        np.testing.assert_array_equal(old, w.numpy())
    # from_preset takes them from the file, as it does the resolution.
    config.pop("image_size")
    loaded = keras_vit.ViT.from_preset(path, **config)
    assert loaded.position_embedding_tokens == "patches"
    np.testing.assert_allclose(
        loaded.predict(expected["images"], verbose=0),
        expected["logits"],
        atol=1e-4,
        rtol=0,
    )


@pytest.mark.parametrize("positions, tokens", [(12, "patches"), (13, "all")])
def test_a_source_grid_says_which_tokens_have_position_embeddings(
    tmp_path, positions, tokens
):
    path = _timm_file(tmp_path, "deit3", positions)  # a class token
    checkpoint = read_checkpoint(path, source_grid=(3, 4))
    assert checkpoint.position_embedding_tokens == tokens
    assert checkpoint.position_grid == (3, 4)


#: The tiny golden of each published family preset.
PRESET_OF = {
    "deit_distilled": "vit_s16_deit_distilled_in1k",
    "deit3": "vit_s16_deit3_in21k_ft_in1k",
    "dinov2": "vit_s14_dinov2_lvd142m_518",
    "dinov2_reg": "vit_s14_dinov2_reg4_lvd142m_518",
    "clip": "vit_b16_clip_openai",
    "siglip": "vit_b16_siglip_webli",
}


def _pixels_for(preset, images):
    """The pixels that `preset`'s normalisation maps to `images / 127.5 -
    1`, the inputs timm took for the goldens."""
    norm = preset["normalization"]
    if norm is None:
        return images
    mean, std = np.array(norm["mean"]), np.array(norm["std"])
    return 255 * (mean + std * (images / 127.5 - 1))


@pytest.fixture
def tiny_family_preset(tmp_path, monkeypatch):
    """`make(name)`: the published preset of the family, its variant's
    numbers and URL swapped for the tiny golden's (a local file)."""
    from keras_vit import registry
    from keras_vit.registry import presets as registry_presets
    from keras_vit.weights import download

    monkeypatch.setitem(
        registry.VARIANTS,
        "Fam/4",
        dict(
            patch_size=4, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32
        ),
    )
    monkeypatch.setattr(download, "CACHE_DIR", str(tmp_path / "cache"))

    def make(name):
        published = registry.get_preset(PRESET_OF[name])
        path, expected = files(name)
        head = expected["logits"].shape[1] if published["num_classes"] else None
        preset = {
            **published,
            "unique_name": f"vit_fam4_{published['name']}",
            "variant": "Fam/4",
            "url": "file://" + path,
            "image_size": 16,
            "num_classes": head,
        }
        monkeypatch.setattr(
            registry_presets, "PRESETS", [*registry_presets.PRESETS, preset]
        )
        return preset, expected

    return make


@pytest.mark.parametrize("name", sorted(PRESET_OF))
def test_a_family_presets_arguments_give_timms_outputs(
    tiny_family_preset, name
):
    preset, expected = tiny_family_preset(name)
    images = _pixels_for(preset, expected["images"])
    norm = preset["normalization"]
    model = resolver.resolve_model(
        preset["unique_name"], classifier_activation=None
    )
    assert model.include_preprocessing and model.normalization == norm
    assert model.include_top == (preset["num_classes"] is not None)
    np.testing.assert_allclose(
        model.predict(images, verbose=0), expected["logits"], atol=ATOL
    )


def test_load_weights_refuses_a_model_other_than_its_presets(
    tiny_family_preset, tmp_path
):
    """A preset name through load_weights: the preset's activation,
    epsilon and normalisation are in no tensor, so a model built with the
    variant's defaults loaded CLIP's weights without a word and computed
    other outputs (by 0.01 on the golden)."""
    preset, expected = tiny_family_preset("clip")
    # The tensors' architecture (norm_pre, no patch bias), the rest default.
    model = keras_vit.ViT.from_variant(
        "Fam/4", image_size=16, num_classes=8, norm_pre=True, patch_bias=False
    )
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(ValueError) as info:
        keras_vit.load_weights(model, "clip_openai")
    message = str(info.value)
    assert (
        "needs a model with activation='quick_gelu', layer_norm_epsilon=1e-05"
        ", normalization={'mean': (0.48145466" in message
    ), message
    assert "ViT.from_preset('vit_fam4_clip_openai')" in message, message
    assert message.endswith(
        "Received: activation='gelu', layer_norm_epsilon=1e-06, "
        "normalization=None"
    ), message
    for old, w in zip(before, model.weights):
        np.testing.assert_array_equal(old, w.numpy())
    assert not (tmp_path / "cache").exists()  # refused before downloading
    # Built with the preset's settings (the head's activation is free), it
    # loads and computes timm's outputs.
    right = keras_vit.ViT.from_variant(
        "Fam/4",
        image_size=16,
        num_classes=8,
        **{**preset["vit_arguments"], "classifier_activation": "softmax"},
        normalization=preset["normalization"],
    )
    keras_vit.load_weights(right, "clip_openai")
    logits = expected["logits"] - expected["logits"].max(-1, keepdims=True)
    want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = right.predict(_pixels_for(preset, expected["images"]), verbose=0)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_load_weights_takes_any_layer_scale_start_for_a_preset(
    tiny_family_preset,
):
    """LayerScale's init value is where its weights start, which the
    preset's replace: only a model without LayerScale is refused."""
    preset, expected = tiny_family_preset("dinov2")
    arguments = dict(
        image_size=16,
        include_top=False,
        normalization=preset["normalization"],
        position_embedding_tokens="all",
    )
    model = keras_vit.ViT.from_variant(
        "Fam/4", layer_scale_init=0.5, **arguments
    )
    keras_vit.load_weights(model, preset["name"])
    got = model.predict(_pixels_for(preset, expected["images"]), verbose=0)
    np.testing.assert_allclose(got, expected["logits"], atol=ATOL)
    without = keras_vit.ViT.from_variant("Fam/4", **arguments)
    with pytest.raises(ValueError, match="Received: layer_scale_init=None"):
        keras_vit.load_weights(without, preset["name"])


def test_convert_command_takes_what_the_file_does_not_record(tmp_path):
    import keras

    from keras_vit import cli

    path, expected = files("clip")
    output = str(tmp_path / "clip.keras")
    argv = ["convert", path, "--output", output, "--num-heads", "2"]
    argv += ["--activation", "quick_gelu", "--layer-norm-epsilon", "1e-5"]
    assert cli.main([*argv, "--quiet"]) == 0
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.activation == "quick_gelu" and model.norm_pre
    logits = expected["logits"] - expected["logits"].max(-1, keepdims=True)
    want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0), want, atol=1e-5
    )


def test_convert_command_takes_the_position_embedding_tokens(tmp_path, capsys):
    from keras_vit import cli

    path = _timm_file(tmp_path, "dinov2_reg", 9)  # 3x3, or 2x2 after 5
    argv = ["convert", path, "--num-heads", "2", "--quiet", "--output"]
    assert cli.main([*argv, str(tmp_path / "a.weights.h5")]) != 0
    assert "position_embedding_tokens=" in capsys.readouterr().err
    told = [*argv, str(tmp_path / "b.weights.h5")]
    assert cli.main([*told, "--position-embedding-tokens", "patches"]) == 0
    assert "image_size (12, 12)" in capsys.readouterr().out  # 3x3 patches


def test_load_weights_takes_the_position_embedding_tokens(tmp_path):
    path = _timm_file(tmp_path, "dinov2_reg", 9)  # 3x3, or 2x2 after 5
    _, model, _ = build("dinov2_reg")  # 4x4 patches, no prefix entries
    with pytest.raises(ValueError, match="position_embedding_tokens="):
        keras_vit.load_weights(model, path)
    with pytest.warns(UserWarning, match="from a 3x3 to a 4x4 patch grid"):
        keras_vit.load_weights(model, path, position_embedding_tokens="patches")
