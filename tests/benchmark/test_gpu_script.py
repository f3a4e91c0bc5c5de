"""benchmarks/gpu_h200.py's CPU parts: its arguments, time budget, timing,
results files and wheel install, and a tiny run on Keras's JAX backend.

The script has not run on a GPU here; these tests run what a CPU can."""

import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile

import pytest

from tests.benchmark import SCRIPTS
from tests.benchmark import script as benchmark_script
from tests.helpers import backend_env

SCRIPT = os.path.join(SCRIPTS, "gpu_h200.py")


@pytest.fixture(scope="module")
def gpu():
    return benchmark_script("gpu_h200")


def test_arguments(gpu, capsys):
    args = gpu.parse_args([])
    assert (args.budget_s, args.wheels, args.tiny) == (450.0, None, False)
    assert args.out.endswith(os.path.join("benchmarks", "results"))
    args = gpu.parse_args(["--wheels", "w", "--budget-s", "60", "--tiny"])
    assert (args.wheels, args.budget_s, args.tiny) == ("w", 60.0, True)
    for bad, name in (
        (["--budget-s", "0"], "budget_s=0.0"),
        (["--steps", "0"], "steps=0"),
        (["--warmup", "0"], "warmup=0"),
    ):
        with pytest.raises(SystemExit):
            gpu.parse_args(bad)
        assert name in capsys.readouterr().err


def test_the_plan_fits_the_budget(gpu):
    # The plan's caps add up to less than 8 minutes with the budget's
    # default, and measurements the budget cannot start are skipped.
    assert gpu.parse_args([]).budget_s + gpu.GRACE_S < 8 * 60
    now = [0.0]
    given = []

    def runner(spec, timeout):
        given.append((spec["kind"], timeout))
        now[0] += timeout  # each takes all it is given
        return {"images_per_s": 1.0}

    plan = [({"kind": "a"}, 50), ({"kind": "b"}, 50), ({"kind": "c"}, 50)]
    results = gpu.run_plan(plan, 80, runner, clock=lambda: now[0])
    assert given == [("a", 50), ("b", 30)]
    assert results[0]["images_per_s"] == 1.0 and results[0]["wall_s"] == 50
    assert results[2] == {
        "kind": "c",
        "error": "skipped: time budget spent (80 s)",
    }
    # --tiny swaps the batches, --skip-timm drops timm's rows.
    tiny = gpu.plan_for(gpu.parse_args(["--tiny", "--skip-timm"]))
    assert {s["kind"] for s, _ in tiny} == {"parity", "matmul", "keras_vit"}
    assert sorted(s["batch"] for s, _ in tiny if "batch" in s) == [2, 4, 4]
    full = gpu.plan_for(gpu.parse_args([]))
    assert sorted(
        (s["kind"], s["mode"], s["batch"]) for s, _ in full if "batch" in s
    ) == sorted(
        (k, m, b)
        for k in ("keras_vit", "timm")
        for m, b in (("train", 64), ("train", 128), ("inference", 256))
    )


def test_time_calls_follows_the_rule_and_stops_at_the_deadline(gpu):
    calls = []
    fn = lambda: calls.append(time.sleep(0.001))  # noqa: E731
    times = gpu.time_calls(fn, 3, 2, 0.0, time.perf_counter() + 60)
    assert len(times) == 3 and len(calls) == 5
    calls.clear()
    times = gpu.time_calls(fn, 100, 1, 10.0, time.perf_counter() - 1)
    assert len(times) == 1 and len(calls) == 2
    assert gpu.rate_row(8, [0.5, 0.1, 0.2]) == {
        "images_per_s": 40.0,
        "timed_calls": 3,
    }


def _report(gpu):
    results = [
        {
            "kind": "parity",
            "max_abs_diff": {"float32": 1e-6},
            "max_abs_output": {"float32": 2.5},
        },
        {
            "kind": "matmul",
            "bf16_matmul_flops": 800e12,
            "flops_per_image": 35e9,
            "tiny": False,
            "machine": {"device": "NVIDIA H200", "jax": "0.7"},
        },
        {
            "kind": "keras_vit",
            "mode": "train",
            "batch": 64,
            "images_per_s": 3000.0,
            "peak_memory_mb": 20000.0,
            "fused_attention": True,
        },
        {
            "kind": "timm",
            "mode": "train",
            "batch": 64,
            "images_per_s": 2000.0,
            "peak_memory_mb": 25000.0,
            "fused_attention": True,
            "machine": {"torch": "2.9"},
        },
        {
            "kind": "timm",
            "mode": "inference",
            "batch": 256,
            "error": "timed out after 45 s",
        },
    ]
    gpu.add_shares(results)
    argv = ["--steps", "5", "--warmup", "2", "--skip-timm", "--out", "a b"]
    report = gpu.new_report(gpu.parse_args(argv), argv, results, 400.0)
    return {**report, "date": "2026-12-01"}


