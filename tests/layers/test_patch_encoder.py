import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


def _encoder(**kwargs):
    kwargs.setdefault("hidden_dim", 8)
    return keras_vit.layers.PatchEncoder(**kwargs)


def test_hand_computed_output():
    patches = rng.normal(size=(2, 6, 5)).astype("float32")
    layer = _encoder(grid_size=(2, 3))
    layer(patches)
    randomize_weights(layer)
    kernel = layer.projection.kernel.numpy()
    bias = layer.projection.bias.numpy()
    cls = layer.cls.numpy()
    posemb = layer.pos_embedding.numpy()
    tokens = patches @ kernel + bias
    expected = np.concatenate([np.repeat(cls, 2, axis=0), tokens], 1) + posemb
    np.testing.assert_allclose(layer(patches).numpy(), expected, atol=1e-5)


def test_initialisation_as_in_the_paper():
    layer = _encoder(hidden_dim=256)
    layer(np.zeros((1, 196, 48), "float32"))
    assert layer.pos_embedding.shape == (1, 197, 256)
    np.testing.assert_array_equal(layer.cls.numpy(), 0.0)
    std = layer.pos_embedding.numpy().std()
    assert 0.018 < std < 0.022


def test_grid_input_equals_flat_input():
    patches = rng.normal(size=(2, 2, 3, 5)).astype("float32")
    layer = _encoder()
    grid_out = layer(patches).numpy()
    assert layer.grid_size == (2, 3)
    flat_out = layer(patches.reshape(2, 6, 5)).numpy()
    np.testing.assert_allclose(grid_out, flat_out, atol=1e-6)


def test_resampling_to_the_same_grid_is_identity():
    posemb = rng.normal(size=(1, 1 + 12, 8)).astype("float32")
    out = keras_vit.patch_grid.resample_position_embeddings(
        posemb, (3, 4), (3, 4)
    )
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out), posemb)


def test_new_grid_resamples_embeddings_keeping_the_class_token():
    layer = _encoder(grid_size=(2, 2))
    layer(np.zeros((1, 4, 5), "float32"))
    randomize_weights(layer)
    big = rng.normal(size=(1, 4, 6, 5)).astype("float32")
    out = layer(big).numpy()
    assert out.shape == (1, 1 + 24, 8)
    tokens = big.reshape(1, 24, 5) @ layer.projection.kernel.numpy()
    tokens += layer.projection.bias.numpy()
    posemb = out - np.concatenate([layer.cls.numpy(), tokens], axis=1)
    # Class token: its embedding untouched.
    np.testing.assert_allclose(
        posemb[:, 0],
        layer.cls.numpy()[:, 0] * 0 + layer.pos_embedding[:, 0],
        atol=1e-5,
    )
    expected = keras_vit.patch_grid.resample_position_embeddings(
        layer.pos_embedding.numpy(), (4, 6), (2, 2)
    )
    np.testing.assert_allclose(posemb, expected, atol=1e-5)


def test_dynamic_grid_inside_a_graph():
    layer = _encoder(grid_size=(2, 2))
    layer(np.zeros((1, 2, 2, 5), "float32"))
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, None, 5))]
    )
    x = rng.normal(size=(1, 3, 5, 5)).astype("float32")
    np.testing.assert_allclose(fn(x).numpy(), layer(x).numpy(), atol=1e-5)
    same = rng.normal(size=(3, 2, 2, 5)).astype("float32")
    np.testing.assert_allclose(fn(same).numpy(), layer(same).numpy(), atol=1e-6)


def test_sincos2d_and_none():
    patches = rng.normal(size=(2, 16, 5)).astype("float32")
    layer = _encoder(position_embedding="sincos2d", grid_size=4)
    out = layer(patches).numpy()
    assert len(layer.weights) == 3  # kernel, bias, class token: no posemb
    tokens = (
        patches @ layer.projection.kernel.numpy()
        + layer.projection.bias.numpy()
    )
    sincos = keras_vit.patch_grid.sincos_2d_position_embedding(4, 4, 8).numpy()
    np.testing.assert_allclose(out[:, 0], 0.0, atol=1e-6)  # cls: zeros + 0
    np.testing.assert_allclose(out[:, 1:], tokens + sincos, atol=1e-5)

    plain = _encoder(position_embedding="none", class_token=False)
    out = plain(patches).numpy()
    tokens = (
        patches @ plain.projection.kernel.numpy()
        + plain.projection.bias.numpy()
    )
    np.testing.assert_allclose(out, tokens, atol=1e-5)


