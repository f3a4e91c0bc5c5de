"""Parity with Hugging Face transformers' DINOv2, CLIP and SigLIP image
towers, from committed goldens.

tests/golden/make_hf_family_checkpoints.py (developer-side: torch,
transformers) made tiny `Dinov2Model`, `Dinov2WithRegistersModel`,
`CLIPVisionModel`, `CLIPVisionModelWithProjection` and `SiglipVisionModel`s
with every weight perturbed, wrote their `save_pretrained` files and
recorded their outputs. Here, without torch, keras_vit reads each file
(the architecture, activation and LayerNorm epsilon from its layout, the
head count given) and must give the same outputs to 1e-4 in float32:

* `pooler_output`: the model's output with `include_top=False` (DINOv2:
  the class token after the final norm; CLIP: the class token after
  `post_layernorm`; SigLIP: the MAP head's output);
* `image_embeds` (CLIP with projection): the output with the head;
* `last_hidden_state`: `forward_features` (DINOv2, SigLIP: after the final
  norm), and for CLIP, whose `post_layernorm` is applied to the pooled
  token only, the last block's output.
"""

import os
import warnings

import numpy as np
import pytest

import keras_vit
from keras_vit.weights import convert
from keras_vit.weights import huggingface
from keras_vit.weights import loading
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
FAMILIES = (
    "dinov2",
    "dinov2_reg",
    "clip",
    "clip_proj",
    "siglip",
    "siglip_cls",
)

#: The architecture each file implies (`convert.architecture`).
IMPLIED = {
    "dinov2": {
        "layer_scale_init": convert.LAYER_SCALE_INIT,
        "pooling": "token",
        "activation": "gelu",
        "layer_norm_epsilon": 1e-6,
    },
    "dinov2_reg": {
        "num_register_tokens": 4,
        "position_embedding_tokens": "patches",  # the class's is folded in
        "layer_scale_init": convert.LAYER_SCALE_INIT,
    },
    "clip": {
        "norm_pre": True,
        "patch_bias": False,
        "include_top": False,
        "activation": "quick_gelu",
        "layer_norm_epsilon": 1e-5,
    },
    "clip_proj": {"include_top": True, "num_classes": 8, "norm_pre": True},
    "siglip": {
        "pooling": "map",
        "class_token": False,
        "activation": "gelu_tanh",
        "layer_norm_epsilon": 1e-6,
    },
    "siglip_cls": {
        "pooling": "gap",  # its classifier: on the tokens' mean
        "class_token": False,
        "include_top": True,
        "num_classes": 5,
        "activation": "gelu_tanh",
    },
}


def files(name):
    path = os.path.join(GOLDEN, f"family_{name}.hf")
    with np.load(path + ".expected.npz") as data:
        return path + ".safetensors", {k: data[k] for k in data.files}


def build(name, path=None, **kwargs):
    golden, expected = files(name)
    checkpoint = read_checkpoint(path or golden)
    model = convert.model_for_checkpoint(
        checkpoint, num_heads=2, classifier_activation=None, **kwargs
    )
    return checkpoint, model, expected


def last_hidden_state(name, model, images):
    out = model.forward_features(images, return_block_outputs=True)
    if name.startswith("clip"):  # post_layernorm: the pooled token only
        return np.asarray(out["block_outputs"][-1])
    return np.asarray(out["features"])


def pooled(name, expected, suffix=""):
    """The output keras_vit's model gives: `image_embeds` (with the CLIP
    projection), `logits` (SigLIP's classifier), else `pooler_output`."""
    key = {"clip_proj": "image_embeds", "siglip_cls": "logits"}
    return expected[key.get(name, "pooler_output") + suffix]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_file_gives_the_architecture(name):
    checkpoint = read_checkpoint(files(name)[0])
    implied = convert.architecture(checkpoint)
    for key, value in IMPLIED[name].items():
        assert implied.get(key) == value, key
    assert checkpoint.source == "huggingface"
    assert checkpoint.unexpected == [] and checkpoint.missing == []


@pytest.mark.parametrize("name", FAMILIES)
def test_outputs_match_transformers(name):
    _, model, expected = build(name)
    images = expected["images"]
    np.testing.assert_allclose(
        model.predict(images, verbose=0), pooled(name, expected), atol=1e-4
    )
    if name == "siglip_cls":  # its outputs: the logits only
        return
    np.testing.assert_allclose(
        last_hidden_state(name, model, images),
        expected["last_hidden_state"],
        atol=1e-4,
    )


