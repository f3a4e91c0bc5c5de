import math
import re

import keras
import numpy as np
import pytest

from keras_vit import patch_grid

rng = np.random.default_rng(0)


def _np(x):
    return keras.ops.convert_to_numpy(x)


def test_same_grid_is_identity():
    posemb = rng.normal(size=(1, 1 + 12, 8)).astype("float32")
    out = patch_grid.resample_position_embeddings(posemb, (3, 4), (3, 4))
    np.testing.assert_array_equal(_np(out), posemb)


def test_class_token_kept_and_rank_2_input():
    posemb = rng.normal(size=(1 + 16, 8)).astype("float32")
    out = _np(patch_grid.resample_position_embeddings(posemb, (6, 3)))
    assert out.shape == (1 + 18, 8)
    np.testing.assert_array_equal(out[0], posemb[0])


def test_bilinear_halving_is_the_2x2_block_mean():
    grid = rng.normal(size=(4, 4, 3)).astype("float32")
    posemb = np.concatenate([np.zeros((1, 3), "float32"), grid.reshape(16, 3)])
    out = _np(patch_grid.resample_position_embeddings(posemb, 2))
    blocks = grid.reshape(2, 2, 2, 2, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(out[1:].reshape(2, 2, 3), blocks, atol=1e-6)


@pytest.mark.parametrize(
    "interpolation", ["bilinear", "bicubic", "nearest", "area"]
)
def test_constant_embeddings_stay_constant(interpolation):
    posemb = np.tile(np.arange(5, dtype="float32"), (1, 1 + 9, 1))
    out = _np(
        patch_grid.resample_position_embeddings(
            posemb, (5, 7), interpolation=interpolation
        )
    )
    assert out.shape == (1, 1 + 35, 5)
    np.testing.assert_allclose(
        out, np.tile(np.arange(5.0), (1, 36, 1)), atol=1e-5
    )


def test_no_prefix_tokens():
    posemb = rng.normal(size=(1, 4, 2)).astype("float32")
    out = _np(
        patch_grid.resample_position_embeddings(posemb, 4, num_prefix_tokens=0)
    )
    assert out.shape == (1, 16, 2)


def test_bad_arguments():
    posemb = np.zeros((1, 1 + 12, 4), "float32")
    with pytest.raises(ValueError, match="not a square"):
        patch_grid.resample_position_embeddings(posemb, (4, 4))
    with pytest.raises(ValueError, match="source_grid"):
        patch_grid.resample_position_embeddings(
            posemb, (4, 4), source_grid=(2, 2)
        )
    with pytest.raises(ValueError, match="interpolation='cubic'"):
        patch_grid.resample_position_embeddings(
            posemb, (4, 4), (3, 4), interpolation="cubic"
        )
    with pytest.raises(ValueError, match="posemb.shape"):
        patch_grid.resample_position_embeddings(np.zeros(5), (2, 2))


@pytest.mark.parametrize(
    "name, value",
    [
        ("target_grid", (float("nan"), 4)),
        ("target_grid", (2.5, 4)),
        ("target_grid", 0),
        ("target_grid", (4, 4, 4)),
        ("target_grid", "4"),
        ("target_grid", (True, 4)),
        ("antialias", "yes"),
        ("antialias", 1),
        ("num_prefix_tokens", 1.5),
        ("num_prefix_tokens", -1),
        ("num_prefix_tokens", 20),
        ("num_prefix_tokens", "1"),
    ],
)
def test_resampling_arguments_are_named(name, value):
    # NaN or non-integer grids and a non-bool antialias were TensorFlow's
    # unnamed errors; num_prefix_tokens=1.5 was truncated silently.
    posemb = np.zeros((1, 1 + 16, 4), "float32")
    args = dict(posemb=posemb, target_grid=(2, 8), source_grid=(4, 4))
    args[name] = value
    with pytest.raises(ValueError, match=rf"Received: {name}="):
        patch_grid.resample_position_embeddings(**args)


@pytest.mark.parametrize("interpolation", patch_grid.INTERPOLATIONS)
def test_antialias_is_refused_where_the_interpolation_has_none(interpolation):
    # "bilinear_align_corners" (the loading default) and "nearest" ignored
    # it: a 16x16 grid downsampled to 5x5 came back as aliased as without.
    posemb = np.random.default_rng(0).normal(size=(1, 1 + 16 * 16, 4))
    args = dict(posemb=posemb, target_grid=(5, 5), interpolation=interpolation)
    plain = patch_grid.resample_position_embeddings(**args, antialias=False)
    if interpolation in patch_grid.NO_ANTIALIAS:
        with pytest.raises(
            ValueError,
            match=rf"antialias=True, interpolation='{interpolation}'",
        ):
            patch_grid.resample_position_embeddings(**args, antialias=True)
        return
    filtered = patch_grid.resample_position_embeddings(**args, antialias=True)
    # "area" averages either way; the others filter only when asked to.
    changed = np.abs(filtered.numpy() - plain.numpy()).max() > 1e-3
    assert changed == (interpolation != "area")


def test_resampling_inputs_are_named():
    with pytest.raises(
        ValueError, match="`posemb` must be an array of floating-point"
    ):
        patch_grid.resample_position_embeddings(np.array([["a"] * 4] * 17), 2)
    with pytest.raises(ValueError, match="Received: posemb of dtype int"):
        patch_grid.resample_position_embeddings(np.zeros((17, 4), "int32"), 2)
    with pytest.raises(ValueError, match=r"Received: length=0\.?$"):
        patch_grid.resample_1d_embeddings(np.zeros((4, 2), "float32"), 0)
    with pytest.raises(ValueError, match=r"embeddings.shape=\(4,\)"):
        patch_grid.resample_1d_embeddings(np.zeros(4, "float32"), 3)
    # NumPy integers are integers, and a side known only when the graph
    # runs is a scalar integer tensor.
    posemb = rng.normal(size=(1 + 4, 2)).astype("float32")
    out = patch_grid.resample_position_embeddings(
        posemb,
        (np.int64(3), np.int32(3)),
        interpolation="bilinear_align_corners",
    )
    assert tuple(out.shape) == (10, 2)
    import tensorflow as tf

    dynamic = tf.function(
        lambda side: patch_grid.resample_position_embeddings(posemb, (side, 3))
    )(tf.constant(3))
    np.testing.assert_allclose(
        _np(dynamic),
        _np(patch_grid.resample_position_embeddings(posemb, (3, 3))),
        atol=1e-6,
    )


def test_sincos_and_kernel_arguments_are_named():
    for kwargs, received in (
        (dict(dim="8"), "dim='8'"),
        (dict(temperature=float("nan")), "temperature=nan"),
        (dict(temperature=0.0), "temperature=0.0"),
        (dict(grid_h=2.0), "grid="),
    ):
        args = {**dict(grid_h=2, grid_w=3, dim=8), **kwargs}
        with pytest.raises(
            ValueError, match=f"Received: {re.escape(received)}"
        ):
            patch_grid.sincos_2d_position_embedding(**args)
    with pytest.raises(ValueError, match="Received: patch_size=1.5"):
        patch_grid.dense_to_conv_kernel(np.zeros((12, 8)), 1.5, 3)
    with pytest.raises(ValueError, match="Received: num_channels='3'"):
        patch_grid.dense_to_conv_kernel(np.zeros((12, 8)), 2, "3")


def test_sincos_values_by_hand():
    pe = _np(patch_grid.sincos_2d_position_embedding(2, 3, 8))
    assert pe.shape == (6, 8)
    omega = [1.0, 1e-4]  # 1 / 10000 ** (k / (quarter - 1)) for k = 0, 1
    for index in range(6):
        row, col = divmod(index, 3)
        expected = (
            [math.sin(col * w) for w in omega]
            + [math.cos(col * w) for w in omega]
            + [math.sin(row * w) for w in omega]
            + [math.cos(row * w) for w in omega]
        )
        np.testing.assert_allclose(pe[index], expected, atol=1e-6)
    with pytest.raises(ValueError, match="dim=6"):
        patch_grid.sincos_2d_position_embedding(2, 2, 6)


def test_sincos_similarity_peaks_at_the_patch_itself():
    pe = _np(patch_grid.sincos_2d_position_embedding(8, 8, 64))
    pe = pe / np.linalg.norm(pe, axis=1, keepdims=True)
    sim = (pe @ pe.T).reshape(8, 8, 8, 8)
    centre = sim[3, 3]
    assert np.unravel_index(centre.argmax(), centre.shape) == (3, 3)
    # Falls along the row and the column, moving away from the patch.
    assert np.all(np.diff(centre[3, 3:]) < 0)
    assert np.all(np.diff(centre[3:, 3]) < 0)


def test_kernel_conversion_errors():
    with pytest.raises(ValueError, match="kernel.shape"):
        patch_grid.conv_to_dense_kernel(np.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match="patch_size=4"):
        patch_grid.dense_to_conv_kernel(np.zeros((47, 8)), 4, 3)


def test_align_corners_matches_the_original_code_scipy_zoom():
    # google-research/vision_transformer resizes the grid with
    # scipy.ndimage.zoom(grid, (new / old, new / old, 1), order=1).
    from scipy import ndimage

    for old, new in (
        ((7, 7), (12, 12)),
        ((4, 4), (3, 5)),
        ((14, 14), (24, 24)),
    ):
        grid = rng.normal(size=(*old, 6)).astype("float32")
        zoom = (new[0] / old[0], new[1] / old[1], 1)
        expected = ndimage.zoom(grid, zoom, order=1)
        assert expected.shape[:2] == new
        posemb = np.concatenate([rng.normal(size=(1, 6)), grid.reshape(-1, 6)])
        out = _np(
            patch_grid.resample_position_embeddings(
                posemb.astype("float32"),
                new,
                old,
                interpolation="bilinear_align_corners",
            )
        )
        np.testing.assert_allclose(out[0], posemb[0], atol=1e-7)
        np.testing.assert_allclose(
            out[1:].reshape(*new, 6), expected, atol=1e-5
        )


def test_align_corners_in_the_graph_equals_the_static_weights():
    # A ViT(dynamic_image_size=True) resamples with the loader's method on
    # grids known only when the graph runs, XLA-compiled too: the in-graph
    # weights must be _align_corners_matrix's.
    import tensorflow as tf

    posemb = rng.normal(size=(1, 2 + 4 * 5, 6)).astype("float32")

    def resample(height, width):
        return patch_grid.resample_position_embeddings(
            posemb,
            (height, width),
            (4, 5),
            num_prefix_tokens=2,
            interpolation=patch_grid.LOADING_INTERPOLATION,
        )

    compiled = tf.function(resample, jit_compile=True)
    for new in ((4, 5), (7, 3), (1, 9), (13, 12)):
        expected = _np(resample(*new))
        out = _np(compiled(tf.constant(new[0]), tf.constant(new[1])))
        assert out.shape == (1, 2 + new[0] * new[1], 6)
        np.testing.assert_allclose(out, expected, atol=1e-5)
    np.testing.assert_array_equal(_np(compiled(4, 5)), posemb)
