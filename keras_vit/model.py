"""`ViT`: the Vision Transformer as a functional `keras.Model`."""

import keras

from keras_vit import validation
from keras_vit import variants
from keras_vit.layers.layer_norm import LayerNorm
from keras_vit.layers.patch_encoder import PatchEncoder
from keras_vit.layers.patches import Patches
from keras_vit.layers.pooling import POOLINGS
from keras_vit.layers.pooling import TokenPooling
from keras_vit.layers.resnet_stem import ResNetStem
from keras_vit.layers.transformer_block import TransformerBlock
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.weights import loading as weights_loading
from keras_vit.weights import reader as weights_reader


class _TensorFlowMultiWorkerFit:
    """`fit` / `evaluate` fixes for MultiWorkerMirroredStrategy, mixed into
    keras_vit's models (`ViT`, `MaskedPatchPrediction`) before
    `keras.Model` on the TensorFlow backend."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras (3.15) takes a sample batch for the symbolic build by
        # averaging a distributed batch across replicas with
        # `strategy.reduce`; under MultiWorkerMirroredStrategy that eager
        # collective fails ("Attempt to convert a value (PerReplica...) to a
        # Tensor"). Only the batch's shapes matter here, so this replica's
        # own values serve, with no communication.
        import tensorflow as tf

        if iterator is not None and self._distribute_strategy is not None:
            for _, _, it in iterator:
                batch = next(it)
                data_batch = tf.nest.map_structure(
                    lambda x: self.distribute_strategy.experimental_local_results(x)[0]
                    if isinstance(x, tf.distribute.DistributedValues)
                    else x,
                    batch,
                )
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def train_step(self, data):
        return _multi_worker_logs(super().train_step(data), self.distribute_strategy)

    def test_step(self, data):
        return _multi_worker_logs(super().test_step(data), self.distribute_strategy)


class _NoFit:
    """Other Keras backends' trainers: nothing to fix (their steps take
    other arguments; JAX's `train_step(state, data)`)."""


MultiWorkerFit = (
    _TensorFlowMultiWorkerFit if keras.backend.backend() == "tensorflow" else _NoFit
)