def test_no_class_token():
    layer = _encoder(class_token=False)
    out = layer(np.zeros((2, 9, 5), "float32"))
    assert out.shape == (2, 9, 8)
    assert layer.pos_embedding.shape == (1, 9, 8)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hidden_dim=0"):
        _encoder(hidden_dim=0)
    with pytest.raises(ValueError, match="position_embedding='2d'"):
        _encoder(position_embedding="2d")
    with pytest.raises(ValueError, match="hidden_dim=6"):
        _encoder(hidden_dim=6, position_embedding="sincos2d")
    with pytest.raises(ValueError, match="grid_size"):
        _encoder(grid_size=(2, 0))
    for kind in ("sincos2d", "learned2d"):  # a flat sequence without a grid
        with pytest.raises(
            ValueError,
            match=f"'{kind}'.*needs `grid_size`.*"
            r"Received: input shape \(1, 16, 5\)",
        ):
            _encoder(position_embedding=kind)(np.zeros((1, 16, 5), "float32"))


def test_flat_patches_are_on_the_layers_grid_never_a_guessed_one():
    # 16 flat patches may be a 4x4 or a 2x8 grid, 64 an 8x8 or a 4x16: the
    # layer once took the square and resampled to it, silently wrong for
    # any other shape.
    layer = _encoder(grid_size=(4, 4))
    layer(np.zeros((1, 4, 4, 5), "float32"))
    randomize_weights(layer)
    posemb = layer.pos_embedding.numpy()
    flat = rng.normal(size=(1, 16, 5)).astype("float32")
    tokens = (
        flat @ layer.projection.kernel.numpy() + layer.projection.bias.numpy()
    )
    out = layer(flat).numpy()
    np.testing.assert_allclose(out[:, 1:] - tokens, posemb[:, 1:], atol=1e-5)
    with pytest.raises(
        ValueError,
        match=r"for 16 patches \(a 4x4 grid\).*flat "
        r"sequence of 64.*as a grid",
    ):
        layer(np.zeros((1, 64, 5), "float32"))
    # As a grid, the same number of patches in another shape is resampled.
    wide = rng.normal(size=(1, 2, 8, 5)).astype("float32")
    tokens = wide.reshape(1, 16, 5) @ layer.projection.kernel.numpy()
    tokens += layer.projection.bias.numpy()
    want = keras_vit.patch_grid.resample_position_embeddings(
        posemb, (2, 8), (4, 4)
    )
    np.testing.assert_allclose(
        layer(wide).numpy()[:, 1:] - tokens, np.asarray(want)[:, 1:], atol=1e-5
    )
    assert layer.compute_output_shape((None, 16, 5)) == (None, 17, 8)


def test_built_from_a_flat_sequence_the_grid_stays_unknown():
    # Built from 6 flat patches without grid_size (once refused: "not a
    # square", and a square count was taken to be a square grid): learned
    # embeddings for 6 positions, never resampled to any grid.
    layer = _encoder()
    layer(np.zeros((2, 6, 5), "float32"))
    assert layer.grid_size is None and layer.pos_embedding.shape == (1, 7, 8)
    assert layer.get_config()["grid_size"] is None
    randomize_weights(layer)
    as_grid = rng.normal(size=(1, 2, 3, 5)).astype("float32")
    np.testing.assert_allclose(
        layer(as_grid).numpy(),
        layer(as_grid.reshape(1, 6, 5)).numpy(),
        atol=1e-6,
    )
    with pytest.raises(
        ValueError,
        match=r"without `grid_size`.*not known.*"
        r"Received: grid=\(4, 4\)",
    ):
        layer(np.zeros((1, 4, 4, 5), "float32"))


