"""`model_flops` on the architecture options, against counts by hand."""

import keras
import pytest

import keras_vit
from keras_vit import benchmark

# 32 px, 16 px patches: 4 patches of 16 * 16 * 3 = 768 values; 16 wide,
# MLP 32, one block, 10 classes.
SMALL = dict(
    image_size=32,
    patch_size=16,
    hidden_dim=16,
    num_layers=1,
    num_heads=2,
    mlp_dim=32,
    num_classes=10,
)
PATCHES = 2 * 4 * 768 * 16  # the patch embedding: 98,304
HEAD = 2 * 16 * 10  # one linear head: 320


def _block(t):
    """One block over `t` tokens, by hand: QKV, logits, weighting, output
    projection, the MLP's two layers."""
    return (
        2 * t * 16 * 48
        + 2 * 2 * t * t * 16
        + 2 * t * 16 * 16
        + (2 * 2 * t * 16 * 32)
    )


def _flops(**options):
    with keras.StatelessScope(initialize_variables=False):
        return benchmark.model_flops(keras_vit.ViT(**SMALL, **options))


def test_plain_and_token_options():
    # The paper's ViT: the class token and 4 patches, 5 tokens.
    assert _block(5) == 22_080
    assert _flops() == PATCHES + 22_080 + HEAD
    # Register tokens are tokens of every block: 1 + 4 + 4 = 9.
    assert _flops(num_register_tokens=4) == PATCHES + _block(9) + HEAD
    # DeiT's distillation token (6 tokens) and its second head.
    assert _flops(distillation=True) == PATCHES + _block(6) + 2 * HEAD


def test_map_head():
    # SigLIP: no class token (4 tokens), the MAP head over them: the probe's
    # query (2 * 16 * 16), keys and values of 4 tokens (2 * 4 * 16 * 32),
    # one query's logits and weighting (2 * 2 * 4 * 16), the output
    # projection (2 * 16 * 16) and the MLP (2 * 2 * 16 * 32).
    map_head = 512 + 4096 + 256 + 512 + 2048
    assert _flops(class_token=False, pooling="map") == (
        PATCHES + _block(4) + map_head + HEAD
    )
    features = _flops(class_token=False, pooling="map", include_top=False)
    assert features == PATCHES + _block(4) + map_head


def test_elementwise_options_add_nothing():
    gap = PATCHES + _block(4) + HEAD
    assert _flops(class_token=False, pooling="gap") == gap
    assert _flops(class_token=False, pooling="gap", fc_norm=True) == gap
    plain = _flops()
    for options in (
        {"norm_pre": True},
        {"layer_scale_init": 1e-5},
        {"qk_norm": True},
        {"activation": "quick_gelu"},
        {"patch_bias": False},
        {"position_embedding_tokens": "patches"},
    ):
        assert _flops(**options) == plain, options


def test_a_gated_mlp_counts_its_gate_projection():
    # The gate's projection, 16 -> 32 for each of the 5 tokens: 5,120.
    assert _flops(use_gated_mlp=True) == _flops() + 2 * 5 * 16 * 32


def test_family_architectures_at_224_px():
    with keras.StatelessScope(initialize_variables=False):
        b16 = benchmark.model_flops(keras_vit.ViT_B16())
        siglip = benchmark.model_flops(
            keras_vit.ViT_B16(class_token=False, pooling="map")
        )
    assert b16 / 1e9 == pytest.approx(35.1, abs=0.05)
    # 196 tokens instead of 197 (12 blocks: -0.18 GFLOPs), and a MAP head
    # whose keys and values of all 196 tokens are 0.46 GFLOPs (two thirds
    # of a block's QKV), its MLP 0.01: 35.13 -> 35.42 GFLOPs.
    assert siglip / 1e9 == pytest.approx(35.42, abs=0.005)


def test_the_peak_is_the_fastest_call_of_any_size(monkeypatch):
    # One size's median read below ViT-B/16's own rate ("126% of peak"):
    # the peak is the fastest single call over the sizes, each warmed up.
    import itertools
    import time

    from keras_vit.benchmark import flops

    # A fake clock whose steps are mostly 9 ms, one in five 1 ms: most
    # calls read slow, a few fast; the median would be the slow rate.
    steps = itertools.cycle((1e-3, 9e-3, 9e-3, 9e-3, 9e-3))
    now = itertools.accumulate(steps)
    monkeypatch.setattr(time, "perf_counter", lambda: next(now))
    peak = flops.peak_flops(seconds=0.4, sizes=(8, 16))
    # The fastest call of the larger size: 1 ms.
    assert peak == pytest.approx(2.0 * 16**3 / 1e-3)
