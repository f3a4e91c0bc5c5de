import os
import subprocess
import sys

import pytest

import keras_vit
from keras_vit import cli
from tests.helpers import TINY


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert keras_vit.__version__ in capsys.readouterr().out


def test_models_lists_builders_with_exact_counts(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    assert "ViT_B16" in out and "86,567,656" in out
    assert "ViT_H14" in out and "632,045,800" in out


def test_console_script_is_installed():
    # The `keras-vit` entry point of pyproject.toml, as a user runs it.
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from keras_vit.cli import main; main()",
            "--version",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert keras_vit.__version__ in result.stdout


def test_sigterm_during_a_command_exits_143_and_restores_the_handler(
    monkeypatch,
):
    import signal

    def run(args):
        # (Checked first so that a regression fails here instead of
        # killing the test run.)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(cli.models, "run", run)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["models"])
    assert exit_info.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_sigterm_wrapped_by_other_code_still_exits_143():
    # An extension module's import turns the exception into ImportError
    # ("initialization failed") with ours as its cause.
    def wrapped():
        with cli._terminate_cleanly():
            try:
                raise cli._Terminated(143)
            except SystemExit as error:
                raise ImportError("initialization failed") from error

    with pytest.raises(SystemExit) as exit_info:
        wrapped()
    assert exit_info.value.code == 143 and not isinstance(
        exit_info.value, cli._Terminated
    )
    with pytest.raises(ImportError):  # other errors pass through unchanged
        with cli._terminate_cleanly():
            raise ImportError("no module")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_lost_sigterm_still_stops_the_next_write_and_exits_143(
    monkeypatch, tmp_path
):
    # Python drops (prints) an exception raised while a garbage collector
    # callback runs; JAX registers one, so SIGTERM's exception can be lost
    # mid-export. The export's write then stops at its commit.
    import gc
    import signal

    from keras_vit import files

    out = tmp_path / "out.bin"

    def lose_it(phase, info):
        gc.callbacks.remove(lose_it)
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs, here

    def run(args):
        with files.atomic_file(str(out)) as tmp:
            _write(tmp)
            gc.callbacks.append(lose_it)
            gc.collect()
        raise AssertionError("the write was not stopped")

    monkeypatch.setattr(cli.models, "run", run)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["models"])
    assert exit_info.value.code == 143
    assert list(tmp_path.iterdir()) == []

    # ... and a command that writes nothing after it exits 143 too.
    def run_on(args):
        gc.callbacks.append(lose_it)
        gc.collect()

    monkeypatch.setattr(cli.models, "run", run_on)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["models"])
    assert exit_info.value.code == 143
    # Nothing stays requested once the command is over.
    with files.atomic_file(str(out)) as tmp:
        _write(tmp)
    assert out.read_bytes() == b"data"


def _write(path):
    with open(path, "wb") as file:
        file.write(b"data")


def test_train_flags_reach_the_model(monkeypatch, tmp_path):
    import keras_vit.training

    configs = []

    def fake_train(config):
        configs.append(config)
        return keras_vit.training.TrainResult(
            None, {}, {"accuracy": 0.5}, config.run.output, "default", 0
        )

    monkeypatch.setattr(keras_vit.training, "train", fake_train)
    cli.main(
        [
            "train",
            "--dataset",
            "digits",
            "--output",
            str(tmp_path / "run"),
            "--hidden-dim",
            "32",
            "--pooling",
            "gap",
            "--position-embedding",
            "learned2d",
        ]
    )
    (config,) = configs
    assert config.model.kwargs == {
        "hidden_dim": 32,
        "pooling": "gap",
        "position_embedding": "learned2d",
    }
    assert config.objective.name == "classification"
    cli.main(
        [
            "train",
            "--dataset",
            "folder:photos",
            "--output",
            str(tmp_path / "mpp"),
            "--objective",
            "masked-patches",
        ]
    )
    assert configs[-1].objective.name == "masked_patches"
    assert configs[-1].objective.masked_patches == {}  # the paper's options
    configs[-1].check()
    cli.main(
        [
            "train",
            "--dataset",
            "folder:photos",
            "--output",
            str(tmp_path / "mpp"),
            "--objective",
            "masked-patches",
            "--corrupt-rate",
            "0.25",
            "--replace-rate",
            "0",
            "--color-bits",
            "2",
        ]
    )
    assert configs[-1].objective.masked_patches == {
        "corrupt_rate": 0.25,
        "replace_rate": 0.0,
        "bits": 2,
    }
    configs[-1].check()
    # The defaults --help states are the objective's.
    from keras_vit.training.masked_patches import OPTIONS

    actions = {
        action.dest: action
        for action in cli.build_parser()
        ._subparsers._group_actions[0]
        .choices["train"]
        ._actions
    }
    for flag, option in [
        ("corrupt_rate", "corrupt_rate"),
        ("mask_rate", "mask_rate"),
        ("replace_rate", "replace_rate"),
        ("color_bits", "bits"),
    ]:
        assert f"(default {OPTIONS[option]})" in actions[flag].help
    from keras_vit.models.vit import MODEL_POSITION_EMBEDDINGS

    (train,) = [
        action
        for action in cli.build_parser()
        ._subparsers._group_actions[0]
        .choices["train"]
        ._actions
        if action.dest == "position_embedding"
    ]
    assert sorted(train.choices) == sorted(MODEL_POSITION_EMBEDDINGS)


