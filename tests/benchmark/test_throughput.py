"""`keras-vit benchmark`: keras_vit's own models, timed in one process."""

import pytest

from keras_vit import cli
from keras_vit.benchmark import flops
from keras_vit.benchmark import throughput

#: Ti/16 of one block at 32 px (4 patches): what a row says does not
#: depend on the depth.
ONE_BLOCK = "Ti/16:num_layers=1"


@pytest.mark.slow
def test_it_prints_images_per_s_and_the_share_of_the_measured_peak(
    capsys, monkeypatch
):
    monkeypatch.setattr(flops, "peak_flops", lambda **k: 1e10)
    argv = ["benchmark", "--model", ONE_BLOCK, "--image-size", "32"]
    timing = ["--steps", "1", "--warmup", "1", "--min-seconds", "0"]
    batches = ["--batch-size", "2", "--train", "--train-batch-size", "3"]
    assert cli.main([*argv, *timing, *batches, "--jit-compile", "off"]) == 0
    out = capsys.readouterr().out
    assert "matmul peak 10 GFLOP/s" in out
    rows = [line for line in out.splitlines() if "images/s" in line]
    assert len(rows) == 2
    assert "inference batch   2" in rows[0] and "train batch   3" in rows[1]
    assert all("% of peak" in r and "no XLA" in r for r in rows)


def test_the_share_of_the_peak_is_the_rows_flops_over_the_peak(monkeypatch):
    monkeypatch.setattr(flops, "peak_flops", lambda **k: 1e10)
    monkeypatch.setattr(
        throughput, "inference_rate", lambda *a: (100.0, 1.0, False)
    )
    monkeypatch.setattr(throughput, "train_rate", lambda *a: (10.0, 1.0))
    rows = throughput.time_models(
        [ONE_BLOCK], [4], [2], image_size=32, printer=lambda line: None
    )
    gflops = rows[0]["gflops_per_image"]
    assert gflops > 0
    assert [r["fraction_of_peak"] for r in rows] == pytest.approx(
        [gflops * 1e9 * 100 / 1e10, 3 * gflops * 1e9 * 10 / 1e10]
    )


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--model", "ViT_X"], "ViT_X"),
        (["--model", "Ti/16", "--image-size", "0"], "--image-size"),
        (["--train-batch-size", "2"], "--train-batch-size"),
        (["--batch-size", "0"], "--batch-size"),
    ],
)
def test_bad_arguments_are_named_before_anything_is_timed(
    flags, named, capsys, monkeypatch
):
    monkeypatch.setattr(flops, "peak_flops", lambda **k: pytest.fail("timed"))
    # A count below 1 is refused by argparse (exit 2), the others by the
    # library (returned 2): either way before anything is timed.
    try:
        code = cli.main(["benchmark", *flags])
    except SystemExit as exit:
        code = exit.code
    assert code == 2
    assert named in capsys.readouterr().err
