"""`MultiHeadSelfAttention`: fused-projection self-attention."""

import keras
import numpy as np
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers import _attention_core
from keras_vit.layers import _dropout
from keras_vit.layers import _norm_dense
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.layers.layer_norm import statistics_dtype
from keras_vit.layers.rotary import apply_rope


@keras.saving.register_keras_serializable(package="keras_vit")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention (Vaswani et al., 2017).

    The query, key and value projections are one fused `Dense` of width
    `3 · D` (one matrix multiply instead of three), its output ordered
    `[query heads | key heads | value heads]`, each head `D / num_heads`
    wide; `proj` maps the concatenated heads back to `D`. Splitting the fused
    kernel into three `(D, num_heads, D / num_heads)` kernels gives the
    original checkpoints' `query` / `key` / `value` kernels; it is also
    timm's `qkv` layout.

    The softmax is computed in float32, so mixed-precision training
    (`mixed_float16`, `mixed_bfloat16`) does not overflow or lose the small
    attention weights; in bfloat16 only where the CPU's bfloat16 softmax
    computes in float32 and rounds once (in a trainer's step without XLA,
    `step_xla=False`: `keras_vit.layers.kernels`). The weights returned are
    float32. A float64 layer computes its softmax, and returns its weights, in
    float64 (`statistics_dtype`).

    With `relative_positions=T` the layer is the paper's relative-position
    ablation (Appendix D.4): every offset `p_q - p_k` between a query and a
    key in a sequence of `T` tokens has a learned embedding, and an extra
    attention of the query against these embeddings (used as keys) gives a
    bias added to the content logits before the softmax. The offsets count
    positions along the token sequence (the paper's "1-dimensional relative
    attention"); the embeddings are per head, `relative_position_embedding`
    of shape `(2T - 1, D)` laid out like the key projection's output (head
    `h` reads columns `h·d` to `(h+1)·d`), initialised normal with std 0.02
    like the absolute position embeddings.

    With `qk_norm=True` each head's queries and keys are layer-normalised
    over the head width before the dot product (QK-norm, Dehghani et al.,
    2023; timm's `qk_norm`): one `LayerNorm` of width `D / num_heads` for
    the queries (`q_norm`) and one for the keys (`k_norm`), shared by the
    heads, applied before the queries are scaled.

    With a `rope` table in the call, the queries and keys (after QK-norm,
    before the scaling) are rotated by it (`keras_vit.layers.rotary`:
    DINOv3's 2-D rotary position embedding; its prefix rows leave the class
    and register tokens as they are), as timm's `EvaAttention` does.

    Args:
        num_heads: int, number of attention heads; must divide the width.
        dropout_rate: float in [0, 1), dropout on the attention weights.
            Defaults to `0.0`.
        relative_positions: int or `None`, the sequence length `T` whose
            `2T - 1` offsets get learned relative position embeddings; the
            layer then takes exactly `T` tokens. Defaults to `None` (no
            relative positions).
        qk_norm: bool, whether to layer-normalise queries and keys per head.
            Defaults to `False`.
        layer_norm_epsilon: float, the epsilon of the QK-norm LayerNorms.
            Defaults to `1e-6`.
        qkv_bias: bool, whether the fused `qkv` projection has a bias
            (timm's `qkv_bias`; DINOv3's S and B have none). Defaults to
            `True`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: `(B, T, D)` tokens.
        training: bool, whether dropout is active. Defaults to `None`.
        return_attention_scores: bool, whether to also return the float32
            (a float64 layer's: float64) attention weights `(B, num_heads,
            T, T)` (rows sum to 1). Defaults to `False`.
        dropout_seed: the seed of the attention dropout, drawn beforehand
            from the layer's `attention_dropout` (`_dropout.draw`),
            for a caller that rematerialises the layer (`TransformerBlock`
            with `remat=True`): the generator must not advance inside
            `keras.remat`. Defaults to `None`: the layer draws its own.
        norm: `None`, or a built `LayerNorm` to apply to `inputs` first
            (the pre-norm block's `norm1`): training steps then take the
            two with the `qkv` projection as one function whose backward
            pass keeps only `inputs`. Defaults to `None`.
        rope: `None`, or a `(T, 2 · D / num_heads)` rotary table
            (`keras_vit.layers.rotary.RotaryEmbedding`'s output) to rotate the
            queries and keys by. Defaults to `None`.

    Returns:
        `(B, T, D)` outputs, or `(outputs, attention_weights)`.

    Example:

    >>> layer = keras_vit.layers.MultiHeadSelfAttention(num_heads=4)
    >>> out, weights = layer(np.zeros((2, 5, 32)), return_attention_scores=True)
    >>> out.shape, weights.shape
    (TensorShape([2, 5, 32]), TensorShape([2, 4, 5, 5]))
    """

    def __init__(
        self,
        num_heads,
        dropout_rate=0.0,
        relative_positions=None,
        qk_norm=False,
        layer_norm_epsilon=1e-6,
        qkv_bias=True,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.num_heads = arg_checks.positive_int("num_heads", num_heads)
        self.dropout_rate = arg_checks.rate("dropout_rate", dropout_rate)
        self.relative_positions = arg_checks.optional_positive_int(
            "relative_positions", relative_positions
        )
        self.qk_norm = arg_checks.boolean("qk_norm", qk_norm)
        self.qkv_bias = arg_checks.boolean("qkv_bias", qkv_bias)
        self.layer_norm_epsilon = arg_checks.epsilon(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        #: What the trainer said of the step being traced (`kernels`).
        self.step_xla = None
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def build(self, input_shape):
        dim = arg_checks.known_last_dim(
            "MultiHeadSelfAttention", input_shape, "the token width"
        )
        self.head_dim = arg_checks.head_width(self.num_heads, dim)
        # The weights fix the width (and relative positions the count):
        # other inputs fail here, named, not in a reshape.
        self.input_spec = _token_spec(self.relative_positions, dim)
        if self.relative_positions is not None:
            tokens = self.relative_positions
            if input_shape[1] is not None and input_shape[1] != tokens:
                raise ValueError(
                    "The layer's relative position embeddings are for "
                    f"sequences of relative_positions={tokens} tokens. "
                    f"Received: inputs of shape {tuple(input_shape)}"
                )
            self.relative_position_embedding = self.add_weight(
                shape=(2 * tokens - 1, dim),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                name="relative_position_embedding",
            )
        # Xavier-uniform per (D, D) projection, as in the original code: for
        # the fused (D, 3D) kernel fan_avg is 2D, so scale 2 gives 1 / D.
        self.qkv = keras.layers.Dense(
            3 * dim,
            kernel_initializer=keras.initializers.VarianceScaling(
                2.0, mode="fan_avg", distribution="uniform"
            ),
            use_bias=self.qkv_bias,
            name="qkv",
            dtype=self.dtype_policy,
        )
        self.proj = keras.layers.Dense(
            dim,
            kernel_initializer="glorot_uniform",
            name="proj",
            dtype=self.dtype_policy,
        )
        self.attention_dropout = _dropout.Dropout(
            self.dropout_rate, dtype=self.dtype_policy
        )
        self.qkv.build(input_shape)
        self.proj.build(input_shape)
        if self.qk_norm:
            self.q_norm, self.k_norm = (
                LayerNorm(
                    self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
                )
                for name in ("q_norm", "k_norm")
            )
            self.q_norm.build((None, self.head_dim))
            self.k_norm.build((None, self.head_dim))

    def call(
        self,
        inputs,
        training=None,
        return_attention_scores=False,
        dropout_seed=None,
        norm=None,
        rope=None,
    ):
        shape = ops.shape(inputs)
        batch, tokens = shape[0], shape[1]
        dim = inputs.shape[-1]
        # The projections see (B·T, D) rows, not (B, T, D): on TensorFlow a
        # Dense on a 3-D input is reshape-MatMul-reshape, which keeps
        # grappler from fusing the bias into the oneDNN MatMul.
        rows = ops.reshape(inputs, (-1, dim))
        projected = _norm_dense.project(norm, self.qkv, rows, training)
        # Split the fused projection on its last axis (a TFLite SPLIT) rather
        # than indexing a transposed (3, B, heads, T, d) tensor: `qkv[0]` is
        # a STRIDED_SLICE with shrink_axis_mask, which XNNPACK does not
        # delegate, and it cut every block out of the delegate, each piece
        # threaded alone with hand-offs between them (timings:
        # benchmarks/results/2026-11-29-export-latency-ti16.md).
        query, key, value = ops.split(projected, 3, axis=-1)
        heads = (batch, tokens, self.num_heads, self.head_dim)
        if self.qk_norm:  # over each head's width: (B, T, heads, d)
            query = self.q_norm(ops.reshape(query, heads))
            key = self.k_norm(ops.reshape(key, heads))
        if rope is not None:  # after QK-norm, before the scaling (timm)
            query = apply_rope(ops.reshape(query, heads), rope)
            key = apply_rope(ops.reshape(key, heads), rope)
        if self._fuses(inputs, training, return_attention_scores):
            out = ops.dot_product_attention(
                *(ops.reshape(x, heads) for x in (query, key, value)),
                scale=self.head_dim**-0.5,
            )  # (B, T, heads, d)
            out = ops.reshape(out, (-1, dim))
            if return_attention_scores:
                # Traced (`_fuses`): XLA drops this output (and these
                # weights, where nothing reads them, as in every model's
                # forward pass), never the fused op's.
                _, weights = self._attention(
                    query, key, value, batch, tokens, training, dropout_seed
                )
        else:
            out, weights = self._attention(
                query, key, value, batch, tokens, training, dropout_seed
            )  # (B, T, heads, d)
            out = ops.reshape(out, (-1, dim))
        out = ops.reshape(self.proj(out), (batch, tokens, dim))
        if return_attention_scores:
            return out, weights
        return out

    def _attention(
        self, query, key, value, batch, tokens, training, dropout_seed
    ):
        """Softmax attention of the `(B·T, D)` (or `(B, T, heads, d)`)
        queries, keys and values: `(B, T, heads, d)` outputs and the
        `(B, heads, T, T)` weights in `statistics_dtype` (float32)."""
        # From an array: Keras casts a Python float through float32, a
        # rounding float64 would keep (float32 and below: the same number).
        scale = np.asarray(self.head_dim**-0.5, statistics_dtype(query.dtype))
        query = self._heads(query * ops.cast(scale, query.dtype), batch, tokens)
        value = self._heads(value, batch, tokens)
        key = ops.transpose(  # (B, heads, d, T): ready for query @ key
            ops.reshape(key, (batch, tokens, self.num_heads, self.head_dim)),
            (0, 2, 3, 1),
        )
        if training and self._recomputes_probabilities():
            # The weights: pruned from the graph where nothing reads them.
            weights = _attention_core.probabilities(query, key)
            outputs = _attention_core.attend(query, key, value, self.step_xla)
            return outputs, weights
        logits = ops.matmul(query, key)
        if self.relative_positions is not None:
            logits = logits + self._relative_logits(query, batch)
        wide = statistics_dtype(self.compute_dtype)
        weights = ops.softmax(ops.cast(logits, wide), axis=-1)
        dropped = _dropout.seeded_dropout(
            self.attention_dropout,
            self._probabilities(logits, weights, training),
            dropout_seed,
            training,
        )
        out = ops.matmul(dropped, value)  # (B, heads, T, d)
        return ops.transpose(out, (0, 2, 1, 3)), weights

    def _probabilities(self, logits, weights, training):
        """What the values are averaged with, in the compute dtype: the
        float32 `weights` cast down, or in inference where a softmax in
        the compute dtype keeps float32 precision (a bfloat16 `predict`
        step without XLA on a CPU whose oneDNN softmax computes in float32
        and rounds once: `_attention_core.softmax_dtype`), that softmax of
        the logits: one `(B, heads, T, T)` kernel instead of three, and
        no float32 copies (the float32 `weights` are pruned unless a caller
        reads them). Training keeps the cast (its gradient's row sum)."""
        dtype = _attention_core.softmax_dtype(self.compute_dtype, self.step_xla)
        if training or dtype == statistics_dtype(self.compute_dtype):
            return ops.cast(weights, self.compute_dtype)
        return ops.softmax(ops.cast(logits, dtype), axis=-1)

    def _fuses(self, inputs, training, return_attention_scores):
        """Whether this call uses `keras.ops.dot_product_attention`, the
        backend's fused attention (on the JAX backend on a GPU: cuDNN's
        flash attention in bfloat16 and float16, XLA's otherwise): on the
        JAX backend only, without relative positions and without attention
        dropout in training; where weights are asked for, only under a
        trace (`jit`), where XLA computes them only if something reads
        them (a ViT's blocks always ask, for one output structure in every
        graph: `_call_layers`). TensorFlow keeps the plain graph, so its
        exports, XNNPACK partition and goldens do not change."""
        if keras.backend.backend() != "jax":
            return False
        import jax

        return (
            self.relative_positions is None
            and not (training and self.dropout_rate > 0)
            and (
                not return_attention_scores
                or isinstance(inputs, jax.core.Tracer)
            )
        )

    def _recomputes_probabilities(self):
        """Whether training steps use `_attention_core.attend`, which keeps
        no `(B, heads, T, T)` tensor for the backward pass: without
        attention dropout (its mask would have to be kept) and relative
        positions. Inference keeps the plain graph (the TFLite export's)."""
        return self.dropout_rate == 0 and self.relative_positions is None

    def _relative_logits(self, query, batch):
        """The paper's relative attention: `(B, heads, T, T)` logits of the
        (scaled) queries against the embedding of each offset `p_q - p_k`.

        One matmul of the queries against all `2T - 1` offset embeddings,
        the table's rows reversed so that column `c` of query `q` holds the
        offset to key `k = c + q - (T - 1)`; then the "skewing" of Huang et
        al. (2018, Music Transformer) turns the `(T, 2T - 1)` logits into
        `(T, T)` with reshapes and slices alone: in the flattened logits,
        `(q, k)` sits at `T - 1 + q · (2T - 2) + k`. No gather, so TFLite's
        XNNPACK delegate keeps the block whole; under XLA it costs no more
        than a gather in the forward pass and less in a training step,
        whose gather would be differentiated as a scatter-add (figures:
        `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`).
        """
        tokens = self.relative_positions  # static: the layer takes T tokens
        offsets = 2 * tokens - 1
        table = ops.flip(
            ops.cast(self.relative_position_embedding, query.dtype), 0
        )
        table = ops.transpose(  # (heads, d, 2T - 1)
            ops.reshape(table, (offsets, self.num_heads, self.head_dim)),
            (1, 2, 0),
        )
        logits = ops.matmul(query, table)  # (B, heads, T, 2T - 1)
        if tokens == 1:
            return logits
        logits = ops.reshape(logits, (batch, self.num_heads, tokens * offsets))
        logits = logits[:, :, tokens - 1 : tokens - 1 + tokens * (offsets - 1)]
        logits = ops.reshape(
            logits, (batch, self.num_heads, tokens, offsets - 1)
        )
        return logits[:, :, :, :tokens]

    def _heads(self, x, batch, tokens):
        """`(B·T, D)` -> `(B, heads, T, d)`."""
        x = ops.reshape(x, (batch, tokens, self.num_heads, self.head_dim))
        return ops.transpose(x, (0, 2, 1, 3))

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(
        self,
        inputs,
        training=None,
        return_attention_scores=False,
        dropout_seed=None,
        norm=None,
        rope=None,
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
                "dropout_rate": self.dropout_rate,
                "relative_positions": self.relative_positions,
                "qk_norm": self.qk_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "qkv_bias": self.qkv_bias,
            }
        )
        return config


def _token_spec(relative_positions, dim):
    """The `InputSpec` of built `(B, T, D)` tokens: `D` fixed, and `T` too
    with relative positions (their embeddings are for `T` tokens)."""
    axes = {-1: dim}
    if relative_positions is not None:
        axes[1] = relative_positions
    return keras.layers.InputSpec(ndim=3, axes=axes)
