"""DINOv3's 2-D rotary position embedding (`keras_vit.layers.rotary`):
hand-checked numbers, the relative-position property, the attention's use
of it, and the layer's checks and config."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import MultiHeadSelfAttention
from keras_vit.layers.rotary import RotaryEmbedding
from keras_vit.layers.rotary import adjacent_to_halves
from keras_vit.layers.rotary import apply_rope
from keras_vit.layers.rotary import rope_table
from tests import reference
from tests.helpers import random_images
from tests.helpers import randomize_weights


def _rotate(v, table):
    """`apply_rope` of one `(d,)` vector per token, `(T, d)`."""
    x = np.asarray(v, "float32")[None, :, None, :]
    return keras.ops.convert_to_numpy(apply_rope(x, table))[0, :, 0]


def test_a_row_of_four_patches_by_hand():
    # head width 4: one period, theta ** 0 = 1. A 1x4 grid: y = 0, and x
    # = -0.75, -0.25, 0.25, 0.75, so the x angles are 2 pi x: -3pi/2,
    # -pi/2, pi/2, 3pi/2. Pairs (v0, v2) turn by the y angle (0: kept),
    # (v1, v3) by the x angle: by -pi/2, (b, d) -> (d, -b).
    table = keras.ops.convert_to_numpy(rope_table(1, 4, 4, 100.0))
    assert table.shape == (4, 8)
    sin, cos = table[:, :4], table[:, 4:]
    np.testing.assert_allclose(sin[:, 1], [1, -1, 1, -1], atol=1e-6)
    np.testing.assert_allclose(cos[:, 1], [0, 0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(sin[:, 0], 0, atol=1e-7)
    np.testing.assert_allclose(cos[:, 0], 1, atol=1e-7)
    out = _rotate(np.tile([1.0, 2.0, 3.0, 4.0], (4, 1)), table)
    np.testing.assert_allclose(out[1], [1, 4, 3, -2], atol=1e-6)
    np.testing.assert_allclose(out[2], [1, -4, 3, 2], atol=1e-6)


def test_the_periods_come_from_theta():
    # head width 8: periods 1 and theta ** 0.5; a 2x1 grid: y = -0.5,
    # 0.5 and x = 0. The second y angle of the first row: 2 pi (-0.5) / 10.
    table = keras.ops.convert_to_numpy(rope_table(2, 1, 8, 100.0))
    angles = np.arcsin(table[:, :8])
    np.testing.assert_allclose(angles[0, 1], -np.pi / 10, atol=1e-6)
    np.testing.assert_allclose(angles[0, 2:4], 0, atol=1e-7)  # x = 0
    # The layout repeats the d / 2 angles: [y, x, y, x] by quarters.
    np.testing.assert_allclose(table[:, :4], table[:, 4:8], atol=0)


def test_prefix_tokens_are_not_rotated():
    table = rope_table(2, 3, 8, 100.0, num_prefix_tokens=5)
    v = np.random.default_rng(0).normal(size=(11, 8))
    out = _rotate(v, table)
    np.testing.assert_array_equal(out[:5], v[:5].astype("float32"))
    assert np.abs(out[5:] - v[5:]).max() > 0.1


def test_scores_depend_on_the_offset_only():
    """RoPE's point: on a grid of equal steps, the score of a query and a
    key depends on their offset, not on where the pair sits."""
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 16))
    table = rope_table(4, 5, 16, 100.0)

    def score(i, j):
        rotated = _rotate(np.stack([q, k]), keras.ops.take(table, [i, j], 0))
        return rotated[0] @ rotated[1]

    # (row 0, col 0)-(row 1, col 2) and (row 2, col 1)-(row 3, col 3).
    np.testing.assert_allclose(score(0, 7), score(11, 18), rtol=1e-5)
    assert abs(score(0, 7) - score(0, 8)) > 1e-3


def test_matches_the_numpy_reference_on_a_non_square_grid():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(2, 3, 1 + 12, 8))  # (B, heads, T, d)
    table = rope_table(3, 4, 8, 7.0, num_prefix_tokens=1)
    got = apply_rope(v.transpose(0, 2, 1, 3).astype("float32"), table)
    got = keras.ops.convert_to_numpy(got).transpose(0, 2, 1, 3)
    want = reference.rotate(v, reference.rope_angles(3, 4, 8, 7.0), 1)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_the_layer_reads_the_grid_of_its_input():
    layer = RotaryEmbedding(8, num_prefix_tokens=1, grid_size=(2, 3))
    flat = layer(np.zeros((1, 6, 5), "float32"))
    grid = layer(np.zeros((1, 2, 3, 5), "float32"))
    np.testing.assert_array_equal(flat, grid)
    assert tuple(flat.shape) == (7, 16)
    other = layer(np.zeros((1, 3, 2, 5), "float32"))
    assert np.abs(keras.ops.convert_to_numpy(other - grid)).max() > 0.1
    assert layer.compute_output_shape((None, None, None, 5)) == (None, 16)
    assert layer.compute_output_shape((None, 6, 5)) == (7, 16)


def test_the_attention_applies_the_table():
    layer = MultiHeadSelfAttention(2, qkv_bias=False)
    x = np.random.default_rng(3).normal(size=(2, 5, 16)).astype("float32")
    plain = layer(x)
    table = rope_table(2, 2, 8, 100.0, num_prefix_tokens=1)
    rotated = layer(x, rope=table)
    assert np.abs(keras.ops.convert_to_numpy(rotated - plain)).max() > 1e-3
    assert layer.qkv.bias is None
    weights = {
        "qkv_kernel": layer.qkv.kernel.numpy(),
        "proj_kernel": layer.proj.kernel.numpy(),
        "proj_bias": layer.proj.bias.numpy(),
        "rope": (reference.rope_angles(2, 2, 8, 100.0), 1),
    }
    want, _ = reference.attention(x.astype("float64"), weights, 2)
    np.testing.assert_allclose(rotated, want, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"head_dim": 6}, "multiple of 4. Received: head_dim=6"),
        ({"head_dim": 8, "rope_theta": 0}, "Received: rope_theta=0"),
        ({"head_dim": 8, "rope_theta": float("nan")}, "rope_theta=nan"),
        ({"head_dim": 8, "grid_size": (0, 2)}, "grid_size"),
        ({"head_dim": 8, "num_prefix_tokens": -1}, "num_prefix_tokens=-1"),
        (
            {"head_dim": 8, "rope_type": "cat", "jitter_coords": 2.0},
            "rope_type='cat', jitter_coords=2.0",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding(**kwargs)


def test_a_flat_input_needs_the_grid():
    with pytest.raises(ValueError, match="without grid_size"):
        RotaryEmbedding(8)(np.zeros((1, 6, 5), "float32"))


def test_config_round_trip():
    layer = RotaryEmbedding(8, 10.0, num_prefix_tokens=5, grid_size=(2, 3))
    again = RotaryEmbedding.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert isinstance(restored, RotaryEmbedding)


def test_a_float64_model_rotates_in_float64():
    model = keras_vit.ViT(
        image_size=(8, 12),
        patch_size=4,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        mlp_dim=16,
        num_classes=3,
        position_embedding="rope",
        num_register_tokens=1,
        dtype="float64",
    )
    randomize_weights(model, scale=0.3)
    images = random_images((2, 8, 12, 3))
    np.testing.assert_allclose(
        model.predict(images, verbose=0),
        reference.vit(images, model),
        atol=1e-10,
    )


def test_a_bfloat16_table_is_computed_in_float32_then_cast():
    # Angles of 16 x 16 patches in bfloat16 would be off by ~1e-2; the
    # table is computed in float32 and only its values are rounded.
    layer = RotaryEmbedding(64, grid_size=(16, 16), dtype="mixed_bfloat16")
    got = layer(np.zeros((1, 256, 3), "float32"))
    assert keras.backend.standardize_dtype(got.dtype) == "bfloat16"
    expected = keras.ops.cast(
        rope_table(16, 16, 64, 100.0, dtype="float32"), "bfloat16"
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(got, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(expected, "float32")),
    )


def _timm_cat_rotation(v, rows, cols, theta, offset, reference_grid):
    """timm's `"cat"` RoPE by hand in NumPy (`build_rotary_pos_embed`
    with `in_pixels=False`, `grid_indexing="xy"`, then
    `apply_rot_embed(half=False)`): column then row index plus `offset`,
    rescaled onto `reference_grid`, adjacent pairs rotated."""
    d = v.shape[-1]
    bands = 1.0 / theta ** (np.arange(d // 4) / (d // 4))
    x = (np.arange(cols) + offset) / cols * reference_grid[1]
    y = (np.arange(rows) + offset) / rows * reference_grid[0]
    yy, xx = np.meshgrid(y, x, indexing="ij")
    angles = np.concatenate(
        [xx.reshape(-1, 1) * bands, yy.reshape(-1, 1) * bands], axis=-1
    ).repeat(2, axis=-1)  # interleaved: [a0, a0, a1, a1, ...]
    rotated = np.stack([-v[..., 1::2], v[..., ::2]], -1).reshape(v.shape)
    return v * np.cos(angles) + rotated * np.sin(angles)


def test_adjacent_pairs_are_halves_with_the_columns_reordered():
    """timm's interleaved rotation of queries and keys and keras_vit's
    rotation of halves, on the same columns reordered evens then odds
    (`adjacent_to_halves`), give the same attention logits."""
    rows, cols, d = 2, 3, 8
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, rows * cols, d))
    timm_q, timm_k = (
        _timm_cat_rotation(v, rows, cols, 10000.0, 1.0, (4, 4)) for v in (q, k)
    )
    table = rope_table(
        rows, cols, d, 10000.0, rope_type="cat", offset=1.0, reference=(4, 4)
    )
    order = adjacent_to_halves(d)
    assert order == [0, 2, 4, 6, 1, 3, 5, 7]
    ours_q, ours_k = (_rotate(v[:, order], table) for v in (q, k))
    np.testing.assert_allclose(ours_q @ ours_k.T, timm_q @ timm_k.T, atol=1e-5)
    # The reordered rotation is timm's, reordered.
    np.testing.assert_allclose(ours_q, timm_q[:, order], atol=1e-5)


def test_mixed_tables_are_per_block_and_head():
    layer = RotaryEmbedding(
        8, rope_type="mixed", num_layers=3, num_heads=2, num_prefix_tokens=1
    )
    table = keras.ops.convert_to_numpy(layer(np.zeros((1, 2, 3, 5))))
    assert table.shape == (3, 7, 2, 16)  # (blocks, tokens, heads, ...)
    np.testing.assert_array_equal(
        table[:, 0], np.broadcast_to([0] * 8 + [1] * 8, (3, 2, 16))
    )
    frequencies = keras.ops.convert_to_numpy(layer.frequencies)
    # Patch (row 1, column 2), block 2, head 1: 2 fx + 1 fy.
    angles = 2 * frequencies[0, 2, 1] + frequencies[1, 2, 1]
    np.testing.assert_allclose(
        table[2, 1 + 5, 1, :8], np.sin(np.tile(angles, 2)), atol=1e-6
    )
    config = layer.get_config()
    assert RotaryEmbedding.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"grid_offset": 1.0}, "grid_offset"),
        ({"rope_type": "cat", "reference_grid": (0, 2)}, "reference_grid"),
        ({"rope_type": "mixed", "num_heads": 2}, "num_layers"),
    ],
)
def test_the_options_are_checked(arguments, match):
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding(8, **arguments)
