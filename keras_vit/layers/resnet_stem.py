"""Hybrid ViT stems: the BiT-style ResNet of the paper's hybrid models."""

import keras
from keras import backend
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers import layer_norm


@keras.saving.register_keras_serializable(package="keras_vit")
class StdConv2D(keras.layers.Conv2D):
    """A `Conv2D` with weight standardisation (Qiao et al., 2019).

    Each output channel's kernel is standardised over (height, width, input
    channels) before the convolution: `(w - mean) / sqrt(var + epsilon)`,
    as in the ResNet of the ViT paper's hybrids (BiT, Kolesnikov et al.,
    2019). The stored kernel is the raw one, as in the checkpoints.

    Args:
        *args: `filters`, `kernel_size`, `strides`, `padding`, as
            `keras.layers.Conv2D` takes them.
        epsilon: float, added to the variance. Defaults to `1e-8` (timm's
            port of the hybrids; the original code adds `1e-5` to the
            standard deviation, a difference below 1e-4 relative).
        **kwargs: other `keras.layers.Conv2D` arguments.

    Example:

    >>> conv = keras_vit.layers.StdConv2D(64, 7, strides=2, padding="same")
    >>> conv(np.zeros((1, 224, 224, 3))).shape
    TensorShape([1, 112, 112, 64])
    """

    def __init__(self, *args, epsilon=1e-8, **kwargs):
        kwargs.setdefault("use_bias", False)
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(*args, **kwargs)
        self.epsilon = arg_checks.epsilon("epsilon", epsilon)

    def build(self, input_shape):
        arg_checks.known_last_dim("StdConv2D", input_shape, "the channels")
        super().build(input_shape)

    def convolution_op(self, inputs, kernel):
        kernel = ops.cast(kernel, "float32")
        mean = ops.mean(kernel, axis=(0, 1, 2), keepdims=True)
        variance = ops.mean(
            ops.square(kernel - mean), axis=(0, 1, 2), keepdims=True
        )
        kernel = (kernel - mean) * ops.rsqrt(variance + self.epsilon)
        return super().convolution_op(inputs, ops.cast(kernel, inputs.dtype))

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config


def _conv(filters, kernel_size, strides, name, epsilon, dtype):
    return StdConv2D(
        filters,
        kernel_size,
        strides=strides,
        padding="same",
        epsilon=epsilon,
        name=name,
        dtype=dtype,
    )


@keras.saving.register_keras_serializable(package="keras_vit")
class GroupNorm(keras.layers.GroupNormalization):
    """Group normalisation (Wu and He, 2018) written to quantize cleanly.

    `keras.layers.GroupNormalization` with its normalisation written out
    per group as `(x - mean) * rsqrt(mean((x - mean)²) + epsilon) * gamma
    + beta`, the form of `keras_vit.layers.LayerNorm`: Keras's own
    (`ops.moments`, then `x * inv - mean * inv`) leaves float NEG and
    SQUARE ops in a fully int8-quantized TFLite graph and fails int16x8
    quantization, so a hybrid could not be quantized. The same function
    (to float32 rounding), weights and variable names as Keras's layer:
    checkpoints and `.keras` files load unchanged.

    Args:
        **kwargs: `keras.layers.GroupNormalization` arguments (`groups`,
            `epsilon`, `name`, `dtype`, ...).

    Example:

    >>> norm = GroupNorm(groups=4, epsilon=1e-5)
    >>> norm(np.zeros((1, 8, 8, 16))).shape
    TensorShape([1, 8, 8, 16])
    """

    def _apply_normalization(self, reshaped_inputs, input_shape):
        dtype = reshaped_inputs.dtype
        # In float32 (float64 for float64 inputs) under mixed precision,
        # as Keras's layer: group sums overflow in float16.
        x = ops.cast(reshaped_inputs, backend.result_type(dtype, "float32"))
        axes = list(range(1, len(x.shape)))
        axes.pop(-2 if self.axis == -1 else self.axis - 1)  # the groups
        _, centered, inv_std = layer_norm.moments(x, self.epsilon, axes)
        y = centered * inv_std
        shape = self._create_broadcast_shape(input_shape)
        if self.scale:
            y = y * ops.cast(ops.reshape(self.gamma, shape), x.dtype)
        if self.center:
            y = y + ops.cast(ops.reshape(self.beta, shape), x.dtype)
        return ops.cast(y, dtype)


def _norm(groups, epsilon, name, dtype):
    return GroupNorm(groups=groups, epsilon=epsilon, name=name, dtype=dtype)