def test_the_report_records_the_command_and_every_argument(gpu):
    report = _report(gpu)
    assert report["command"] == (
        "python benchmarks/gpu_h200.py --steps 5 --warmup 2 --skip-timm "
        "--out 'a b'"
    )
    arguments = report["arguments"]
    assert (arguments["steps"], arguments["warmup"]) == (5, 2)
    assert (arguments["skip_timm"], arguments["out"]) == (True, "a b")
    # The defaults too: what was not given is recorded as it was taken.
    assert (arguments["min_seconds"], arguments["wheels"]) == (3.0, None)
    assert (arguments["budget_s"], arguments["tiny"]) == (450.0, False)
    assert "worker" not in arguments
    page = gpu.markdown(report)
    assert report["command"] in page
    assert "steps 5, warmup 2" in page and "min_seconds 3.0" in page
    assert "skip_timm True" in page and "wheels None" in page


def test_shares_of_the_peak(gpu):
    rows = _report(gpu)["results"]
    # 3 x 35 GFLOPs x 3000 images/s over 989.5 and 800 TFLOP/s.
    assert rows[2]["share_of_datasheet_peak"] == pytest.approx(
        3 * 35e9 * 3000 / 989.5e12
    )
    assert rows[2]["share_of_measured_peak"] == pytest.approx(
        3 * 35e9 * 3000 / 800e12
    )
    assert "share_of_datasheet_peak" not in rows[4]


def test_results_are_written_as_json_and_markdown(gpu, tmp_path):
    report = _report(gpu)
    paths = gpu.write_report(report, str(tmp_path / "results"))
    assert [os.path.basename(p) for p in paths] == [
        "2026-12-01-gpu-nvidia-h200.json",
        "2026-12-01-gpu-nvidia-h200.md",
    ]
    with open(paths[0]) as file:
        assert json.load(file) == report
    with open(paths[1]) as file:
        page = file.read()
    assert "# keras_vit and timm on NVIDIA H200, 2026-12-01" in page
    assert "float32 1.00e-06 (2.50e+00)" in page
    assert "| train, batch 64: images/s | 3000 | 2000 | 1.50 |" in page
    assert (
        "| train, batch 64: peak GPU memory, MB | 20000 | 25000 | 0.80 |"
        in page
    )
    assert "| train, batch 64: fused attention | True | True |  |" in page
    assert (
        "| inference, batch 256: images/s | n/a | n/a (timed out after 45 s) |"
        in page
    )
    # Nothing else is left there (no temporary files).
    assert set(os.listdir(tmp_path / "results")) == {
        os.path.basename(p) for p in paths
    }
    assert gpu.read_result('x\nRESULT {"a": 1}\n', "") == {"a": 1}
    assert gpu.read_result("", "Traceback\nValueError: bad") == {
        "error": "ValueError: bad"
    }


