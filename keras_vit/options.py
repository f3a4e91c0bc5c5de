"""The choices of keras_vit's options, in one place that imports nothing.

The library checks its arguments against these tuples and the `keras-vit`
command offers them as its flags' choices; this module imports neither
Keras nor TensorFlow (nor NumPy), so the command line can build its parser
(`keras-vit --help`) without them. Each tuple is the one source of its
choices: the modules that use them import them from here.
"""

#: `keras_vit.layers.TokenPooling` / `ViT(pooling=...)`.
POOLINGS = ("token", "gap")

#: `ViT(pooling=...)`: `TokenPooling`'s, and multihead attention pooling
#: (`keras_vit.layers.AttentionPooling`, SigLIP's MAP head).
MODEL_POOLINGS = (*POOLINGS, "map")

#: `keras_vit.layers.PatchEncoder(position_embedding=...)`.
POSITION_EMBEDDINGS = ("learned", "learned2d", "sincos2d", "none")

#: `ViT(position_embedding=...)`: the encoder's, and in the attention
#: instead: relative position biases, or DINOv3's 2-D rotary embedding of
#: the patch tokens' queries and keys (`keras_vit.layers.rotary`).
MODEL_POSITION_EMBEDDINGS = (*POSITION_EMBEDDINGS, "relative", "rope")

#: `PatchEncoder(position_embedding_tokens=...)` / `ViT(...)`: which tokens
#: get a position embedding: all (the paper's: the class token's entry
#: first) or the patches only (DeiT III, DINOv2; timm's `no_embed_class`).
POSITION_EMBEDDING_TOKENS = ("all", "patches")

#: `ViT(rope_type=...)` / `RotaryEmbedding(...)`: how the rotary angles
#: come from the grid, named as timm's `rope_type`: DINOv3's (patch
#: centres in [-1, 1]); timm's `RotaryEmbeddingCat` (patch indices:
#: Perception Encoder, Naver's RoPE-ViT); Naver's RoPE-Mixed (learned
#: frequencies per block and head). See `keras_vit.layers.rotary`.
ROPE_TYPES = ("dinov3", "cat", "mixed")

#: The MLP activation of `TransformerBlock(activation=...)` / `ViT(...)`:
#: exact (erf) GELU, the paper's; GELU's tanh approximation (big_vision's
#: default, SigLIP); OpenAI CLIP's "quick GELU", `x * sigmoid(1.702 x)`;
#: SiLU, `x * sigmoid(x)` (the gate of SwiGLU, `use_gated_mlp=True`).
ACTIVATIONS = ("gelu", "gelu_tanh", "quick_gelu", "silu")

#: `keras_vit.training.recipe.make_optimizer` / `TrainConfig.optimizer.name`.
OPTIMIZERS = ("adamw", "sgd")
#: Each optimizer's weight decay when none is given: AdamW's pre-training
#: value (paper, Appendix B.1), none for SGD (the fine-tuning recipe).
DEFAULT_WEIGHT_DECAY = {"adamw": 0.1, "sgd": 0.0}

#: Learning-rate decays after the warm-up (`recipe.WarmupDecay`).
DECAYS = ("cosine", "linear")

#: `TrainConfig.scale.mixed_precision` (`recipe.dtype_policy`).
MIXED_PRECISION = ("auto", "off", "bfloat16", "float16")

#: `tf.distribute` strategies `keras_vit.training.make_strategy` makes.
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")

#: What `keras_vit.training.train` can train a model for.
OBJECTIVES = ("classification", "masked_patches")

#: Formats of `keras-vit export`.
EXPORT_FORMATS = ("saved_model", "tflite", "onnx", "openvino")

#: Quantization modes of `keras_vit.export.export_tflite`.
QUANTIZATIONS = ("none", "float16", "dynamic", "int8", "int16x8")

#: Input/output dtypes of a full-integer (`quantize="int8"`) model.
IO_DTYPES = ("float32", "int8", "uint8")

#: LiteRT interpreters a TFLite model is verified on, and the op resolver
#: each one names (`ai_edge_litert`'s `OpResolverType`).
INTERPRETERS = {
    "xnnpack": "AUTO",  # LiteRT's default: builtin kernels + XNNPACK
    "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
    "reference": "BUILTIN_REF",
}

#: The linear few-shot evaluation's defaults (big_vision's standard
#: evaluator): shots per class, random draws, and the L2 penalty.
FEW_SHOT_SHOTS = (1, 5, 10, 25)
FEW_SHOT_SEEDS = 3
FEW_SHOT_L2_REG = 2.0**10
