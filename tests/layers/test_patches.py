import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from tests import reference
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches


def test_patch_order_on_arange_image():
    # 4x4 single-channel image 0..15, 2x2 patches: row-major patch order,
    # each patch flattened row by row.
    image = np.arange(16, dtype="float32").reshape(1, 4, 4, 1)
    out = keras_vit.layers.Patches(2)(image).numpy()
    expected = np.array(
        [[[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]],
        dtype="float32",
    )
    np.testing.assert_array_equal(out, expected)


def test_channel_order_and_non_square_image():
    # (row, column, channel) order inside a patch, on a 6x9 image with 2
    # channels and 3x3 patches: a 2x3 grid.
    image = np.arange(2 * 6 * 9 * 2, dtype="float32").reshape(2, 6, 9, 2)
    out = keras_vit.layers.Patches(3)(image).numpy()
    assert out.shape == (2, 6, 18)
    np.testing.assert_array_equal(out, reference.patches(image, 3))
    # The first patch's first values: pixel (0,0) ch 0, 1; pixel (0,1) ch 0.
    np.testing.assert_array_equal(out[0, 0, :3], [0, 1, 2])
    # Second patch starts 3 pixels (6 values) to the right.
    np.testing.assert_array_equal(out[0, 1, :2], [6, 7])


def test_grid_output_matches_flat_output():
    image = np.random.default_rng(0).normal(size=(2, 8, 12, 3))
    flat = keras_vit.layers.Patches(4)(image).numpy()
    grid = keras_vit.layers.Patches(4, flatten=False)(image).numpy()
    assert grid.shape == (2, 2, 3, 48)
    np.testing.assert_array_equal(grid.reshape(2, 6, 48), flat)


def test_patches_then_dense_equals_strided_convolution():
    # The projection kernel is the original checkpoints' conv kernel
    # (P, P, C, D) reshaped: both ways give the same tokens.
    rng = np.random.default_rng(0)
    images = rng.normal(size=(2, 8, 12, 3)).astype("float32")
    conv_kernel = rng.normal(size=(4, 4, 3, 5)).astype("float32")
    conv = keras.ops.conv(images, conv_kernel, strides=4).numpy()
    dense = keras_vit.patch_grid.conv_to_dense_kernel(conv_kernel)
    tokens = keras_vit.layers.Patches(4)(images).numpy() @ dense.numpy()
    np.testing.assert_allclose(tokens, conv.reshape(2, 6, 5), atol=1e-5)
    back = keras_vit.patch_grid.dense_to_conv_kernel(dense, 4, 3)
    np.testing.assert_array_equal(back.numpy(), conv_kernel)


def test_dynamic_image_size():
    layer = keras_vit.layers.Patches(4)
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    image = np.random.default_rng(0).normal(size=(1, 8, 16, 3))
    np.testing.assert_array_equal(
        fn(tf.constant(image, tf.float32)).numpy(),
        reference.patches(image, 4).astype("float32"),
    )


def test_image_not_divisible_by_patch_size():
    with pytest.raises(ValueError, match="patch_size=16.*225"):
        keras_vit.layers.Patches(16)(np.zeros((1, 225, 224, 3)))


def test_a_size_known_only_when_the_graph_runs_is_checked_then():
    # Built for any size, the layer checks the size of each call: in the
    # graph, an error that names the size (not a reshape's).
    layer = keras_vit.layers.Patches(4)
    layer.build((None, None, None, 3))
    with pytest.raises(ValueError, match=r"patch_size=4.*\(8, 18, 3\)"):
        layer(np.zeros((1, 8, 18, 3), "float32"))
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"patch_size=4.*\[8 18\]"
    ):
        fn(tf.zeros((1, 8, 18, 3)))


def test_pad_pads_the_bottom_and_right_to_the_patch_size():
    image = np.random.default_rng(0).normal(size=(2, 7, 9, 3))
    padded = np.pad(image, [(0, 0), (0, 1), (0, 3), (0, 0)])
    layer = keras_vit.layers.Patches(4, flatten=False, pad=True)
    expected = reference.patches(padded, 4).reshape(2, 2, 3, 48)
    np.testing.assert_allclose(layer(image), expected, atol=1e-6)
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    np.testing.assert_allclose(fn(tf.constant(image, "float32")), expected)
    assert layer.compute_output_shape((2, 7, 9, 3)) == (2, 2, 3, 48)
    assert_config_round_trip(layer, image.astype("float32"))
    with pytest.raises(ValueError, match="Received: pad='yes'"):
        keras_vit.layers.Patches(4, pad="yes")


@pytest.mark.parametrize("bad", [0, -2, 2.5, "16", True, None])
def test_invalid_patch_size(bad):
    with pytest.raises(ValueError, match="patch_size"):
        keras_vit.layers.Patches(bad)


def test_config_round_trip_and_output_shape():
    images = np.zeros((2, 8, 12, 3), "float32")
    for flatten in (True, False):
        layer = keras_vit.layers.Patches(4, flatten=flatten, name="p")
        assert_config_round_trip(layer, images)
        assert_output_shape_matches(layer, images)


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("size", [(0, 8), (8, 0), (0, 0)])
def test_an_image_of_no_patch_one_way_is_refused(pad, size):
    # Traced for any size, a 0x8 image gave an empty grid (and a ViT an
    # output of no patch at all); a size known while building did too.
    layer = keras_vit.layers.Patches(4, pad=pad)
    images = np.zeros((1, *size, 3), "float32")
    with pytest.raises(ValueError, match=r"at least one patch.*patch_size=4"):
        layer(images)
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    shown = r"\[{} {}\]".format(*size)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=f"at least one patch.*{shown}"
    ):
        fn(images)
