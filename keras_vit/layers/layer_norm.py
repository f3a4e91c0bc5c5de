"""`LayerNorm`: layer normalisation written to quantize cleanly."""

import keras
from keras import ops
from keras.backend import standardize_dtype

from keras_vit import arg_checks
from keras_vit.layers import _fused


@keras.saving.register_keras_serializable(package="keras_vit")
class LayerNorm(keras.layers.Layer):
    """Layer normalisation over the last axis, computed in float32 or wider.

    `y = (x - mean) * rsqrt(var + epsilon) * gamma + beta`
    ([Ba et al., 2016](https://arxiv.org/abs/1607.06450)), the same function
    as `keras.layers.LayerNormalization(epsilon=epsilon)`. It is written out
    with plain ops because that form converts to TFLite without the float
    NEG ops Keras's layer leaves in a fully int8-quantized graph, and it
    quantizes to int16x8, where Keras's layer fails. Under mixed precision
    the statistics, the scale and the offset are float32 and the result is
    cast back; in a float64 layer they are float64 (`statistics_dtype`).

    The backward pass is the closed form
    `dx = (g - mean(g) - x̂ · mean(g · x̂)) / σ` (`g` the gradient of the
    normalised `x̂`, `σ = sqrt(var + epsilon)`), not automatic
    differentiation of the forward ops: the same gradient (to float32
    rounding), with two row reductions instead of the five or so that
    autodiff leaves, which XLA on a CPU lowers into slow windowed
    reductions (timings: `benchmarks/results/2026-11-30-profile.md`); the
    forward graph, and so every export, is unchanged.

    In a bfloat16 evaluation or prediction step that its trainer says runs
    without XLA (`step_xla=False`, see `kernels`: `evaluate` and `predict` of a
    model compiled with `jit_compile=False`, as `keras-vit` compiles mixed
    bfloat16 on a CPU), the layer is one XLA kernel (`fused_forward`) rather
    than a dozen TensorFlow ops, each a pass over the tokens, for some more
    resident memory (XLA's compiler, in a process that may not have used it).
    Not in float32, where the fewer passes did not pay
    (`benchmarks/results/2026-12-03-xeon-where-the-time-goes.md`). XLA's sums
    round otherwise than TensorFlow's: the output equals the plain graph's to
    float32 rounding before the cast. Called directly (or traced for an export)
    the layer keeps the plain graph.

    Args:
        epsilon: float, added to the variance. Defaults to `1e-6`, the
            original ViT code's value.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: a tensor of any rank >= 1, normalised over its last axis.
        training: bool, whether the call is training (Keras passes it on).

    Returns:
        A tensor of the same shape and of the layer's compute dtype.

    Example:

    >>> x = np.array([[1.0, 2.0, 3.0]])
    >>> keras_vit.layers.LayerNorm()(x)  # ~ [[-1.2247, 0.0, 1.2247]]
    """

    def __init__(self, epsilon=1e-6, **kwargs):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.epsilon = arg_checks.epsilon("epsilon", epsilon)
        #: What the trainer said of the step being traced (`kernels`).
        self.step_xla = None

    def build(self, input_shape):
        dim = arg_checks.known_last_dim(
            "LayerNorm", input_shape, "the normalised features"
        )
        self.input_spec = keras.layers.InputSpec(min_ndim=1, axes={-1: dim})
        # Not autocast: under mixed precision the float32 arithmetic takes
        # the float32 scale and offset, not their rounding to the compute
        # dtype (as Keras's LayerNormalization).
        self.gamma = self.add_weight(
            shape=(dim,), initializer="ones", name="gamma", autocast=False
        )
        self.beta = self.add_weight(
            shape=(dim,), initializer="zeros", name="beta", autocast=False
        )

    def call(self, inputs, training=None):
        gamma, beta = self.scale_and_offset()
        if self._fuses(training):
            return fused_forward(
                inputs, gamma, beta, self.epsilon, self.compute_dtype
            )[0]
        y = _normalize(ops.cast(inputs, gamma.dtype), self.epsilon)
        return ops.cast(y * gamma + beta, self.compute_dtype)

    def scale_and_offset(self):
        """`gamma` and `beta` in the dtype the layer computes its
        statistics in (`statistics_dtype`)."""
        dtype = statistics_dtype(self.compute_dtype)
        return tuple(ops.cast(w, dtype) for w in (self.gamma, self.beta))

    def _fuses(self, training):
        """Whether this call is `fused_forward`: a bfloat16 evaluation or
        prediction step that runs without XLA (the class docstring)."""
        return (
            not training
            and self.compute_dtype == "bfloat16"
            and self.step_xla is False
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config


def statistics_dtype(dtype):
    """The dtype that statistics of `dtype` tensors are computed in (the
    LayerNorm's moments, the attention's softmax, the GELU, the model's
    classifier activation): the wider of `dtype` and float32. float16 and
    bfloat16 (mixed precision) take float32, where their sums and
    exponentials keep their precision; a float64 model keeps float64
    (float32 statistics would cap it at float32 precision, silently)."""
    if standardize_dtype(dtype) == "float64":
        return "float64"
    return "float32"


def _normalize(x, epsilon):
    """`(x - mean) / sqrt(var + epsilon)` over the last axis, closed-form
    gradient."""

    @ops.custom_gradient
    def normalize(x):
        _, centered, inv_std = moments(x, epsilon)
        normalized = centered * inv_std

        def grad(*args, upstream=None):
            # Keras passes the upstream gradient positionally on TensorFlow
            # and as `upstream` on other backends.
            g = args[0] if upstream is None else upstream
            return normalized_gradient(g, normalized, inv_std)

        return normalized, grad

    return normalize(x)


# Module-level, `epsilon` and `dtype` static arguments: compiled once per
# shape, not once per LayerNorm of a model.
@_fused.elementwise
def fused_forward(x, gamma, beta, epsilon, dtype):
    """The LayerNorm of `x` over its last axis in `dtype`, and the mean and
    inverse deviation of each row, all computed in the dtype of `gamma` and
    `beta` (`statistics_dtype`), as one XLA kernel on TensorFlow
    (`_fused`)."""
    mean, centered, inv_std = moments(ops.cast(x, gamma.dtype), epsilon)
    return ops.cast(centered * inv_std * gamma + beta, dtype), mean, inv_std


def moments(x, epsilon, axis=-1):
    """`(mean, x - mean, 1 / sqrt(var + epsilon))` of `x` over `axis` (an
    axis or a list of them; the mean and the inverse deviation keep them,
    of size 1). The hybrid stem's `GroupNorm` takes its groups' too."""
    mean = ops.mean(x, axis=axis, keepdims=True)
    centered = x - mean
    # `centered * centered`, not `ops.square(centered)`: the TFLite
    # converter fuses square(x - mean) into SQUARED_DIFFERENCE, which
    # LiteRT cannot run on int16 (int16x8 quantization). Same numbers.
    variance = ops.mean(centered * centered, axis=axis, keepdims=True)
    return mean, centered, ops.rsqrt(variance + epsilon)


def normalized_gradient(g, normalized, inv_std):
    """The gradient of `x` from `g`, that of `normalized = (x - mean) *
    inv_std`, in closed form."""
    mean_g = ops.mean(g, axis=-1, keepdims=True)
    mean_gx = ops.mean(g * normalized, axis=-1, keepdims=True)
    return inv_std * (g - mean_g - normalized * mean_gx)