@keras.saving.register_keras_serializable(package="keras_vit")
class ResNetBottleneck(keras.layers.Layer):
    """A bottleneck unit of the hybrid's ResNet (not pre-activation).

    conv1 1x1 → GroupNorm → ReLU → conv2 3x3 (with the stride) → GroupNorm
    → ReLU → conv3 1x1 → GroupNorm, plus the shortcut (a 1x1 projection
    with GroupNorm in the first unit of a stage), then ReLU. Convolutions
    are weight-standardised, padding is TensorFlow's "same".

    Args:
        filters: int, output channels (4x the bottleneck width).
        strides: int, the stride of conv2 and of the projection.
        projection: bool, whether the shortcut is projected.
        groups: int, GroupNorm groups. Defaults to `32`.
        norm_epsilon: float, GroupNorm epsilon. Defaults to `1e-5`.
        conv_epsilon: float, weight standardisation epsilon. Defaults to
            `1e-8`.
        **kwargs: base layer arguments.

    Example:

    >>> unit = keras_vit.layers.ResNetBottleneck(256, 1, projection=True)
    >>> unit(np.zeros((1, 56, 56, 64))).shape
    TensorShape([1, 56, 56, 256])
    """

    def __init__(
        self,
        filters,
        strides=1,
        projection=False,
        groups=32,
        norm_epsilon=1e-5,
        conv_epsilon=1e-8,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.filters = arg_checks.positive_int("filters", filters)
        if self.filters % 4:
            raise ValueError(
                "`filters` must be a multiple of 4. Received: "
                f"filters={filters}"
            )
        self.strides = arg_checks.positive_int("strides", strides)
        self.projection = arg_checks.boolean("projection", projection)
        self.groups = arg_checks.positive_int("groups", groups)
        self.norm_epsilon = arg_checks.epsilon("norm_epsilon", norm_epsilon)
        self.conv_epsilon = arg_checks.epsilon("conv_epsilon", conv_epsilon)
        mid = self.filters // 4
        for channels in (mid, self.filters):
            if channels % self.groups:
                raise ValueError(
                    f"GroupNorm needs channels divisible by groups. Received: "
                    f"groups={groups} for {channels} channels "
                    f"(filters={filters})"
                )
        policy, ce, ne = self.dtype_policy, self.conv_epsilon, self.norm_epsilon
        self.conv1 = _conv(mid, 1, 1, "conv1", ce, policy)
        self.norm1 = _norm(self.groups, ne, "norm1", policy)
        self.conv2 = _conv(mid, 3, self.strides, "conv2", ce, policy)
        self.norm2 = _norm(self.groups, ne, "norm2", policy)
        self.conv3 = _conv(self.filters, 1, 1, "conv3", ce, policy)
        self.norm3 = _norm(self.groups, ne, "norm3", policy)
        if self.projection:
            self.proj_conv = _conv(
                self.filters, 1, self.strides, "proj_conv", ce, policy
            )
            self.proj_norm = _norm(self.groups, ne, "proj_norm", policy)

    def build(self, input_shape):
        mid_shape = self.conv1.compute_output_shape(input_shape)
        self.conv1.build(input_shape)
        self.norm1.build(mid_shape)
        self.conv2.build(mid_shape)
        out_shape = self.conv2.compute_output_shape(mid_shape)
        self.norm2.build(out_shape)
        self.conv3.build(out_shape)
        final = self.conv3.compute_output_shape(out_shape)
        self.norm3.build(final)
        if self.projection:
            self.proj_conv.build(input_shape)
            self.proj_norm.build(final)
        elif input_shape[-1] != self.filters or self.strides != 1:
            raise ValueError(
                "A unit without projection needs as many input channels as "
                f"filters and stride 1. Received: filters={self.filters}, "
                f"strides={self.strides} for input shape {tuple(input_shape)}"
            )

    def call(self, inputs):
        x = ops.relu(self.norm1(self.conv1(inputs)))
        x = ops.relu(self.norm2(self.conv2(x)))
        x = self.norm3(self.conv3(x))
        shortcut = (
            self.proj_norm(self.proj_conv(inputs))
            if self.projection
            else inputs
        )
        return ops.relu(x + shortcut)

    def compute_output_shape(self, input_shape):
        shape = self.conv2.compute_output_shape(
            self.conv1.compute_output_shape(input_shape)
        )
        return (*shape[:-1], self.filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "strides": self.strides,
                "projection": self.projection,
                "groups": self.groups,
                "norm_epsilon": self.norm_epsilon,
                "conv_epsilon": self.conv_epsilon,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class ResNetStem(keras.layers.Layer):
    """The ResNet that feeds the paper's hybrid ViTs with a feature map.

    The BiT-style ResNet of google-research/vision_transformer (and timm's
    `vit_*_r50_*` / `vit_*_r26_*`): a 7x7 stride-2 weight-standardised
    root convolution, GroupNorm, ReLU and a 3x3 stride-2 max-pool, then
    stages of `ResNetBottleneck` units; the first stage keeps the
    resolution, each later one halves it. "R50+ViT-B/16" uses
    `block_units=(3, 4, 9)` (ResNet-50 with stage 4 removed and stage 3
    grown to 9 units: stride 16, 1024 channels); R26 and R50 with 4 stages
    have stride 32.

    Args:
        block_units: tuple of ints, units per stage.
        width: int, the bottleneck width of the first stage; stage `i`
            outputs `4 · width · 2^i` channels. Defaults to `64`.
        root_width: int, channels of the root convolution. Defaults to
            `None`: `width`.
        stage_filters: list of ints, the output channels of each stage,
            overriding `4 · width · 2^i` (the bottleneck is a quarter).
            Defaults to `None`.
        groups: int, GroupNorm groups. Defaults to `32`.
        norm_epsilon: float, GroupNorm epsilon. Defaults to `1e-5`.
        conv_epsilon: float, weight-standardisation epsilon. Defaults to
            `1e-8`.
        **kwargs: base layer arguments.

    Call arguments:
        images: `(B, H, W, C)` images (already normalised).

    Returns:
        The `(B, H / stride, W / stride, 4 · width · 2^(stages - 1))` map.

    Example:

    >>> stem = keras_vit.layers.ResNetStem(block_units=(3, 4, 9))
    >>> stem(np.zeros((1, 224, 224, 3))).shape
    TensorShape([1, 14, 14, 1024])
    """

    def __init__(
        self,
        block_units,
        width=64,
        root_width=None,
        stage_filters=None,
        groups=32,
        norm_epsilon=1e-5,
        conv_epsilon=1e-8,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        if not isinstance(block_units, (list, tuple)) or not block_units:
            raise ValueError(
                "`block_units` must be a non-empty list of units per stage. "
                f"Received: block_units={block_units!r}"
            )
        self.block_units = tuple(
            arg_checks.positive_int("block_units", u) for u in block_units
        )
        self.width = arg_checks.positive_int("width", width)
        self.root_width = arg_checks.positive_int(
            "root_width", width if root_width is None else root_width
        )
        if stage_filters is None:
            filters = [
                4 * self.width * 2**i for i in range(len(self.block_units))
            ]
        else:
            if not isinstance(stage_filters, (list, tuple)) or len(
                stage_filters
            ) != len(self.block_units):
                raise ValueError(
                    "`stage_filters` must give one channel count per stage. "
                    f"Received: stage_filters={stage_filters!r} for "
                    f"block_units={block_units!r}"
                )
            filters = [
                arg_checks.positive_int("stage_filters", f)
                for f in stage_filters
            ]
        self.stage_filters = None if stage_filters is None else list(filters)
        self._filters = filters
        self.groups = arg_checks.positive_int("groups", groups)
        self.norm_epsilon = arg_checks.epsilon("norm_epsilon", norm_epsilon)
        self.conv_epsilon = arg_checks.epsilon("conv_epsilon", conv_epsilon)
        if self.root_width % self.groups:
            raise ValueError(
                "GroupNorm needs the root width divisible by groups. Received: "
                f"root_width={self.root_width}, groups={groups}"
            )
        policy = self.dtype_policy
        self.root_conv = _conv(
            self.root_width, 7, 2, "root_conv", self.conv_epsilon, policy
        )
        self.root_norm = _norm(
            self.groups, self.norm_epsilon, "root_norm", policy
        )
        self.root_pool = keras.layers.MaxPooling2D(
            3, strides=2, padding="same", name="root_pool", dtype=policy
        )
        self.units = []
        for stage, count in enumerate(self.block_units):
            for unit in range(count):
                self.units.append(
                    ResNetBottleneck(
                        filters[stage],
                        strides=2 if stage > 0 and unit == 0 else 1,
                        projection=unit == 0,
                        groups=self.groups,
                        norm_epsilon=self.norm_epsilon,
                        conv_epsilon=self.conv_epsilon,
                        # The checkpoints' names: block<stage>/unit<unit>.
                        name=f"block{stage + 1}_unit{unit + 1}",
                        dtype=policy,
                    )
                )

    @property
    def stride(self):
        """The stem's total stride: 4 for the root, then 2 per later stage."""
        return 4 * 2 ** (len(self.block_units) - 1)

    @property
    def output_channels(self):
        return self._filters[-1]

    def build(self, input_shape):
        self.root_conv.build(input_shape)
        shape = self.root_conv.compute_output_shape(input_shape)
        self.root_norm.build(shape)
        shape = self.root_pool.compute_output_shape(shape)
        for unit in self.units:
            unit.build(shape)
            shape = unit.compute_output_shape(shape)

    def call(self, images):
        x = self.root_pool(ops.relu(self.root_norm(self.root_conv(images))))
        for unit in self.units:
            x = unit(x)
        return x

    def compute_output_shape(self, input_shape):
        shape = self.root_pool.compute_output_shape(
            self.root_conv.compute_output_shape(input_shape)
        )
        for unit in self.units:
            shape = unit.compute_output_shape(shape)
        return shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "block_units": list(self.block_units),
                "width": self.width,
                "root_width": self.root_width,
                "stage_filters": self.stage_filters,
                "groups": self.groups,
                "norm_epsilon": self.norm_epsilon,
                "conv_epsilon": self.conv_epsilon,
            }
        )
        return config
