"""keras_vit.timing: the one rule every benchmark times by."""

import os
import subprocess
import sys

import numpy as np
import pytest

import keras_vit
from keras_vit import timing


def test_a_killed_measurement_says_so():
    proc = subprocess.CompletedProcess(
        ["python"], -9, stdout="", stderr="FutureWarning: x\n"
    )
    assert "killed by signal 9" in timing.read_result(proc)["error"]
    proc = subprocess.CompletedProcess(
        ["python"], 1, stdout="", stderr="ValueError: bad\n"
    )
    assert timing.read_result(proc)["error"] == "ValueError: bad"
    proc = subprocess.CompletedProcess(
        ["python"], 0, stdout='noise\nRESULT {"a": 1}\n', stderr=""
    )
    assert timing.read_result(proc) == {"a": 1}


class _FakeClock:
    """`time` for `timing.latencies`: each call of `fn` takes `tick` s,
    and `cores` CPU seconds per second of it."""

    def __init__(self, tick, cores=1.0):
        self.now, self.cpu, self.tick, self.cores = 0.0, 0.0, tick, cores

    def perf_counter(self):
        return self.now

    def process_time(self):
        return self.cpu

    def call(self):
        self.now += self.tick
        self.cpu += self.tick * self.cores


def test_latencies_time_at_least_steps_calls_and_min_seconds(monkeypatch):
    clock = _FakeClock(0.01)
    monkeypatch.setattr(timing, "time", clock)
    assert len(timing.latencies(clock.call, steps=3, warmup=2)) == 3
    # 0.25 s of 10 ms calls: 25 timed calls, not `steps`, and no more.
    times = timing.latencies(clock.call, steps=3, warmup=2, min_seconds=0.25)
    assert len(times) == 25 and sum(times) == pytest.approx(0.25)
    # A slow call still runs `steps` times.
    clock.tick = 2.0
    assert (
        len(timing.latencies(clock.call, steps=3, warmup=0, min_seconds=1.0))
        == 3
    )
    assert timing.median_seconds(
        clock.call, steps=3, warmup=0
    ) == pytest.approx(2.0)
    # Cores busy counts the timed calls only, not the warm-up.
    clock.tick, rates = 0.01, iter([0.0, 0.0] + [1.5] * 10)

    def call():
        clock.cores = next(rates)  # idle while warming up, then 1.5 cores
        clock.call()

    seconds, cores = timing.seconds_and_cores(call, steps=3, warmup=2)
    assert seconds == pytest.approx(0.01) and cores == pytest.approx(1.5)


@pytest.mark.parametrize(
    "values",
    [
        [3.0],
        [5.0, 1.0],
        [4.0, 1.0, 3.0, 2.0],
        list(np.random.default_rng(0).exponential(size=51)),
    ],
)
def test_percentiles_are_numpys(values):
    # benchmark-export's p50 / p90 were np.percentile's (linear) before
    # they moved here, where the timm peer, without NumPy, can use them.
    for q in (0, 10, 50, 90, 100):
        assert timing.percentile(values, q) == pytest.approx(
            np.percentile(values, q), rel=1e-12
        )
    with pytest.raises(ValueError, match="values"):
        timing.percentile([], 50)


def test_it_runs_without_keras_vit(tmp_path):
    # The timm peer loads timing.py by its path in an interpreter that may
    # lack TensorFlow: it must import nothing of keras_vit. A keras_vit that
    # cannot be imported stands first on the path.
    (tmp_path / "keras_vit").mkdir()
    (tmp_path / "keras_vit" / "__init__.py").write_text(
        "raise ImportError('imported keras_vit')\n"
    )
    path = os.path.join(os.path.dirname(keras_vit.__file__), "timing.py")
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('t', {path!r})\n"
        "t = importlib.util.module_from_spec(spec); "
        "spec.loader.exec_module(t)\n"
        "t.print_result({'median': t.percentile(t.latencies(lambda: None, 3, "
        "1), 50),\n"
        "                'tensorflow': 'tensorflow' in sys.modules})\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert process.returncode == 0, process.stderr
    result = timing.read_result(process)
    assert result["median"] >= 0 and result["tensorflow"] is False
