"""Values that cannot be right are refused, by name, before any work
(issue 22, item 9): non-finite or out-of-range numbers, and flags that
would be silently ignored."""

import os

import pytest

from keras_vit import cli
from keras_vit import export
from keras_vit.export import saved_model as saved_model_lib
from keras_vit.export import tflite as tflite_lib


def _cli(*args):
    return cli.main(["export", *map(str, args)])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_top1_agreement": float("nan")}, "min_top1_agreement=nan"),
        ({"min_top1_agreement": 1.5}, "min_top1_agreement=1.5"),
        ({"min_top1_agreement": 0.9, "verify": False}, "verify=False skips"),
        ({"num_verify_images": 0}, "num_verify_images=0"),
        ({"num_calibration_images": 0}, "num_calibration_images=0"),
        ({"verify_data": None}, "verify_data=None"),
        ({"overwrite": "yes"}, "overwrite='yes'"),
    ],
)
def test_export_tflite_refuses_impossible_values(
    random_model, tmp_path, monkeypatch, kwargs, message
):
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    with pytest.raises(ValueError, match=message):
        export.export_tflite(random_model, tmp_path / "m.tflite", **kwargs)
    assert os.listdir(tmp_path) == []


def test_export_saved_model_refuses_impossible_values(random_model, tmp_path):
    for kwargs, message in [
        ({"num_verify_images": 0}, "num_verify_images=0"),
        ({"verify_data": None}, "verify_data=None"),
    ]:
        with pytest.raises(ValueError, match=message):
            export.export_saved_model(random_model, tmp_path / "sm", **kwargs)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"min_top1_agreement": float("nan")}, "min_top1_agreement=nan"),
        ({"min_top1_agreement": -0.1}, "min_top1_agreement=-0.1"),
        ({"max_abs": float("nan")}, "max_abs=nan"),
        ({"num_images": 0}, "num_images=0"),
        ({"num_threads": 0}, "num_threads=0"),
        ({"runtimes": ()}, "runtimes=()"),
        ({"data": []}, r"data=\[\]"),
    ],
)
def test_verify_refuses_impossible_values(
    random_tflite_path, random_model, kwargs, message
):
    with pytest.raises(ValueError, match=message):
        export.verify(random_tflite_path, random_model, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"runs": 0}, "runs=0"),
        ({"warmup": -1}, "warmup=-1"),
        ({"threads": (0,)}, "threads=0"),
        ({"threads": ()}, r"threads=\(\)"),
        ({"quantizations": "int8"}, "quantizations='int8'"),
        ({"onnx": "yes"}, "onnx='yes'"),
        ({"output_dir": "no/such/folder"}, "output_dir='no/such/folder'"),
    ],
)
def test_benchmark_export_refuses_impossible_values(
    random_model, kwargs, message, monkeypatch
):
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    with pytest.raises(ValueError, match=message):
        export.benchmark_export(random_model, **{"tensorflow": False, **kwargs})


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--num-images", "0"],
            "argument --num-images: expected a positive integer, got '0'",
        ),
        (
            [
                "--num-calibration-images",
                "0",
                "--representative-data",
                "digits",
            ],
            "argument --num-calibration-images: expected a positive integer",
        ),
        (
            ["--min-top1-agreement", "nan"],
            "argument --min-top1-agreement: expected a number in [0, 1]",
        ),
        (
            ["--min-top1-agreement", "inf"],
            "expected a number in [0, 1], got 'inf'",
        ),
        (
            ["--image-size", "0"],
            "argument --image-size: expected a positive integer",
        ),
    ],
)
def test_export_flags_of_impossible_values(
    random_model_path, tmp_path, capsys, args, message
):
    with pytest.raises(SystemExit) as info:
        _cli(
            random_model_path,
            "--format",
            "tflite",
            "--output",
            tmp_path / "m.tflite",
            *args,
        )
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--image-size", "64"],
            "`image_size` applies to a builder, variant or preset name or a "
            "checkpoint, not to a .keras file",
        ),
        (
            ["--num-classes", "3"],
            "`num_classes` applies to a builder, variant or preset name or a "
            "checkpoint, not to a .keras file",
        ),
        (
            ["--num-calibration-images", "10"],
            "--num-calibration-images applies with --representative-data only",
        ),
        (
            ["--no-verify", "--num-images", "10"],
            "--num-images applies to the verification",
        ),
        (
            ["--no-verify", "--min-top1-agreement", "0.9"],
            "--min-top1-agreement applies to the verification",
        ),
        (
            ["--no-verify", "--verify-data", "digits"],
            "--verify-data applies to the verification",
        ),
        (
            ["--format", "saved_model", "--min-top1-agreement", "0.9"],
            "--min-top1-agreement applies to --format tflite only",
        ),
        (
            ["--format", "saved_model", "--representative-data", "digits"],
            "--representative-data applies to --format tflite only",
        ),
        (
            [
                "--format",
                "saved_model",
                "--batch-size",
                "dynamic",
            ],  # said "None"
            "--batch-size applies to --format tflite only (a SavedModel is not "
            "quantized, takes "
            "a dynamic batch and is held to max |Δ| limits). Received: "
            "--batch-size dynamic",
        ),
    ],
)
def test_export_flags_that_would_be_ignored_are_refused(
    random_model_path, tmp_path, capsys, monkeypatch, args, message
):
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    monkeypatch.setattr(
        saved_model_lib, "build_archive", lambda *a: pytest.fail("converted")
    )
    fmt = [] if "--format" in args else ["--format", "tflite"]
    assert _cli(random_model_path, *fmt, "--output", tmp_path / "m", *args) == 2
    assert f"keras-vit: error: {message}" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_verify_flags_for_a_saved_model_are_refused(
    random_model_path, tmp_path, capsys
):
    folder = tmp_path / "sm"
    folder.mkdir()
    code = cli.main(
        [
            "verify",
            str(folder),
            "--reference",
            random_model_path,
            "--runtimes",
            "xnnpack",
        ]
    )
    assert code == 2
    assert (
        "--runtimes applies to a .tflite file only" in capsys.readouterr().err
    )
    code = cli.main(["verify", str(folder), "--reference", random_model_path])
    assert code == 2
    assert "Not a SavedModel folder" in capsys.readouterr().err


def test_benchmark_export_flags_of_impossible_values(random_model_path, capsys):
    for args, message in [
        (["--runs", "0"], "argument --runs"),
        (["--threads", "1", "0"], "argument --threads"),
        (["--warmup", "-1"], "argument --warmup: expected an integer >= 0"),
    ]:
        with pytest.raises(SystemExit):
            cli.main(["benchmark-export", random_model_path, *args])
        assert message in capsys.readouterr().err
