"""`keras-vit export / verify / benchmark-export`, the export/ scripts and
examples/tflite_inference.py."""

import json
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from keras_vit import cli
from keras_vit import export
from tests.export.helpers import tf_latency_stand_in
from tests.helpers import TEST_VARIANT

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.fixture(scope="module")
def cli_export(trained_model_path, tmp_path_factory):
    """`keras-vit export` of the trained digits model, dynamic-range int8."""
    folder = tmp_path_factory.mktemp("cli")
    labels = folder / "labels.txt"
    labels.write_text("".join(f"digit {d}\n" for d in range(10)))
    out = folder / "vit.tflite"
    code = cli.main(
        [
            "export",
            trained_model_path,
            "--format",
            "tflite",
            "--output",
            str(out),
            "--quantize",
            "dynamic",
            "--labels",
            str(labels),
            "--num-images",
            "50",
        ]
    )
    assert code == 0
    return out


def test_export_writes_a_verified_file_and_its_labels(cli_export, capsys):
    assert cli_export.exists()
    with open(cli_export.with_suffix(".json")) as file:
        meta = json.load(file)
    assert meta["class_names"][3] == "digit 3"
    assert meta["quantization"] == "dynamic"


@pytest.mark.parametrize(
    "fmt, name, needs",
    [
        ("onnx", "vit.onnx", ("tf2onnx", "onnxruntime")),
        ("openvino", "vit.xml", ("openvino",)),
    ],
)
def test_export_writes_onnx_and_openvino_with_their_labels(
    random_model_path, tmp_path, capsys, fmt, name, needs
):
    # `--format` took saved_model and tflite only: ONNX and OpenVINO were
    # written from Python alone.
    for module in needs:
        pytest.importorskip(module)
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"c{i}\n" for i in range(10)))
    out = tmp_path / name
    argv = ["export", random_model_path, "--format", fmt, "--output", str(out)]
    assert cli.main([*argv, "--labels", str(labels)]) == 0
    with open(tmp_path / "vit.json") as file:
        meta = json.load(file)
    assert meta["format"] == fmt and meta["class_names"][3] == "c3"
    assert f"wrote {out}" in capsys.readouterr().out
    # TFLite's quantization and image verification are refused up front.
    other = tmp_path / f"other{os.path.splitext(name)[1]}"
    quantized = ["--output", str(other), "--quantize", "dynamic"]
    assert cli.main([*argv[:4], *quantized]) == 2
    assert "--quantize applies to --format tflite only" in (
        capsys.readouterr().err
    )
    assert not other.exists()