def test_clip_projection_file_without_its_head_gives_pooler_output():
    # CLIPVisionModelWithProjection records no pooler_output; the same
    # model without the projection is CLIPVisionModel's, whose pooled
    # output is the class token after post_layernorm: the projection's
    # input. Checked against the projection: head(features) = embeds.
    _, model, expected = build("clip_proj", include_top=False)
    features = model.predict(expected["images"], verbose=0)
    _, full, _ = build("clip_proj")
    kernel = full.get_layer("head").kernel.numpy()
    np.testing.assert_allclose(
        features @ kernel, expected["image_embeds"], atol=1e-4
    )
    assert np.all(full.get_layer("head").bias.numpy() == 0)  # it has none


@pytest.mark.parametrize("name", FAMILIES)
def test_outputs_match_transformers_at_another_resolution(name):
    """transformers' class built at 24 px with the position embeddings
    resampled bilinearly, as keras_vit's `interpolation="bilinear"`."""
    checkpoint, model, expected = build(name)
    config = {**model.get_config(), "image_size": (24, 24)}
    config.pop("name", None)
    bigger = keras_vit.ViT(**config)
    with pytest.warns(UserWarning, match="from a 4x4 to a 6x6 patch grid"):
        loading.load_checkpoint(bigger, checkpoint, interpolation="bilinear")
    images = expected["images_24"]
    np.testing.assert_allclose(
        bigger.predict(images, verbose=0),
        pooled(name, expected, "_24"),
        atol=1e-4,
    )
    if name != "siglip_cls":  # its outputs: the logits only
        np.testing.assert_allclose(
            last_hidden_state(name, bigger, images),
            expected["last_hidden_state_24"],
            atol=1e-4,
        )


#: Each family's transformers `model_type` (its config's).
MODEL_TYPES = {
    "dinov2": "dinov2",
    "dinov2_reg": "dinov2_with_registers",
    "clip": "clip_vision_model",
    "siglip": "siglip_vision_model",
}
#: The sizes transformers' `interpolate_pos_encoding` was recorded at:
#: 24 px (6x6, in family_NAME.hf.expected.npz), 12 px (3x3) and 8x12 px
#: (2x3, in transformers_resample_family.expected.npz).
SIZES = {"24": (24, 24), "12": (12, 12), "8x12": (8, 12)}


def interpolated(name, size):
    """transformers' own outputs at `size` (`interpolate_pos_encoding`):
    `(images, pooled, last_hidden_state)`."""
    if size == "24":
        _, expected = files(name)
        suffix = "_interpolated_24"
        return (
            expected["images_24"],
            pooled(name, expected, suffix),
            expected["last_hidden_state" + suffix],
        )
    path = os.path.join(GOLDEN, "transformers_resample_family.expected.npz")
    with np.load(path) as data:
        return tuple(
            data[f"{name}/{key}_{size}"]
            for key in ("images", "pooler_output", "last_hidden_state")
        )


def resampled_model(name, size, **resize):
    checkpoint, model, _ = build(name)
    config = {**model.get_config(), "image_size": SIZES[size]}
    config.pop("name", None)
    resized = keras_vit.ViT(**config)
    with pytest.warns(UserWarning, match="patch grid"):
        loading.load_checkpoint(resized, checkpoint, **resize)
    return resized


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("name", sorted(MODEL_TYPES))
def test_transformers_resampling_gives_its_outputs_at_another_size(name, size):
    """Loaded at another size with `transformers_resampling` of its
    class, the file gives what transformers computes there with
    `interpolate_pos_encoding` (PyTorch's bicubic; antialiased for
    DINOv2 with registers): larger, smaller and non-square grids."""
    resize = huggingface.transformers_resampling(MODEL_TYPES[name])
    model = resampled_model(name, size, **resize)
    images, want, hidden = interpolated(name, size)
    np.testing.assert_allclose(
        model.predict(images, verbose=0), want, atol=1e-4
    )
    np.testing.assert_allclose(
        last_hidden_state(name, model, images), hidden, atol=1e-4
    )


