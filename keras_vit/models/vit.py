"""`ViT`: the Vision Transformer as a functional `keras.Model`.

The constructor builds layers from a checked `ViTConfig`
(`keras_vit.models.config`); weights are loaded after construction, by
`ViT.from_preset` and the builders' `weights=`, with the readers and
loading of `keras_vit.weights` (below the model). Keras workarounds:
`keras_fixes`.
"""

import dataclasses

import keras
import numpy as np
from keras import ops

from keras_vit import arg_checks
from keras_vit import patch_grid
from keras_vit.layers import _dropout
from keras_vit.layers.attention_pooling import AttentionPooling
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.layers.layer_norm import statistics_dtype
from keras_vit.layers.patch_encoder import PatchEncoder
from keras_vit.layers.patches import Patches
from keras_vit.layers.pooling import TokenPooling
from keras_vit.layers.resnet_stem import ResNetStem
from keras_vit.layers.rotary import RotaryEmbedding
from keras_vit.layers.transformer_block import TransformerBlock
from keras_vit.models import keras_fixes

# MODEL_POSITION_EMBEDDINGS is re-exported.
from keras_vit.models.config import MODEL_POSITION_EMBEDDINGS  # noqa: F401
from keras_vit.models.config import ViTConfig
from keras_vit.models.config import vit_config
from keras_vit.models.preprocessing import PREPROCESSING_ARGUMENTS
from keras_vit.models.preprocessing import Preprocessing
from keras_vit.models.preprocessing import scale_and_offset
from keras_vit.registry import variants
from keras_vit.weights import from_preset
from keras_vit.weights import keras_files
from keras_vit.weights import loading

#: The `ViT` arguments that a `ViTConfig` holds, in signature order.
ARCHITECTURE_ARGUMENTS = tuple(
    field.name for field in dataclasses.fields(ViTConfig)
)

#: The layers after the final LayerNorm, in call order (those present).
HEAD_LAYERS = (
    "pooling",
    "fc_norm",
    "pre_logits",
    "head",
    "head_dist",
    "predictions",
)

#: The `from_preset` arguments that say how the weights are loaded (how
#: their position embeddings are resampled onto another patch grid, as
#: `keras_vit.load_weights` takes them), not what the model is: they apply
#: only where weights are loaded, and are not the model's config.
LOADING_ARGUMENTS = ("interpolation", "antialias")


def refuse_loading_arguments(kwargs, weights):
    """Raises where `kwargs` holds `LOADING_ARGUMENTS` and `weights` is
    `None`: with no weights to load they would do nothing (as a `ViT`
    argument they would be refused as unknown, which does not say why)."""
    given = [name for name in LOADING_ARGUMENTS if name in kwargs]
    if weights is None and given:
        received = ", ".join(f"{name}={kwargs[name]!r}" for name in given)
        raise ValueError(
            "`interpolation` and `antialias` apply only with `weights`: "
            "they say how the position embeddings of loaded weights are "
            "resampled onto the model's patch grid, and weights=None loads "
            "none. Pass the weights too, or leave them out. Received: "
            f"{received} with weights=None"
        )


