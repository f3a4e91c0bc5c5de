"""`TransformerBlock`: the pre-norm ViT encoder block."""

import keras
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers import _activations
from keras_vit.layers import _dropout
from keras_vit.layers import _gelu
from keras_vit.layers import _norm_dense
from keras_vit.layers.attention import MultiHeadSelfAttention
from keras_vit.layers.attention import _token_spec
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.layers.layer_norm import statistics_dtype
from keras_vit.layers.layer_scale import LayerScale
from keras_vit.layers.layer_scale import layer_scale_init as _check_scale
from keras_vit.options import ACTIVATIONS


@keras.saving.register_keras_serializable(package="keras_vit")
class TransformerBlock(keras.layers.Layer):
    """One pre-LayerNorm Transformer encoder block, Eqs. 2-3 of the ViT paper.

    `z' = MSA(LN(z)) + z`, then `z = MLP(LN(z')) + z'`
    ([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)). The MLP
    is `Dense(mlp_dim)` → exact (erf) GELU (or `activation`) → `Dense(D)`,
    with dropout after each `Dense` and after the attention output, as in
    the original code. A gated MLP (`use_gated_mlp=True`; SwiGLU with
    `activation="silu"`, Shazeer, 2020) is
    `Dense(D)(activation(x W_gate) * (x W_value))`: `mlp_fc1` is one
    `Dense(2 * mlp_dim)` whose first `mlp_dim` outputs are the gate, the
    layout of timm's `SwiGLUPacked` and transformers' `Dinov2SwiGLUFFN`.
    Stochastic depth (`drop_path_rate`, Huang et al., 2016) drops each
    residual branch per example while training.

    Args:
        num_heads: int, attention heads; must divide the token width.
        mlp_dim: int, width of the MLP's hidden layer.
        dropout_rate: float in [0, 1), dropout after the attention output
            and after each MLP `Dense`. Defaults to `0.0`.
        attention_dropout_rate: float in [0, 1), dropout on the attention
            weights. Defaults to `0.0`.
        drop_path_rate: float in [0, 1), probability of dropping each
            residual branch for an example (stochastic depth). Defaults to
            `0.0`.
        layer_norm_epsilon: float, the LayerNorm epsilon. Defaults to
            `1e-6`, the original code's value.
        remat: bool, whether training recomputes the block's activations
            in the backward pass instead of storing them (gradient
            checkpointing with `keras.remat`). With dropout the
            recomputation draws the forward pass's masks (the seeds are
            drawn outside it), so training is the same as without, on
            TensorFlow and JAX. Defaults to `False`.
        relative_positions: int or `None`, the sequence length whose
            offsets get learned relative position embeddings in the
            attention (the paper's relative-position ablation; see
            `MultiHeadSelfAttention`). Defaults to `None`.
        activation: the MLP's activation, one of
            `keras_vit.options.ACTIVATIONS`: `"gelu"` (exact, the paper's),
            `"gelu_tanh"` (its tanh approximation), `"quick_gelu"`
            (`x * sigmoid(1.702 x)`, OpenAI CLIP's) or `"silu"`
            (`x * sigmoid(x)`, SwiGLU's gate). Defaults to `"gelu"`.
        layer_scale_init: `None`, or a float: each residual branch is then
            scaled per channel by a learned `LayerScale` initialised to it,
            after its dropout (`ls1` after the attention, `ls2` after the
            MLP; CaiT, DeiT III, DINOv2). Defaults to `None`.
        qk_norm: bool, whether the attention layer-normalises its queries
            and keys per head (see `MultiHeadSelfAttention`). Defaults to
            `False`.
        qkv_bias: bool, whether the attention's fused `qkv` projection has
            a bias (timm's `qkv_bias`). Defaults to `True`.
        use_gated_mlp: bool, whether the MLP is gated (see above);
            `mlp_dim` is then the width of the gated product, the input of
            `mlp_fc2`. Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: `(B, T, D)` tokens.
        training: bool, whether dropout and stochastic depth are active.
            Defaults to `None`.
        return_attention_scores: bool, whether to also return the float32
            (a float64 block's: float64) attention weights `(B, num_heads,
            T, T)`. Defaults to `False`.
        rope: `None`, or the rotary table the attention rotates its
            queries and keys by (see `MultiHeadSelfAttention`). Defaults to
            `None`.

    Returns:
        `(B, T, D)` tokens, or `(tokens, attention_weights)`.

    Example:

    >>> block = keras_vit.layers.TransformerBlock(num_heads=12, mlp_dim=3072)
    >>> block(np.zeros((2, 197, 768))).shape
    TensorShape([2, 197, 768])
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-6,
        remat=False,
        relative_positions=None,
        activation="gelu",
        layer_scale_init=None,
        qk_norm=False,
        qkv_bias=True,
        use_gated_mlp=False,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.num_heads = arg_checks.positive_int("num_heads", num_heads)
        self.mlp_dim = arg_checks.positive_int("mlp_dim", mlp_dim)
        self.dropout_rate = arg_checks.rate("dropout_rate", dropout_rate)
        self.attention_dropout_rate = arg_checks.rate(
            "attention_dropout_rate", attention_dropout_rate
        )
        self.drop_path_rate = arg_checks.rate("drop_path_rate", drop_path_rate)
        self.layer_norm_epsilon = arg_checks.epsilon(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.remat = arg_checks.boolean("remat", remat)
        self.relative_positions = arg_checks.optional_positive_int(
            "relative_positions", relative_positions
        )
        self.activation = arg_checks.one_of(
            "activation", activation, ACTIVATIONS
        )
        self.layer_scale_init = (
            None
            if layer_scale_init is None
            else _check_scale("layer_scale_init", layer_scale_init)
        )
        self.qk_norm = arg_checks.boolean("qk_norm", qk_norm)
        self.qkv_bias = arg_checks.boolean("qkv_bias", qkv_bias)
        self.use_gated_mlp = arg_checks.boolean("use_gated_mlp", use_gated_mlp)
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def build(self, input_shape):
        dim = arg_checks.known_last_dim(
            "TransformerBlock", input_shape, "the token width"
        )
        # (The attention, built below, checks that num_heads divides dim.)
        self.input_spec = _token_spec(self.relative_positions, dim)
        policy = self.dtype_policy
        self.norm1 = LayerNorm(
            self.layer_norm_epsilon, name="norm1", dtype=policy
        )
        self.attention = MultiHeadSelfAttention(
            self.num_heads,
            dropout_rate=self.attention_dropout_rate,
            relative_positions=self.relative_positions,
            qk_norm=self.qk_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            qkv_bias=self.qkv_bias,
            name="attention",
            dtype=policy,
        )
        self.norm2 = LayerNorm(
            self.layer_norm_epsilon, name="norm2", dtype=policy
        )
        # Xavier-uniform kernels and N(0, 1e-6) biases, as in the original
        # code's MlpBlock.
        bias_init = keras.initializers.RandomNormal(stddev=1e-6)
        self.mlp_fc1 = keras.layers.Dense(
            self.mlp_dim * (2 if self.use_gated_mlp else 1),
            kernel_initializer="glorot_uniform",
            bias_initializer=bias_init,
            name="mlp_fc1",
            dtype=policy,
        )
        self.mlp_fc2 = keras.layers.Dense(
            dim,
            kernel_initializer="glorot_uniform",
            bias_initializer=bias_init,
            name="mlp_fc2",
            dtype=policy,
        )
        self.dropout = _dropout.Dropout(self.dropout_rate, dtype=policy)
        # Stochastic depth is dropout with one draw per example: Keras's
        # Dropout with a broadcast noise shape (rescaled by 1 / keep).
        self.drop_path = _dropout.Dropout(
            self.drop_path_rate, noise_shape=(None, 1, 1), dtype=policy
        )
        for layer in (self.norm1, self.attention, self.norm2, self.mlp_fc1):
            layer.build(input_shape)
        if self.layer_scale_init is not None:
            self.ls1, self.ls2 = (
                LayerScale(self.layer_scale_init, name=name, dtype=policy)
                for name in ("ls1", "ls2")
            )
            self.ls1.build(input_shape)
            self.ls2.build(input_shape)
        self.mlp_fc2.build((*input_shape[:-1], self.mlp_dim))

    def call(
        self, inputs, training=None, return_attention_scores=False, rope=None
    ):
        if self.remat and training:
            # Gradient checkpointing: the function takes the tensor alone
            # (TensorFlow's recompute_grad accepts no keyword arguments in
            # graphs), the Python flags are closed over. So are the dropout
            # seeds, drawn here, outside: advancing a seed generator inside
            # crashes JAX's jax.checkpoint, and on TensorFlow the recomputed
            # pass would draw other masks (wrong gradients).
            seeds = self._draw_seeds()
            out, weights = keras.remat(
                lambda x: self._forward(x, training, seeds, rope)
            )(inputs)
        else:
            out, weights = self._forward(inputs, training, rope=rope)
        if return_attention_scores:
            return out, weights
        return out

    def _draw_seeds(self):
        """The seeds of one training pass's dropouts, drawn from each
        dropout layer's generator as `_forward`'s own calls would."""
        return {
            "attention": _dropout.draw(self.attention.attention_dropout, 1)[0],
            # After the attention, after the GELU and after mlp_fc2.
            "dropout": _dropout.draw(self.dropout, 3),
            # The attention branch's, then the MLP branch's.
            "drop_path": _dropout.draw(self.drop_path, 2),
        }

    def _forward(self, inputs, training, seeds=None, rope=None):
        if seeds is None:
            seeds = {
                "attention": None,
                "dropout": [None] * 3,
                "drop_path": [None] * 2,
            }

        def dropout(x, i):
            return _dropout.seeded_dropout(
                self.dropout, x, seeds["dropout"][i], training
            )

        def drop_path(x, i):
            return _dropout.seeded_dropout(
                self.drop_path, x, seeds["drop_path"][i], training
            )

        # A training step hands norm1 to the attention, which takes it with
        # its qkv projection (`_norm_dense`); inference keeps the graph the
        # exports convert.
        x, weights = self.attention(
            inputs if training else self.norm1(inputs),
            training=training,
            return_attention_scores=True,
            dropout_seed=seeds["attention"],
            norm=self.norm1 if training else None,
            rope=rope,
        )
        x = self._scale(dropout(x, 0), "ls1")
        x = inputs + drop_path(x, 0)

        # The MLP runs on (B·T, D) rows: on TensorFlow that lets grappler
        # fuse MatMul + bias + GELU into one oneDNN op (a Dense on a 3-D
        # input is reshape-MatMul-reshape, which blocks the fusion). It
        # pays without XLA; XLA fuses either way (timings:
        # benchmarks/results/2026-11-30-profile.md).
        shape = ops.shape(x)
        rows = ops.reshape(x, (-1, x.shape[-1]))
        y = _norm_dense.project(self.norm2, self.mlp_fc1, rows, training)
        y = self._scale(dropout(self._mlp_out(y, training, dropout), 2), "ls2")
        y = ops.reshape(y, shape)
        return x + drop_path(y, 1), weights

    def _mlp_out(self, hidden, training, dropout):
        """`mlp_fc2(dropout(activation(hidden)))`, or of the gated
        product. A training step with
        the exact GELU and no dropout on it takes `_gelu.gelu_dense`,
        which keeps only `hidden` for the backward pass (a LoRA or
        quantized `mlp_fc2` keeps its own call); inference keeps the
        plain graph, the one every export converts."""
        fc2 = self.mlp_fc2
        if self.use_gated_mlp:  # the gate first, as in the checkpoints
            gate, value = ops.split(hidden, 2, axis=-1)
            y = _activations.activate(gate, self.activation, training)
            return fc2(dropout(y * value, 1))
        if (
            training
            and self.activation == "gelu"
            and self.dropout_rate == 0
            and not fc2.lora_enabled
            and fc2.quantization_mode is None
        ):
            kernel, bias = (
                ops.cast(w, fc2.compute_dtype) for w in (fc2.kernel, fc2.bias)
            )
            return _gelu.gelu_dense(hidden, kernel, bias)
        y = _activations.activate(hidden, self.activation, training)
        return fc2(dropout(y, 1))

    def _scale(self, branch, name):
        """`branch` through LayerScale `name` when the block has one."""
        if self.layer_scale_init is None:
            return branch
        return getattr(self, name)(branch)

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(
        self, inputs, training=None, return_attention_scores=False, rope=None
    ):
        out = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return out
        batch, tokens = inputs.shape[0], inputs.shape[1]
        weights = keras.KerasTensor(
            (batch, self.num_heads, tokens, tokens),
            dtype=statistics_dtype(self.compute_dtype),
        )
        return out, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_dim": self.mlp_dim,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "drop_path_rate": self.drop_path_rate,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "remat": self.remat,
                "relative_positions": self.relative_positions,
                "activation": self.activation,
                "layer_scale_init": self.layer_scale_init,
                "qk_norm": self.qk_norm,
                "qkv_bias": self.qkv_bias,
                "use_gated_mlp": self.use_gated_mlp,
            }
        )
        return config