@pytest.mark.parametrize("name", ["dinov2", "clip", "siglip"])
def test_tensorflows_bicubic_does_not_give_transformers_outputs(name):
    """keras_vit's `"bicubic"` (TensorFlow's cubic, a = -0.5) is not the
    resampling of the classes that do not antialias (PyTorch's a =
    -0.75): what `"bicubic_pytorch"` is for."""
    model = resampled_model(name, "24", interpolation="bicubic")
    images, want, _ = interpolated(name, "24")
    assert np.max(np.abs(model.predict(images, verbose=0) - want)) > 1e-3


@pytest.mark.parametrize(
    "name, activation", [("clip", "gelu"), ("siglip", "gelu")]
)
def test_the_layouts_activation_is_the_default_and_can_be_replaced(
    name, activation
):
    """The activation is not in the file: the family's is taken from the
    layout, an argument replaces it (and the goldens tell them apart: by
    more than twice the tolerance)."""
    _, model, expected = build(name, activation=activation)
    assert model.activation == activation
    outputs = model.predict(expected["images"], verbose=0)
    assert np.max(np.abs(outputs - pooled(name, expected))) > 2e-4


def test_loading_into_a_model_of_another_activation_warns():
    path, _ = files("clip")
    _, model, _ = build("clip")
    config = {**model.get_config(), "activation": "gelu"}
    config.pop("name", None)
    with pytest.warns(UserWarning, match="activation='quick_gelu'") as record:
        keras_vit.load_weights(keras_vit.ViT(**config), path)
    assert "layer_norm_epsilon" not in str(record[0].message)  # it agrees
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keras_vit.load_weights(model, path)  # the layout's: no warning


def test_a_clip_projection_gives_the_embeddings():
    # Its head is the image-text projection: the converted model gave a
    # softmax over image_embeds (the default classifier_activation).
    checkpoint = read_checkpoint(files("clip_proj")[0])
    assert convert.architecture(checkpoint)["classifier_activation"] is None
    expected = files("clip_proj")[1]
    model = convert.model_for_checkpoint(checkpoint, num_heads=2)
    assert model.classifier_activation is None
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected["image_embeds"],
        atol=1e-4,
    )
    # A new head for other classes is a classifier: the default softmax.
    new = convert.model_for_checkpoint(checkpoint, num_heads=2, num_classes=3)
    assert new.classifier_activation == "softmax"
    assert "classifier_activation" not in convert.architecture(
        read_checkpoint(files("clip")[0])
    )


def test_loading_a_clip_projection_under_a_softmax_warns():
    path, _ = files("clip_proj")
    _, model, _ = build("clip_proj")
    config = {**model.get_config(), "classifier_activation": "softmax"}
    config.pop("name", None)
    with pytest.warns(UserWarning, match="image projection") as record:
        keras_vit.load_weights(keras_vit.ViT(**config), path)
    assert "classifier_activation='softmax'" in str(record[0].message)
    assert "classifier_activation=None" in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keras_vit.load_weights(model, path)  # embeddings: no warning
        include_top = {**config, "include_top": False}
        keras_vit.load_weights(keras_vit.ViT(**include_top), path)
        # The identity in another spelling is the embeddings too.
        import keras

        for linear in ("linear", keras.activations.linear):
            spelled = {**config, "classifier_activation": linear}
            keras_vit.load_weights(keras_vit.ViT(**spelled), path)


def test_convert_command_takes_the_classifier_activation(tmp_path, capsys):
    import keras

    from keras_vit import cli

    path, expected = files("clip_proj")
    embeds = expected["image_embeds"]
    shifted = np.exp(embeds - embeds.max(-1, keepdims=True))
    softmax = shifted / shifted.sum(-1, keepdims=True)
    argv = ["convert", path, "--num-heads", "2", "--quiet", "--output"]
    for name, flags, want in (
        ("default", [], embeds),
        ("none", ["--classifier-activation", "none"], embeds),
        ("softmax", ["--classifier-activation", "softmax"], softmax),
    ):
        output = str(tmp_path / f"{name}.keras")
        assert cli.main([*argv, output, *flags]) == 0
        model = keras.saving.load_model(output, safe_mode=True)
        np.testing.assert_allclose(
            model.predict(expected["images"], verbose=0), want, atol=1e-4
        )
    capsys.readouterr()
    output = tmp_path / "bad.keras"
    bad = [*argv, str(output), "--classifier-activation", "softmaks"]
    assert cli.main(bad) == 2
    assert "classifier_activation='softmaks'" in capsys.readouterr().err
    assert not output.exists()


