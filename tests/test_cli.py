import os
import subprocess
import sys

import pytest

import keras_vit
from keras_vit import benchmark
from keras_vit import cli
from tests.test_case import TINY


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
        [sys.executable, "-c", "from keras_vit.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert keras_vit.__version__ in result.stdout


def test_benchmark_measures(capsys):
    model = keras_vit.ViT(**TINY)
    result = benchmark.benchmark(model, batch_size=2, steps=2, warmup=1, train=True)
    assert result["inference_images_per_s"] > 0
    assert result["train_images_per_s"] > 0
    assert cli.main(
        ["benchmark", "--model", "ViT_Ti16", "--image-size", "32",
         "--batch-size", "2", "--train-batch-size", "2", "--steps", "1",
         "--warmup", "1", "--min-seconds", "0", "--train", "--remat"]
    ) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out
    rows = [line for line in out.splitlines() if "images/s" in line]
    assert len(rows) == 2 and all("% of peak" in r and "MB peak" in r for r in rows)
    assert all("cores busy" in r for r in rows)
    for key in ("inference_cores_busy", "train_cores_busy"):
        assert 0 < result[key] <= os.cpu_count() + 0.5, result


def test_flop_count_matches_the_known_figures():
    import keras

    with keras.StatelessScope(initialize_variables=False):
        b16 = keras_vit.ViT_B16()
        r50 = keras_vit.ViT_R50_B16()
    assert benchmark.model_flops(b16) / 1e9 == pytest.approx(35.1, abs=0.05)
    # timm reports 16.9 GMACs for the backbone... the hybrid adds its ResNet.
    assert benchmark.model_flops(r50) > benchmark.model_flops(b16)


def test_failing_peers_are_reported_not_fatal():
    row = benchmark.measure_in_subprocess(
        peer="no_such_peer", variant="Ti/16", mode="inference", batch_size=1)
    assert "peer='no_such_peer'" in row["error"]


def test_timm_runs_in_the_given_interpreter(tmp_path):
    # A stand-in "python" that records its arguments and answers like the
    # timm script: the suite must hand it timm's model name and the mode.
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo \"$@\" > {tmp_path}/args\n"
        "echo 'RESULT {\"images_per_s\": 3.0, \"peak_memory_mb\": 1.0}'\n"
    )
    fake.chmod(0o755)
    row = benchmark.measure_in_subprocess(
        peer="timm", variant="ViT_S16", mode="train", batch_size=8, timm_python=str(fake))
    assert row == {"images_per_s": 3.0, "peak_memory_mb": 1.0}
    args = (tmp_path / "args").read_text().split()
    assert args[-7:] == ["vit_small_patch16_224", "train", "8", "5", "2", "1.0", "float32"]
    missing = benchmark.measure_in_subprocess(
        peer="timm", variant="Ti/16", mode="inference", batch_size=1,
        timm_python=str(tmp_path / "no_python"))
    assert "error" in missing


def test_bad_model_name_is_a_clear_error(capsys):
    assert cli.main(["benchmark", "--model", "ViT_X"]) == 2
    assert "variant='ViT_X'" in capsys.readouterr().err


def test_profile_times_every_part(capsys, monkeypatch):
    # Two blocks instead of twelve: the parts printed do not depend on the
    # depth, and compiling a 12-block training step took most of a minute.
    from keras_vit import variants

    monkeypatch.setitem(variants.VARIANTS, "Ti/16",
                        {**variants.VARIANTS["Ti/16"], "num_layers": 2})
    assert cli.main(["benchmark", "--model", "Ti/16", "--image-size", "32",
                     "--batch-size", "2", "--steps", "1", "--warmup", "1",
                     "--min-seconds", "0", "--profile"]) == 0
    out = capsys.readouterr().out
    for part in ("forward, XLA off", "training step", "strided Conv2D",
                 "dot_product_attention", "MultiHeadAttention", "tf.data pipeline"):
        assert part in out
    assert "(x2 blocks)" in out


