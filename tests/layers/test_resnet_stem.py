import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import assert_config_round_trip
from tests.helpers import assert_output_shape_matches
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


def test_std_conv_standardises_each_output_channel():
    x = rng.normal(size=(2, 6, 6, 3)).astype("float32")
    conv = keras_vit.layers.StdConv2D(4, 3, padding="same")
    conv.build(x.shape)
    kernel = rng.normal(1.0, 2.0, size=(3, 3, 3, 4)).astype("float32")
    conv.kernel.assign(kernel)
    mean = kernel.mean(axis=(0, 1, 2), keepdims=True)
    var = kernel.var(axis=(0, 1, 2), keepdims=True)
    standardised = (kernel - mean) / np.sqrt(var + 1e-8)
    expected = keras.ops.conv(x, standardised, padding="same").numpy()
    np.testing.assert_allclose(conv(x).numpy(), expected, atol=1e-4)
    assert not conv.use_bias
    # Scaling or shifting a channel's kernel changes nothing.
    conv.kernel.assign(kernel * 5.0 + 3.0)
    np.testing.assert_allclose(conv(x).numpy(), expected, atol=1e-3)
    assert_config_round_trip(conv, x, atol=1e-4)


def test_same_padding_is_tensorflows_asymmetric_padding():
    # 7x7 stride 2 on an even size pads (2, 3): the output's first pixel
    # sees rows -2..4 of the input.
    x = np.zeros((1, 8, 8, 1), "float32")
    x[0, 0, 0, 0] = 1.0
    conv = keras_vit.layers.StdConv2D(
        1, 7, strides=2, padding="same", epsilon=1e-8
    )
    conv.build(x.shape)
    kernel = np.zeros((7, 7, 1, 1), "float32")
    kernel[2, 2] = 1.0  # picks input pixel (2*i - 2 + 2) = 2*i
    conv.kernel.assign(kernel)
    out = conv(x).numpy()[0, :, :, 0]
    standardised_one = (1 - 1 / 49) / np.sqrt(1 / 49 - 1 / 49**2)
    assert out[0, 0] == pytest.approx(standardised_one, rel=1e-4)


def test_stem_stride_and_channels():
    stem = keras_vit.layers.ResNetStem(block_units=(3, 4, 9))
    assert stem.compute_output_shape((None, 224, 224, 3)) == (
        None,
        14,
        14,
        1024,
    )
    assert stem.stride == 16
    four = keras_vit.layers.ResNetStem(block_units=(2, 2, 2, 2))
    assert four.compute_output_shape((None, 224, 224, 3)) == (None, 7, 7, 2048)
    assert four.stride == 32


def test_small_stem_runs_and_round_trips():
    stem = keras_vit.layers.ResNetStem(
        block_units=(1, 2), width=8, groups=4, name="stem"
    )
    x = rng.uniform(-1, 1, size=(2, 32, 32, 3)).astype("float32")
    out = stem(x)
    assert out.shape == (2, 4, 4, 64)
    assert np.all(out.numpy() >= 0)  # every unit ends with a ReLU
    randomize_weights(stem, scale=0.3)
    assert_config_round_trip(stem, x, atol=1e-4)
    assert_output_shape_matches(stem, x)


def test_bad_arguments():
    with pytest.raises(ValueError, match="block_units"):
        keras_vit.layers.ResNetStem(block_units=())
    with pytest.raises(ValueError, match="groups=32"):
        keras_vit.layers.ResNetStem(block_units=(1,), width=8)
    with pytest.raises(ValueError, match="stage_filters"):
        keras_vit.layers.ResNetStem(block_units=(1, 1), stage_filters=[64])
    with pytest.raises(ValueError, match="filters=30"):
        keras_vit.layers.ResNetBottleneck(30)
