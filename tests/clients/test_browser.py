"""keras_vit's `.tflite` in a real browser: the web demo (examples/web/)
in headless Chromium with `@mediapipe/tasks-vision` from npm, served from
127.0.0.1 (tests/clients/browser.py)."""

import json
import os
import pathlib
import subprocess

import keras
import numpy as np
import pytest
from PIL import Image

from keras_vit import export
from keras_vit.export import runtime
from keras_vit.export import tflite
from keras_vit.export import tflite_metadata
from tests.clients import browser

pytestmark = pytest.mark.slow  # Each starts Chromium: seconds.

TOP_K = 5


@pytest.fixture
def image_path(tmp_path):
    """A 32 x 32 PNG (the tiny model's input size, so MediaPipe's own
    resizing leaves it as it is) of random pixels."""
    pixels = np.random.default_rng(0).integers(0, 256, (32, 32, 3), np.uint8)
    path = tmp_path / "image.png"
    Image.fromarray(pixels).save(path)
    return path


@pytest.fixture
def bare_tflite_path(random_model_path, tmp_path, monkeypatch):
    """The converter's bytes without the TFLite Metadata that
    `tflite_bytes` attaches: what every keras_vit file was before #55."""
    model = keras.saving.load_model(random_model_path, compile=False)
    bare = tmp_path / "bare.tflite"
    monkeypatch.setattr(tflite_metadata, "attach", lambda data, *_: data)
    bare.write_bytes(tflite.tflite_bytes(model))
    return bare


def test_a_file_without_metadata_is_refused_in_the_browser(
    bare_tflite_path, image_path
):
    # The message comes from MediaPipe's WASM core running in Chromium.
    report = browser.classify_in_browser(bare_tflite_path, image_path)
    assert "categories" not in report, report
    assert (
        "requires specifying NormalizationOptions metadata" in (report["error"])
    )


def test_the_browser_top_k_is_keras_top_k(
    random_model_path, random_tflite_path, image_path
):
    model = keras.saving.load_model(random_model_path, compile=False)
    pixels = np.asarray(Image.open(image_path), np.float32)[None]
    scores = np.asarray(model(pixels))[0]
    want = np.argsort(-scores)[:TOP_K]
    names = json.loads(
        pathlib.Path(random_tflite_path).with_suffix(".json").read_text()
    )["class_names"]

    report = browser.classify_in_browser(
        random_tflite_path, image_path, k=TOP_K
    )
    assert "error" not in report, report["error"]
    got = report["categories"]
    assert [c["index"] for c in got] == want.tolist()
    np.testing.assert_allclose(
        [c["score"] for c in got], scores[want], rtol=1e-4, atol=1e-5
    )
    assert [c["categoryName"] for c in got] == [names[i] for i in want]


@pytest.mark.parametrize("quantize", ["float16", "dynamic", "int8"])
def test_the_browser_runs_every_quantized_kind(
    quantize, random_model_path, image_path, tmp_path
):
    # The browser's top-k is the file's own (keras_vit's TFLite runtime on
    # the same pixels); the full-int8 file takes uint8 pixels as they are.
    path = tmp_path / f"{quantize}.tflite"
    options = {"representative_data": "digits"} if quantize == "int8" else {}
    if quantize == "int8":
        options["io_dtype"] = "uint8"
    export.export_tflite(
        random_model_path, path, quantize=quantize, verify=False, **options
    )
    pixels = np.asarray(Image.open(image_path), np.float32)[None]
    scores = runtime.run_tflite(str(path), pixels)[0]
    report = browser.classify_in_browser(path, image_path, k=TOP_K)
    assert "error" not in report, report["error"]
    got = report["categories"]
    np.testing.assert_allclose(
        [c["score"] for c in got],
        np.sort(scores)[::-1][:TOP_K],
        rtol=1e-4,
        atol=1e-5,
    )
    # Ties (int8's coarse scores) may come in either order.
    for c in got:
        assert scores[c["index"]] == pytest.approx(c["score"], abs=1e-5)


def test_a_model_the_server_lacks_is_reported_by_the_page(tmp_path, image_path):
    report = browser.classify_in_browser(tmp_path / "absent.tflite", image_path)
    assert report == {"error": "model: HTTP 404"}


def test_a_bad_k_is_refused_by_name(random_tflite_path, image_path):
    report = browser.classify_in_browser(random_tflite_path, image_path, k=0)
    assert report == {"error": "k must be a positive integer, got 0"}


def test_an_image_the_browser_cannot_decode_is_reported(
    random_tflite_path, tmp_path
):
    path = tmp_path / "image.png"
    path.write_text("not an image\n")
    report = browser.classify_in_browser(random_tflite_path, path)
    assert "cannot be decoded" in report["error"], report


def test_a_page_that_never_reports_times_out_and_chromium_is_killed(
    random_tflite_path, image_path, monkeypatch
):
    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(browser.subprocess, "Popen", Recorded)
    with pytest.raises(RuntimeError, match="no report within 0.01 s"):
        browser.classify_in_browser(
            random_tflite_path, image_path, timeout=0.01
        )
    [process] = started
    assert process.returncode is not None
    with pytest.raises(ProcessLookupError):  # its whole process group
        os.killpg(process.pid, 0)


def test_the_page_renders_the_image_and_the_error(
    bare_tflite_path, image_path, tmp_path
):
    path = tmp_path / "page.png"
    browser.screenshot_in_browser(bare_tflite_path, image_path, path)
    page = np.asarray(Image.open(path).convert("RGB")).astype(int)
    assert page.shape[1] == 800  # The window's width (its height less
    # Chromium's frame is the page's).
    # The 32 x 32 preview, pixel for pixel, somewhere on the page.
    pixels = np.asarray(Image.open(image_path)).astype(int)
    rows, columns = np.nonzero((page == pixels[0, 0]).all(axis=-1))
    assert any(
        (page[r : r + 32, c : c + 32] == pixels).all()
        for r, c in zip(rows, columns)
    )
    # The refusal, in the page's error colour (#b00020).
    error_red = (np.abs(page - [176, 0, 32]).sum(axis=-1) < 30).sum()
    assert error_red > 100, error_red