def _wheel(folder):
    """A minimal wheel of one module, `gpu_h200_probe`."""
    path = folder / "gpu_h200_probe-1.0-py3-none-any.whl"
    info = "gpu_h200_probe-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("gpu_h200_probe.py", "ANSWER = 42\n")
        wheel.writestr(
            f"{info}/METADATA",
            "Metadata-Version: 2.1\nName: gpu-h200-probe\nVersion: 1.0\n",
        )
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_wheels_are_installed_offline_into_the_target(gpu, tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with pytest.raises(ValueError, match="Received: wheels="):
        gpu.install_wheels(str(wheels), str(tmp_path / "site"))
    _wheel(wheels)
    site = gpu.install_wheels(str(wheels), str(tmp_path / "site"))
    env = gpu.worker_env(site)
    assert env["KERAS_BACKEND"] == "jax"
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [site, gpu.ROOT]
    probe = subprocess.run(
        [sys.executable, "-c", "import gpu_h200_probe as p; print(p.ANSWER)"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert probe.stdout.strip() == "42", probe.stderr


#: Runs the script (`sys.argv[1]`) on the arguments after it as its
#: `__main__` would, each measurement's deadline `GRACE_S` = 29 s before
#: its cap instead of 20: the matmul probe times rounds until its deadline
#: (10 s of its 30 s cap; 1 s here), and its figure is no claim of the
#: test below.
SHORT_MATMUL = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gpu_h200", sys.argv[1])
gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu)
gpu.GRACE_S = 29
sys.exit(gpu.main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_a_tiny_run_on_the_jax_backend(tmp_path):
    # Every measurement, on a CPU, in processes of their own, where
    # TensorFlow cannot be imported (as on the GPU machine): keras_vit's
    # rows are figures; timm's, where torch is not installed, errors.
    pytest.importorskip("jax")
    (tmp_path / "block" / "tensorflow").mkdir(parents=True)
    (tmp_path / "block" / "tensorflow" / "__init__.py").write_text(
        "raise ImportError('the GPU script imported tensorflow')\n"
    )
    env = backend_env("jax", PYTHONPATH=str(tmp_path / "block"))
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            SHORT_MATMUL,
            SCRIPT,
            "--tiny",
            "--out",
            str(tmp_path),
            "--budget-s",
            "300",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--min-seconds",
            "0.05",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    (json_path,) = tmp_path.glob("*.json")
    assert "imported tensorflow" not in json_path.read_text()
    report = json.loads(json_path.read_text())
    rows = {
        (r["kind"], r.get("mode"), r.get("batch")): r for r in report["results"]
    }
    assert report["machine"]["device"] == "cpu"
    # On a CPU "the GPU" is the CPU itself: the same outputs, of a model
    # whose logits differ (a zero head would make any two devices agree).
    parity = rows[("parity", None, None)]
    assert max(parity["max_abs_diff"].values()) < 1e-5
    assert min(parity["max_abs_output"].values()) > 0.1, parity
    assert rows[("matmul", None, None)]["bf16_matmul_flops"] > 0
    for mode, batch in (("train", 2), ("train", 4), ("inference", 4)):
        row = rows[("keras_vit", mode, batch)]
        assert row["images_per_s"] > 0 and row["share_of_measured_peak"] > 0
        # keras.ops.dot_product_attention in every step (cuDNN's flash
        # attention on a GPU).
        assert row["fused_attention"] is True, row
        timm = rows[("timm", mode, batch)]
        if not all(map(importlib.util.find_spec, ("torch", "timm"))):
            assert "No module named" in timm["error"], timm
        else:
            assert timm["images_per_s"] > 0, timm
    assert (tmp_path / json_path.name.replace(".json", ".md")).exists()


def test_the_rate_rows_model_gives_logits(gpu, monkeypatch):
    # The training step's loss takes logits (from_logits=True) and timm's
    # model gives logits: a softmax head would train on probabilities
    # taken for logits and add a softmax timm does not run.
    pytest.importorskip("jax")
    import keras
    import numpy as np

    # _keras_vit_rate counts keras.ops.dot_product_attention's calls by
    # replacing it: the original is put back after the test.
    monkeypatch.setattr(
        keras.ops, "dot_product_attention", keras.ops.dot_product_attention
    )
    built, original = [], gpu._vit

    class Built(Exception):
        pass

    def vit(*args, **kwargs):
        built.append(original(*args, **kwargs))
        raise Built

    monkeypatch.setattr(gpu, "_vit", vit)
    job = {"tiny": True, "mode": "train", "batch": 2}
    with pytest.raises(Built):
        gpu._keras_vit_rate(job, time.perf_counter() + 60)
    (model,) = built
    rng = np.random.default_rng(0)
    for variable in model.trainable_variables:  # a zero head is not enough
        variable.assign(variable.numpy() + rng.normal(0, 0.5, variable.shape))
    images = rng.uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    out = np.asarray(model(images, training=False), "float32")
    assert out.shape == (2, gpu.TINY["num_classes"])
    assert not np.allclose(out.sum(-1), 1.0, atol=1e-2), out.sum(-1)
    assert out.min() < 0, out
