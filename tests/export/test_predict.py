"""`keras-vit predict`: the top classes of images for a `.keras` file, a
training run, a SavedModel, a `.tflite` file and a preset name."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import cli
from keras_vit.cli import predict
from keras_vit.data.images import load_image_files
from tests.helpers import TINY
from tests.helpers import random_images

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Three PNG photos of other sizes than the model's 32 x 32."""
    folder = tmp_path_factory.mktemp("photos")
    paths = []
    for i, size in enumerate([(40, 48), (32, 32), (64, 20)]):
        pixels = random_images((1, *size, 3), seed=10 + i)[0].astype("uint8")
        path = str(folder / f"photo{i}.png")
        tf.io.write_file(path, tf.io.encode_png(pixels))
        paths.append(path)
    return paths


def _expected(model_path, paths):
    model = keras.saving.load_model(model_path)
    pixels = load_image_files(paths, (32, 32), 3)
    return model.predict(pixels, verbose=0)


def _predict_json(capsys, *argv):
    assert cli.main(["predict", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _check(results, expected, paths, class_names):
    assert [r["image"] for r in results] == paths
    for result, row in zip(results, expected):
        top = result["top"]
        assert top[0]["index"] == int(np.argmax(row))
        assert top[0]["class"] == class_names[int(np.argmax(row))]
        got = [c["probability"] for c in top]
        assert got == sorted(got, reverse=True)
        np.testing.assert_allclose(
            got, np.sort(row)[::-1][: len(top)], atol=1e-4
        )


def test_a_keras_file(random_model_path, images, capsys):
    results = _predict_json(capsys, random_model_path, *images, "--top", "3")
    assert [len(r["top"]) for r in results] == [3, 3, 3]
    names = [f"class_{i}" for i in range(10)]
    _check(results, _expected(random_model_path, images), images, names)


def test_a_training_run_folder_names_its_classes(
    random_model_path, images, tmp_path, capsys
):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(random_model_path, run / "model.keras")
    (run / "config.json").write_text('{"data": {"dataset": "digits"}}')
    results = _predict_json(capsys, str(run), *images, "--top", "10")
    names = [str(d) for d in range(10)]
    _check(results, _expected(random_model_path, images), images, names)


def test_the_table(random_model_path, images, capsys):
    assert (
        cli.main(["predict", random_model_path, images[0], "--top", "2"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["image", "rank", "class", "probability"]
    assert [line.split()[:2] for line in lines[1:]] == [
        [images[0], "1"],
        [images[0], "2"],
    ]


@pytest.mark.slow
def test_a_saved_model_and_a_tflite_export(
    random_model_path, images, tmp_path, capsys
):
    from keras_vit import export

    # Unverified: `_check` compares what `predict` prints of each with
    # Keras's outputs (a verification's fresh process, seconds, would
    # check the same twice).
    labels = [f"label{i}" for i in range(10)]
    saved = str(tmp_path / "serving")
    export.export_saved_model(
        random_model_path, saved, labels=labels, verify=False
    )
    tflite = str(tmp_path / "vit.tflite")
    export.export_tflite(random_model_path, tflite, labels=labels, verify=False)
    expected = _expected(random_model_path, images)
    for model in (saved, tflite):
        _check(_predict_json(capsys, model, *images), expected, images, labels)


def test_imagenet_class_names():
    names = keras_vit.imagenet_class_names()
    assert len(names) == 1000
    assert names[:3] == ["tench", "goldfish", "great_white_shark"]
    assert names[-1] == "toilet_tissue"
    # The duplicated first lemmas, at Keras's decode_predictions indices.
    assert names[134] == names[517] == "crane"
    assert names[638] == names[639] == "maillot"
    ids = keras_vit.data.imagenet.imagenet_wordnet_ids()
    assert ids == sorted(ids) and ids[0] == "n01440764"


@pytest.mark.parametrize(
    "model, image, message",
    [
        ("ViT_X", "photo", "Received: model='ViT_X'"),
        ("model", "missing.png", "does not exist. Received: image="),
        (
            "model",
            "junk.png",
            "Could not read the image: Not a JPEG, PNG, GIF, BMP or WebP "
            "image. Received: image=",
        ),
        ("nowhere.tflite", "photo", "Received: model='nowhere.tflite'"),
    ],
)
def test_errors_say_what_was_received(
    random_model_path, images, tmp_path, capsys, model, image, message
):
    (tmp_path / "junk.png").write_text("not an image")
    model = random_model_path if model == "model" else model
    image = images[0] if image == "photo" else str(tmp_path / image)
    assert cli.main(["predict", model, image]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("keras-vit: error: ") and message in line


@pytest.mark.slow
def test_the_command_prints_only_its_table(random_model_path, images):
    launcher = os.path.join(ROOT, "keras_vit", "_launcher", "__init__.py")
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('l', {launcher!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "sys.exit(module.main(sys.argv[1:]))\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-c", script, "predict", random_model_path, *images],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert len(done.stdout.splitlines()) == 1 + 3 * 5


def test_json_stdout_is_the_json_alone(
    random_model_path, images, capsys, monkeypatch
):
    # A preset's first download printed Keras's progress bar to stdout,
    # before the JSON, so `--json` output did not parse.
    load = predict.load_predictor

    def loud_load(*args):
        print("Downloading data from https://example.invalid [=====]")
        return load(*args)

    monkeypatch.setattr(predict, "load_predictor", loud_load)
    assert cli.main(["predict", random_model_path, *images, "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == len(images)
    assert "Downloading data" in err


def test_a_checkpoint_file(images, tmp_path, capsys):
    # The model loaded, then "Unknown model ... Received: model='...npz'":
    # the class names were looked up by resolving the path as a name.
    model = keras_vit.ViT(**TINY)
    path = str(tmp_path / "tiny.npz")
    keras_vit.weights.save_npz(model, path)
    results = _predict_json(capsys, path, *images, "--top", "5")
    pixels = load_image_files(images, (32, 32), 3)
    expected = model.predict(pixels, verbose=0)
    _check(results, expected, images, [f"class_{i}" for i in range(5)])


def test_exports_resize_as_their_model_was_evaluated(tmp_path):
    # Exports recorded no image_resize and `keras-vit predict` squashed
    # every image, whatever crop the model (a preset) was evaluated with.
    from keras_vit import export
    from keras_vit.export import metadata
    from tests.helpers import randomize_weights

    setting = {"crop_pct": 1.0, "interpolation": "bicubic"}
    model = keras_vit.ViT(**TINY, image_resize=setting)
    randomize_weights(model, seed=4, scale=0.5)
    path = str(tmp_path / "serving")
    export.export_saved_model(model, path, verify=False)
    found = metadata.read_metadata(path)
    assert found["input"]["image_resize"] == {**setting, "antialias": True}
    photo = keras_vit.sample_image_path()  # 3:2, so crop and squash differ
    cropped = load_image_files([photo], (32, 32), 3, model.image_resize)
    squashed = load_image_files([photo], (32, 32), 3)
    assert np.abs(cropped - squashed).mean() > 5.0
    expected = model.predict(cropped, verbose=0)
    other = model.predict(squashed, verbose=0)
    assert np.abs(expected - other).max() > 1e-3  # the resize shows
    model.save(tmp_path / "m.keras")
    for source in (path, str(tmp_path / "m.keras")):
        got = predict.load_predictor(source).predict([photo])
        np.testing.assert_allclose(got, expected, atol=1e-5)
    # Metadata from before input.image_resize: its exports were fed
    # squashed images, and still are.
    del found["input"]["image_resize"]
    metadata.write(metadata.sidecar_path(path), found)
    got = predict.load_predictor(path).predict([photo])
    np.testing.assert_allclose(got, other, atol=1e-5)


def test_a_model_that_is_no_vit_records_the_squash():
    from keras_vit.data import resize
    from keras_vit.export import metadata

    inputs = keras.Input((32, 32, 3))
    outputs = keras.layers.Dense(2, activation="softmax")(
        keras.layers.GlobalAveragePooling2D()(inputs)
    )
    model = keras.Model(inputs, outputs)
    found = metadata.build(
        model, "tflite", "none", ["a", "b"], [1, 32, 32, 3], "float32", [1, 2]
    )
    assert found["input"]["image_resize"] == resize.DEFAULT
    json.dumps(found)  # JSON as it is


def _probabilities(results, num_classes):
    """Each image's probabilities by class index, from `--json` results
    of `--top num_classes`."""
    rows = np.zeros((len(results), num_classes))
    for row, result in zip(rows, results):
        for c in result["top"]:
            row[c["index"]] = c["probability"]
    return rows


def test_onnx_and_openvino_exports_predict_as_the_keras_model(tmp_path, capsys):
    # `keras-vit predict` took no .onnx or OpenVINO .xml file (their
    # exports wrote no metadata); with their sidecars they are read, and
    # resized, as the model was evaluated: a crop of the 3:2 photo.
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    from keras_vit import export
    from tests.helpers import randomize_weights

    setting = {"crop_pct": 1.0, "interpolation": "bicubic"}
    model = keras_vit.ViT(**TINY, image_resize=setting)
    randomize_weights(model, seed=4, scale=0.5)
    model.save(tmp_path / "m.keras")
    photo = keras_vit.sample_image_path()
    labels = [f"label{i}" for i in range(5)]
    # A static batch of 2 for ONNX: 3 images are a batch and a padded one.
    onnx_path = export.export_onnx(
        model, tmp_path / "m.onnx", labels=labels, batch_size=2
    )
    xml_path = export.export_openvino(model, tmp_path / "v.xml", labels=labels)
    # Three different images, so that order and the padding's cut show.
    from PIL import Image

    with Image.open(photo) as image:
        image.transpose(Image.FLIP_LEFT_RIGHT).save(tmp_path / "flip.png")
        image.rotate(90, expand=True).save(tmp_path / "turn.png")
    images = [photo, str(tmp_path / "flip.png"), str(tmp_path / "turn.png")]
    argv = [*images, "--top", "5"]
    expected = _probabilities(
        _predict_json(capsys, str(tmp_path / "m.keras"), *argv), 5
    )
    squashed = model.predict(load_image_files([photo], (32, 32), 3), verbose=0)
    assert np.abs(expected[0] - squashed[0]).max() > 1e-3  # the crop shows
    assert np.abs(expected[0] - expected[2]).max() > 1e-3  # images differ
    for path in (onnx_path.path, xml_path.path):
        results = _predict_json(capsys, path, *argv)
        assert [c["class"] for c in results[0]["top"]] == [
            labels[c["index"]] for c in results[0]["top"]
        ]
        np.testing.assert_allclose(
            _probabilities(results, 5), expected, atol=1e-4
        )


@pytest.mark.parametrize("name", ["m.onnx", "m.xml"])
def test_an_export_without_its_sidecar_is_refused_naming_it(
    tmp_path, capsys, name
):
    # Not read as a builder name ("Unknown model"), nor run without
    # knowing its input size, resize and classes.
    (tmp_path / name).write_bytes(b"a model")
    photo = keras_vit.sample_image_path()
    assert cli.main(["predict", str(tmp_path / name), photo]) == 2
    err = capsys.readouterr().err
    assert f"({tmp_path / 'm.json'}), which is missing" in err
    assert f"Received: model={str(tmp_path / name)!r}" in err


def test_a_feature_extractor_is_refused_before_its_export_is_loaded(
    tmp_path, images, capsys, monkeypatch
):
    from keras_vit import export
    from tests.export.helpers import TINY_EXPORT

    model = keras_vit.ViT(**{**TINY_EXPORT, "include_top": False})
    keras_path = str(tmp_path / "features.keras")
    model.save(keras_path)
    tflite_path = str(tmp_path / "features.tflite")
    export.export_tflite(model, tflite_path, verify=False)

    def no_runtime(*args):
        raise AssertionError("the export was loaded")

    monkeypatch.setattr(predict, "_runner", no_runtime)
    for path in (keras_path, tflite_path):
        assert cli.main(["predict", path, images[0]]) == 2
        err = capsys.readouterr().err
        assert "no classifier head (include_top=False)" in err, err
        assert "Received: a feature extractor" in err


@pytest.fixture(scope="module")
def saved_model_export(random_model_path, tmp_path_factory):
    """The random model as a SavedModel (`sm`), unverified, in a folder of
    its own."""
    from keras_vit import export

    folder = tmp_path_factory.mktemp("saved_model_export")
    export.export_saved_model(random_model_path, folder / "sm", verify=False)
    return folder / "sm"


@pytest.mark.parametrize(
    "fmt, model, damaged",
    [
        ("tflite", "random.tflite", "random.tflite"),
        ("saved_model", "sm", "sm/saved_model.pb"),
        ("saved_model", "sm", "sm/variables/variables.data-00000-of-00001"),
        ("onnx", "m.onnx", "m.onnx"),
        ("openvino", "m.xml", "m.xml"),
        ("openvino", "m.xml", "m.bin"),
    ],
)
def test_a_damaged_export_is_an_error_naming_it(
    request, tmp_path, images, capsys, fmt, model, damaged
):
    # A cut .onnx file was onnxruntime's raw InvalidProtobuf traceback, a
    # cut OpenVINO IR or SavedModel TensorFlow's or OpenVINO's; a cut
    # .tflite was already `keras-vit: error: ...`.
    # The random model's export, its files copied into tmp_path (those of
    # TFLite, ONNX and OpenVINO are made once for the run: conftest.py's;
    # skipped where the runtime is not installed).
    name = (
        "saved_model_export" if fmt == "saved_model" else f"random_{fmt}_path"
    )
    export = request.getfixturevalue(name)
    shutil.copytree(export.parent, tmp_path, dirs_exist_ok=True)
    data = (tmp_path / damaged).read_bytes()
    (tmp_path / damaged).write_bytes(data[: len(data) // 2])
    path = str(tmp_path / model)
    assert cli.main(["predict", path, images[0]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-vit: error: ") and repr(path) in err, err
    assert "Traceback" not in err
