"""`ViT(normalization=...)`: a preset's mean and std applied by
`include_preprocessing=True`, so every model takes RGB pixels in [0, 255]."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import cli
from keras_vit import registry
from keras_vit.data.images import load_image_files
from keras_vit.registry import presets as registry_presets
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights
from tests.weights.test_loading import local_preset  # noqa: F401 (a fixture)

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
CLIP = registry.get_preset("vit_b16_clip_openai")["normalization"]


def _normalised(pixels, norm):
    return (pixels / 255.0 - np.array(norm["mean"])) / np.array(norm["std"])


def _pair(norm, **kwargs):
    """A model that normalises pixels itself, and the same model (same
    weights) that takes normalised inputs."""
    model = keras_vit.ViT(
        **TINY, normalization=norm, classifier_activation=None, **kwargs
    )
    randomize_weights(model, seed=3)
    raw = keras_vit.ViT(
        **TINY,
        normalization=norm,
        include_preprocessing=False,
        classifier_activation=None,
        **kwargs,
    )
    raw.set_weights(model.get_weights())
    return model, raw


@pytest.mark.parametrize("norm", [IMAGENET, CLIP], ids=["imagenet", "clip"])
def test_the_model_normalises_pixels_with_the_mean_and_std(norm):
    model, raw = _pair(norm)
    pixels = random_images((2, 32, 32, 3))
    want = raw.predict(_normalised(pixels, norm).astype("float32"), verbose=0)
    np.testing.assert_allclose(
        model.predict(pixels, verbose=0), want, atol=1e-6, rtol=0
    )
    # One multiply-add per channel, the inputs (pixels / 255 - mean) / std.
    rescaled = model.get_layer("rescaling")(pixels)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(rescaled),
        _normalised(pixels, norm),
        atol=1e-6,
        rtol=0,
    )
    # Not the paper's [-1, 1].
    assert not np.allclose(
        model.predict(pixels, verbose=0),
        raw.predict(pixels / 127.5 - 1, verbose=0),
        atol=1e-3,
    )


def test_the_default_is_the_papers_minus_one_to_one():
    model = keras_vit.ViT(**TINY)
    assert model.normalization is None
    layer = model.get_layer("rescaling")
    assert (layer.scale, layer.offset) == (1 / 127.5, -1.0)


def test_config_round_trip_and_safe_mode_save(tmp_path):
    model, _ = _pair(IMAGENET)
    config = model.get_config()
    assert config["normalization"] == IMAGENET
    # JSON makes the tuples lists; the model reads them back the same.
    loaded = json.loads(json.dumps(config))
    clone = keras_vit.ViT.from_config(loaded)
    assert clone.get_config() == config
    path = str(tmp_path / "m.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    assert reloaded.normalization == IMAGENET
    pixels = random_images((1, 32, 32, 3), seed=1)
    np.testing.assert_allclose(
        reloaded.predict(pixels, verbose=0),
        model.predict(pixels, verbose=0),
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "norm",
    [
        "imagenet",
        {"mean": (0.5, 0.5, 0.5)},
        {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5), "max": 255},
        {"mean": (0.5, 0.5), "std": (0.5, 0.5, 0.5)},
        {"mean": 0.5, "std": (0.5, 0.5, 0.5)},
        {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.0, 0.5)},
        {"mean": (0.5, float("nan"), 0.5), "std": (0.5, 0.5, 0.5)},
        {"mean": ("a", 0.5, 0.5), "std": (0.5, 0.5, 0.5)},
    ],
)
def test_bad_normalizations_are_refused(norm):
    with pytest.raises(ValueError, match=r"normalization.*Received: normal"):
        keras_vit.ViT(**TINY, normalization=norm)


@pytest.fixture
def normalised_preset(local_preset, monkeypatch):  # noqa: F811
    """The tiny local preset, recorded with ImageNet's mean and std."""
    preset = {**local_preset, "normalization": IMAGENET}
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry.PRESETS, preset]
    )
    return preset


