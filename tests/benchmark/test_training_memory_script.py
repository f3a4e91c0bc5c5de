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
    built, peak, between, tensors = (
        int(part.split(" MB")[0].split()[-1].replace(",", ""))
        for part in line.replace(", peak", ";").split(";")
    )
    assert 0 < built <= peak
    (first,) = [x for x in out.splitlines() if x.startswith("peak over")]
    assert built <= int(first.split()[-2].replace(",", ""))
    # TensorFlow's allocator: the weights and slots stay between steps.
    assert 0 <= between <= tensors <= peak


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