def test_the_grid_is_saved_with_the_weights(tmp_path):
    import h5py

    def model(grid):
        images = keras.Input((*grid, 5))
        tokens = keras_vit.layers.PatchEncoder(8, name="encoder")(images)
        return keras.Model(images, tokens)

    square = model((4, 4))
    randomize_weights(square)
    path = str(tmp_path / "square.weights.h5")
    square.save_weights(path)
    with h5py.File(path) as file:
        assert list(file["layers/patch_encoder/vars/grid_size"][()]) == [4, 4]
    same = model((4, 4))
    same.load_weights(path)
    for a, b in zip(same.weights, square.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Keras copies same-sized embeddings onto another grid: refused.
    with pytest.raises(
        ValueError,
        match=r"saved on a 4x4 patch grid and the "
        r"layer has 2x8.*keras_vit.load_weights",
    ):
        model((2, 8)).load_weights(path)
    # A file without the record (written before it) still loads.
    with h5py.File(path, "a") as file:
        del file["layers/patch_encoder/vars/grid_size"]
    model((2, 8)).load_weights(path)


def test_config_round_trip_and_output_shape():
    patches = rng.normal(size=(2, 6, 5)).astype("float32")
    for kwargs in (
        {"grid_size": (2, 3)},
        {"grid_size": (2, 3), "class_token": False, "interpolation": "bicubic"},
        {"grid_size": (2, 3), "position_embedding": "sincos2d"},
    ):
        layer = _encoder(name="enc", **kwargs)
        assert_config_round_trip(layer, patches)
        assert_output_shape_matches(layer, patches)


def test_learned2d_concatenates_column_and_row_embeddings():
    # The paper's 2D ablation (Appendix D.4): patch (i, j) gets [x_j, y_i].
    patches = rng.normal(size=(2, 6, 5)).astype("float32")
    layer = _encoder(grid_size=(2, 3), position_embedding="learned2d")
    layer(patches)
    randomize_weights(layer)
    assert layer.pos_embedding_x.shape == (
        3,
        4,
    ) and layer.pos_embedding_y.shape == (2, 4)
    x, y = layer.pos_embedding_x.numpy(), layer.pos_embedding_y.numpy()
    posemb = np.stack(
        [np.concatenate([x[j], y[i]]) for i in range(2) for j in range(3)]
    )
    tokens = (
        patches @ layer.projection.kernel.numpy()
        + layer.projection.bias.numpy()
    )
    out = layer(patches).numpy()
    np.testing.assert_allclose(
        out[:, 0], np.repeat(layer.cls.numpy()[0], 2, 0), atol=1e-6
    )
    np.testing.assert_allclose(out[:, 1:], tokens + posemb, atol=1e-5)
    np.testing.assert_allclose(
        layer.position_embeddings()[0, 1:], posemb, atol=1e-6
    )
    # Another grid: each axis resampled on its own (here 2x3 -> 4x3: the
    # columns stay, the rows are interpolated).
    bigger = layer.position_embeddings((4, 3)).numpy()[0, 1:].reshape(4, 3, 8)
    np.testing.assert_allclose(
        bigger[:, :, :4], np.broadcast_to(x, (4, 3, 4)), atol=1e-6
    )
    rows = keras_vit.patch_grid.resample_position_embeddings(
        y, (4, 1), source_grid=(2, 1), num_prefix_tokens=0
    ).numpy()
    np.testing.assert_allclose(bigger[:, 0, 4:], rows, atol=1e-6)
    assert layer(rng.normal(size=(2, 4, 3, 5)).astype("float32")).shape == (
        2,
        13,
        8,
    )
    with pytest.raises(ValueError, match="hidden_dim=7"):
        _encoder(hidden_dim=7, position_embedding="learned2d")
    assert_config_round_trip(
        _encoder(grid_size=(2, 3), position_embedding="learned2d", name="enc"),
        patches,
    )