def test_auto_xla_times_inference_both_ways_and_reports_which(monkeypatch):
    # "auto" keeps the faster of XLA on / off for inference (neither wins
    # at every size on a CPU) and says which; training uses XLA.
    assert benchmark._jit_choices("auto", "inference") == (False, True)
    assert benchmark._jit_choices("auto", "train") == (True,)
    assert benchmark._jit_choices(False, "inference") == (False,)
    # Training as `keras-vit train` runs it: not XLA for bfloat16 on a CPU.
    assert benchmark._jit_choices("auto", "train", "mixed_bfloat16", "cpu") == (False,)
    assert benchmark._jit_choices("auto", "train", "mixed_bfloat16", "gpu") == (True,)
    row = benchmark.measure(peer="keras_vit", variant="Ti/16", mode="inference",
                            batch_size=1, steps=1, warmup=1, image_size=32)
    assert row["xla"] in (True, False) and row["images_per_s"] > 0
    # Whichever setting is faster is the one reported, with its rate.
    for faster in (True, False):
        rates = {faster: 7.0, not faster: 5.0}
        monkeypatch.setattr(
            benchmark, "benchmark",
            lambda *a, jit_compile, **k: {"inference_images_per_s": rates[jit_compile],
                                          "inference_cores_busy": rates[jit_compile] / 10})
        row = benchmark.measure(peer="keras_vit", variant="Ti/16", mode="inference",
                                batch_size=1, image_size=32)
        # ... and the cores busy of that same measurement.
        assert (row["xla"], row["images_per_s"], row["cores_busy"]) == (faster, 7.0, 0.7)
    line = benchmark._format_row({"variant": "Ti/16", "peer": "keras_vit",
                                  "mode": "inference", "batch": 1,
                                  "fraction_of_peak": 0.5, **row})
    assert line.endswith("XLA")


def test_rounds_interleave_and_report_medians(capsys):
    assert cli.main(
        ["benchmark", "--model", "Ti/16", "--image-size", "32", "--batch-size", "2",
         "--steps", "1", "--warmup", "1", "--min-seconds", "0", "--jit-compile", "off",
         "--rounds", "2"]
    ) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("round 1/2") for line in out) == 1
    assert sum(line.startswith("round 2/2") for line in out) == 1
    median = out[out.index("median of 2 interleaved rounds:") + 1]
    assert "images/s" in median and "(rounds " in median and "no XLA" in median
    assert cli.main(["benchmark", "--model", "Ti/16", "--rounds", "0"]) == 2
    assert "rounds=0" in capsys.readouterr().err


def test_row_takes_the_median_rate_and_the_largest_memory():
    key = ("Ti/16", 1e9, "keras_vit", "inference", 8)
    results = [{"images_per_s": r, "peak_memory_mb": m, "xla": x}
               for r, m, x in ((10.0, 900, True), (30.0, 800, False), (20.0, 700, True))]
    row = benchmark._row(key, results, peak=1e10)
    assert row["images_per_s"] == 20.0 and row["peak_memory_mb"] == 900
    assert row["xla"] is True and row["images_per_s_range"] == (10.0, 30.0)
    assert row["fraction_of_peak"] == pytest.approx(1e9 * 20.0 / 1e10)
    failed = benchmark._row(key, [{"error": "not installed"}], peak=1e10)
    assert failed["error"] == "not installed"


def test_a_killed_measurement_says_so():
    import subprocess

    proc = subprocess.CompletedProcess(["python"], -9, stdout="", stderr="FutureWarning: x\n")
    assert "killed by signal 9" in benchmark._result(proc)["error"]
    proc = subprocess.CompletedProcess(["python"], 1, stdout="", stderr="ValueError: bad\n")
    assert benchmark._result(proc)["error"] == "ValueError: bad"


