"""`AttentionPooling`: multihead attention pooling (MAP) by a probe."""

import keras
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers import _activations
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.options import ACTIVATIONS


@keras.saving.register_keras_serializable(package="keras_vit")
class AttentionPooling(keras.layers.Layer):
    """Pools `(B, T, D)` tokens into `(B, D)` by attention from a probe.

    Multihead attention pooling, big_vision's `MAPHead` (SigLIP) and timm's
    `AttentionPoolLatent`: one learned probe token (`probe`) is the query of
    a multi-head attention over the tokens (`query` maps the probe,
    `key_value` the tokens, fused `[keys | values]` as timm's `kv`, `proj`
    the heads' output), then `x = x + MLP(LayerNorm(x))` (`norm`,
    `mlp_fc1`, `mlp_fc2`), and the probe's output is the feature.
    The first `num_prefix_tokens` tokens (a class token, registers) are
    left out, as timm's `VisionTransformer` leaves them out of its
    `attn_pool` (`pool_include_prefix=False`).

    Args:
        num_heads: int, attention heads; must divide the token width.
        mlp_dim: int, the MLP's hidden width.
        layer_norm_epsilon: float, the LayerNorm epsilon. Defaults to
            `1e-6`.
        activation: the MLP activation, one of
            `keras_vit.options.ACTIVATIONS`. Defaults to `"gelu"`.
        num_prefix_tokens: int, tokens at the start that the probe does
            not attend to. Defaults to `0` (all the tokens).
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        tokens: `(B, T, D)` tokens.
        return_attention_scores: bool, whether to also return the probe's
            float32 attention weights `(B, num_heads, T - num_prefix_tokens)`
            over the tokens it attends to. Defaults to `False`.

    Returns:
        A `(B, D)` tensor, or `(features, attention_weights)`.

    Example:

    >>> pool = keras_vit.layers.AttentionPooling(num_heads=2, mlp_dim=32)
    >>> pool(np.zeros((2, 5, 8))).shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        layer_norm_epsilon=1e-6,
        activation="gelu",
        num_prefix_tokens=0,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.num_heads = arg_checks.positive_int("num_heads", num_heads)
        self.mlp_dim = arg_checks.positive_int("mlp_dim", mlp_dim)
        self.layer_norm_epsilon = arg_checks.epsilon(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.activation = arg_checks.one_of(
            "activation", activation, ACTIVATIONS
        )
        self.num_prefix_tokens = arg_checks.non_negative_int(
            "num_prefix_tokens", num_prefix_tokens
        )
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def build(self, input_shape):
        dim = arg_checks.known_last_dim(
            "AttentionPooling", input_shape, "the token width"
        )
        self.head_dim = arg_checks.head_width(self.num_heads, dim)
        count = input_shape[1]
        if count is not None and count <= self.num_prefix_tokens:
            raise ValueError(
                "AttentionPooling leaves out the first `num_prefix_tokens` "
                "tokens, and these inputs have no other. Received: "
                f"num_prefix_tokens={self.num_prefix_tokens} for tokens of "
                f"shape {tuple(input_shape)}"
            )
        self.input_spec = keras.layers.InputSpec(ndim=3, axes={-1: dim})
        policy = self.dtype_policy
        self.probe = self.add_weight(
            shape=(1, 1, dim),
            initializer=keras.initializers.RandomNormal(stddev=dim**-0.5),
            name="probe",
        )
        dense = {
            "query": dim,
            "key_value": 2 * dim,
            "proj": dim,
            "mlp_fc1": self.mlp_dim,
            "mlp_fc2": dim,
        }
        for name, width in dense.items():
            layer = keras.layers.Dense(
                width,
                kernel_initializer="glorot_uniform",
                name=name,
                dtype=policy,
            )
            layer.build((None, self.mlp_dim if name == "mlp_fc2" else dim))
            setattr(self, name, layer)
        self.norm = LayerNorm(
            self.layer_norm_epsilon, name="norm", dtype=policy
        )
        self.norm.build((None, dim))

    def call(self, tokens, return_attention_scores=False):
        if self.num_prefix_tokens:
            tokens = tokens[:, self.num_prefix_tokens :]
        shape = ops.shape(tokens)
        batch, count = shape[0], shape[1]
        dim = tokens.shape[-1]
        heads, width = self.num_heads, self.head_dim
        probe = ops.reshape(ops.cast(self.probe, tokens.dtype), (1, dim))
        query = self.query(probe) * ops.cast(width**-0.5, tokens.dtype)
        query = ops.broadcast_to(
            ops.reshape(query, (1, heads, 1, width)), (batch, heads, 1, width)
        )
        keys, values = ops.split(
            self.key_value(ops.reshape(tokens, (-1, dim))), 2, axis=-1
        )
        keys = ops.transpose(  # (B, heads, d, T)
            ops.reshape(keys, (batch, count, heads, width)), (0, 2, 3, 1)
        )
        values = ops.transpose(
            ops.reshape(values, (batch, count, heads, width)), (0, 2, 1, 3)
        )
        weights = ops.softmax(
            ops.cast(ops.matmul(query, keys), "float32"), axis=-1
        )  # (B, heads, 1, T)
        x = ops.matmul(ops.cast(weights, self.compute_dtype), values)
        x = self.proj(ops.reshape(x, (-1, dim)))  # (B, D): heads in order
        y = self.mlp_fc1(self.norm(x))
        y = self.mlp_fc2(_activations.activate(y, self.activation))
        x = x + y
        if return_attention_scores:
            return x, ops.reshape(weights, (batch, heads, count))
        return x

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])

    def compute_output_spec(self, tokens, return_attention_scores=False):
        out = keras.KerasTensor(
            (tokens.shape[0], tokens.shape[2]), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return out
        count = tokens.shape[1]
        if count is not None:
            count -= self.num_prefix_tokens
        weights = keras.KerasTensor(
            (tokens.shape[0], self.num_heads, count), dtype="float32"
        )
        return out, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_dim": self.mlp_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "activation": self.activation,
                "num_prefix_tokens": self.num_prefix_tokens,
            }
        )
        return config