def test_a_presets_normalization_is_applied(normalised_preset):
    # (This was refused: include_preprocessing=True gave [-1, 1] only.)
    name = normalised_preset["unique_name"]
    model = keras_vit.ViT.from_preset(name, classifier_activation=None)
    assert model.include_preprocessing and model.normalization == IMAGENET
    raw = keras_vit.ViT.from_preset(
        name, classifier_activation=None, include_preprocessing=False
    )
    assert raw.normalization == IMAGENET  # recorded: what its inputs are
    pixels = random_images((2, 32, 32, 3), seed=2)
    np.testing.assert_allclose(
        model.predict(pixels, verbose=0),
        raw.predict(_normalised(pixels, IMAGENET), verbose=0),
        atol=1e-5,
    )
    # Told otherwise, the model takes the caller's.
    other = keras_vit.ViT.from_preset(name, normalization=None)
    assert other.normalization is None


def test_predict_on_a_preset_feeds_pixels(normalised_preset, tmp_path, capsys):
    paths = []
    for i in range(2):
        pixels = random_images((1, 40, 36, 3), seed=20 + i)[0]
        paths.append(str(tmp_path / f"photo{i}.png"))
        tf.io.write_file(paths[-1], tf.io.encode_png(pixels.astype("uint8")))
    name = normalised_preset["unique_name"]
    # (Downloads the preset first: its progress bar is not the JSON.)
    raw = keras_vit.ViT.from_preset(name, include_preprocessing=False)
    capsys.readouterr()
    assert cli.main(["predict", name, *paths, "--json", "--top", "5"]) == 0
    results = json.loads(capsys.readouterr().out)
    inputs = _normalised(load_image_files(paths, (32, 32), 3), IMAGENET)
    want = raw.predict(inputs, verbose=0)
    for result, row in zip(results, want):
        got = {c["index"]: c["probability"] for c in result["top"]}
        np.testing.assert_allclose([got[i] for i in range(5)], row, atol=1e-4)


def test_model_for_checkpoint_takes_a_normalization(tmp_path):
    from keras_vit.weights import read_checkpoint
    from keras_vit.weights.convert import model_for_checkpoint
    from tests.weights.test_golden_parity import golden

    checkpoint = read_checkpoint(golden("vit_token.npz"))
    model = model_for_checkpoint(checkpoint, normalization=CLIP)
    assert model.normalization == CLIP and model.include_preprocessing


@pytest.mark.slow
def test_a_normalised_models_tflite_export(tmp_path):
    from keras_vit import export
    from keras_vit.export import graph as graph_lib
    from keras_vit.export import runtime as runtime_lib
    from tests.export.helpers import TINY_EXPORT

    model = keras_vit.ViT(**TINY_EXPORT, normalization=CLIP)
    randomize_weights(model, seed=5)
    result = export.export_tflite(
        model, tmp_path / "m.tflite", num_verify_images=10
    )
    assert result.report is not None and not result.report.failures
    assert result.report.xnnpack_partitions == 1  # the whole graph
    graph = graph_lib.read_graph(result.path)
    assert not graph.unsupported_ops()
    pixels = random_images((1, 32, 32, 3), seed=6)
    np.testing.assert_allclose(
        runtime_lib.run_tflite(result.path, pixels),
        model.predict(pixels, verbose=0),
        atol=1e-5,
    )
    meta = result.metadata["input"]
    assert meta["pixel_range"] == [0, 255]
    assert meta["normalization"] == {k: list(v) for k, v in CLIP.items()}
    text = result.metadata["preprocessing"]
    assert "[0, 255]" in text and str(list(CLIP["mean"])) in text


def test_the_metadata_of_a_model_that_takes_normalised_inputs():
    from keras_vit.export import metadata

    def build(model):
        return metadata.build(
            model,
            "tflite",
            "none",
            ["a"] * 5,
            [1, 32, 32, 3],
            "float32",
            [1, 5],
        )

    raw = keras_vit.ViT(
        **TINY, include_preprocessing=False, normalization=IMAGENET
    )
    meta = build(raw)
    assert meta["input"]["pixel_range"] is None
    assert meta["input"]["normalization"]["std"] == list(IMAGENET["std"])
    assert "(pixels / 255 - mean) / std" in meta["preprocessing"]
    assert str(list(IMAGENET["mean"])) in meta["preprocessing"]
    plain = build(keras_vit.ViT(**TINY, include_preprocessing=False))
    assert plain["input"]["normalization"] is None
    assert "pixels / 127.5 - 1" in plain["preprocessing"]
    pixels = build(keras_vit.ViT(**TINY, normalization=IMAGENET))
    assert pixels["input"]["pixel_range"] == [0, 255]
    assert "[0, 255]" in pixels["preprocessing"]


