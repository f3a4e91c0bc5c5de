"""benchmarks/training_memory.py reads what a training step keeps."""

import json
import sys

import pytest

from tests.benchmark import script as benchmark_script


def _script():
    return benchmark_script("training_memory")


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
    # MLP-wide, only the GELU's input (mlp_fc1's BiasAdd): its output is
    # recomputed in the backward pass (`_gelu.gelu_dense`). Rows are one
    # per op and shape.
    mlp_wide = [r for r in rows if r.split("|")[3].strip().endswith("x40")]
    assert [r.split("|")[2].strip() for r in mlp_wide] == ["BiasAdd"], rows


LINUX = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/status"
)


def _step_figures(out):
    """`{figure: MB or None}` of the printed step figures (`None`: not
    measured on this machine)."""
    line = [x for x in out.splitlines() if x.startswith("resident")][0]
    built, peak, tensors = (part.split(": ", 1)[1] for part in line.split("; "))

    def mb(text):
        if text.startswith("not measured"):
            return None
        return int(text.split(" MB")[0].split()[-1].replace(",", ""))

    (first,) = [x for x in out.splitlines() if x.startswith("peak over")]
    return {
        "built": mb(built),
        "first": mb(first.split(": ", 1)[1]),
        "peak": mb(peak),
        "between": mb(tensors),
        "tensors": None if mb(tensors) is None else mb(tensors.split(", ")[1]),
    }


def _run_steps(capsys):
    _script().main(
        ["--model", "ViT_Ti16", "--image-size", "16", "--batch-size", "2"]
        + ["--model-kwargs", TINY]
    )
    return capsys.readouterr().out


@LINUX
def test_it_measures_the_step_peak(capsys):
    out = _run_steps(capsys)
    figures = _step_figures(out)
    assert 0 < figures["built"] <= figures["first"], out
    if figures["peak"] is None:
        pytest.skip(f"this machine gives no step peak: {out}")
    assert figures["built"] <= figures["peak"], out


@LINUX
def test_it_reads_the_tensors_tensorflows_allocator_holds(capsys):
    reason = _script().allocator_stats_unavailable("CPU:0")
    if reason:
        pytest.skip(reason)
    figures = _step_figures(_run_steps(capsys))
    # The weights and slots stay between steps.
    assert 0 <= figures["between"] <= figures["tensors"]
    if figures["peak"] is not None:
        assert figures["tensors"] <= figures["peak"]


@LINUX
def test_it_says_what_this_machine_cannot_measure(capsys, monkeypatch):
    import tensorflow as tf

    def refused(device):
        raise ValueError(f"Cannot reset memory stats for device '{device}'")

    # As on a machine whose CPU allocator keeps no stats.
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", refused)
    out = _run_steps(capsys)
    figures = _step_figures(out)
    assert figures["between"] is None and figures["tensors"] is None, out
    assert figures["built"] > 0, out
    assert (
        "not measured: TensorFlow keeps no allocator stats for CPU:0 here: "
        "Cannot reset memory stats for device 'CPU:0'"
    ) in out


def test_it_counts_each_kept_buffer_once():
    import numpy as np
    import tensorflow as tf

    import keras_vit

    model = keras_vit.ViT(image_size=16, num_classes=3, **json.loads(TINY))
    images = tf.constant(np.zeros((2, 16, 16, 3), "float32"))
    kept = _script().kept_for_backward(model, images, tf.zeros((2,), "int32"))
    mlp_wide = sum(n for key, n in kept.items() if key[1].endswith("x40"))
    # One (B·T, mlp_dim) float32 tensor per block, the GELU's input
    # (`gelu_dense` recomputes its output): its custom gradient's IdentityN
    # aliases are not counted again.
    assert mlp_wide == 2 * (2 * 17) * 40 * 4, kept
    ops_kept = {key[0] for key in kept if key[1].endswith("x40")}
    assert "BiasAdd" in ops_kept and "IdentityN" not in ops_kept, kept
