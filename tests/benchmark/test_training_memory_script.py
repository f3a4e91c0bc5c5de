"""benchmarks/training_memory.py reads what a training step keeps."""

import importlib.util
import os
import sys

import pytest

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    "benchmarks",
    "training_memory.py",
)


def _script():
    spec = importlib.util.spec_from_file_location("training_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = (
    '{"patch_size": 4, "num_layers": 2, "num_heads": 2, "hidden_dim": 16, '
    '"mlp_dim": 40}'
)


def test_it_lists_the_kept_tensors_without_an_attention_matrix(capsys):
    _script().main(
        ["--model", "ViT_Ti16", "--image-size", "16", "--batch-size", "2"]
        + ["--model-kwargs", TINY, "--graph-only", "--top", "50"]
    )
    out = capsys.readouterr().out
    assert "kept for the backward pass" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows[1:], out
    # T = 17 tokens: no (B, heads, T, T) tensor is kept.
    assert not [r for r in rows if "x17x17 |" in r], out
    # The GELU's input and output per block, MLP-wide.
    assert len([r for r in rows if r.split("|")[3].strip().endswith("x40")])


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/status"
)
def test_it_measures_the_step_peak(capsys):
    _script().main(
        ["--model", "ViT_Ti16", "--image-size", "16", "--batch-size", "2"]
        + ["--model-kwargs", TINY]
    )
    out = capsys.readouterr().out
    line = [x for x in out.splitlines() if x.startswith("resident")][0]
    built, peak = (
        int(part.split(" MB")[0].split()[-1].replace(",", ""))
        for part in line.split(";")
    )
    assert 0 < built <= peak