@keras.saving.register_keras_serializable(package="keras_vit")
class ViT(MultiWorkerFit, keras.Model):
    """The Vision Transformer (ViT) image classifier or feature extractor.

    "An Image is Worth 16x16 Words: Transformers for Image Recognition at
    Scale" ([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)):
    the image is cut into patches (`Patches`), each patch is projected to a
    token, a class token is prepended and position embeddings are added
    (`PatchEncoder`), `num_layers` pre-norm Transformer blocks follow
    (`TransformerBlock`), then a final LayerNorm; the class token's output
    (or the mean of the patch tokens) feeds a linear head.

    By default the model takes RGB pixel values in [0, 255] of any float or
    integer dtype and maps them to [-1, 1] itself, as the released
    checkpoints expect. Its config is exactly its constructor arguments, so
    `ViT.from_config(model.get_config())` builds the same architecture.

    The named builders (`keras_vit.ViT_B16` ...) are the usual entry point;
    `ViT.from_variant("B/16", ...)` builds any variant of
    `keras_vit.variants.VARIANTS`.

    Args:
        image_size: int or `(height, width)`, the input resolution; both
            must be multiples of `patch_size`. Defaults to `None`: the
            resolution of the `weights` when they record one, else 224.
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
            patch tokens), or `None` (with `include_top=False` only: return
            all tokens, `(B, T, D)`). Defaults to `"token"`.
        class_token: bool, whether to prepend a class token. Defaults to
            `None`: `True` unless `pooling="gap"` (the paper's GAP models
            have none).
        position_embedding: `"learned"` (1D learned, the paper's),
            `"learned2d"` (learned row and column embeddings, the paper's
            2D ablation), `"relative"` (the paper's relative-position
            ablation: no embeddings added to the tokens; every block's
            attention adds logits of the query against learned embeddings
            of the offset between query and key along the token sequence),
            `"sincos2d"` (fixed 2D sine-cosine) or `"none"`. Defaults to
            `"learned"`.
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
            as `"softmax"` or `None` for logits. Always computed in float32.
            Defaults to `"softmax"`.
        include_preprocessing: bool. If `True`, inputs are pixel values in
            [0, 255], rescaled to [-1, 1] inside the model; if `False`, the
            model takes already-normalised inputs. Defaults to `True`.
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
        remat: bool, whether to rematerialise each Transformer block in
            training (gradient checkpointing, `keras.remat`): its
            activations are recomputed in the backward pass instead of
            stored, trading more compute for less memory on large models;
            with dropout too, the same training as without. Defaults to
            `False`.
        weights: `None` (random initialisation), the name of a preset of
            this variant (`keras_vit.list_presets()`; downloaded once), or a
            weights file: an original google-research / big_vision `.npz`,
            a timm or Hugging Face `.safetensors`, or keras_vit's own
            `.weights.h5` / `.keras`. Loaded exactly, all or nothing (see
            `keras_vit.load_weights`): a different `num_classes` gets a new
            zero-initialised head, a different `image_size` resampled
            position embeddings. Defaults to `None`.
        dtype: the floating-point dtype policy of the layers, e.g.
            `"mixed_bfloat16"` (or the `DTypePolicyMap` of a quantized
            model's config); integer policies are refused. Defaults to
            `None`, the global policy.
        name: the model's name. Defaults to `"vit"`.
        **kwargs: other `keras.Model` arguments such as `trainable`.

    Call arguments:
        images: `(B, height, width, num_channels)` images.
        training: bool, whether dropout is active.

    Returns:
        With `include_top=True`: `(B, num_classes)` probabilities (or logits
        with `classifier_activation=None`), float32. Otherwise the pooled
        `(B, hidden_dim)` feature, or the `(B, T, hidden_dim)` tokens after
        the final LayerNorm with `pooling=None`.

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
        representation_size=None,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-6,
        classifier_activation="softmax",
        include_preprocessing=True,
        num_channels=3,
        stem=None,
        remat=False,
        weights=None,
        dtype=None,
        name="vit",
        **kwargs,
    ):
        # === Arguments, checked before anything is built ===
        _check_model_kwargs(kwargs)
        # A plain quantized policy would quantize the new, unloaded layers
        # (Keras: "already quantized"); a quantized model's config holds a
        # DTypePolicyMap instead.
        validation.float_dtype_policy("dtype", dtype, quantized=False)
        patch_size = validation.positive_int("patch_size", patch_size)
        hidden_dim = validation.positive_int("hidden_dim", hidden_dim)
        num_layers = validation.positive_int("num_layers", num_layers)
        num_heads = validation.positive_int("num_heads", num_heads)
        if hidden_dim % num_heads:
            raise ValueError(
                "`hidden_dim` must be divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim} and num_heads={num_heads}"
            )
        mlp_dim = validation.positive_int("mlp_dim", mlp_dim)
        include_top = validation.boolean("include_top", include_top)
        num_classes = validation.positive_int("num_classes", num_classes)
        pooling = validation.one_of("pooling", pooling, (*POOLINGS, None))
        if include_top and pooling is None:
            raise ValueError(
                "A model with include_top=True needs pooling='token' or "
                "'gap'. Received: pooling=None"
            )
        if class_token is None:
            class_token = pooling != "gap"
        class_token = validation.boolean("class_token", class_token)
        if pooling == "token" and not class_token:
            raise ValueError(
                "pooling='token' needs a class token. Received: "
                "class_token=False"
            )
        position_embedding = validation.one_of(
            "position_embedding", position_embedding, MODEL_POSITION_EMBEDDINGS
        )
        if position_embedding == "sincos2d" and hidden_dim % 4:
            raise ValueError(
                "position_embedding='sincos2d' needs a hidden_dim that is a "
                f"multiple of 4. Received: hidden_dim={hidden_dim}"
            )
        if position_embedding == "learned2d" and hidden_dim % 2:
            raise ValueError(
                "position_embedding='learned2d' needs an even hidden_dim. "
                f"Received: hidden_dim={hidden_dim}"
            )
        representation_size = validation.optional_positive_int(
            "representation_size", representation_size
        )
        dropout_rate = validation.rate("dropout_rate", dropout_rate)
        attention_dropout_rate = validation.rate(
            "attention_dropout_rate", attention_dropout_rate
        )
        drop_path_rate = validation.rate("drop_path_rate", drop_path_rate)
        layer_norm_epsilon = validation.epsilon(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        if classifier_activation is not None:
            try:
                keras.activations.get(classifier_activation)
            except (ValueError, TypeError):
                raise ValueError(
                    "Unknown `classifier_activation`. Received: "
                    f"classifier_activation={classifier_activation!r}"
                ) from None
        include_preprocessing = validation.boolean(
            "include_preprocessing", include_preprocessing
        )
        num_channels = validation.positive_int("num_channels", num_channels)
        remat = validation.boolean("remat", remat)

        # === Weights: read first, they may decide defaults ===
        checkpoint = None
        if weights is not None:
            variant = variants.find_variant(
                patch_size, hidden_dim, num_layers, num_heads, mlp_dim, stem
            )
            weights_path, preset = weights_loading.resolve(weights, variant)
            if not weights_reader.is_native(weights_path):
                checkpoint = weights_reader.read_checkpoint(weights_path)
            if image_size is None:
                image_size = (
                    preset["image_size"] if preset
                    else checkpoint.image_size if checkpoint
                    else None
                )
            if (
                representation_size is None
                and include_top
                and checkpoint is not None
                and checkpoint.representation_size is not None
                and checkpoint.num_classes == num_classes
            ):
                # Same head as the checkpoint: keep its pre-logits layer too.
                representation_size = checkpoint.representation_size
        image_size = validation.size_2d(
            "image_size", 224 if image_size is None else image_size
        )
        stem_layer = _make_stem(stem, dtype)
        feature_size = image_size
        if stem_layer is not None:
            feature_size = _stem_output_size(stem_layer, image_size, num_channels)
        for side in feature_size:
            if side % patch_size:
                where = (
                    "" if stem_layer is None
                    else f" (the stem's {feature_size} feature map)"
                )
                raise ValueError(
                    "`image_size` must be a multiple of `patch_size` in both "
                    f"dimensions{where}. Received: image_size={image_size} "
                    f"and patch_size={patch_size}"
                )

        # === Layers ===
        grid = (feature_size[0] // patch_size, feature_size[1] // patch_size)
        layers = {}
        if include_preprocessing:
            layers["rescaling"] = keras.layers.Rescaling(
                1.0 / 127.5, offset=-1.0, name="rescaling", dtype=dtype
            )
        if stem_layer is not None:
            layers["stem"] = stem_layer
        layers["patches"] = Patches(patch_size, name="patches", dtype=dtype)
        layers["patch_encoder"] = PatchEncoder(
            hidden_dim,
            grid_size=grid,
            class_token=class_token,
            position_embedding=(
                "none" if position_embedding == "relative" else position_embedding
            ),
            name="patch_encoder",
            dtype=dtype,
        )
        layers["embedding_dropout"] = keras.layers.Dropout(
            dropout_rate, name="embedding_dropout", dtype=dtype
        )
        relative_positions = (
            grid[0] * grid[1] + int(class_token)
            if position_embedding == "relative"
            else None
        )
        layers["blocks"] = [
            TransformerBlock(
                num_heads,
                mlp_dim,
                dropout_rate=dropout_rate,
                attention_dropout_rate=attention_dropout_rate,
                drop_path_rate=drop_path_rate * i / max(num_layers - 1, 1),
                layer_norm_epsilon=layer_norm_epsilon,
                remat=remat,
                relative_positions=relative_positions,
                name=f"block_{i}",
                dtype=dtype,
            )
            for i in range(num_layers)
        ]
        layers["encoder_norm"] = LayerNorm(
            layer_norm_epsilon, name="encoder_norm", dtype=dtype
        )
        if pooling is not None:
            layers["pooling"] = TokenPooling(
                pooling, int(class_token), name="pooling", dtype=dtype
            )
        if include_top:
            if representation_size is not None:
                layers["pre_logits"] = keras.layers.Dense(
                    representation_size,
                    activation="tanh",
                    name="pre_logits",
                    dtype=dtype,
                )
            # Zero-initialised, as in the original code.
            layers["head"] = keras.layers.Dense(
                num_classes, kernel_initializer="zeros", name="head", dtype=dtype
            )
            layers["predictions"] = keras.layers.Activation(
                classifier_activation or "linear",
                name="predictions",
                dtype="float32",
            )

        # === Functional model ===
        inputs = keras.Input(
            shape=(*image_size, num_channels), name="images"
        )
        outputs = _forward(layers, inputs)["output"]
        super().__init__(
            inputs=inputs, outputs=outputs, name=name, dtype=dtype, **kwargs
        )
        if isinstance(dtype, keras.dtype_policies.DTypePolicyMap):
            # A quantized model's config (see `_config_dtype_policy`).
            _resolve_policy_map(self, dtype)
            dtype = dtype.default_policy
        if dtype is not None:
            # A functional model keeps no policy of its own (Keras 3.15): the
            # config, and so a saved mixed-precision model, would say float32.
            self.dtype_policy = dtype
        if not self.trainable:
            # `trainable=False` as an argument (how a frozen model comes back
            # from its config) sets the model's own flag only, before its
            # layers are tracked; freeze them and their variables too, or a
            # model holding this one trains them. (`self.trainable = False`
            # again would be skipped: Keras ignores assigning a value equal
            # to the current one.)
            for layer in self._flatten_layers(include_self=False, recursive=False):
                layer.trainable = False

        # === Config ===
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.mlp_dim = mlp_dim
        self.num_classes = num_classes
        self.include_top = include_top
        self.pooling = pooling
        self.class_token = class_token
        self.position_embedding = position_embedding
        self.representation_size = representation_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.drop_path_rate = drop_path_rate
        self.layer_norm_epsilon = layer_norm_epsilon
        self.classifier_activation = classifier_activation
        self.include_preprocessing = include_preprocessing
        self.num_channels = num_channels
        self.remat = remat
        self.stem = (
            None if stem_layer is None
            else stem if isinstance(stem, dict)
            else keras.saving.serialize_keras_object(stem_layer)
        )
        self._stem_name = None if stem_layer is None else stem_layer.name
        self._grid_size = grid

        if weights is not None:
            if checkpoint is None:  # keras_vit's own file: read for this model
                checkpoint = weights_reader.read_checkpoint(
                    weights_path, model=self
                )
            weights_loading.load_checkpoint(self, checkpoint)

    @property
    def grid_size(self):
        """The `(grid_h, grid_w)` token grid at the model's resolution."""
        return self._grid_size

    @property
    def num_prefix_tokens(self):
        """Tokens before the patch tokens: 1 with a class token, else 0."""
        return int(self.class_token)

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
            float32 `(B, num_heads, T, T)` tensors, rows summing to 1, token
            0 being the class token when there is one; `"output"`: this
            model's output.

        Example:

        >>> model = keras_vit.ViT_Ti16()
        >>> out = model.intermediates_model()(images)
        >>> cls_attention = out["attention_weights"][-1][:, :, 0, 1:]
        """
        validation.boolean("attention", attention)
        inputs = keras.Input(
            shape=(*self.image_size, self.num_channels), name="images"
        )
        outputs = _forward(self._layer_table(), inputs, intermediates=True)
        if not attention:
            del outputs["attention_weights"]
        return keras.Model(inputs, outputs, name=f"{self.name}_intermediates")

    def _layer_table(self):
        """The model's layers as `_forward` takes them: a dict by name,
        with `"stem"` (hybrids) and `"blocks"` (the list of blocks)."""
        layers = {layer.name: layer for layer in self.layers}
        if self._stem_name is not None:
            layers["stem"] = layers.pop(self._stem_name)
        layers["blocks"] = [
            layers.pop(f"block_{i}") for i in range(self.num_layers)
        ]
        return layers

    @classmethod
    def from_variant(cls, variant, **kwargs):
        """Builds the named variant; `kwargs` override its numbers.

        Args:
            variant: a name from `keras_vit.variants.VARIANTS`, e.g.
                `"B/16"`.
            **kwargs: any `ViT` argument, e.g. `num_classes=10` or
                `patch_size=8`.

        Example:

        >>> keras_vit.ViT.from_variant("S/16", num_classes=10)
        """
        return cls(**{**variants.get_variant(variant), **kwargs})

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self._config_dtype_policy()),
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "hidden_dim": self.hidden_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "mlp_dim": self.mlp_dim,
            "num_classes": self.num_classes,
            "include_top": self.include_top,
            "pooling": self.pooling,
            "class_token": self.class_token,
            "position_embedding": self.position_embedding,
            "representation_size": self.representation_size,
            "dropout_rate": self.dropout_rate,
            "attention_dropout_rate": self.attention_dropout_rate,
            "drop_path_rate": self.drop_path_rate,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "classifier_activation": keras.saving.serialize_keras_object(
                self.classifier_activation
            ),
            "include_preprocessing": self.include_preprocessing,
            "num_channels": self.num_channels,
            "stem": self.stem,
            "remat": self.remat,
        }

    def _config_dtype_policy(self):
        """The model's dtype policy, or after `quantize()` a
        `DTypePolicyMap` that gives each quantized layer its policy (so
        that a saved quantized model is rebuilt quantized)."""
        policies = keras.dtype_policies.DTypePolicyMap(self.dtype_policy)
        for layer in self._flatten_layers():
            if layer.quantization_mode is not None:
                policies[layer.path] = layer.dtype_policy
        return policies if len(policies) else self.dtype_policy

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.get(config["dtype"])
        activation = config.get("classifier_activation")
        if isinstance(activation, dict):
            config["classifier_activation"] = keras.activations.deserialize(
                activation
            )
        return cls(**config)


#: `keras.applications` argument names, and what a `ViT` takes instead.
KERAS_APPLICATIONS_ARGUMENTS = {
    "classes": "num_classes",
    "input_shape": "image_size (and num_channels)",
    "input_tensor": "no input tensor: call the model on it, model(tensor)",
}


def _check_model_kwargs(kwargs):
    """Refuses keyword arguments that are neither `ViT`'s nor `keras.Model`'s
    (Keras's functional models would drop them without a word, so
    `ViT_B16(classes=10)` built a 1000-class model)."""
    unknown = sorted(set(kwargs) - {"trainable"})
    if unknown:
        hints = [
            f"{name} -> {KERAS_APPLICATIONS_ARGUMENTS[name]}"
            for name in unknown
            if name in KERAS_APPLICATIONS_ARGUMENTS
        ]
        raise ValueError(
            "Unknown keras_vit.ViT argument(s)"
            + (f" (keras.applications names; {'; '.join(hints)})" if hints else "")
            + ". Received: "
            + ", ".join(f"{name}={kwargs[name]!r}" for name in unknown)
        )


def _resolve_policy_map(model, policies):
    """Gives every layer of `model`, built with the `DTypePolicyMap`
    `policies`, its own policy from the map.

    Keras builds each layer right from a map (the quantized layers with
    their quantized variables, to be loaded), but a layer that keeps the map
    answers `dtype_policy` with the map itself, and Keras 3.15's quantized
    `Dense` reads its mode from there when saving: a reloaded quantized
    model could not be saved again. Resolved, the layers hold plain
    policies, as after `model.quantize()`.
    """
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer._dtype_policy, keras.dtype_policies.DTypePolicyMap):
            layer._dtype_policy = (
                policies[layer.path] if layer.path else policies.default_policy
            )


def _multi_worker_logs(logs, strategy):
    """Scalar step logs as `(1,)` tensors under several workers.

    Keras (3.15) reduces each replica's step logs with
    `strategy.reduce("MEAN", value, axis=0)` under MultiWorkerMirroredStrategy,
    which fails for the scalar loss and metrics ("Invalid reduction
    dimension 0 for input with 0 dimensions"); with a leading axis of 1 the
    same reduction gives the scalar mean.
    """
    import tensorflow as tf

    extended = getattr(strategy, "extended", None)
    in_multi_worker = getattr(extended, "_in_multi_worker_mode", lambda: False)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or not in_multi_worker():
        return logs
    return {
        key: tf.reshape(value, [1]) if getattr(value, "shape", None) == () else value
        for key, value in logs.items()
    }


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


def _forward(layers, images, intermediates=False, patch_hook=None):
    """Runs the ViT graph over `layers`, a dict of the model's layers
    (`ViT._layer_table`); it stops at the last one present, so without the
    pooling and head layers the output is the normalised tokens.

    `patch_hook`, if given, maps the projected patch tokens `(B, N, D)`
    before the class token and position embeddings are added (masked patch
    prediction)."""
    x = images
    if "rescaling" in layers:
        x = layers["rescaling"](x)
    if "stem" in layers:
        x = layers["stem"](x)
    x = layers["patches"](x)
    if patch_hook is None:
        x = layers["patch_encoder"](x)
    else:
        tokens, grid = layers["patch_encoder"].project(x)
        x = layers["patch_encoder"].add_positions(patch_hook(tokens), grid)
    x = layers["embedding_dropout"](x)
    block_outputs, attention_weights = [], []
    for block in layers["blocks"]:
        # Always the (tokens, weights) form: Keras's graph check reads a
        # layer's output structure from its first call, so every call of a
        # block in every graph must have the same structure. The weights
        # are computed either way; unused, they cost nothing.
        x, weights = block(x, return_attention_scores=True)
        block_outputs.append(x)
        attention_weights.append(weights)
    x = layers["encoder_norm"](x)
    for name in ("pooling", "pre_logits", "head", "predictions"):
        if name in layers:
            x = layers[name](x)
    if not intermediates:
        return {"output": x}
    return {
        "block_outputs": block_outputs,
        "attention_weights": attention_weights,
        "output": x,
    }
