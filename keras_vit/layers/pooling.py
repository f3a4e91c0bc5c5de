"""`TokenPooling`: one feature vector from a token sequence."""

import keras
from keras import ops

from keras_vit import arg_checks
from keras_vit.options import POOLINGS


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
    """  # noqa: E501 (the doctest's output is one line)

    def __init__(self, pooling="token", num_prefix_tokens=1, **kwargs):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.pooling = arg_checks.one_of("pooling", pooling, POOLINGS)
        num_prefix_tokens = arg_checks.non_negative_int(
            "num_prefix_tokens", num_prefix_tokens
        )
        if pooling == "token" and num_prefix_tokens == 0:
            raise ValueError(
                "pooling='token' needs a class token. Received: "
                "num_prefix_tokens=0"
            )
        self.num_prefix_tokens = num_prefix_tokens
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def build(self, input_shape):
        self._check_tokens(input_shape)

    def _least_tokens(self):
        return 1 if self.pooling == "token" else self.num_prefix_tokens + 1

    def _no_tokens(self, received):
        """The refusal of inputs with nothing to pool; `received` ends it."""
        if self.pooling == "token":
            return (
                "pooling='token' takes the first token, and these inputs "
                f"have none. Received: {received}"
            )
        return (
            "pooling='gap' averages the tokens after the "
            "`num_prefix_tokens` prefix tokens, and these inputs have "
            f"none. Received: num_prefix_tokens={self.num_prefix_tokens} "
            f"for {received}"
        )

    def _check_tokens(self, shape):
        """Refuses a static token count that leaves nothing to pool (the
        mean of no patch tokens is NaN)."""
        if shape[1] is not None and shape[1] < self._least_tokens():
            raise ValueError(self._no_tokens(f"tokens of shape {tuple(shape)}"))

    def _check_dynamic_tokens(self, tokens):
        """`tokens`, checked when run for the count `_check_tokens` could
        not see (a `tf.function` over `(B, None, D)`: the only case where a
        backend traces an unknown token count; JAX and PyTorch shapes are
        always known). Without it, "gap" of no patch tokens was NaN and
        "token" of no token an empty batch, silently."""
        if (
            tokens.shape[1] is not None
            or keras.backend.backend() != "tensorflow"
        ):
            return tokens
        import tensorflow as tf

        count = tf.shape(tokens)[1]
        check = tf.debugging.Assert(
            count >= self._least_tokens(),
            [
                f"TokenPooling {self.name!r}: "
                + self._no_tokens("a token count of"),
                count,
            ],
        )
        with tf.control_dependencies([check]):
            return tf.identity(tokens)

    def call(self, tokens):
        self._check_tokens(tuple(tokens.shape))
        tokens = self._check_dynamic_tokens(tokens)
        if self.pooling == "token":
            # `tokens[:, :1]` then a reshape, not `tokens[:, 0]`: the latter
            # is a STRIDED_SLICE with shrink_axis_mask, which TFLite's
            # XNNPACK delegate does not take. A reshape to (B, D), not a
            # squeeze: with an unknown token count the slice's static
            # shape does not say that its axis 1 is 1.
            dim = tokens.shape[-1]
            if dim is None:
                dim = ops.shape(tokens)[-1]
            return ops.reshape(tokens[:, :1], (-1, dim))
        return ops.mean(tokens[:, self.num_prefix_tokens :], axis=1)

    def compute_output_shape(self, input_shape):
        self._check_tokens(input_shape)
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
