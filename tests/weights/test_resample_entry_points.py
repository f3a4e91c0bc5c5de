"""`interpolation` and `antialias` reach every way of loading weights.

`keras_vit.load_weights(..., interpolation="bicubic", antialias=True)`
resamples position embeddings as timm and DINOv2 do onto a smaller grid
(tests/weights/test_resample_on_load.py). `ViT.from_preset`, the
builders' `weights=`, `resolver.resolve_model` and `convert` /
`model_for_checkpoint` build the model first and then load: they must
give exactly what building the same model and calling `load_weights`
with the same arguments gives, and refuse a bad value before any file is
read or downloaded.
"""

import numpy as np
import pytest

import keras_vit
from keras_vit import resolver
from keras_vit.weights import convert
from keras_vit.weights import download
from keras_vit.weights import reader
from tests.weights.test_golden_parity import TINY
from tests.weights.test_golden_parity import golden

#: The golden file's variant numbers (a 32 px, 4x4 patch grid checkpoint).
NUMBERS = {
    k: TINY[k]
    for k in ("patch_size", "hidden_dim", "num_layers", "num_heads", "mlp_dim")
}
#: A smaller grid (2x2) than the checkpoint's, where antialiasing counts,
#: and the checkpoint's head (loaded, not a new one).
SMALLER = {"image_size": 16, "num_classes": TINY["num_classes"]}
TIMM = {"interpolation": "bicubic", "antialias": True}
POSEMB = "patch_encoder/position_embedding"


def _weights(model):
    return {v.path: v.numpy() for v in model.weights}


def posemb(model):
    return _weights(model)[POSEMB]


def loaded_as_load_weights(model, path, **resampling):
    """A model of `model`'s config, `load_weights(path, **resampling)`."""
    config = model.get_config()
    config.pop("name")
    built = keras_vit.ViT(**config)
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        keras_vit.load_weights(built, path, **resampling)
    return built


def assert_same_weights(model, other):
    ours, theirs = _weights(model), _weights(other)
    assert sorted(ours) == sorted(theirs)
    for path, value in ours.items():
        np.testing.assert_array_equal(value, theirs[path], err_msg=path)


def _from_preset(path, **resampling):
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        return keras_vit.ViT.from_preset(
            path, **NUMBERS, **SMALLER, **resampling
        )


@pytest.mark.parametrize(
    "source", ["vit_token.npz", "native"], ids=["npz", "weights_h5"]
)
def test_from_preset_resamples_as_load_weights(tmp_path, source):
    """A released file (read before the model is built) and keras_vit's
    own (read for the built model) alike."""
    path = golden("vit_token.npz")
    if source == "native":
        full = keras_vit.ViT.from_preset(
            path, **NUMBERS, num_classes=TINY["num_classes"]
        )
        path = str(tmp_path / "tiny.weights.h5")
        full.save_weights(path)
    model = _from_preset(path, **TIMM)
    assert model.grid_size == (2, 2)
    assert_same_weights(model, loaded_as_load_weights(model, path, **TIMM))
    default = posemb(_from_preset(path))
    aliased = posemb(_from_preset(path, interpolation="bicubic"))
    for other in (default, aliased):  # (so both arguments got through)
        assert np.max(np.abs(posemb(model) - other)) > 1e-3


def test_from_variant_and_build_resample_as_load_weights(tmp_path, monkeypatch):
    monkeypatch.setitem(keras_vit.registry.VARIANTS, "Tiny/8", NUMBERS)
    path = golden("vit_token.npz")
    want = loaded_as_load_weights(_from_preset(path, **TIMM), path, **TIMM)
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        made = [
            keras_vit.ViT.from_variant(
                "Tiny/8", weights=path, **SMALLER, **TIMM
            ),
            resolver.resolve_model("Tiny/8", weights=path, **SMALLER, **TIMM),
            resolver.resolve_model(path, **SMALLER, **TIMM),
        ]
    for model in made:
        assert_same_weights(model, want)
    # A .keras model with weights loaded into it, as load_weights does.
    saved = str(tmp_path / "small.keras")
    keras_vit.ViT.from_config(want.get_config()).save(saved)
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        assert_same_weights(
            resolver.resolve_model(saved, weights=path, **TIMM), want
        )


def test_convert_and_model_for_checkpoint_resample_as_load_weights(tmp_path):
    path = golden("vit_token.npz")
    output = str(tmp_path / "small.weights.h5")
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        converted = convert.convert(path, output, verbose=0, **SMALLER, **TIMM)
        built = convert.model_for_checkpoint(
            reader.read_checkpoint(path), **SMALLER, **TIMM
        )
        default = convert.model_for_checkpoint(
            reader.read_checkpoint(path), **SMALLER
        )
    want = loaded_as_load_weights(converted, path, **TIMM)
    assert_same_weights(converted, want)
    assert_same_weights(built, want)
    written = keras_vit.ViT.from_config(want.get_config())
    written.load_weights(output)
    assert_same_weights(written, want)
    assert np.max(np.abs(posemb(default) - posemb(want))) > 1e-3


#: Bad values, and what the error must say.
BAD = [
    ({"interpolation": "cubic"}, "Received: interpolation='cubic'"),
    ({"antialias": "yes"}, "Received: antialias='yes'"),
    (
        {"antialias": True},  # the default interpolation has no filter
        "Received: antialias=True, interpolation='bilinear_align_corners'",
    ),
]


@pytest.fixture
def nothing_read(monkeypatch):
    """Reading or downloading any file fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a file was read: {args}")

    monkeypatch.setattr(reader, "read_checkpoint", refuse)
    monkeypatch.setattr(download, "download", refuse)


@pytest.mark.parametrize("bad, message", BAD)
def test_bad_values_are_refused_before_anything_is_read(
    tmp_path, monkeypatch, nothing_read, bad, message
):
    monkeypatch.setitem(keras_vit.registry.VARIANTS, "Tiny/8", NUMBERS)
    path = golden("vit_token.npz")
    output = tmp_path / "out.weights.h5"
    calls = [
        lambda: keras_vit.ViT.from_preset(path, **NUMBERS, **bad),
        lambda: keras_vit.ViT.from_preset("vit_b16_augreg_in21k", **bad),
        lambda: keras_vit.ViT_B16(weights="augreg_in21k", **bad),
        lambda: keras_vit.ViT.from_variant("Tiny/8", weights=path, **bad),
        lambda: resolver.resolve_model(path, **bad),
        lambda: resolver.resolve_model("vit_b16_augreg_in21k", **bad),
        lambda: convert.convert(path, str(output), **bad),
        lambda: convert.model_for_checkpoint(None, **bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()
    assert not output.exists()


def test_resampling_without_weights_is_refused(tmp_path):
    """With no weights they would do nothing; `ViT` would have refused
    them as unknown arguments, which does not say why."""
    saved = str(tmp_path / "tiny.keras")
    keras_vit.ViT(**NUMBERS, image_size=32).save(saved)
    calls = [
        lambda: keras_vit.ViT_B16(interpolation="bicubic"),
        lambda: keras_vit.ViT.from_variant("B/16", interpolation="bicubic"),
        lambda: resolver.resolve_model("ViT_B16", interpolation="bicubic"),
        lambda: resolver.resolve_model(saved, interpolation="bicubic"),
    ]
    for call in calls:
        with pytest.raises(
            ValueError,
            match=r"Received: interpolation='bicubic' with weights=None",
        ):
            call()
    with pytest.raises(ValueError, match="Received: antialias=True with"):
        keras_vit.ViT_B16(antialias=True)