@keras.saving.register_keras_serializable(package="keras_vit")
class ViT(keras_fixes.TrainerFixes, keras.Model):
    """The Vision Transformer (ViT) image classifier or feature extractor.

    "An Image is Worth 16x16 Words: Transformers for Image Recognition at
    Scale" ([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)):
    the image is cut into patches (`Patches`), each patch is projected to a
    token, a class token is prepended and position embeddings are added
    (`PatchEncoder`), `num_layers` pre-norm Transformer blocks follow
    (`TransformerBlock`), then a final LayerNorm; the class token's output
    (or the mean of the patch tokens) feeds a linear head.

    By default the model takes RGB pixel values in [0, 255] of any float or
    integer dtype and normalises them itself, as its weights expect: to
    [-1, 1], the paper's, or with a preset's `normalization` (a mean and
    std). Its config is exactly its constructor arguments, so
    `ViT.from_config(model.get_config())` builds the same architecture.

    The named builders (`keras_vit.ViT_B16` ...) are the usual entry point;
    `ViT.from_variant("B/16", ...)` builds any variant of
    `keras_vit.registry.VARIANTS`, and `ViT.from_preset(name_or_path, ...)`
    builds a model for released or saved weights and loads them. The
    constructor only builds layers (no file is read): the checks between
    arguments are `keras_vit.models.config.vit_config`'s, and
    `forward_features` gives the tokens before pooling and head.

    Args:
        image_size: int or `(height, width)`, the input resolution; both
            must be multiples of `patch_size`. Defaults to `None`: 224 (with
            `from_preset`, the resolution of the weights when they record
            one).
        patch_size: int, the side of a square patch. Defaults to `16`.
        hidden_dim: int, the token width `D`. Defaults to `768`.
        num_layers: int, the number of Transformer blocks. Defaults to `12`.
        num_heads: int, attention heads; must divide `hidden_dim`. Defaults
            to `12`.
        mlp_dim: int, the MLP hidden width. Defaults to `3072`.
        num_classes: int, the number of classes of the head. Defaults to
            `1000`.
        include_top: bool, whether to end with the classification head.
            Defaults to `True`.
        pooling: `"token"` (the class token's output), `"gap"` (mean of the
            patch tokens), `"map"` (multihead attention pooling: a learned
            probe attends over the patch tokens, then an MLP, with the
            model's heads and `mlp_dim`: SigLIP's MAP head,
            `keras_vit.layers.AttentionPooling`), or `None` (with
            `include_top=False` only: return all tokens, `(B, T, D)`).
            Defaults to `"token"`.
        class_token: bool, whether to prepend a class token. Defaults to
            `None`: `True` unless `pooling="gap"` or `"map"` (the paper's
            GAP models have none, nor SigLIP's).
        position_embedding: `"learned"` (1D learned, the paper's),
            `"learned2d"` (learned row and column embeddings, the paper's
            2D ablation), `"relative"` (the paper's relative-position
            ablation: no embeddings added to the tokens; every block's
            attention adds logits of the query against learned embeddings
            of the offset between query and key along the token sequence),
            `"sincos2d"` (fixed 2D sine-cosine), `"rope"` (DINOv3's 2-D
            rotary position embedding: every block's attention rotates the
            patch tokens' queries and keys by angles of the patch's centre
            on the grid, normalised to [-1, 1] per axis, so any image size
            needs nothing resampled; `keras_vit.layers.rotary`) or
            `"none"`. Defaults to `"learned"`.
        rope_theta: float > 0, with `position_embedding="rope"`: the base
            of the rotation periods, `rope_theta ** (4k / head_width)`
            (DINOv3's 100; transformers' `rope_theta`, timm's
            `rope_temperature`). Defaults to `100.0`.
        rope_type: with `position_embedding="rope"`, how the angles come
            from the grid (`keras_vit.options.ROPE_TYPES`, timm's names):
            `"dinov3"` (patch centres in [-1, 1]), `"cat"` (patch indices:
            Perception Encoder core, Naver's axial RoPE-ViT) or `"mixed"`
            (learned frequencies per block and head: Naver's RoPE-Mixed).
            Defaults to `"dinov3"`.
        rope_grid_offset: float >= 0, with `rope_type="cat"`: added to the
            patch indices (Perception Encoder's 1). Defaults to `0.0`.
        rope_reference_grid: `(rows, cols)` or `None`, with
            `rope_type="cat"`: the grid the patch indices are rescaled
            onto, so that another image size spans the same range
            (Perception Encoder's pretraining grid, timm's
            `ref_feat_shape`). Defaults to `None`.
        rope_with_learned: bool, with `position_embedding="rope"`: also a
            learned position table added to the tokens (over those
            `position_embedding_tokens` says), as Perception Encoder and
            Naver's `*_ape` models have. Defaults to `False`.
        rope_shift_coords: float >= 0 or `None`, with
            `position_embedding="rope"`, in training only: shift the
            patches' coordinates by one draw of U(-s, s) per axis (DINOv3's
            train-time augmentation; timm's `shift_coords`, transformers'
            `pos_embed_shift`; `keras_vit.layers.rotary`). Defaults to
            `None` (off).
        rope_jitter_coords: float >= 1 or `None`, likewise: scale each
            axis's coordinates by a log-uniform draw in [1/j, j] (timm's
            `jitter_coords`, transformers' `pos_embed_jitter`). Defaults
            to `None` (off).
        rope_rescale_coords: float >= 1 or `None`, likewise: scale both
            axes by one log-uniform draw in [1/r, r] (timm's
            `rescale_coords`, transformers' `pos_embed_rescale`, 2 in
            `DINOv3ViTConfig`). Defaults to `None` (off; at inference every
            one of the three is off).
        representation_size: int or `None`; if set, a `tanh` "pre-logits"
            layer of this width comes before the head (the paper's
            pre-training head). Defaults to `None`.
        dropout_rate: float in [0, 1), dropout after the position
            embeddings and inside each block. Defaults to `0.0`.
        attention_dropout_rate: float in [0, 1), dropout on the attention
            weights. Defaults to `0.0`.
        drop_path_rate: float in [0, 1), the stochastic depth rate of the
            last block; it rises linearly from 0 over the blocks. Defaults to
            `0.0`.
        layer_norm_epsilon: float, the LayerNorm epsilon. Defaults to
            `1e-6`, as in the original code.
        classifier_activation: activation of the head's output, a name such
            as `"softmax"` or `None` for logits. Always computed in float32
            (float64 in a float64 model). Defaults to `"softmax"`.
        include_preprocessing: bool. If `True`, inputs are pixel values in
            [0, 255], normalised inside the model as `normalization` says
            (one per-channel multiply-add, layer `rescaling`); if `False`,
            the model takes already-normalised inputs. Defaults to `True`.
        normalization: how the weights' inputs are normalised: `None`, the
            paper's `[-1, 1]` (`pixels / 127.5 - 1`), or `{"mean": (r, g,
            b), "std": (r, g, b)}` on `[0, 1]` pixels, `(pixels / 255 -
            mean) / std` (ImageNet's for DeiT and DINOv2, CLIP's; a preset
            gives its own, its record's `normalization`). With
            `include_preprocessing=False` it only records what the inputs
            must be (exports state it). Defaults to `None`.
        image_resize: how an image is resized to the model's input for inference
            and evaluation (`keras_vit.data.eval_pipeline`,
            `keras_vit.data.images.load_image_files`, the commands and exports;
            not the training augmentation): `None`, the whole image squashed,
            bilinear with antialiasing; or a dict with any of `crop_pct` (timm's
            centre crop: the image resized, aspect ratio kept, to cover `size /
            crop_pct`, then the centre cut out; `None` squashes),
            `interpolation` (`"bilinear"` or `"bicubic"`) and `antialias`
            (bool). A preset gives its evaluation's (its record's
            `image_resize`), e.g. `{"crop_pct": 0.9, "interpolation":
            "bicubic"}` for timm's 224 px ViTs. Read back complete
            (`keras_vit.data.resize.check`). Defaults to `None`.
        class_names: `None`, or a list of `num_classes` strings, the names
            of the head's outputs in order (with `include_top=True`):
            saved with the model, read by exports' metadata and
            `keras-vit predict`. `from_preset` gives ImageNet-1k's to a
            preset's 1000-class head, `keras-vit train` its dataset's.
            Read back as a tuple. Defaults to `None`.
        weights_preset: `None`, or the unique name of the preset the
            weights came from (`from_preset` records it): exports write
            its licence and publisher into their metadata. Defaults to
            `None`.
        num_channels: int, the channels of the input images. Defaults to
            `3`.
        stem: `None` (patches of raw pixels, the plain ViT), or a CNN whose
            feature map is cut into patches instead (the paper's hybrid
            models, usually with `patch_size=1`): a dict of
            `keras_vit.layers.ResNetStem` arguments (e.g.
            `{"block_units": [3, 4, 9]}` for R50+ViT-B/16), or any Keras
            layer or model that maps images to a `(B, h, w, C)` map, such
            as `keras.applications.ResNet50V2(include_top=False,
            weights=None)`. The token grid is taken from the map. Defaults
            to `None`.
        activation: the MLP activation of every block: `"gelu"` (exact,
            the paper's), `"gelu_tanh"` (its tanh approximation),
            `"quick_gelu"` (`x * sigmoid(1.702 x)`, OpenAI CLIP's) or
            `"silu"` (`x * sigmoid(x)`; with `use_gated_mlp`, the gate's).
            Defaults to `"gelu"`.
        layer_scale_init: `None`, or a float: every block's two residual
            branches are scaled per channel by learned `LayerScale`s
            initialised to it (CaiT, DeiT III, DINOv2: timm's
            `init_values`). Defaults to `None`.
        qk_norm: bool, whether every attention layer-normalises its
            queries and keys per head (timm's `qk_norm`). Defaults to
            `False`.
        qkv_bias: bool, whether every attention's fused query-key-value
            projection has a bias (timm's `qkv_bias`; DINOv3's S and B have
            none). Defaults to `True`.
        use_gated_mlp: bool, whether every block's MLP is gated:
            `activation(x W_gate) * (x W_value)` before `mlp_fc2`, SwiGLU
            with `activation="silu"` (DINOv2 giant; DINOv3 H+/16 and 7B;
            see `keras_vit.layers.TransformerBlock`). `mlp_dim` is then the
            gated width, `mlp_fc2`'s input, which each family rounds its
            own way: 4096 for DINOv2 giant (transformers'
            `Dinov2SwiGLUFFN` rounds `2/3 · 4 · 1536` up to a multiple of
            8; timm's `SwiGLUPacked` takes twice that as its
            `hidden_features`); timm's DINOv3 `int(mlp_ratio · D)` rounded
            up to a multiple of 8 (`swiglu_align_to`); transformers'
            DINOv3 its `intermediate_size`. A `pooling="map"` head's MLP
            stays plain. Defaults to `False`.
        patch_bias: bool, whether the patch projection has a bias (CLIP's
            has none). Defaults to `True`.
        norm_pre: bool, whether a LayerNorm (`norm_pre`) comes before the
            blocks, after the position embeddings (CLIP's `ln_pre`).
            Defaults to `False`.
        fc_norm: bool, with `pooling="gap"`: the final LayerNorm is
            applied after pooling (layer `fc_norm`) instead of to the
            tokens before (timm's `fc_norm`); `forward_features` then gives
            the tokens unnormalised. Defaults to `False`.
        position_embedding_tokens: `"all"` (the paper's: with
            `position_embedding="learned"` the class and register tokens
            have an entry too) or `"patches"` (only the patches get a
            position embedding: DeiT III, DINOv2, timm's `no_embed_class`).
            Defaults to `"all"`.
        num_register_tokens: int, learned register tokens (Darcet et al.,
            2023, DINOv2 with registers) after the class token, before the
            patches (timm's order); they are not pooled (`"gap"` averages
            the patches only) and maps over patches leave them out.
            `model.num_prefix_tokens` counts the tokens before the patches.
            Defaults to `0`.
        distillation: bool, DeiT's distillation: a learned distillation
            token after the class token (before any registers) and a second
            head (`head_dist`) on its output. The model's output is then
            the mean of the two heads' logits (through
            `classifier_activation`), as DeiT's at inference; with
            `include_top=False` and `pooling="token"`, the mean of the two
            tokens' features. For a distillation loss set
            `model.distilled_training = True`: then `model(images,
            training=True)` returns the pair `(class_head, distillation_head)`
            (timm's `set_distilled_training`); `fit` with one label needs it
            `False`, the default. Needs `pooling="token"` (or `None`).
            Defaults to `False`.
        pool_include_prefix: bool, with `pooling="map"`: whether the
            pooling probe also attends to the prefix tokens (class token,
            registers), not only to the patches. timm leaves them out (its
            `pool_include_prefix=False`), as do the weights readers.
            Defaults to `False`.
        pooling_num_heads: int or `None`, with `pooling="map"`: the
            attention pooling's heads (Perception Encoder's 8). Defaults to
            `None`: `num_heads`.
        dynamic_image_size: bool, whether the model takes images of any
            height and width that `patch_size` divides (input shape
            `(None, None, num_channels)`), as timm's `dynamic_img_size`:
            the position embeddings, stored on `image_size`'s grid (the
            reference grid, `grid_size`), are resampled in the graph on each
            call to the input's grid, with the resampling
            `keras_vit.load_weights` uses (`"bilinear_align_corners"`), so
            the outputs are those of a model built at that size with these
            weights loaded. XLA-compilable. Not with a `stem` nor
            `position_embedding="relative"`. TFLite, ONNX and OpenVINO
            exports are at `image_size`. Defaults to `False`.
        dynamic_image_padding: bool, with `dynamic_image_size=True`: images
            whose sides `patch_size` does not divide are zero-padded on the
            bottom and the right (after `include_preprocessing`) to the next
            multiple, as timm's `dynamic_img_pad`; without it they are
            refused (a `ValueError` when the size is known as the graph is
            built, else TensorFlow's `InvalidArgumentError` when it runs;
            under XLA, which drops such checks, a reshape's error).
            Defaults to `False`.
        dtype: the floating-point dtype policy of the layers, e.g.
            `"mixed_bfloat16"` (or the `DTypePolicyMap` of a quantized
            model's config); integer policies are refused. Defaults to
            `None`, the global policy.
        name: the model's name. Defaults to `"vit"`.
        **kwargs: other `keras.Model` arguments such as `trainable`, and
            `layer_trainable`: a dict of layer path (layer names from the
            model down, joined by `/`: `"block_0"`,
            `"resnet_stem/block1_unit1"`) to its `trainable` flag, set
            after the layers are built, parents first. `get_config`
            records it when a layer was frozen on its own (partial
            fine-tuning), so that a saved model comes back with those
            layers frozen and its optimizer's state loads.

    Call arguments:
        images: `(B, height, width, num_channels)` images.
        training: bool, whether dropout is active.

    Returns:
        With `include_top=True`: `(B, num_classes)` probabilities (or logits
        with `classifier_activation=None`), float32 (float64 in a float64
        model; with `distillation`, of the two heads' mean logits; see
        `distilled_training`). Otherwise
        the pooled `(B, hidden_dim)` feature, or the `(B, T, hidden_dim)`
        tokens after the final LayerNorm with `pooling=None`.

    Example:

    >>> model = keras_vit.ViT(image_size=32, patch_size=4, hidden_dim=64,
    ...                       num_layers=2, num_heads=4, mlp_dim=128,
    ...                       num_classes=10)
    >>> model.compile("adamw", "sparse_categorical_crossentropy")
    >>> model.predict(np.zeros((2, 32, 32, 3)), verbose=0).shape
    (2, 10)
    """

    def __init__(
        self,
        image_size=None,
        patch_size=16,
        hidden_dim=768,
        num_layers=12,
        num_heads=12,
        mlp_dim=3072,
        num_classes=1000,
        include_top=True,
        pooling="token",
        class_token=None,
        position_embedding="learned",
        rope_theta=100.0,
        rope_type="dinov3",
        rope_grid_offset=0.0,
        rope_reference_grid=None,
        rope_with_learned=False,
        rope_shift_coords=None,
        rope_jitter_coords=None,
        rope_rescale_coords=None,
        representation_size=None,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-6,
        classifier_activation="softmax",
        include_preprocessing=True,
        normalization=None,
        image_resize=None,
        class_names=None,
        weights_preset=None,
        num_channels=3,
        stem=None,
        activation="gelu",
        layer_scale_init=None,
        qk_norm=False,
        qkv_bias=True,
        use_gated_mlp=False,
        patch_bias=True,
        norm_pre=False,
        fc_norm=False,
        position_embedding_tokens="all",
        num_register_tokens=0,
        distillation=False,
        pool_include_prefix=False,
        pooling_num_heads=None,
        dynamic_image_size=False,
        dynamic_image_padding=False,
        dtype=None,
        name="vit",
        **kwargs,
    ):
        # Long: the signature lists every argument (the constructor's
        # defaults are `DEFAULTS`, a test checks); the body is the steps.
        arguments = {
            key: value
            for key, value in locals().items()
            if key in ARCHITECTURE_ARGUMENTS
        }
        preprocessing = Preprocessing(
            normalization, image_resize, class_names, weights_preset
        )
        _check_model_kwargs(kwargs)
        layer_trainable = keras_fixes.checked_trainable_flags(
            kwargs.pop(keras_fixes.LAYER_TRAINABLE, None)
        )
        # A plain quantized policy would quantize the new, unloaded layers
        # (Keras: "already quantized"); a quantized model's config holds a
        # DTypePolicyMap instead.
        arg_checks.float_dtype_policy("dtype", dtype, quantized=False)
        config = vit_config(**arguments)
        preprocessing.check_fits(config)
        stem_layer = _make_stem(config.stem, dtype)
        if stem_layer is not None and not isinstance(config.stem, dict):
            config = dataclasses.replace(
                config, stem=keras.saving.serialize_keras_object(stem_layer)
            )
        feature_size = config.image_size
        if stem_layer is not None:
            feature_size = _stem_output_size(
                stem_layer, config.image_size, config.num_channels
            )
        grid = config.token_grid(feature_size)
        layers = _make_layers(
            config, preprocessing.normalization, grid, stem_layer, dtype
        )
        inputs = _images_input(config, dtype)
        outputs = _call_layers(layers, inputs)["output"]
        super().__init__(
            inputs=inputs, outputs=outputs, name=name, dtype=dtype, **kwargs
        )
        keras_fixes.finish_functional_init(self, dtype, layer_trainable)
        self.vit_config = config
        self.preprocessing = preprocessing
        self._remat = False
        self._stem_name = None if stem_layer is None else stem_layer.name
        self._grid_size = grid
        self._distilled_training = False

    @classmethod
    def from_preset(
        cls,
        preset,
        interpolation=None,
        antialias=None,
        **kwargs,
    ):
        """Builds a model for released or saved weights and loads them.

        The model is built first, from `kwargs` (any `ViT` argument) and
        what the weights record (their resolution when `image_size` is not
        given, their pre-logits layer when the head is theirs), then the
        weights are loaded, all or nothing, by `keras_vit.load_weights`'s
        rules: a different `num_classes` gets a new zero-initialised head, a
        different `image_size` resampled position embeddings
        (`interpolation`, `antialias`).

        Args:
            preset: a preset's unique name (`"vit_s16_augreg_in21k"`,
                which gives the variant and, unless given, the class count
                too), the short name of a preset of
                the model's variant (`keras_vit.list_presets()`; downloaded
                once), or a weights file: an original google-research /
                big_vision `.npz`, a timm or Hugging Face `.safetensors`,
                keras_vit's `.weights.h5` / `.keras`; or a Hub repo (timm's,
                transformers'), `"hf://ORG/NAME[@REV]"` or its folder: its
                configuration, `kwargs` over it (`weights.hub.arguments`).
            interpolation: how the position embeddings are resampled when
                the model's patch grid is not the weights', one of
                `keras_vit.patch_grid.INTERPOLATIONS`, as for
                `keras_vit.load_weights`. Defaults to `None`: a Hub repo's
                library's, else `"bilinear_align_corners"`.
            antialias: bool, whether that resampling low-pass filters onto
                a smaller grid, as for `keras_vit.load_weights`. With
                `interpolation="bicubic_pytorch"`: timm's
                `resample_abs_pos_embed` and DINOv2 with registers (a 518
                px DINOv2 checkpoint at 224 px). Defaults to `None`: a Hub
                repo's library's, else `False`.
            **kwargs: any `ViT` argument but `weights`; the architecture
                must be the weights' (`patch_size`, `hidden_dim`, ...).

        Raises:
            ValueError: for arguments the model cannot take, and for an
                `interpolation` or `antialias` that `keras_vit.load_weights`
                refuses, before any file is read or downloaded; for weights
                that do not fit the model, with nothing loaded.

        Example:

        >>> model = keras_vit.ViT.from_preset("ViT-B_16.npz", num_classes=37)
        >>> smaller = keras_vit.ViT.from_preset(
        ...     "ViT-B_16.npz", image_size=160, interpolation="bicubic",
        ...     antialias=True)
        """
        if "weights" in kwargs:
            raise ValueError(
                "from_preset takes the weights as its first argument. "
                f"Received: weights={kwargs['weights']!r}"
            )
        arguments = {
            key: value
            for key, value in kwargs.items()
            if key in ARCHITECTURE_ARGUMENTS + PREPROCESSING_ARGUMENTS
        }
        others = {
            key: value for key, value in kwargs.items() if key not in arguments
        }
        # The arguments' own errors come first.
        vit_config(
            **{k: arguments[k] for k in ARCHITECTURE_ARGUMENTS if k in kwargs}
        )
        Preprocessing(
            **{k: arguments[k] for k in PREPROCESSING_ARGUMENTS if k in kwargs}
        )
        arguments, load = from_preset.prepare(
            preset, arguments, interpolation=interpolation, antialias=antialias
        )
        model = cls(**arguments, **others)
        load(model)
        return model

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Loads weights saved by Keras, all or nothing.

        Keras's loader copies a `.weights.h5` (or a `.keras` file's
        weights) layer by layer and ignores what the model has no place
        for: a deeper model's file, or one with LayerScale or `norm_pre`,
        loaded in part, with no warning, into a model that then computed
        other outputs. keras_vit's own files are first checked whole, as
        `keras_vit.load_weights` checks them (every weight's name, shape,
        dtype and finite values, the prefix tokens and the grid the file
        records, a `.keras` file's recorded settings), and must fit as
        they are: a head for another class count or position embeddings on
        another grid are refused (`keras_vit.load_weights` adapts them,
        for fine-tuning). On a mismatch a `ValueError` lists what does not
        fit and nothing is loaded; then Keras loads the file (with the
        optimizer's state it holds): a `.keras` file's weights from a
        temporary copy, which Keras reads straight through, where in the
        archive each of its seeks re-reads the member from its start (on
        Python 3.11; `benchmarks/results/2026-12-03-load-keras-copy.md`). A
        `.weights.h5` written before keras_vit recorded its patch grid is
        taken to be on the model's, as Keras copies it.

        Args:
            filepath: the file, as for `keras.Model.load_weights`: a
                `.weights.h5`, a `.keras` file, or Keras's other formats
                (sharded `.weights.json`, legacy `.h5`), which are left to
                Keras unchecked.
            skip_mismatch: bool, Keras's partial loading: layers whose
                weights do not fit are skipped, each with a warning, and the
                file is not checked first. Defaults to `False`.
            **kwargs: other `keras.Model.load_weights` arguments.
        """
        if not skip_mismatch:
            loading.check_keras_file(self, filepath)
        with keras_files.weights_for_keras(filepath) as path:
            super().load_weights(path, skip_mismatch=skip_mismatch, **kwargs)

    @property
    def distilled_training(self):
        """With `distillation=True`: whether `model(images, training=True)`
        returns both heads' outputs, `(class_head, distillation_head)`, for
        a distillation loss, instead of their mean (timm's
        `distilled_training`). Not saved; defaults to `False`."""
        return self._distilled_training

    @distilled_training.setter
    def distilled_training(self, value):
        value = arg_checks.boolean("distilled_training", value)
        if value and not (self.distillation and self.include_top):
            raise ValueError(
                "distilled_training=True needs a model with "
                "distillation=True and include_top=True. Received: "
                f"distilled_training=True for distillation="
                f"{self.distillation}, include_top={self.include_top}"
            )
        self._distilled_training = value

    @property
    def remat(self):
        """Whether training rematerialises each Transformer block (gradient
        checkpointing, `keras.remat`): its activations are recomputed in
        the backward pass instead of stored, more compute for less memory
        on large models; with dropout too, the same training as without
        (`TransformerBlock`'s `remat`). A training switch, not the
        architecture: not saved; `keras-vit train` sets it from its
        config's `scale.remat`. Setting it drops the traced training step,
        so the next `fit` traces it anew. Defaults to `False`."""
        return self._remat

    @remat.setter
    def remat(self, value):
        value = arg_checks.boolean("remat", value)
        for i in range(self.num_layers):
            self.get_layer(f"block_{i}").remat = value
        self._remat = value
        self.train_function = None

    def call(self, inputs, training=None, mask=None, **kwargs):
        if training and getattr(self, "_distilled_training", False):
            return _call_layers(
                self._layer_table(),
                inputs,
                training=training,
                distilled_pair=True,
            )["output"]
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, *args, **kwargs):
        # The distillation pair needs a target for each head; Keras's own
        # error for one label names a loss path, not the cause.
        pair = isinstance(y_pred, (tuple, list)) and len(y_pred) == 2
        if pair and self._distilled_training and y is not None:
            if not isinstance(y, (tuple, list)):
                raise ValueError(
                    "With distilled_training=True the model returns "
                    "(class_head, distillation_head) in training: give a "
                    "target for each, y=(labels, teacher_labels), or set "
                    "distilled_training=False to train their mean on one "
                    f"label. Received: y of shape {tuple(y.shape)}"
                )
        return super().compute_loss(x, y, y_pred, *args, **kwargs)

    @property
    def grid_size(self):
        """The `(grid_h, grid_w)` token grid at the model's resolution
        (`image_size`). With `dynamic_image_size=True` it is the reference
        grid, that of the position embeddings the model stores; an input's
        own grid is its size over `patch_size` (see `input_grid`)."""
        return self._grid_size

    @property
    def stem_layer(self):
        """A hybrid's CNN stem, the layer its patches are cut from (a
        `ResNetStem`, or the layer passed as `stem`), for code that needs
        its weights or stride (`keras_vit.visualize` maps tokens to
        pixels with it); `None` for a plain ViT, whose patches are raw
        pixels. Read-only: the config's `stem` builds it."""
        if self._stem_name is None:
            return None
        return self.get_layer(self._stem_name)

    def input_grid(self, image_shape):
        """The `(grid_h, grid_w)` token grid of images of `image_shape`
        (`(B, H, W, C)`, `(H, W, C)` or `(H, W)`): `grid_size` for a
        fixed-size model; with `dynamic_image_size=True`, `H` and `W` over
        `patch_size` (rounded up with `dynamic_image_padding`)."""
        if not self.dynamic_image_size:
            return tuple(self.grid_size)
        shape = tuple(image_shape)
        height, width = shape[:2] if len(shape) == 2 else shape[-3:-1]
        p = self.patch_size
        if not self.dynamic_image_padding and (height % p or width % p):
            raise ValueError(
                "The image height and width must be multiples of "
                f"patch_size={p} (or build the model with "
                "dynamic_image_padding=True). Received: an image of "
                f"(height, width)={(height, width)}"
            )
        return -(-height // p), -(-width // p)

    @property
    def num_prefix_tokens(self):
        """Tokens before the patch tokens: the class token (if any), then
        the register tokens; every count of tokens goes through it."""
        return self.vit_config.num_prefix_tokens

    @property
    def num_tokens(self):
        """The tokens each block sees at the model's resolution: the
        `grid_size` patches and the `num_prefix_tokens`."""
        return self.grid_size[0] * self.grid_size[1] + self.num_prefix_tokens

    def forward_features(
        self,
        images,
        training=None,
        return_attention=False,
        return_block_outputs=False,
        patch_hook=None,
    ):
        """The token features before pooling and head.

        Runs this model's layers (shared, nothing copied) from the images to
        the final LayerNorm, as timm's `forward_features` does.

        Args:
            images: `(B, height, width, num_channels)` images, as the model
                takes them.
            training: bool or `None`, whether dropout is active. Defaults
                to `None` (Keras's: inherited from an enclosing call, else
                inference).
            return_attention: bool, whether to also return every block's
                attention weights. Defaults to `False`.
            return_block_outputs: bool, whether to also return every
                block's output. Defaults to `False`.
            patch_hook: `None`, or a function that maps the projected patch
                tokens `(B, N, hidden_dim)` before the class token and
                position embeddings are added (masked patch prediction
                corrupts them there). Defaults to `None`.

        Returns:
            The `(B, T, hidden_dim)` tokens after the final LayerNorm
            (before it with `fc_norm=True`, as timm's): the
            `num_prefix_tokens` prefix tokens first (class, distillation,
            registers: those the model has), then the patches. With
            `return_attention` or `return_block_outputs`, a dict:
            `"features"` (those tokens),
            `"attention_weights"` (a list of `num_layers` float32 `(B,
            num_heads, T, T)` tensors, float64 in a float64 model, rows
            summing to 1) and
            `"block_outputs"` (a list of `num_layers` `(B, T, hidden_dim)`
            tensors, before the final LayerNorm), each only when asked.

        Example:

        >>> tokens = model.forward_features(images)
        >>> patch_tokens = tokens[:, model.num_prefix_tokens:]
        """
        arg_checks.boolean("return_attention", return_attention)
        arg_checks.boolean("return_block_outputs", return_block_outputs)
        layers = self._layer_table()
        for name in HEAD_LAYERS:
            layers.pop(name, None)
        outputs = _call_layers(
            layers, images, training=training, patch_hook=patch_hook
        )
        if not (return_attention or return_block_outputs):
            return outputs["output"]
        features = {"features": outputs["output"]}
        if return_attention:
            features["attention_weights"] = outputs["attention_weights"]
        if return_block_outputs:
            features["block_outputs"] = outputs["block_outputs"]
        return features

    def head_layers(self):
        """The layers after the final LayerNorm that the model has, in call
        order: `pooling`, `pre_logits`, `head`, `predictions`."""
        names = {layer.name for layer in self.layers}
        return [self.get_layer(name) for name in HEAD_LAYERS if name in names]

    def intermediates_model(self, attention=True):
        """A model that returns every block's output and attention weights.

        It shares this model's layers and weights (nothing is copied), and
        takes the same inputs.

        Args:
            attention: bool, whether to also return every block's attention
                weights. Defaults to `True`.

        Returns:
            A `keras.Model` whose output is a dict:
            `"block_outputs"`: a list of `num_layers` `(B, T, D)` tensors,
            the tokens after each block (before the final LayerNorm);
            `"attention_weights"` (if `attention`): a list of `num_layers`
            float32 (a float64 model's: float64) `(B, num_heads, T, T)`
            tensors, rows summing to 1, token 0 being the class token when
            there is one; `"output"`: this model's output.

        Example:

        >>> model = keras_vit.ViT_Ti16()
        >>> out = model.intermediates_model()(images)
        >>> last = out["attention_weights"][-1]  # (B, heads, T, T)
        >>> cls_attention = last[:, :, 0, model.num_prefix_tokens :]
        """
        arg_checks.boolean("attention", attention)
        inputs = _images_input(self.vit_config, self.dtype_policy)
        outputs = _call_layers(self._layer_table(), inputs)
        if not attention:
            del outputs["attention_weights"]
        return keras.Model(inputs, outputs, name=f"{self.name}_intermediates")

    def _layer_table(self):
        """The model's layers as `_call_layers` takes them: a dict by name,
        with `"stem"` (hybrids) and `"blocks"` (the list of blocks). (Looked
        up at each call, not stored: a second reference would be saved
        twice.)"""
        layers = {layer.name: layer for layer in self.layers}
        if self._stem_name is not None:
            layers["stem"] = layers.pop(self._stem_name)
        layers["blocks"] = [
            layers.pop(f"block_{i}") for i in range(self.num_layers)
        ]
        return layers

    @classmethod
    def from_variant(cls, variant, weights=None, **kwargs):
        """Builds the named variant; `kwargs` override its numbers.

        Args:
            variant: a name from `keras_vit.registry.VARIANTS`, e.g.
                `"B/16"`.
            weights: `None` (random initialisation), or a preset name or
                weights file, loaded after the model is built (see
                `from_preset`). Defaults to `None`.
            **kwargs: any `ViT` argument, e.g. `num_classes=10` or
                `patch_size=8`; with `weights`, also `from_preset`'s
                `interpolation` and `antialias` (how the position
                embeddings are resampled to another `image_size`).

        Raises:
            ValueError: for `interpolation` or `antialias` without
                `weights`.

        Example:

        >>> keras_vit.ViT.from_variant("S/16", num_classes=10)
        """
        refuse_loading_arguments(kwargs, weights)
        kwargs = {**variants.get_variant(variant), **kwargs}
        if weights is None:
            return cls(**kwargs)
        return cls.from_preset(weights, **kwargs)

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable}
        # Only where a layer was frozen on its own: the configs (and files)
        # of other models stay as they were.
        flags = keras_fixes.trainable_flags(self)
        if flags:
            config[keras_fixes.LAYER_TRAINABLE] = flags
        config["dtype"] = keras.dtype_policies.serialize(
            keras_fixes.config_dtype_policy(self)
        )
        return {
            **config,
            **self.vit_config.to_dict(),
            **self.preprocessing.to_dict(),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Saved before `remat` became a training switch (`model.remat`).
        remat = config.pop("remat", False)
        if config.get("pooling") == "map":
            # Saved before the probe left the prefix tokens out: it
            # attended to them all.
            config.setdefault("pool_include_prefix", True)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.get(config["dtype"])
        model = cls(**config)
        model.remat = remat
        return model


def _config_property(record, name):
    def get(self):
        return getattr(getattr(self, record), name)

    get.__doc__ = f"The model's `{name}` (`model.{record}.{name}`)."
    return property(get)


# Each argument reads as a model attribute (`model.hidden_dim`,
# `model.class_names`), from the one `ViTConfig` or `Preprocessing` the
# model was built from.
for _name in ARCHITECTURE_ARGUMENTS:
    setattr(ViT, _name, _config_property("vit_config", _name))
for _name in PREPROCESSING_ARGUMENTS:
    setattr(ViT, _name, _config_property("preprocessing", _name))
del _name


#: The `ViT` arguments beyond its architecture's (`**kwargs`).
MODEL_ARGUMENTS = ("trainable", keras_fixes.LAYER_TRAINABLE)

#: `keras.applications` argument names, and what a `ViT` takes instead.
KERAS_APPLICATIONS_ARGUMENTS = {
    "classes": "num_classes",
    "input_shape": "image_size (and num_channels)",
    "input_tensor": "no input tensor: call the model on it, model(tensor)",
    "weights": "ViT.from_preset(weights, ...), or a builder's weights=",
}


def _check_model_kwargs(kwargs):
    """Refuses keyword arguments that are neither `ViT`'s nor `keras.Model`'s
    (Keras's functional models would drop them without a word, so
    `ViT_B16(classes=10)` built a 1000-class model)."""
    unknown = sorted(set(kwargs) - set(MODEL_ARGUMENTS))
    if unknown:
        hints = [
            f"{name} -> {KERAS_APPLICATIONS_ARGUMENTS[name]}"
            for name in unknown
            if name in KERAS_APPLICATIONS_ARGUMENTS
        ]
        raise ValueError(
            "Unknown keras_vit.ViT argument(s)"
            + (
                f" (keras.applications names; {'; '.join(hints)})"
                if hints
                else ""
            )
            + ". Received: "
            + ", ".join(f"{name}={kwargs[name]!r}" for name in unknown)
        )


def _input_shape(config):
    """The model's input shape (without the batch): any height and width
    with `dynamic_image_size`."""
    if config.dynamic_image_size:
        return (None, None, config.num_channels)
    return (*config.image_size, config.num_channels)


def _images_input(config, dtype):
    """The model's `images` input, of `_wide_dtype(dtype)`: float32, or
    float64 for a float64 model (float32 would round its inputs)."""
    return keras.Input(
        shape=_input_shape(config), name="images", dtype=_wide_dtype(dtype)
    )


def _wide_dtype(dtype):
    """`statistics_dtype` of the `dtype` policy's compute dtype (`None`:
    the global policy's): float32, or float64 for float64."""
    return statistics_dtype(keras.dtype_policies.get(dtype).compute_dtype)


def _make_stem(stem, dtype):
    """The stem layer for a `stem=` argument (see `ViT`)."""
    if stem is None:
        return None
    if isinstance(stem, dict) and "class_name" in stem:  # a serialized layer
        return keras.saving.deserialize_keras_object(stem)
    if isinstance(stem, dict):
        try:
            return ResNetStem(**stem, name="resnet_stem", dtype=dtype)
        except TypeError as error:
            raise ValueError(
                f"Bad ResNetStem arguments ({error}). Received: stem={stem!r}"
            ) from None
    if isinstance(stem, keras.layers.Layer):
        return stem
    raise ValueError(
        "`stem` must be None, a dict of ResNetStem arguments or a Keras "
        f"layer/model. Received: stem={stem!r}"
    )


def _stem_output_size(stem, image_size, num_channels):
    """The `(h, w)` of the stem's feature map for `image_size` images."""
    shape = stem.compute_output_shape((None, *image_size, num_channels))
    if len(shape) != 4 or None in shape[1:3]:
        raise ValueError(
            "The stem must map images to a (batch, height, width, channels) "
            f"map. Received a stem with output shape {tuple(shape)} for "
            f"image_size={image_size}"
        )
    return tuple(shape[1:3])


def _rope_layer(config, grid, dtype):
    """The `RotaryEmbedding` of a `position_embedding="rope"` config."""
    return RotaryEmbedding(
        config.hidden_dim // config.num_heads,
        rope_theta=config.rope_theta,
        num_prefix_tokens=config.num_prefix_tokens,
        grid_size=grid,
        rope_type=config.rope_type,
        grid_offset=config.rope_grid_offset,
        reference_grid=config.rope_reference_grid,
        num_layers=config.num_layers,  # `"mixed"`'s only; others ignore
        num_heads=config.num_heads,
        shift_coords=config.rope_shift_coords,
        jitter_coords=config.rope_jitter_coords,
        rescale_coords=config.rope_rescale_coords,
        name="rope",
        dtype=dtype,
    )


def _make_layers(config, normalization, grid, stem_layer, dtype):
    """The model's layers for `config` (a `ViTConfig`), its inputs'
    `normalization` and its token `grid`, as `_call_layers` takes them."""
    layers = {}
    if config.include_preprocessing:
        # Arrays of the wide dtype: Keras casts a Python float to float64
        # through float32 (the same numbers in float32 and below).
        scale, offset = (
            np.asarray(v, _wide_dtype(dtype))
            for v in scale_and_offset(normalization)
        )
        layers["rescaling"] = keras.layers.Rescaling(
            scale, offset=offset, name="rescaling", dtype=dtype
        )
    if stem_layer is not None:
        layers["stem"] = stem_layer
    layers["patches"] = Patches(
        config.patch_size,
        # A grid, so that the encoder resamples its embeddings to it.
        flatten=not config.dynamic_image_size,
        pad=config.dynamic_image_padding,
        name="patches",
        dtype=dtype,
    )
    # Relative positions and RoPE are in the attention, not on the tokens.
    in_attention = config.position_embedding in ("relative", "rope")
    if config.position_embedding == "rope":
        layers["rope"] = _rope_layer(config, grid, dtype)
    encoder_positions = (
        "learned"
        if config.rope_with_learned
        else "none"
        if in_attention
        else config.position_embedding
    )
    dynamic = {}
    if config.dynamic_image_size:  # as weights loaded at that grid are
        dynamic["interpolation"] = patch_grid.LOADING_INTERPOLATION
    layers["patch_encoder"] = PatchEncoder(
        config.hidden_dim,
        grid_size=grid,
        class_token=config.class_token,
        position_embedding=encoder_positions,
        patch_bias=config.patch_bias,
        num_register_tokens=config.num_register_tokens,
        distillation_token=config.distillation,
        position_embedding_tokens=config.position_embedding_tokens,
        name="patch_encoder",
        dtype=dtype,
        **dynamic,
    )
    layers["embedding_dropout"] = _dropout.Dropout(
        config.dropout_rate, name="embedding_dropout", dtype=dtype
    )
    if config.norm_pre:
        layers["norm_pre"] = LayerNorm(
            config.layer_norm_epsilon, name="norm_pre", dtype=dtype
        )
    layers["blocks"] = _make_blocks(config, grid, dtype)
    if not config.fc_norm:  # else the same norm comes after the pooling
        layers["encoder_norm"] = LayerNorm(
            config.layer_norm_epsilon, name="encoder_norm", dtype=dtype
        )
    layers.update(_make_head(config, dtype))
    return layers


def _make_blocks(config, grid, dtype):
    """The model's `TransformerBlock`s for `config` and its token `grid`."""
    return [
        TransformerBlock(
            config.num_heads,
            config.mlp_dim,
            dropout_rate=config.dropout_rate,
            attention_dropout_rate=config.attention_dropout_rate,
            drop_path_rate=config.drop_path_rate
            * i
            / max(config.num_layers - 1, 1),
            layer_norm_epsilon=config.layer_norm_epsilon,
            relative_positions=(
                grid[0] * grid[1] + config.num_prefix_tokens
                if config.position_embedding == "relative"
                else None
            ),
            activation=config.activation,
            layer_scale_init=config.layer_scale_init,
            qk_norm=config.qk_norm,
            qkv_bias=config.qkv_bias,
            use_gated_mlp=config.use_gated_mlp,
            name=f"block_{i}",
            dtype=dtype,
        )
        for i in range(config.num_layers)
    ]


def _make_head(config, dtype):
    """The layers after the final LayerNorm, by name."""
    layers = {}
    if config.pooling == "map":
        layers["pooling"] = AttentionPooling(
            config.pooling_num_heads or config.num_heads,
            config.mlp_dim,
            layer_norm_epsilon=config.layer_norm_epsilon,
            activation=config.activation,
            num_prefix_tokens=(
                0 if config.pool_include_prefix else config.num_prefix_tokens
            ),
            name="pooling",
            dtype=dtype,
        )
    elif config.pooling is not None:
        layers["pooling"] = TokenPooling(
            config.pooling,
            config.num_prefix_tokens,
            name="pooling",
            dtype=dtype,
        )
    if config.fc_norm:
        layers["fc_norm"] = LayerNorm(
            config.layer_norm_epsilon, name="fc_norm", dtype=dtype
        )
    if not config.include_top:
        return layers
    if config.representation_size is not None:
        layers["pre_logits"] = keras.layers.Dense(
            config.representation_size,
            activation="tanh",
            name="pre_logits",
            dtype=dtype,
        )
    # Zero-initialised, as in the original code.
    layers["head"] = keras.layers.Dense(
        config.num_classes, kernel_initializer="zeros", name="head", dtype=dtype
    )
    if config.distillation:
        layers["head_dist"] = keras.layers.Dense(
            config.num_classes,
            kernel_initializer="zeros",
            name="head_dist",
            dtype=dtype,
        )
    # Float32 under mixed precision (no float16 softmax), float64 in a
    # float64 model.
    layers["predictions"] = keras.layers.Activation(
        config.classifier_activation or "linear",
        name="predictions",
        dtype=_wide_dtype(dtype),
    )
    return layers


def _call_head(layers, x, distilled_pair=False):
    """The head layers present in `layers` on the final tokens `x`. With
    a distillation token: the class and the distillation token each
    through their head, their mean (or, `distilled_pair`, both)."""
    if not layers["patch_encoder"].distillation_token or "pooling" not in (
        layers
    ):
        for name in HEAD_LAYERS:
            if name in layers:
                x = layers[name](x)
        return x
    cls = layers["pooling"](x)
    dist = ops.reshape(x[:, 1:2], (-1, x.shape[-1]))  # (see TokenPooling)
    if "head" not in layers:
        return (cls + dist) / 2
    cls, dist = layers["head"](cls), layers["head_dist"](dist)
    if distilled_pair:
        return layers["predictions"](cls), layers["predictions"](dist)
    return layers["predictions"]((cls + dist) / 2)


def _call_layers(
    layers, images, training=None, patch_hook=None, distilled_pair=False
):
    """Runs the ViT graph over `layers`, a dict of the model's layers
    (`_make_layers`, `ViT._layer_table`); it stops at the last one present,
    so without the head layers the output is the normalised tokens.

    Returns a dict: `"output"`, `"block_outputs"`, `"attention_weights"`.
    `patch_hook`: see `ViT.forward_features`; `distilled_pair`: see
    `_call_head`."""
    x = images
    if "rescaling" in layers:
        x = layers["rescaling"](x)
    if "stem" in layers:
        x = layers["stem"](x, training=training)
    x = layers["patches"](x)
    rope = layers["rope"](x, training=training) if "rope" in layers else None
    if patch_hook is None:
        x = layers["patch_encoder"](x)
    else:
        tokens, grid = layers["patch_encoder"].project(x)
        x = layers["patch_encoder"].add_positions(patch_hook(tokens), grid)
    x = layers["embedding_dropout"](x, training=training)
    if "norm_pre" in layers:
        x = layers["norm_pre"](x)
    block_outputs, attention_weights = [], []
    mixed = "rope" in layers and layers["rope"].rope_type == "mixed"
    for i, block in enumerate(layers["blocks"]):
        # Always the (tokens, weights) form: Keras's graph check reads a
        # layer's output structure from its first call, so every call of a
        # block in every graph must have the same structure. The weights
        # are computed either way; unused, they cost nothing.
        x, weights = block(
            x,
            training=training,
            return_attention_scores=True,
            rope=rope[i] if mixed else rope,
        )
        block_outputs.append(x)
        attention_weights.append(weights)
    if "encoder_norm" in layers:
        x = layers["encoder_norm"](x)
    x = _call_head(layers, x, distilled_pair)
    return {
        "block_outputs": block_outputs,
        "attention_weights": attention_weights,
        "output": x,
    }