def test_a_file_that_is_no_image_is_named_in_one_line(
    monkeypatch, tmp_path, capsys
):
    # The TensorFlow error of a training run's input pipeline, reduced to
    # the file's path.
    from PIL import Image

    import keras_vit.training
    from keras_vit import data

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (4, 4)).save(tmp_path / label / "0.png")
    (tmp_path / "b" / "page.jpg").write_text("<html>")

    def reading_train(config):
        for _ in data.load(config.data.dataset).train:
            pass

    monkeypatch.setattr(keras_vit.training, "train", reading_train)
    assert (
        cli.main(
            [
                "train",
                "--dataset",
                f"folder:{tmp_path}",
                "--output",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert error == (
        f"keras-vit: error: {data.datasets.NOT_AN_IMAGE} "
        f"{tmp_path}/b/page.jpg\n"
    )
    # Other errors still raise.
    monkeypatch.setattr(keras_vit.training, "train", lambda config: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(
            ["train", "--dataset", "digits", "--output", str(tmp_path / "run")]
        )


def test_inspect_reads_images_as_evaluation_does(monkeypatch, tmp_path):
    # inspect made a one-channel image with a plain mean of R, G and B;
    # evaluation (and export's calibration) with luma weights.
    import numpy as np
    from PIL import Image

    from keras_vit import data
    from keras_vit import visualize
    from keras_vit.data.images import model_pixels

    (tmp_path / "photos" / "a").mkdir(parents=True)
    path = tmp_path / "photos" / "a" / "red.png"
    pixels = np.zeros((12, 20, 3), np.uint8)
    pixels[..., 0] = 200  # pure red: mean 66.7, luma 59.8
    pixels[:, :10, 2] = 90
    Image.fromarray(pixels).save(path)
    model = keras_vit.ViT(
        **{**TINY, "image_size": 16, "patch_size": 8}, num_channels=1
    )
    model.save(tmp_path / "gray.keras")

    seen = []
    monkeypatch.setattr(
        visualize,
        "inspect",
        lambda model, images, *args, **kwargs: seen.append(images) or [],
    )
    assert (
        cli.main(
            [
                "inspect",
                str(tmp_path / "gray.keras"),
                "--image",
                str(path),
                "--output",
                str(tmp_path / "figures"),
            ]
        )
        == 0
    )
    (images,) = seen
    pairs = data.datasets.read_images([str(path)], np.array([0], np.int64))
    ((batch, _),) = data.eval_pipeline(
        pairs, 1, (16, 16), 1
    ).as_numpy_iterator()
    expected = model_pixels(batch, 1)
    assert images.shape == expected.shape == (1, 16, 16, 1)
    assert images.dtype == np.float32
    np.testing.assert_allclose(images, expected, atol=1e-4)


def test_inspect_names_a_file_that_is_no_image(tmp_path, capsys):
    page = tmp_path / "cat.jpg"
    page.write_text("<html>")
    code = cli.main(
        [
            "inspect",
            "ViT_Ti16",
            "--image-size",
            "32",
            "--image",
            str(page),
            "--output",
            str(tmp_path / "figures"),
        ]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert (
        error.startswith("keras-vit: error: Could not read the image: ")
        and error.count("\n") == 1
    )
    assert f"Received: image={str(page)!r}" in error
    assert not (tmp_path / "figures").exists()


def test_inspect_names_a_missing_image_before_loading_the_model(
    tmp_path, capsys, monkeypatch
):
    # The model was loaded first (a preset's weights downloaded), then
    # TensorFlow's ReadFile error said the file was missing, in many lines.
    from keras_vit.export import loaded_model

    monkeypatch.setattr(
        loaded_model,
        "inference_model",
        lambda *a, **k: pytest.fail("loaded"),
    )
    missing = str(tmp_path / "typo.png")
    code = cli.main(
        [
            "inspect",
            "ViT_B16",
            "--image",
            missing,
            "--output",
            str(tmp_path / "figures"),
        ]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert error == (
        "keras-vit: error: The image file does not exist. Received: "
        f"image={missing!r}\n"
    )
    assert not (tmp_path / "figures").exists()


def test_the_command_table_names_the_formats_export_writes():
    # docs/command-line.md said `export` writes "SavedModel, TFLite, ONNX
    # or OpenVINO" when its --format took saved_model and tflite only; it
    # takes all four now, and the table names each.
    from keras_vit.options import EXPORT_FORMATS

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "command-line.md")) as file:
        (row,) = [line for line in file if line.startswith("| `export` |")]
    does = row.split("|")[2]
    names = {
        "saved_model": "SavedModel",
        "tflite": "TFLite",
        "onnx": "ONNX",
        "openvino": "OpenVINO",
    }
    assert sorted(EXPORT_FORMATS) == sorted(names)
    assert all(names[f] in does for f in EXPORT_FORMATS)
    assert "Python only" not in does
