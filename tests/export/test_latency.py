"""`keras_vit.export.latency` (`benchmark-export`): its home, its programs;
and the export's other program run by path, `verify_saved_model`'s reload
check."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keras_vit
from keras_vit import export
from keras_vit.export import verification


def test_keras_vit_export_stays_below_the_benchmark_suite():
    # keras_vit.benchmark reads an export's input spec; export must not
    # import it back (the two `benchmark` modules imported each other).
    code = (
        "import sys; import keras_vit.export\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.startswith('keras_vit.benchmark')))"
    )
    process = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_keras_and_the_saved_model_are_timed_by_their_program(
    random_model, capsys
):
    # `keras_vit.export.tf_latency`, in a process of its own per thread count.
    rows = export.benchmark_export(
        random_model,
        quantizations=(),
        threads=(1,),
        runs=2,
        warmup=0,
        onnx=False,
        openvino=False,
    )
    assert [(r["runtime"], r["variant"], r["threads"]) for r in rows] == [
        ("keras", "float32", 1),
        ("saved_model", "float32", 1),
    ]
    assert all(
        0 < r["p50_ms"] <= r["p90_ms"] and r["bytes"] > 0 for r in rows
    ), rows
    table = capsys.readouterr().out
    assert "saved_model" in table and "p90 ms" in table


@pytest.mark.slow
def test_bad_representative_data_fails_before_any_export(
    random_model, tmp_path
):
    # It failed at the first calibrated variant, after the others had been
    # converted and written to output_dir.
    (tmp_path / "out").mkdir()
    with pytest.raises(ValueError, match="representative_data"):
        export.benchmark_export(
            random_model,
            quantizations=("none", "float16", "int8"),
            representative_data="folder:" + str(tmp_path / "no_such_folder"),
            output_dir=tmp_path / "out",
            tensorflow=False,
            onnx=False,
            openvino=False,
        )
    assert os.listdir(tmp_path / "out") == []


def test_the_saved_model_check_runs_without_keras_vit(random_model, tmp_path):
    # verify_saved_model's program, run by its path where keras_vit cannot
    # be imported at all (a keras_vit that refuses stands first on the path).
    export.export_saved_model(random_model, tmp_path / "sm", verify=False)
    poison = tmp_path / "path" / "keras_vit"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text(
        "raise ImportError('imported keras_vit')\n"
    )
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (17, 32, 32, 3))
        .astype("float32")
    )
    np.save(tmp_path / "images.npy", images)
    program = verification._SAVED_MODEL_CHECK
    package = os.path.dirname(os.path.abspath(keras_vit.__file__))
    assert (
        os.path.commonpath([program, package]) == package
    )  # installed with the wheel
    process = subprocess.run(
        [
            sys.executable,
            program,
            str(tmp_path / "sm"),
            str(tmp_path / "images.npy"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(
            os.environ, PYTHONPATH=str(poison.parent), TF_CPP_MIN_LOG_LEVEL="2"
        ),
    )
    assert process.returncode == 0, process.stderr[-3000:]
    info = json.loads(process.stdout.strip().splitlines()[-1])
    assert info["keras_vit_imported"] is False
    assert info["signatures"] == [
        "serving_bytes",
        "serving_default",
        "serving_uint8",
    ]
    expected = random_model.predict(images, verbose=0)
    with np.load(tmp_path / "out.npz") as out:
        # 17 images: a batch of 16 and one of 1, and one image alone.
        np.testing.assert_allclose(out["serving_default"], expected, atol=1e-5)
        np.testing.assert_allclose(
            out["serving_default_single"], expected[:1], atol=1e-5
        )
        rounded = random_model.predict(np.round(images), verbose=0)
        np.testing.assert_allclose(out["serving_uint8"], rounded, atol=1e-5)
        # The same pixels as PNG files, at the model's size: squashed onto
        # the same size, they come back as they were.
        np.testing.assert_allclose(out["serving_bytes"], rounded, atol=1e-5)
