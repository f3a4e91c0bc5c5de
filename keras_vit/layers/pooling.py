"""`TokenPooling`: one feature vector from a token sequence."""

import keras
from keras import ops

from keras_vit import validation

POOLINGS = ("token", "gap")


@keras.saving.register_keras_serializable(package="keras_vit")
class TokenPooling(keras.layers.Layer):
    """Pools `(B, T, D)` tokens into a `(B, D)` feature.

    `"token"` takes the class token's output (the paper's `y = z_L^0`);
    `"gap"` averages the patch tokens, leaving out the `num_prefix_tokens`
    prefix tokens (the paper's global-average-pooling ablation).

    Args:
        pooling: `"token"` or `"gap"`. Defaults to `"token"`.
        num_prefix_tokens: int, tokens before the patch tokens (1 with a
            class token). Defaults to `1`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: `(B, T, D)` tokens.

    Returns:
        A `(B, D)` tensor.

    Example:

    >>> tokens = np.arange(6, dtype="float32").reshape(1, 3, 2)
    >>> keras_vit.layers.TokenPooling("gap")(tokens)  # mean of rows 1 and 2
    <tf.Tensor: shape=(1, 2), dtype=float32, numpy=array([[3., 4.]], dtype=float32)>
    """

    def __init__(self, pooling="token", num_prefix_tokens=1, **kwargs):
        validation.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.pooling = validation.one_of("pooling", pooling, POOLINGS)
        if (
            isinstance(num_prefix_tokens, bool)
            or not isinstance(num_prefix_tokens, int)
            or num_prefix_tokens < 0
        ):
            raise ValueError(
                "`num_prefix_tokens` must be a non-negative integer. "
                f"Received: num_prefix_tokens={num_prefix_tokens!r}"
            )
        if pooling == "token" and num_prefix_tokens == 0:
            raise ValueError(
                "pooling='token' needs a class token. Received: "
                "num_prefix_tokens=0"
            )
        self.num_prefix_tokens = num_prefix_tokens
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def call(self, tokens):
        if self.pooling == "token":
            # `tokens[:, :1]` then a reshape, not `tokens[:, 0]`: the latter
            # is a STRIDED_SLICE with shrink_axis_mask, which TFLite's
            # XNNPACK delegate does not take.
            return ops.squeeze(tokens[:, :1], axis=1)
        return ops.mean(tokens[:, self.num_prefix_tokens :], axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "pooling": self.pooling,
                "num_prefix_tokens": self.num_prefix_tokens,
            }
        )
        return config
