"""Models built with `include_preprocessing=False` take normalised inputs:
every image file, dataset and folder fed to them (an export's calibration
and verification, `keras-vit predict` and `inspect`) is normalised as the
model's `normalization` says, never fed as [0, 255] pixels.

Each check compares the model with its `include_preprocessing=True` twin
(the same weights, normalising [0, 255] pixels itself): fed what
`inputs_from_pixels` makes of the same pixels, the two must agree.
"""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import cli
from keras_vit.cli import predict
from keras_vit.data.images import load_image_files
from keras_vit.export import pixel_inputs
from keras_vit.export import representative
from keras_vit.export import tflite as tflite_lib
from keras_vit.export import verification
from tests.export.helpers import TINY_EXPORT
from tests.helpers import random_images
from tests.helpers import randomize_weights

IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


def _pair(normalization=None):
    """`(raw, twin)`: a random tiny ViT that takes normalised inputs, and
    the same weights taking [0, 255] pixels."""
    raw = keras_vit.ViT(
        **TINY_EXPORT,
        include_preprocessing=False,
        normalization=normalization,
        name="raw",
    )
    randomize_weights(raw, seed=5, scale=0.2)
    twin = keras_vit.ViT(**TINY_EXPORT, normalization=normalization)
    twin.set_weights(raw.get_weights())
    return raw, twin


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An image folder (two classes) of random PNG photos of other sizes."""
    root = tmp_path_factory.mktemp("photos")
    for i, size in enumerate([(40, 48), (32, 32), (64, 20), (36, 36)]):
        (root / f"c{i % 2}").mkdir(exist_ok=True)
        pixels = random_images((1, *size, 3), seed=20 + i)[0].astype("uint8")
        tf.io.write_file(
            str(root / f"c{i % 2}" / f"p{i}.png"), tf.io.encode_png(pixels)
        )
    return str(root)


@pytest.mark.parametrize("normalization", [None, IMAGENET])
def test_inputs_from_pixels_is_what_the_twin_computes(normalization):
    raw, twin = _pair(normalization)
    pixels = random_images((3, 32, 32, 3), seed=1)
    inputs = pixel_inputs.inputs_from_pixels(raw)(pixels)
    if normalization is None:
        np.testing.assert_allclose(inputs, pixels / 127.5 - 1, atol=1e-6)
    else:
        mean, std = (np.array(normalization[k]) for k in ("mean", "std"))
        np.testing.assert_allclose(
            inputs, (pixels / 255 - mean) / std, atol=1e-5
        )
    np.testing.assert_allclose(
        raw.predict(inputs, verbose=0),
        twin.predict(pixels, verbose=0),
        atol=1e-6,
    )
    # A model that takes pixels gets them as they are.
    np.testing.assert_array_equal(
        pixel_inputs.inputs_from_pixels(twin)(pixels), pixels
    )
    # The range of what [0, 255] pixels become, widened by 0.1% of it.
    ends = pixel_inputs.inputs_from_pixels(raw)(np.array([[0.0], [255.0]]))
    margin = 1e-3 * (ends.max() - ends.min())
    np.testing.assert_allclose(
        pixel_inputs.input_range(raw),
        (ends.min() - margin, ends.max() + margin),
        rtol=1e-6,
    )
    if normalization is None:
        np.testing.assert_allclose(
            pixel_inputs.input_range(raw), (-1.002, 1.002), atol=1e-6
        )
    assert pixel_inputs.input_range(twin) == (0.0, 255.0)


def test_an_unknown_normalisation_is_refused_not_guessed():
    inputs = keras.Input((32, 32, 3))
    model = keras.Model(inputs, keras.layers.Flatten()(inputs), name="mine")
    model.include_preprocessing = False  # takes normalised inputs, unknown
    with pytest.raises(ValueError, match="include_preprocessing=False"):
        pixel_inputs.inputs_from_pixels(model)
    with pytest.raises(ValueError, match="model='mine'"):
        representative.load_model_inputs(model, "digits", limit=2)
    # Its own inputs, as an array, are taken as they are.
    array = np.full((2, 32, 32, 3), -3.0, "float32")
    loaded = representative.load_model_inputs(model, array)
    np.testing.assert_array_equal(loaded.images, array)


def test_calibration_from_a_dataset_is_normalised():
    raw, _ = _pair()
    pixels = representative.load_images(
        "digits", (32, 32), limit=8, split="train"
    ).images
    calibration = tflite_lib.load_calibration(raw, "digits", 8)
    np.testing.assert_allclose(
        calibration.images, pixels / 127.5 - 1, atol=1e-6
    )
    assert calibration.images.min() == pytest.approx(-1.0)
    assert calibration.labels is not None


def test_int8_calibration_from_a_folder_quantizes_the_normalised_range(
    folder, tmp_path
):
    # The audit: calibrated on [0, 255] pixels, the input tensor of a model
    # that takes [-1, 1] had scale 1.0 and zero point -128 (every
    # normalised input was 0 or -1 in int8), and top-1 agreement 0.13.
    raw, _ = _pair(IMAGENET)
    source = "folder:" + folder
    calibration = tflite_lib.load_calibration(raw, source, 4)
    pixels = representative.load_images(source, (32, 32), limit=4).images
    np.testing.assert_allclose(
        calibration.images,
        pixel_inputs.normalize_pixels(pixels, IMAGENET),
        atol=1e-6,
    )
    result = tflite_lib.export_tflite(
        raw,
        tmp_path / "raw.tflite",
        quantize="int8",
        io_dtype="int8",
        representative_data=source,
        verify=False,
    )
    quantization = result.metadata["input"]["quantization"]
    low = min(0.0, float(calibration.images.min()))
    high = max(0.0, float(calibration.images.max()))
    assert quantization["scale"] == pytest.approx((high - low) / 255, 0.01)
    assert quantization["zero_point"] == pytest.approx(
        -128 - low / quantization["scale"], abs=1
    )


def test_verification_images_from_a_dataset_are_normalised():
    raw, twin = _pair()
    (normalised,) = verification._image_sets("digits", raw, 4)
    (pixels,) = verification._image_sets("digits", twin, 4)
    np.testing.assert_allclose(
        normalised.images, pixels.images / 127.5 - 1, atol=1e-6
    )
    np.testing.assert_array_equal(normalised.labels, pixels.labels)


def test_pixel_arrays_for_a_model_that_takes_normalised_inputs_are_refused(
    tmp_path,
):
    # An array is taken as the model's inputs: [0, 255] pixels would
    # calibrate the int8 input range far too wide, silently.
    raw, _ = _pair()
    pixels = random_images((4, 32, 32, 3))
    with pytest.raises(
        ValueError, match=r"values in \[-1.002, 1.002\].*span \[0, 255\]"
    ):
        tflite_lib.export_tflite(
            raw,
            tmp_path / "raw.tflite",
            quantize="int8",
            representative_data=pixels,
        )
    assert not list(tmp_path.iterdir())
    # Normalised ones are taken as they are.
    loaded = representative.load_model_inputs(raw, pixels / 127.5 - 1)
    np.testing.assert_allclose(loaded.images, pixels / 127.5 - 1, atol=1e-6)


def _photos(folder):
    return sorted(str(p) for p in pathlib.Path(folder).glob("*/*.png"))


def _predict_json(capsys, *argv):
    assert cli.main(["predict", *argv, "--top", "10", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _probabilities(results):
    """`(images, classes)` probabilities from `keras-vit predict --json`."""
    rows = []
    for result in results:
        row = np.zeros(len(result["top"]))
        for entry in result["top"]:
            row[entry["index"]] = entry["probability"]
        rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("normalization", [None, IMAGENET])
def test_predict_on_png_files(folder, normalization, tmp_path, capsys):
    # The audit: a model trained on normalised digits scored 0.2 through
    # `keras-vit predict` (fed [0, 255] pixels) and 1.0 in Keras.
    raw, twin = _pair(normalization)
    raw.save(tmp_path / "raw.keras")
    photos = _photos(folder)
    expected = twin.predict(load_image_files(photos, (32, 32)), verbose=0)
    results = _predict_json(capsys, str(tmp_path / "raw.keras"), *photos)
    assert [r["image"] for r in results] == photos
    np.testing.assert_allclose(_probabilities(results), expected, atol=1e-5)


@pytest.mark.slow
def test_predict_on_png_files_with_a_tflite_export(folder, tmp_path, capsys):
    raw, twin = _pair(IMAGENET)
    path = str(tmp_path / "raw.tflite")
    # Verified on digits, normalised as the model's inputs.
    tflite_lib.export_tflite(raw, path, verify_data="digits")
    photos = _photos(folder)
    expected = twin.predict(load_image_files(photos, (32, 32)), verbose=0)
    results = _predict_json(capsys, path, *photos)
    np.testing.assert_allclose(_probabilities(results), expected, atol=1e-5)
    # Metadata from before `input.normalization` cannot say what to feed.
    sidecar = tmp_path / "raw.json"
    meta = json.loads(sidecar.read_text())
    del meta["input"]["normalization"]
    sidecar.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="include_preprocessing=False"):
        predict.load_predictor(path)


def test_inspect_feeds_normalised_images(folder, tmp_path, monkeypatch):
    from keras_vit import visualize

    raw, twin = _pair()
    raw.save(tmp_path / "raw.keras")
    photos = _photos(folder)[:2]
    seen = []
    monkeypatch.setattr(
        visualize,
        "inspect",
        lambda model, images, *args, pixels=None, **kwargs: (
            seen.append((images, pixels)) or []
        ),
    )
    argv = ["inspect", str(tmp_path / "raw.keras")]
    argv += ["--output", str(tmp_path / "figures")]
    for photo in photos:
        argv += ["--image", photo]
    assert cli.main(argv) == 0
    ((images, shown),) = seen
    pixels = load_image_files(photos, (32, 32))
    np.testing.assert_allclose(images, pixels / 127.5 - 1, atol=1e-6)
    # The figures draw the pixels, not the normalised inputs (clipped to
    # [0, 1], they were a dark image).
    np.testing.assert_array_equal(shown, pixels)


@pytest.mark.slow
def test_a_saved_model_export_verifies_and_predicts(folder, tmp_path, capsys):
    # The audit: verification rounded normalised inputs to uint8 for
    # serving_uint8 (-1 wrapped to 255) and failed on correct data. Such a
    # model's export has no uint8 signature: uint8 cannot hold its inputs.
    from keras_vit.export import saved_model

    raw, twin = _pair()
    path = str(tmp_path / "serving")
    result = saved_model.export_saved_model(
        raw, path, verify_data="digits", num_verify_images=8
    )
    assert result.report.passed
    assert [c.runtime for c in result.report.comparisons] == ["serving_default"]
    assert result.report.comparisons[0].max_abs < 1e-5
    assert list(result.metadata["signatures"]) == ["serving_default"]
    assert sorted(tf.saved_model.load(path).signatures) == ["serving_default"]
    photos = _photos(folder)
    expected = twin.predict(load_image_files(photos, (32, 32)), verbose=0)
    results = _predict_json(capsys, path, *photos)
    np.testing.assert_allclose(_probabilities(results), expected, atol=1e-5)
