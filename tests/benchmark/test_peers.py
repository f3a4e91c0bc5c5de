"""The peers of `keras-vit benchmark`; timm's program, run by its path.

The timm tests run `keras_vit/benchmark/peers/timm_peer.py` with stand-ins
for torch and timm, in an interpreter where neither keras_vit nor
TensorFlow can be imported: as with `--timm-python ~/torch-env/bin/python`.
"""

import importlib.util
import os
import subprocess
import sys

import measurement
import pytest
import suite
from peers import timm_runner

from keras_vit import timing
from tests.benchmark import SCRIPTS

# Stand-ins for torch and timm, enough for timm_peer.py: the model's calls
# take the seconds listed in $FAKE_TIMM_SLEEPS, in turn, and each call is
# logged to $FAKE_TIMM_LOG.
_FAKE_TORCH = """
import contextlib, os, time, types
__version__ = "fake"
_sleeps = [float(s) for s in os.environ["FAKE_TIMM_SLEEPS"].split(",")]
def set_num_threads(n): pass
def _log_cast(what, dtype):
    if os.environ.get("FAKE_TIMM_CAST_LOG"):
        with open(os.environ["FAKE_TIMM_CAST_LOG"], "a") as log:
            log.write(f"{what} {dtype}\\n")
class _Images(tuple):
    def to(self, dtype):
        _log_cast("images", dtype)
        return self
def rand(*shape):
    if os.environ.get("FAKE_TIMM_SHAPE_LOG"):
        with open(os.environ["FAKE_TIMM_SHAPE_LOG"], "a") as log:
            log.write(f"{shape}\\n")
    return _Images(shape)
def randint(low, high, shape): return shape
inference_mode = contextlib.nullcontext
float32, bfloat16, float16 = "float32", "bfloat16", "float16"
def autocast(device, dtype, enabled):
    if os.environ.get("FAKE_TIMM_AUTOCAST_LOG"):
        with open(os.environ["FAKE_TIMM_AUTOCAST_LOG"], "a") as log:
            log.write(f"{device} {dtype} {enabled}\\n")
    return contextlib.nullcontext()
class _Loss:
    def backward(self):
        with open(os.environ["FAKE_TIMM_LOG"], "a") as log:
            log.write("backward\\n")
class _AdamW:
    def __init__(self, parameters, lr): pass
    def zero_grad(self): pass
    def step(self): pass
optim = types.SimpleNamespace(AdamW=_AdamW)
nn = types.SimpleNamespace(functional=types.SimpleNamespace(
    cross_entropy=lambda outputs, labels: _Loss()))
class Model:
    calls = 0
    def eval(self): pass
    def train(self): pass
    def to(self, dtype):
        _log_cast("model", dtype)
        return self
    def parameters(self): return []
    def __call__(self, x):
        seconds = _sleeps[min(Model.calls, len(_sleeps) - 1)]
        if os.environ.get("FAKE_TIMM_SPIN"):  # busy, as OpenMP threads spin
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(seconds)
        Model.calls += 1
        with open(os.environ["FAKE_TIMM_LOG"], "a") as log:
            log.write("call\\n")
"""


@pytest.fixture
def fake_timm(tmp_path, monkeypatch):
    """The stand-ins alone on PYTHONPATH, with a keras_vit and a tensorflow
    that refuse to be imported; returns the file each call is logged to."""
    (tmp_path / "torch.py").write_text(_FAKE_TORCH)
    (tmp_path / "timm.py").write_text(
        "from torch import Model\n__version__ = 'fake'\n"
        "import os\n"
        "def create_model(name, pretrained, num_classes, img_size):\n"
        "    if os.environ.get('FAKE_TIMM_SHAPE_LOG'):\n"
        "        with open(os.environ['FAKE_TIMM_SHAPE_LOG'], 'a') as log:\n"
        "            log.write(f'{name} img_size={img_size}\\n')\n"
        "    return Model()\n"
    )
    for name in ("keras_vit", "tensorflow"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ImportError('the timm peer imported {name}')\n"
        )
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("FAKE_TIMM_LOG", str(log))
    return log


