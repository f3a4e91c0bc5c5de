"""`LayerScale`: a learned per-channel scale of a residual branch."""

import keras
from keras import ops

from keras_vit import arg_checks


@keras.saving.register_keras_serializable(package="keras_vit")
class LayerScale(keras.layers.Layer):
    """Multiplies each channel by a learned scale, `y = x * gamma`.

    CaiT's LayerScale ([Touvron et al., 2021](https://arxiv.org/abs/2103.17239)),
    also in DeiT III and DINOv2: each residual branch of a block is scaled
    per channel before it is added, `gamma` initialised to a small
    `init_value` (timm's `init_values`), so that a deep model starts near
    the identity. `TransformerBlock(layer_scale_init=...)` puts one after
    the attention (`ls1`) and one after the MLP (`ls2`), timm's names.

    Args:
        init_value: float, the initial value of every scale. Defaults to
            `1e-5`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: a tensor whose last axis is the channels.

    Returns:
        A tensor of the same shape.

    Example:

    >>> layer = keras_vit.layers.LayerScale(0.1)
    >>> layer(np.ones((1, 2, 4))).shape
    TensorShape([1, 2, 4])
    """

    def __init__(self, init_value=1e-5, **kwargs):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.init_value = layer_scale_init("init_value", init_value)

    def build(self, input_shape):
        dim = arg_checks.known_last_dim(
            "LayerScale", input_shape, "the scaled channels"
        )
        self.input_spec = keras.layers.InputSpec(min_ndim=1, axes={-1: dim})
        self.gamma = self.add_weight(
            shape=(dim,),
            initializer=keras.initializers.Constant(self.init_value),
            name="gamma",
        )

    def call(self, inputs):
        return inputs * ops.cast(self.gamma, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"init_value": self.init_value})
        return config


def layer_scale_init(name, value):
    """`value` checked as a LayerScale init value: a number > 0 that
    float32 holds (as an epsilon must be)."""
    return arg_checks.epsilon(name, value)