class _FakeClock:
    """`time` for `benchmark.latencies`: each call of `fn` takes `tick` s,
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
    monkeypatch.setattr(benchmark, "time", clock)
    assert len(benchmark.latencies(clock.call, steps=3, warmup=2)) == 3
    # 0.25 s of 10 ms calls: 25 timed calls, not `steps`, and no more.
    times = benchmark.latencies(clock.call, steps=3, warmup=2, min_seconds=0.25)
    assert len(times) == 25 and sum(times) == pytest.approx(0.25)
    # A slow call still runs `steps` times.
    clock.tick = 2.0
    assert len(benchmark.latencies(clock.call, steps=3, warmup=0, min_seconds=1.0)) == 3
    assert benchmark._time(clock.call, steps=3, warmup=0) == pytest.approx(2.0)
    # Cores busy counts the timed calls only, not the warm-up.
    clock.tick, rates = 0.01, iter([0.0, 0.0] + [1.5] * 10)

    def call():
        clock.cores = next(rates)  # idle while warming up, then 1.5 cores
        clock.call()

    seconds, cores = benchmark._time_and_cores(call, steps=3, warmup=2)
    assert seconds == pytest.approx(0.01) and cores == pytest.approx(1.5)


def test_min_seconds_must_be_a_number_at_least_zero(capsys):
    for bad in (-1, float("nan"), "1"):
        with pytest.raises(ValueError, match="min_seconds"):
            benchmark.run_suite(variants=("Ti/16",), min_seconds=bad)
        with pytest.raises(ValueError, match="min_seconds"):
            benchmark.measure(peer="keras_vit", variant="Ti/16", mode="inference",
                              batch_size=1, min_seconds=bad)
    for mode in ([], ["--profile"]):
        assert cli.main(["benchmark", "--model", "Ti/16", "--min-seconds", "-1", *mode]) == 2
        assert "min_seconds=-1.0" in capsys.readouterr().err


# Stand-ins for torch and timm, enough for benchmark._TIMM_SCRIPT: the
# model's calls take the seconds listed in $FAKE_TIMM_SLEEPS, in turn, and
# each call is logged to $FAKE_TIMM_LOG.
_FAKE_TORCH = """
import contextlib, os, time
__version__ = "fake"
_sleeps = [float(s) for s in os.environ["FAKE_TIMM_SLEEPS"].split(",")]
def set_num_threads(n): pass
def rand(*shape): return shape
inference_mode = contextlib.nullcontext
float32, bfloat16 = "float32", "bfloat16"
def autocast(device, dtype, enabled):
    if os.environ.get("FAKE_TIMM_AUTOCAST_LOG"):
        with open(os.environ["FAKE_TIMM_AUTOCAST_LOG"], "a") as log:
            log.write(f"{device} {dtype} {enabled}\\n")
    return contextlib.nullcontext()
class Model:
    calls = 0
    def eval(self): pass
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
    """The stand-ins on PYTHONPATH; returns the file each call is logged to."""
    (tmp_path / "torch.py").write_text(_FAKE_TORCH)
    (tmp_path / "timm.py").write_text(
        "from torch import Model\n__version__ = 'fake'\n"
        "def create_model(name, pretrained, num_classes): return Model()\n")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("FAKE_TIMM_LOG", str(log))
    return log


def test_timm_is_timed_by_the_same_rule(fake_timm, monkeypatch):
    # The median call, as for every other peer: one stalled call out of five
    # does not move timm's figure either (the mean, 0.116 s, would give 34
    # images/s; the bound leaves the 20 ms sleeps room to overshoot).
    log = fake_timm
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0,0.02,0.02,0.5,0.02,0.02")
    row = benchmark._measure_timm_in_subprocess(
        "Ti/16", "inference", 4, steps=5, warmup=1, python=sys.executable)
    assert 4 / 0.08 < row["images_per_s"] <= 4 / 0.02, row
    assert len(log.read_text().split()) == 1 + 5
    # With min_seconds, calls continue past `steps` until they add up to
    # it (0.3 s of calls of at least 20 ms: at most 15 timed calls).
    log.unlink()
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0.02")
    benchmark._measure_timm_in_subprocess(
        "Ti/16", "inference", 4, steps=2, warmup=1, python=sys.executable,
        min_seconds=0.3)
    assert 1 + 2 < len(log.read_text().split()) <= 1 + 15