def test_timm_runs_in_the_given_interpreter(tmp_path):
    # A stand-in "python" that records its arguments and answers like the
    # timm peer: the suite must hand it timm's model name and the mode.
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/args\n'
        'echo \'RESULT {"images_per_s": 3.0, "peak_memory_mb": 1.0}\'\n'
    )
    fake.chmod(0o755)
    row = suite.measure_in_subprocess(
        peer="timm",
        variant="ViT_S16",
        mode="train",
        batch_size=8,
        timm_python=str(fake),
    )
    assert row == {"images_per_s": 3.0, "peak_memory_mb": 1.0}
    args = (tmp_path / "args").read_text().split()
    assert args[-8:] == [
        "vit_small_patch16_224",
        "train",
        "8",
        "5",
        "2",
        "1.0",
        "float32",
        "224",
    ]
    # The program is a file of the installed package, run by its path (not
    # `-c` with a string, nor `-m`, which would import keras_vit).
    assert args == [timm_runner.PROGRAM, *args[-8:]]
    # --image-size reaches timm too (it builds its model at that size).
    suite.measure_in_subprocess(
        peer="timm",
        variant="ViT_S16",
        mode="inference",
        batch_size=1,
        image_size=384,
        timm_python=str(fake),
    )
    assert (tmp_path / "args").read_text().split()[-1] == "384"
    # The program is the checkout's, beside the suite.
    assert os.path.isfile(args[0])
    assert os.path.commonpath([args[0], SCRIPTS]) == SCRIPTS
    missing = suite.measure_in_subprocess(
        peer="timm",
        variant="Ti/16",
        mode="inference",
        batch_size=1,
        timm_python=str(tmp_path / "no_python"),
    )
    assert "error" in missing


def test_timm_runs_without_keras_vit_or_tensorflow(fake_timm, monkeypatch):
    # The interpreter of the fixture cannot import either ...
    for name in ("keras_vit", "tensorflow"):
        blocked = subprocess.run(
            [sys.executable, "-c", f"import {name}"],
            capture_output=True,
            text=True,
            cwd=fake_timm.parent,
        )
        assert f"the timm peer imported {name}" in blocked.stderr
    # ... and the peer, inference and training, runs there all the same.
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0")
    for mode in ("inference", "train"):
        row = timm_runner.measure(
            "Ti/16", mode, 2, steps=2, warmup=1, python=sys.executable
        )
        assert row["images_per_s"] > 0 and row["peak_memory_mb"] > 0, row
        assert row["version"] == "torch fake, timm fake"
    # Training steps call backward: 1 warm-up and 2 timed steps.
    assert fake_timm.read_text().split().count("backward") == 3


def test_timm_builds_its_model_and_inputs_at_the_image_size(
    fake_timm, tmp_path, monkeypatch
):
    shapes = tmp_path / "shapes.log"
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0")
    monkeypatch.setenv("FAKE_TIMM_SHAPE_LOG", str(shapes))
    row = timm_runner.measure(
        "B/16",
        "train",
        2,
        steps=1,
        warmup=0,
        python=sys.executable,
        image_size=384,
    )
    assert "images_per_s" in row, row
    assert shapes.read_text().splitlines() == [
        "vit_base_patch16_224 img_size=384",
        "(2, 3, 384, 384)",
    ]


def test_timm_is_timed_by_the_same_rule(fake_timm, monkeypatch):
    # The median call, as for every other peer: one stalled call out of five
    # does not move timm's figure either (the mean, 0.116 s, would give 34
    # images/s; the bound leaves the 20 ms sleeps room to overshoot).
    log = fake_timm
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0,0.02,0.02,0.5,0.02,0.02")
    row = timm_runner.measure(
        "Ti/16", "inference", 4, steps=5, warmup=1, python=sys.executable
    )
    assert 4 / 0.08 < row["images_per_s"] <= 4 / 0.02, row
    assert len(log.read_text().split()) == 1 + 5
    # With min_seconds, calls continue past `steps` until they add up to
    # it (0.3 s of calls of at least 20 ms: at most 15 timed calls).
    log.unlink()
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0.02")
    timm_runner.measure(
        "Ti/16",
        "inference",
        4,
        steps=2,
        warmup=1,
        python=sys.executable,
        min_seconds=0.3,
    )
    assert 1 + 2 < len(log.read_text().split()) <= 1 + 15