def _rewritten(tmp_path, name, rename=lambda k: k, extra=None):
    """The `name` golden's tensors renamed and with `extra` ones added."""
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    tensors = {rename(k): v for k, v in load_file(files(name)[0]).items()}
    tensors.update(extra or {})
    path = str(tmp_path / f"{name}.safetensors")
    save_file(tensors, path)
    return path


def test_a_full_clip_model_file_gives_its_image_tower(tmp_path):
    """`CLIPModel`'s file: the image tower under `vision_model.` (as the
    projection model's golden), the text tower and scalars dropped, and
    the position ids buffer of older files."""
    extra = {
        "text_model.embeddings.token_embedding.weight": np.ones((9, 16)),
        "text_model.final_layer_norm.weight": np.ones(16),
        "text_projection.weight": np.ones((8, 16)),
        "logit_scale": np.array(2.6),
        "vision_model.embeddings.position_ids": np.arange(17)[None],
    }
    extra = {k: np.asarray(v, "float32") for k, v in extra.items()}
    path = _rewritten(tmp_path, "clip_proj", extra=extra)
    checkpoint, model, expected = build("clip_proj", path)
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected["image_embeds"],
        atol=1e-4,
    )


def test_a_siglip_file_with_the_vision_model_prefix(tmp_path):
    # SiglipModel's (and transformers 4's SiglipVisionModel's) files.
    path = _rewritten(tmp_path, "siglip", lambda k: "vision_model." + k)
    checkpoint, model, expected = build("siglip", path)
    assert checkpoint.unexpected == [] and checkpoint.pooling == "map"
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected["pooler_output"],
        atol=1e-4,
    )


def test_dinov2_as_transformers_5_names_it_in_memory(tmp_path):
    # A file written from the model's own state_dict (not save_pretrained).
    def rename(key):
        for theirs, ours in (
            ("attention.attention.query.", "attention.q_proj."),
            ("attention.attention.key.", "attention.k_proj."),
            ("attention.attention.value.", "attention.v_proj."),
            ("attention.output.dense.", "attention.o_proj."),
        ):
            key = key.replace(theirs, ours)
        return key

    path = _rewritten(tmp_path, "dinov2_reg", rename)
    checkpoint, model, expected = build("dinov2_reg", path)
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected["pooler_output"],
        atol=1e-4,
    )


@pytest.mark.parametrize(
    "name, prefix, model",
    [
        ("dinov2", "dinov2.", "Dinov2ForImageClassification"),
        ("clip", "vision_model.", "CLIPForImageClassification"),
    ],
)
def test_classifiers_keras_vit_cannot_pool_for_are_refused(
    tmp_path, name, prefix, model
):
    extra = {
        "classifier.weight": np.ones((3, 16), "float32"),
        "classifier.bias": np.ones(3, "float32"),
    }
    path = _rewritten(tmp_path, name, lambda k: prefix + k, extra)
    with pytest.raises(ValueError, match=f"{model} file, whose classifier"):
        read_checkpoint(path)


def test_a_layer_a_file_lacks_is_reported(tmp_path):
    path = _rewritten(tmp_path, "dinov2")
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    tensors = load_file(path)
    del tensors["encoder.layer.1.layer_scale2.lambda1"]
    tensors["encoder.layer.0.mlp.weights_in.weight"] = np.ones((4, 4), "f")
    save_file(tensors, path)
    checkpoint = read_checkpoint(path)
    assert checkpoint.missing == ["encoder.layer.1.layer_scale2.lambda1"]
    assert checkpoint.unexpected == ["encoder.layer.0.mlp.weights_in.weight"]
    with pytest.raises(ValueError, match="weights_in"):
        convert.model_for_checkpoint(checkpoint, num_heads=2)


def test_convert_command_on_a_transformers_file(tmp_path):
    """No --activation or --layer-norm-epsilon: the layout's."""
    import keras

    from keras_vit import cli

    path, expected = files("siglip")
    output = str(tmp_path / "siglip.keras")
    argv = ["convert", path, "--output", output, "--num-heads", "2"]
    assert cli.main([*argv, "--quiet"]) == 0
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.activation == "gelu_tanh" and model.pooling == "map"
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected["pooler_output"],
        atol=1e-4,
    )
