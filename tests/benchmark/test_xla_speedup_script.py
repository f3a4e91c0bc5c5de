"""benchmarks/xla_speedup.py times XLA against no XLA in one process."""

import pytest

from keras_vit.training import recipe
from tests.benchmark import script as benchmark_script

TINY = "Ti/16:patch_size=4,num_layers=1,num_heads=2,hidden_dim=16,mlp_dim=32"


def _script():
    return benchmark_script("xla_speedup")


def test_it_prints_a_ratio_and_the_auto_pick_per_size(capsys):
    # 16 px: 17 tokens; 96 px: 577, past the CPU's XLA limit.
    assert 17 <= recipe.CPU_XLA_MAX_TOKENS < 577
    _script().main(
        ["--model", TINY, "--image-size", "16", "96"]
        + ["--batch-size", "2", "--rounds", "3"]
    )
    rows = [
        line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(f"| {TINY} ")
    ]
    assert [(r[1], r[2], r[5]) for r in rows] == [
        ("16", "17", "XLA |"),
        ("96", "577", "no XLA |"),
    ]
    for row in rows:
        median = float(row[3].rstrip("x"))
        low, high = (float(x) for x in row[4].split("-"))
        assert 0 < low <= median <= high


def test_it_refuses_no_rounds():
    with pytest.raises(SystemExit):
        _script().main(["--rounds", "0"])