def test_peers_compute_in_the_suites_dtype(fake_timm, tmp_path, monkeypatch):
    # --dtype mixed_bfloat16: timm runs under bfloat16 autocast (float32
    # weights, as Keras's mixed precision); --dtype bfloat16: timm's model
    # and images in bfloat16, nothing autocast (as a Keras model whose
    # variables are bfloat16); ONNX Runtime, which has no bfloat16 kernels,
    # is not timed; a float32 suite casts nothing.
    autocast = tmp_path / "autocast.log"
    casts = tmp_path / "casts.log"
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0")
    monkeypatch.setenv("FAKE_TIMM_AUTOCAST_LOG", str(autocast))
    monkeypatch.setenv("FAKE_TIMM_CAST_LOG", str(casts))
    # (policy, the autocast call, the dtype model and images are cast to)
    for dtype, expected, converted in (
        ("mixed_bfloat16", "cpu bfloat16 True", None),
        ("bfloat16", "cpu bfloat16 False", "bfloat16"),
        ("mixed_float16", "cpu float16 True", None),
        ("float16", "cpu float16 False", "float16"),
        (None, "cpu float32 False", None),
    ):
        cast = (
            set()
            if converted is None
            else {
                f"model {converted}",
                f"images {converted}",
            }
        )
        row = suite.measure_in_subprocess(
            peer="timm",
            variant="Ti/16",
            mode="inference",
            batch_size=1,
            steps=2,
            warmup=0,
            min_seconds=0,
            dtype=dtype,
            timm_python=sys.executable,
        )
        assert "images_per_s" in row, row
        assert set(autocast.read_text().splitlines()) == {expected}
        autocast.unlink()
        made = set(casts.read_text().splitlines()) if casts.exists() else set()
        assert made == cast, dtype
        casts.unlink(missing_ok=True)
    row = suite.measure_in_subprocess(
        peer="onnxruntime",
        variant="Ti/16",
        mode="inference",
        batch_size=1,
        dtype="mixed_bfloat16",
    )
    assert row == {"error": measurement.ONNX_FLOAT32_ONLY}


def test_measure_in_this_process_gives_timm_the_policy(
    fake_timm, tmp_path, monkeypatch
):
    # `keras_vit.measurement.measure(peer="timm")` runs the same program, in
    # this interpreter, with the suite's dtype policy.
    casts = tmp_path / "casts.log"
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0")
    monkeypatch.setenv("FAKE_TIMM_CAST_LOG", str(casts))
    row = measurement.measure(
        peer="timm",
        variant="Ti/16",
        mode="inference",
        batch_size=1,
        steps=1,
        warmup=0,
        min_seconds=0,
        dtype="bfloat16",
    )
    assert "images_per_s" in row, row
    assert set(casts.read_text().splitlines()) == {
        "model bfloat16",
        "images bfloat16",
    }


def test_cores_busy_tells_sleeping_from_spinning(fake_timm, monkeypatch):
    # CPU time over wall time while the calls ran: a model that sleeps keeps
    # no core busy, one that spins keeps one.
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0.05")
    measure = lambda: timm_runner.measure(  # noqa: E731
        "Ti/16", "inference", 1, steps=6, warmup=1, python=sys.executable
    )
    sleeping = measure()["cores_busy"]
    monkeypatch.setenv("FAKE_TIMM_SPIN", "1")
    spinning = measure()["cores_busy"]
    # (~0.01 and ~1.0 on a quiet machine; a loaded one, e.g. other test
    # workers on both cores, gives the spinner only a share of a core, so
    # its bound is relative to the sleeper's.)
    assert 0 <= sleeping < 0.1, (sleeping, spinning)
    assert max(0.1, 5 * sleeping) < spinning <= 1.2, (sleeping, spinning)
    row = suite._row(
        ("Ti/16", 224, 197, 1e9, "timm", "inference", 1),
        [{"images_per_s": 20.0, "peak_memory_mb": 1.0, "cores_busy": 1.5}],
        1e11,
    )
    assert "1.50 cores busy" in suite._format_row(row)