def test_peers_compute_in_the_suites_dtype(fake_timm, tmp_path, monkeypatch):
    # --dtype mixed_bfloat16: timm runs under bfloat16 autocast (float32
    # weights, as Keras's mixed precision), ONNX Runtime, which has no
    # bfloat16 kernels, is not timed, and a float32 suite autocasts nothing.
    autocast = tmp_path / "autocast.log"
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0")
    monkeypatch.setenv("FAKE_TIMM_AUTOCAST_LOG", str(autocast))
    for dtype, expected in (("mixed_bfloat16", "cpu bfloat16 True"),
                            (None, "cpu float32 False")):
        row = benchmark.measure_in_subprocess(
            peer="timm", variant="Ti/16", mode="inference", batch_size=1, steps=2,
            warmup=0, min_seconds=0, dtype=dtype, timm_python=sys.executable)
        assert "images_per_s" in row, row
        assert set(autocast.read_text().splitlines()) == {expected}
        autocast.unlink()
    row = benchmark.measure_in_subprocess(
        peer="onnxruntime", variant="Ti/16", mode="inference", batch_size=1,
        dtype="mixed_bfloat16")
    assert row == {"error": benchmark.ONNX_FLOAT32_ONLY}


def test_runtimes_are_timed_for_inference_only():
    for peer in benchmark.RUNTIMES:
        with pytest.raises(ValueError, match=f"{peer} is timed for inference only"):
            benchmark.measure(peer=peer, variant="Ti/16", mode="train", batch_size=1)


def test_cores_busy_tells_sleeping_from_spinning(fake_timm, monkeypatch):
    # CPU time over wall time while the calls ran: a model that sleeps keeps
    # no core busy, one that spins keeps one.
    monkeypatch.setenv("FAKE_TIMM_SLEEPS", "0.05")
    measure = lambda: benchmark._measure_timm_in_subprocess(  # noqa: E731
        "Ti/16", "inference", 1, steps=6, warmup=1, python=sys.executable)
    sleeping = measure()["cores_busy"]
    monkeypatch.setenv("FAKE_TIMM_SPIN", "1")
    spinning = measure()["cores_busy"]
    # (~0.01 and ~1.0 here; the spinner's bound leaves room for a CI whose
    # other test worker keeps both cores busy.)
    assert 0 <= sleeping < 0.1 and 0.25 < spinning <= 1.2, (sleeping, spinning)
    row = benchmark._row(("Ti/16", 1e9, "timm", "inference", 1),
                         [{"images_per_s": 20.0, "peak_memory_mb": 1.0,
                           "cores_busy": 1.5}], 1e11)
    assert "1.50 cores busy" in benchmark._format_row(row)


def test_sigterm_during_a_command_exits_143_and_restores_the_handler(monkeypatch):
    import os
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
    assert exit_info.value.code == 143 and not isinstance(exit_info.value, cli._Terminated)
    with pytest.raises(ImportError):  # other errors pass through unchanged
        with cli._terminate_cleanly():
            raise ImportError("no module")