def test_masked_patches_read_colours_through_the_normalization():
    from keras_vit.training import MaskedPatchPrediction
    from keras_vit.training import mean_color_classes

    # One colour per 8x8 tile, at the middle of its 3-bit level.
    levels = np.random.default_rng(0).integers(0, 8, (2, 4, 4, 3))
    pixels = np.repeat(np.repeat(levels * 31.875 + 16, 8, 1), 8, 2)
    want = (levels @ np.array([64, 8, 1])).reshape(2, 16)
    backbone = keras_vit.ViT(
        **TINY, include_preprocessing=False, normalization=IMAGENET
    )
    mpp = MaskedPatchPrediction(backbone)
    inputs = _normalised(pixels, IMAGENET).astype("float32")
    got = mean_color_classes(inputs, mpp.tile_size, mpp.bits, mpp.value_range)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert np.asarray(mean_color_classes(pixels, 8)).tolist() == want.tolist()
    with pytest.raises(ValueError, match="value_range="):
        mean_color_classes(pixels, 8, value_range=((0, 1, 2), (1, 0, 3)))


def test_the_convert_command_takes_a_mean_and_std(tmp_path, capsys):
    from tests.weights.test_golden_parity import golden

    output = str(tmp_path / "m.keras")
    argv = ["convert", golden("vit_token.npz"), "--output", output, "--quiet"]
    mean = ["--mean", *(str(v) for v in IMAGENET["mean"])]
    std = ["--std", *(str(v) for v in IMAGENET["std"])]
    assert cli.main([*argv, *mean]) == 2
    assert "--mean and --std go together" in capsys.readouterr().err
    assert cli.main([*argv, *mean, *std]) == 0
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.normalization == IMAGENET and model.include_preprocessing


PIXEL_UNITS = {
    "mean": (123.675, 116.28, 103.53),
    "std": (58.395, 57.12, 57.375),
}


@pytest.mark.parametrize(
    "norm",
    [
        PIXEL_UNITS,
        {"mean": (200, 0, 0), "std": (0.5, 0.5, 0.5)},
        {"mean": (-0.1, 0.5, 0.5), "std": (0.5, 0.5, 0.5)},
        {"mean": (0.5, 0.5, 0.5), "std": (0.5, 1.5, 0.5)},
    ],
)
def test_a_normalization_in_pixel_units_is_refused(norm):
    # mmcv-style numbers for [0, 255] pixels mapped every image into a band
    # 0.017 wide, and the model still predicted confidently.
    with pytest.raises(ValueError, match="divide them by 255") as info:
        keras_vit.ViT(**TINY, normalization=norm)
    assert f"Received: normalization={norm!r}" in str(info.value)


def test_the_convert_command_refuses_a_mean_in_pixel_units(tmp_path, capsys):
    from tests.weights.test_golden_parity import golden

    output = tmp_path / "m.keras"
    argv = ["convert", golden("vit_token.npz"), "--output", str(output)]
    mean = ["--mean", *(str(v) for v in PIXEL_UNITS["mean"])]
    std = ["--std", *(str(v) for v in PIXEL_UNITS["std"])]
    assert cli.main([*argv, *mean, *std, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "divide them by 255" in err and "0.485" in err, err
    assert not output.exists()


def test_the_convert_command_takes_an_image_resize(tmp_path, capsys):
    from tests.weights.test_golden_parity import golden

    output = str(tmp_path / "m.keras")
    argv = ["convert", golden("vit_token.npz"), "--output", output, "--quiet"]
    crop = ["--crop-pct", "0.9"]  # bicubic, as timm's crop
    assert cli.main([*argv, "--crop-pct", "1.5"]) == 2
    assert "Received: image_resize={'crop_pct': 1.5" in capsys.readouterr().err
    assert not os.path.exists(output)  # refused before anything is written
    assert cli.main([*argv, *crop]) == 0
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.image_resize == {
        "crop_pct": 0.9,
        "interpolation": "bicubic",
        "antialias": True,
    }


def test_the_convert_commands_interpolation_can_be_told(tmp_path):
    from tests.weights.test_golden_parity import golden

    output = str(tmp_path / "m.keras")
    argv = ["convert", golden("vit_token.npz"), "--output", output, "--quiet"]
    bilinear = ["--resize-interpolation", "bilinear"]
    assert cli.main([*argv, "--crop-pct", "1.0", *bilinear]) == 0
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.image_resize["interpolation"] == "bilinear"
