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
         "--warmup", "1", "--train", "--remat"]
    ) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out
    rows = [line for line in out.splitlines() if "images/s" in line]
    assert len(rows) == 2 and all("% of peak" in r and "MB peak" in r for r in rows)


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
    assert args[-5:] == ["vit_small_patch16_224", "train", "8", "5", "2"]
    missing = benchmark.measure_in_subprocess(
        peer="timm", variant="Ti/16", mode="inference", batch_size=1,
        timm_python=str(tmp_path / "no_python"))
    assert "error" in missing


def test_bad_model_name_is_a_clear_error(capsys):
    assert cli.main(["benchmark", "--model", "ViT_X"]) == 2
    assert "variant='ViT_X'" in capsys.readouterr().err


def test_profile_times_every_part(capsys):
    assert cli.main(["benchmark", "--model", "Ti/16", "--image-size", "32",
                     "--batch-size", "2", "--steps", "1", "--warmup", "1", "--profile"]) == 0
    out = capsys.readouterr().out
    for part in ("forward, XLA off", "training step", "strided Conv2D",
                 "dot_product_attention", "MultiHeadAttention", "tf.data pipeline"):
        assert part in out


def test_auto_xla_times_inference_both_ways_and_reports_which(monkeypatch):
    # "auto" keeps the faster of XLA on / off for inference (neither wins
    # at every size on a CPU) and says which; training uses XLA.
    assert benchmark._jit_choices("auto", "inference") == (False, True)
    assert benchmark._jit_choices("auto", "train") == (True,)
    assert benchmark._jit_choices(False, "inference") == (False,)
    row = benchmark.measure(peer="keras_vit", variant="Ti/16", mode="inference",
                            batch_size=1, steps=1, warmup=1, image_size=32)
    assert row["xla"] in (True, False) and row["images_per_s"] > 0
    # Whichever setting is faster is the one reported, with its rate.
    for faster in (True, False):
        rates = {faster: 7.0, not faster: 5.0}
        monkeypatch.setattr(
            benchmark, "benchmark",
            lambda *a, jit_compile, **k: {"inference_images_per_s": rates[jit_compile]})
        row = benchmark.measure(peer="keras_vit", variant="Ti/16", mode="inference",
                                batch_size=1, image_size=32)
        assert (row["xla"], row["images_per_s"]) == (faster, 7.0)
    line = benchmark._format_row({"variant": "Ti/16", "peer": "keras_vit",
                                  "mode": "inference", "batch": 1,
                                  "fraction_of_peak": 0.5, **row})
    assert line.endswith("XLA")


def test_rounds_interleave_and_report_medians(capsys):
    assert cli.main(
        ["benchmark", "--model", "Ti/16", "--image-size", "32", "--batch-size", "2",
         "--steps", "1", "--warmup", "1", "--jit-compile", "off", "--rounds", "2"]
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
