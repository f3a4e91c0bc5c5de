"""`keras_vit.export.latency` (`benchmark-export`): its home, its programs,
and the old path `keras_vit.export.benchmark`."""

import importlib
import os
import subprocess
import sys

import pytest

from keras_vit import export
from keras_vit.export import latency


def test_the_old_module_path_still_works_and_says_where_it_went(monkeypatch):
    monkeypatch.delitem(sys.modules, "keras_vit.export.benchmark", raising=False)
    with pytest.warns(DeprecationWarning, match="keras_vit.export.latency"):
        old = importlib.import_module("keras_vit.export.benchmark")
    assert old.benchmark_export is latency.benchmark_export is export.benchmark_export
    for name in ("time_tflite", "time_onnx", "time_openvino", "format_table"):
        assert getattr(old, name) is getattr(latency, name)


def test_keras_vit_export_stays_below_the_benchmark_suite():
    # `keras-vit benchmark` (keras_vit.benchmark) times exports; export must
    # not import it back (the two `benchmark` modules imported each other).
    # Nor its own deprecated shim, `keras_vit.export.benchmark`.
    code = ("import sys; import keras_vit.export\n"
            "print(sorted(m for m in sys.modules\n"
            "             if m.startswith(('keras_vit.benchmark', 'keras_vit.export.benchmark'))))")
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_keras_and_the_saved_model_are_timed_by_their_program(random_model, capsys):
    # `keras_vit.export.tf_latency`, in a process of its own per thread count.
    rows = export.benchmark_export(random_model, quantizations=(), threads=(1,), runs=2,
                                   warmup=0, onnx=False, openvino=False)
    assert [(r["runtime"], r["variant"], r["threads"]) for r in rows] == [
        ("keras", "float32", 1), ("saved_model", "float32", 1)]
    assert all(0 < r["p50_ms"] <= r["p90_ms"] and r["bytes"] > 0 for r in rows), rows
    table = capsys.readouterr().out
    assert "saved_model" in table and "p90 ms" in table