def test_verify_command(cli_export, trained_model_path, capsys):
    code = cli.main(
        [
            "verify",
            str(cli_export),
            "--reference",
            trained_model_path,
            "--num-images",
            "20",
            "--runtimes",
            "xnnpack",
            "builtin",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "passed" in out and "top-1 agree" in out and "xnnpack" in out


def test_verify_command_fails_with_exit_2(
    cli_export, trained_model_path, capsys, monkeypatch
):
    # LiteRT returning NaN, as a file that lost its weights does.
    import numpy as np

    from keras_vit.export import runtime

    monkeypatch.setattr(
        runtime,
        "run_tflite",
        lambda path, images, *args: np.full(
            (len(images), 10), np.nan, "float32"
        ),
    )
    code = cli.main(
        [
            "verify",
            str(cli_export),
            "--reference",
            trained_model_path,
            "--num-images",
            "10",
            "--runtimes",
            "xnnpack",
        ]
    )
    assert code == 2
    assert "keras-vit: error: Verification failed" in capsys.readouterr().err


def test_export_script_and_builder_name(tmp_path, monkeypatch, capsys):
    # The export/ entry point, with a name instead of a file (the
    # registered tiny variant's, as a builder's name takes that path), run
    # as `python export/...` runs it, in this process.
    out = tmp_path / "ti.tflite"
    monkeypatch.chdir(tmp_path)
    argv = ["export_tflite.py", TEST_VARIANT, "--image-size", "32"]
    argv += ["--num-classes", "3", "--output", str(out), "--num-images", "4"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(
            os.path.join(ROOT, "export", "export_tflite.py"),
            run_name="__main__",
        )
    assert exit_.value.code == 0, capsys.readouterr().err[-3000:]
    assert out.exists() and (tmp_path / "ti.json").exists()
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "script, other",
    [("export_tflite.py", "saved_model"), ("export_saved_model.py", "tflite")],
)
@pytest.mark.parametrize("spelling", ["--format={}", "--form {}"])
def test_export_scripts_refuse_another_format(
    tmp_path, monkeypatch, capsys, script, other, spelling
):
    # argparse lets the last --format win: export_tflite.py --format
    # saved_model wrote a SavedModel without a word. The script runs as
    # `python export/...` runs it, in this process (a process of its own
    # took 4-5 s).
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    argv = [script, "model.keras", *spelling.format(other).split()]
    monkeypatch.setattr(sys, "argv", [*argv, "--output", str(out)])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(
            os.path.join(ROOT, "export", script), run_name="__main__"
        )
    assert exit_.value.code == 2
    assert f"Received: --format={other}" in capsys.readouterr().err
    assert not out.exists()


def test_tflite_inference_example_uses_litert_only(cli_export, tmp_path):
    from keras_vit.cli import predict
    from keras_vit.data.datasets import digits_arrays

    (_, _), (images, _) = digits_arrays()
    picture = tmp_path / "digit.png"
    # At the model's 32 px, so that no resizing differs from predict's.
    Image.fromarray(images[0]).resize((32, 32)).save(picture)
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['tflite_inference.py', {str(cli_export)!r}, "
        f"{str(picture)!r}]\n"
        "runpy.run_path("
        f"{os.path.join(ROOT, 'examples', 'tflite_inference.py')!r}, "
        "run_name='__main__')\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in "
        "sys.modules\n"
        "assert 'keras_vit' not in sys.modules\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    lines = process.stdout.strip().splitlines()
    assert len(lines) == 5
    printed = {line.split("  ", 1)[1]: float(line.split()[0]) for line in lines}
    # The five most probable digits with the probabilities that
    # `keras-vit predict` gives for the same file (printed to 4 places).
    predictor = predict.load_predictor(str(cli_export))
    (row,) = predictor.predict([str(picture)])
    order = np.argsort(-row, kind="stable")[:5]
    expected = {predictor.class_names[i]: float(row[i]) for i in order}
    assert list(printed) == list(expected)
    np.testing.assert_allclose(
        list(printed.values()), list(expected.values()), atol=6e-5
    )


def test_benchmark_export_prints_a_table(random_model, capsys):
    rows = export.benchmark_export(
        random_model,
        quantizations=("none", "dynamic"),
        threads=(1,),
        runs=3,
        warmup=1,
        tensorflow=False,
        onnx=False,
        openvino=False,
    )
    assert {(r["runtime"], r["variant"]) for r in rows} == {
        ("tflite (xnnpack)", "none"),
        ("tflite (xnnpack)", "dynamic"),
    }
    out = capsys.readouterr().out
    assert "p50 ms" in out and "p90 ms" in out


def test_benchmark_export_times_onnx_runtime_and_openvino_when_installed(
    random_model,
):
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    rows = export.benchmark_export(
        random_model,
        quantizations=("none",),
        threads=(1, 2),
        runs=3,
        warmup=1,
        tensorflow=False,
    )
    for runtime in ("onnxruntime", "openvino"):
        runtime_rows = [r for r in rows if r["runtime"] == runtime]
        assert [r["threads"] for r in runtime_rows] == [1, 2], runtime
        assert all(r["p50_ms"] > 0 and r["bytes"] > 0 for r in runtime_rows)


@pytest.mark.slow
def test_benchmark_export_command_with_keras_and_saved_model(
    random_model_path, capsys, monkeypatch
):
    # Keras and the SavedModel timed as test_latency.py times them for
    # real; ONNX Runtime and OpenVINO as the test above times them.
    tf_latency_stand_in(monkeypatch)
    code = cli.main(
        [
            "benchmark-export",
            random_model_path,
            "--quantize",
            "none",
            "--threads",
            "1",
            "--runs",
            "3",
            "--warmup",
            "1",
            "--onnx",
            "off",
            "--openvino",
            "off",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    for runtime in ("keras", "saved_model", "tflite (xnnpack)"):
        assert runtime in out


def test_sigterm_during_export_leaves_nothing_behind(
    random_model_path, tmp_path
):
    # `timeout` and `kill` send SIGTERM; the export's hidden temporary file
    # must go with the process, as it does on Ctrl-C.
    import signal
    import time

    out = tmp_path / "vit.tflite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_vit.cli",
            "export",
            random_model_path,
            "--format",
            "tflite",
            "--output",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not any(p.name.startswith(".") for p in tmp_path.iterdir()):
        assert proc.poll() is None, f"export ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, "no temporary file appeared"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("quiet", [False, True])
def test_verify_shows_its_runs_unless_quiet(
    random_tflite_path, random_model_path, capsys, quiet
):
    argv = [
        "verify",
        str(random_tflite_path),
        "--reference",
        random_model_path,
        "--num-images",
        "4",
        "--runtimes",
        "xnnpack",
        "builtin",
    ]
    assert cli.main(argv + (["--quiet"] if quiet else [])) == 0
    out = capsys.readouterr().out
    # Keras's progress bar: two runtimes on one image set.
    assert ("2/2" in out) is not quiet, out
    assert "passed" in out


def test_export_to_a_long_legal_name(random_model_path, tmp_path, capsys):
    # A 236-byte --output failed with "OSError: File name too long": the
    # temporary file beside it added about 35 bytes to its name.
    out = tmp_path / ("v" * 229 + ".tflite")
    # Unverified: the name is the claim (the temporary file is made all
    # the same).
    argv = ["export", random_model_path, "--format", "tflite", "--no-verify"]
    assert cli.main([*argv, "--output", str(out)]) == 0
    assert sorted(os.listdir(tmp_path)) == [
        out.with_suffix(".json").name,
        out.name,
    ]


def test_a_runs_export_is_verified_on_the_runs_own_data(
    random_model_path, tmp_path, capsys
):
    # The default was digits whatever the model; a training run's model is
    # checked on the run's dataset (its config.json), and says so.
    run = tmp_path / "run"
    photos = tmp_path / "photos"
    run.mkdir()
    photos.mkdir()
    for i in range(3):
        pixels = np.full((40, 40, 3), 60 * i, "uint8")
        Image.fromarray(pixels).save(photos / f"{i}.png")
    with open(run / "config.json", "w") as file:
        json.dump({"data": {"dataset": f"folder:{photos}"}}, file)
    with open(random_model_path, "rb") as file:
        (run / "model.keras").write_bytes(file.read())
    out = tmp_path / "vit.tflite"
    argv = ["export", str(run), "--format", "tflite", "--output", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"checked on folder:{photos}: 3 images" in printed
    assert "digits" not in printed
    with open(tmp_path / "vit.json") as file:
        assert [d["source"] for d in json.load(file)["verified_on"]] == [
            f"folder:{photos}"
        ]
    assert cli.main(["verify", str(out), "--reference", str(run)]) == 0
    assert f"checked on folder:{photos}: 3 images" in capsys.readouterr().out