def test_train_flags_reach_the_model(monkeypatch, tmp_path):
    import keras_vit.training

    configs = []

    def fake_train(config):
        configs.append(config)
        return keras_vit.training.TrainResult(None, {}, {"accuracy": 0.5}, config.output,
                                              "default", 0)

    monkeypatch.setattr(keras_vit.training, "train", fake_train)
    cli.main(["train", "--dataset", "digits", "--output", str(tmp_path / "run"),
              "--hidden-dim", "32", "--pooling", "gap", "--position-embedding", "learned2d"])
    (config,) = configs
    assert config.model_kwargs == {"hidden_dim": 32, "pooling": "gap",
                                   "position_embedding": "learned2d"}
    assert config.objective == "classification"
    cli.main(["train", "--dataset", "folder:photos", "--output", str(tmp_path / "mpp"),
              "--objective", "masked-patches"])
    assert configs[-1].objective == "masked_patches"
    assert configs[-1].masked_patches == {}  # the paper's options
    configs[-1].check()
    cli.main(["train", "--dataset", "folder:photos", "--output", str(tmp_path / "mpp"),
              "--objective", "masked-patches", "--corrupt-rate", "0.25",
              "--replace-rate", "0", "--color-bits", "2"])
    assert configs[-1].masked_patches == {"corrupt_rate": 0.25, "replace_rate": 0.0,
                                          "bits": 2}
    configs[-1].check()
    # The defaults --help states are the objective's.
    from keras_vit.training.masked_patches import OPTIONS

    actions = {action.dest: action for action in cli.build_parser()._subparsers
               ._group_actions[0].choices["train"]._actions}
    for flag, option in [("corrupt_rate", "corrupt_rate"), ("mask_rate", "mask_rate"),
                         ("replace_rate", "replace_rate"), ("color_bits", "bits")]:
        assert f"(default {OPTIONS[option]})" in actions[flag].help
    from keras_vit.model import MODEL_POSITION_EMBEDDINGS

    (train,) = [action for action in cli.build_parser()._subparsers._group_actions[0]
                .choices["train"]._actions if action.dest == "position_embedding"]
    assert sorted(train.choices) == sorted(MODEL_POSITION_EMBEDDINGS)


def test_a_file_that_is_no_image_is_named_in_one_line(monkeypatch, tmp_path, capsys):
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
        for _ in data.load(config.dataset).train:
            pass

    monkeypatch.setattr(keras_vit.training, "train", reading_train)
    assert cli.main(["train", "--dataset", f"folder:{tmp_path}",
                     "--output", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error == f"keras-vit: error: {data.datasets.NOT_AN_IMAGE} {tmp_path}/b/page.jpg\n"
    # Other errors still raise.
    monkeypatch.setattr(keras_vit.training, "train", lambda config: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(["train", "--dataset", "digits", "--output", str(tmp_path / "run")])


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
    model = keras_vit.ViT(**{**TINY, "image_size": 16, "patch_size": 8}, num_channels=1)
    model.save(tmp_path / "gray.keras")

    seen = []
    monkeypatch.setattr(visualize, "inspect",
                        lambda model, images, *args, **kwargs: seen.append(images) or [])
    assert cli.main(["inspect", str(tmp_path / "gray.keras"), "--image", str(path),
                     "--output", str(tmp_path / "figures")]) == 0
    (images,) = seen
    pairs = data.datasets.read_images([str(path)], np.array([0], np.int64))
    (batch, _), = data.eval_pipeline(pairs, 1, (16, 16), 1).as_numpy_iterator()
    expected = model_pixels(batch, 1)
    assert images.shape == expected.shape == (1, 16, 16, 1)
    assert images.dtype == np.float32
    np.testing.assert_allclose(images, expected, atol=1e-4)


def test_inspect_names_a_file_that_is_no_image(tmp_path, capsys):
    page = tmp_path / "cat.jpg"
    page.write_text("<html>")
    code = cli.main(["inspect", "ViT_Ti16", "--image-size", "32", "--image", str(page),
                     "--output", str(tmp_path / "figures")])
    error = capsys.readouterr().err
    assert code == 2
    assert error.startswith("keras-vit: error: Could not read the image: ") and error.count("\n") == 1
    assert f"Received: image={str(page)!r}" in error
    assert not (tmp_path / "figures").exists()