def test_a_variant_timm_lacks_is_an_error_row():
    assert timm_runner.measure("B/8x", "inference", 1, 1, 0) == {
        "error": "no timm model for B/8x"
    }


def _timm_peer():
    """timm_peer.py loaded by its path, as a module of its own."""
    spec = importlib.util.spec_from_file_location(
        "timm_peer", timm_runner.PROGRAM
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timm_peer_checks_its_arguments_where_torch_is_absent():
    # Its own logic, arguments and result line, loads and runs without
    # torch or timm: they are imported where the model is made.
    peer = _timm_peer()
    assert not hasattr(peer, "torch") and not hasattr(peer, "timm")
    args = peer.parse_args(
        [
            "vit_tiny_patch16_224",
            "train",
            "8",
            "5",
            "2",
            "1.0",
            "mixed_bfloat16",
            "384",
        ]
    )
    assert args == {
        "name": "vit_tiny_patch16_224",
        "mode": "train",
        "batch": 8,
        "steps": 5,
        "warmup": 2,
        "min_seconds": 1.0,
        "dtype_policy": "mixed_bfloat16",
        "image_size": 384,
    }
    good = ["vit", "inference", "1", "1", "0", "0", "float32", "224"]
    for index, bad, name in (
        (1, "eval", "mode"),
        (2, "0", "batch"),
        (3, "x", "steps"),
        (4, "-1", "warmup"),
        (5, "nan", "min_seconds"),
        (6, "float64", "dtype_policy"),
        (6, "mixed_float64", "dtype_policy"),
        (7, "0", "image_size"),
    ):
        argv = [*good[:index], bad, *good[index + 1 :]]
        with pytest.raises(ValueError, match=f"Received: {name}='{bad}'"):
            peer.parse_args(argv)
    with pytest.raises(ValueError, match="expected 8 arguments"):
        peer.parse_args(good[:7])


def test_the_timm_peers_result_is_what_the_suite_reads(capsys):
    peer = _timm_peer()
    row = peer.result(4, 0.5, 1.5, 100.0, (("torch", "2.5"), ("timm", "1.0")))
    assert row == {
        "images_per_s": 8.0,
        "peak_memory_mb": 100.0,
        "cores_busy": 1.5,
        "version": "torch 2.5, timm 1.0",
    }
    timing.print_result(row)
    printed = subprocess.CompletedProcess(
        [], 0, stdout=capsys.readouterr().out, stderr=""
    )
    assert timing.read_result(printed) == row


def test_a_bad_argument_to_the_timm_peer_is_its_rows_error(tmp_path):
    # Run by its path where torch is absent (a torch that refuses stands
    # first on the path): the argument is refused before torch is needed.
    (tmp_path / "torch.py").write_text("raise ImportError('imported torch')\n")
    process = subprocess.run(
        [
            sys.executable,
            timm_runner.PROGRAM,
            "vit",
            "eval",
            "1",
            "1",
            "0",
            "0",
            "float32",
            "224",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert timing.read_result(process)["error"].startswith(
        "ValueError: `mode` must be one of ['inference', 'train']. Received: "
        "mode='eval'"
    )


def test_the_timm_peer_times_a_real_timm_model():
    # Where torch and timm are installed: the program with the real ones.
    pytest.importorskip("torch")
    pytest.importorskip("timm")
    row = timm_runner.measure(
        "Ti/16",
        "inference",
        1,
        steps=1,
        warmup=0,
        python=sys.executable,
        min_seconds=0.0,
    )
    assert row["images_per_s"] > 0 and row["peak_memory_mb"] > 0, row
    assert row["version"].startswith("torch ") and ", timm " in row["version"]
