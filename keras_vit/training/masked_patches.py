"""Masked patch prediction: the paper's self-supervised pre-training.

Section 4.6 and Appendix B.1.2 of the ViT paper
([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)): half of the
patch embeddings are corrupted — of those, 80% replaced by a learned
[mask] embedding, 10% by another patch's embedding, 10% left as they are —
and the encoder learns to predict, for every corrupted patch, its mean
colour with each channel quantised to 3 bits (512 classes for RGB). The
paper's ViT-B/16 pre-trained this way on JFT reached 79.9% on ImageNet after
fine-tuning: 2% above training from scratch, 4% below supervised
pre-training.

The objective needs no labels, so it pre-trains on any image folder; the
backbone is an ordinary `keras_vit.ViT` whose weights then fine-tune like
any checkpoint's.
"""

import keras
import numpy as np
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers import _dropout
from keras_vit.models.keras_fixes import TrainerFixes
from keras_vit.models.vit import ViT


def mean_color_classes(images, tile_size, bits=3, value_range=(0.0, 255.0)):
    """The class of each tile's mean colour, every channel quantised.

    The image is cut into non-overlapping `tile_size` tiles (one per token:
    the patch size, or for hybrids the pixels a token covers); each tile's
    mean value per channel, scaled to [0, 1] by `value_range`, is quantised
    to `bits` bits (`floor(mean * 2**bits)`, the top value folded into the
    top level), and the levels are read as the digits of one number,
    first channel most significant: for RGB and 3 bits,
    `64 * r + 8 * g + b`, one of 512 classes.

    Args:
        images: `(B, H, W, C)` images, `H` and `W` multiples of the tile.
        tile_size: int or `(height, width)`, pixels per tile.
        bits: int, bits per channel. Defaults to `3` (the paper's).
        value_range: `(low, high)` of the pixel values, each a number or
            one per channel (the inputs of a model with a per-channel
            `normalization`). Defaults to `(0, 255)`, what `keras_vit.ViT`
            takes.

    Returns:
        int32 `(B, N)` classes in `[0, 2**(bits * C))`, tiles in row-major
        order (the order of the patch tokens).

    Example:

    >>> white = np.full((1, 32, 32, 3), 255.0)
    >>> keras_vit.training.mean_color_classes(white, 16)   # all 511
    """
    tile = arg_checks.size_2d("tile_size", tile_size)
    bits = arg_checks.positive_int("bits", bits)
    # Tensors: on PyTorch a tensor minus a NumPy array is NumPy's
    # subtraction, which copies the tensor to the host (and fails on the
    # meta tensors Keras builds the model with).
    low, high = map(ops.convert_to_tensor, _value_range(value_range))
    images = ops.convert_to_tensor(images)
    if len(images.shape) != 4 or any(
        side is not None and side % t
        for side, t in zip(images.shape[1:3], tile)
    ):
        raise ValueError(
            "`images` must be (B, H, W, C) with H and W multiples of the tile. "
            f"Received: images.shape={tuple(images.shape)} and tile_size={tile}"
        )
    channels = images.shape[-1]
    levels = 2**bits
    scaled = (ops.cast(images, "float32") - low) / (high - low)
    means = ops.average_pool(scaled, tile, strides=tile, padding="valid")
    quantised = ops.clip(ops.floor(means * levels), 0, levels - 1)
    place = ops.convert_to_tensor(
        [float(levels ** (channels - 1 - c)) for c in range(channels)]
    )
    classes = ops.sum(quantised * place, axis=-1)
    return ops.cast(ops.reshape(classes, (ops.shape(images)[0], -1)), "int32")


def _value_range(value_range):
    """`(low, high)` as float32 arrays (scalars or one value a channel),
    or `ValueError` unless every high > its low."""
    try:
        low, high = (np.asarray(v, dtype="float32") for v in value_range)
        ok = low.ndim <= 1 and high.ndim <= 1 and bool(np.all(high > low))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(
            f"`value_range` must be (low, high) with high > low. Received: "
            f"value_range={value_range!r}"
        )
    return low, high


def input_value_range(backbone):
    """The `(low, high)` of `backbone`'s inputs for [0, 255] pixels: the
    pixels themselves with `include_preprocessing=True`, else what its
    `normalization` maps them to (`[-1, 1]`, or per channel `(0 - mean) /
    std` to `(1 - mean) / std`)."""
    if backbone.include_preprocessing:
        return (0.0, 255.0)
    norm = backbone.normalization
    if norm is None:
        return (-1.0, 1.0)
    pairs = list(zip(norm["mean"], norm["std"]))
    return (
        tuple(-m / s for m, s in pairs),
        tuple((1.0 - m) / s for m, s in pairs),
    )


#: `MaskedPatchPrediction`'s options of the objective (the paper's values).
OPTIONS = {
    "corrupt_rate": 0.5,
    "mask_rate": 0.8,
    "replace_rate": 0.1,
    "bits": 3,
}


def check_options(
    corrupt_rate=OPTIONS["corrupt_rate"],
    mask_rate=OPTIONS["mask_rate"],
    replace_rate=OPTIONS["replace_rate"],
    bits=OPTIONS["bits"],
):
    """The objective's options (see `MaskedPatchPrediction`), validated:
    raises `ValueError` naming a bad one."""
    corrupt_rate = arg_checks.fraction("corrupt_rate", corrupt_rate, zero=False)
    mask_rate = arg_checks.fraction("mask_rate", mask_rate)
    replace_rate = arg_checks.fraction("replace_rate", replace_rate)
    if mask_rate + replace_rate > 1:
        raise ValueError(
            "`mask_rate + replace_rate` must be at most 1. Received: "
            f"mask_rate={mask_rate} and replace_rate={replace_rate}"
        )
    bits = arg_checks.positive_int("bits", bits)
    if bits > 8:
        raise ValueError(f"`bits` must be at most 8. Received: bits={bits}")
    return corrupt_rate, mask_rate, replace_rate, bits


@keras.saving.register_keras_serializable(package="keras_vit")
class MaskedPatchPrediction(TrainerFixes, keras.Model):
    """A ViT pre-trained by masked patch prediction (paper, Section 4.6).

    Wraps a `keras_vit.ViT` (its head, if any, is not used): in each call,
    `round(corrupt_rate * N)` patches of every image, chosen at random,
    have their embedding (the patch projection, before the class token and
    position embeddings are added) corrupted: with probability `mask_rate`
    replaced by a learned mask embedding, with probability `replace_rate`
    by the embedding of a random other patch of the batch, otherwise kept. The
    encoder's outputs for the patch tokens go through the final LayerNorm
    and a Dense layer to `2**(bits * channels)` colour classes. The loss is
    the cross-entropy on the corrupted patches only, against
    `mean_color_classes` of the input images; `patch_accuracy` is the
    share of corrupted patches whose colour class is predicted right.

    `fit` takes images alone: arrays, or a `tf.data.Dataset` of image
    batches (labels, if the data has them, are ignored; per-image
    `sample_weight` weights every corrupted patch of its image).
    Afterwards `backbone` is a trained `keras_vit.ViT`: save it
    (`keras_vit.weights.save_npz(mpp.backbone, "mpp.npz")`) and fine-tune
    with `weights="mpp.npz"` like any checkpoint.

    Args:
        backbone: a `keras_vit.ViT` (plain or hybrid, any pooling).
        corrupt_rate: float in (0, 1], the share of patches corrupted in
            each image. Defaults to `0.5`.
        mask_rate: float in [0, 1], the share of corrupted patches replaced
            by the mask embedding. Defaults to `0.8`.
        replace_rate: float in [0, 1], the share replaced by another
            patch's embedding; `mask_rate + replace_rate <= 1`, the rest
            are kept. Defaults to `0.1`.
        bits: int, bits per channel of the colour target. Defaults to `3`.
        seed: int or `None`, the seed of the corruption draws. Defaults to
            `None`.
        **kwargs: base `keras.Model` arguments such as `name`.

    Call arguments:
        images: `(B, H, W, C)` images as the backbone takes them.
        training: bool, for dropout. The corruption is drawn either way
            (evaluation scores the same task).

    Returns:
        A dict: `"logits"`, float32 `(B, N, classes)` for every patch;
        `"corrupted"`, bool `(B, N)`, which patches were corrupted;
        `"targets"`, int32 `(B, N)`, every patch's `mean_color_classes`.

    Example:

    >>> backbone = keras_vit.ViT_S16(include_top=False)
    >>> mpp = keras_vit.training.MaskedPatchPrediction(backbone)
    >>> mpp.compile(optimizer=keras_vit.training.make_optimizer(
    ...     "adamw", 2e-4, 0.1, warmup_steps=10_000, total_steps=1_000_000))
    >>> mpp.fit(unlabelled_images, epochs=...)
    >>> keras_vit.weights.save_npz(mpp.backbone, "mpp.npz")
    >>> model = keras_vit.ViT_S16(num_classes=10, weights="mpp.npz")
    """

    def __init__(
        self,
        backbone,
        corrupt_rate=OPTIONS["corrupt_rate"],
        mask_rate=OPTIONS["mask_rate"],
        replace_rate=OPTIONS["replace_rate"],
        bits=OPTIONS["bits"],
        seed=None,
        **kwargs,
    ):
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if not isinstance(backbone, ViT):
            raise ValueError(
                "`backbone` must be a keras_vit.ViT. Received: "
                f"backbone={backbone!r}"
            )
        corrupt_rate, mask_rate, replace_rate, bits = check_options(
            corrupt_rate, mask_rate, replace_rate, bits
        )
        kwargs.setdefault("name", f"{backbone.name}_mpp")
        super().__init__(**kwargs)
        self.backbone = backbone
        self.corrupt_rate = corrupt_rate
        self.mask_rate = mask_rate
        self.replace_rate = replace_rate
        self.bits = bits
        self.seed = seed
        self.num_classes = (2**bits) ** backbone.num_channels
        self.tile_size = tuple(
            int(s) // int(g)
            for s, g in zip(backbone.image_size, backbone.grid_size)
        )
        self.value_range = input_value_range(backbone)
        self._seed_generator = keras.random.SeedGenerator(seed)
        self.color_head = keras.layers.Dense(
            self.num_classes, name="color_head", dtype=backbone.dtype_policy
        )
        self.patch_accuracy = keras.metrics.Mean(name="patch_accuracy")

    def build(self, input_shape=None):
        self.mask_token = self.add_weight(
            shape=(self.backbone.hidden_dim,),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="mask_token",
        )
        self.color_head.build((None, None, self.backbone.hidden_dim))
        self.built = True

    def _final_norm(self):
        """The backbone's final LayerNorm where it comes after the pooling
        (`fc_norm=True`): `forward_features` stops before it, and the patch
        tokens go through it here, as the encoder's outputs would."""
        if not self.backbone.vit_config.fc_norm:
            return None
        return self.backbone.get_layer("fc_norm")

    def _unused(self):
        # The backbone's classifier layers take no part in this task (its
        # fc_norm does: the final LayerNorm).
        final_norm = self._final_norm()
        return {
            id(w)
            for layer in self.backbone.head_layers()
            if layer is not final_norm
            for w in layer.weights
        }

    @property
    def trainable_weights(self):
        unused = self._unused()
        return [w for w in super().trainable_weights if id(w) not in unused]

    @property
    def trainable_variables(self):
        return self.trainable_weights

    def _next_seed(self):
        # This replica's own: replicas corrupt their images differently.
        return _dropout.replica_seed(self._seed_generator)

    def _corrupt(self, tokens):
        batch = ops.shape(tokens)[0]
        num_patches, width = tokens.shape[1], tokens.shape[2]
        count = int(round(self.corrupt_rate * num_patches))
        # Exactly `count` patches of each image: those whose random draw
        # ranks lowest.
        draws = keras.random.uniform(
            (batch, num_patches), seed=self._next_seed()
        )
        ranks = ops.argsort(ops.argsort(draws, axis=-1), axis=-1)
        corrupted = ranks < count
        kind = keras.random.uniform(
            (batch, num_patches), seed=self._next_seed()
        )
        masked = corrupted & (kind < self.mask_rate)
        replaced = (
            corrupted
            & (kind >= self.mask_rate)
            & (kind < self.mask_rate + self.replace_rate)
        )
        # "Another" patch: any patch of the batch but this one — a draw from
        # the pool less one, shifted past the patch's own index.
        pool = ops.reshape(tokens, (-1, width))
        size = ops.shape(pool)[0]
        # A Python int where the batch is known: PyTorch's randint reads a
        # tensor bound with .item(), which the meta tensors Keras builds
        # the model with cannot give.
        high = (
            max(size - 1, 1)
            if isinstance(size, int)
            else ops.maximum(size - 1, 1)
        )
        picks = keras.random.randint(
            (batch, num_patches), 0, high, seed=self._next_seed()
        )
        own = ops.reshape(
            ops.arange(size, dtype=picks.dtype), (batch, num_patches)
        )
        picks = ops.minimum(
            picks + ops.cast(picks >= own, picks.dtype), size - 1
        )
        others = ops.take(pool, picks, axis=0)
        mask_token = ops.cast(self.mask_token, tokens.dtype)
        tokens = ops.where(replaced[..., None], others, tokens)
        tokens = ops.where(masked[..., None], mask_token, tokens)
        return tokens, corrupted

    def call(self, images, training=False):
        # The backbone's own graph up to the final LayerNorm, the patch
        # tokens corrupted on the way.
        corrupted = []

        def corrupt(tokens):
            tokens, mask = self._corrupt(tokens)
            corrupted.append(mask)
            return tokens

        x = self.backbone.forward_features(
            images, training=training, patch_hook=corrupt
        )
        x = x[:, self.backbone.num_prefix_tokens :]
        final_norm = self._final_norm()
        if final_norm is not None:
            x = final_norm(x, training=training)
        logits = self.color_head(x)
        targets = mean_color_classes(
            images, self.tile_size, self.bits, self.value_range
        )
        return {
            "logits": ops.cast(logits, "float32"),
            "corrupted": corrupted[0],
            "targets": targets,
        }

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        per_patch = keras.losses.sparse_categorical_crossentropy(
            y_pred["targets"], y_pred["logits"], from_logits=True
        )
        weight = _patch_weights(y_pred["corrupted"], sample_weight)
        loss = ops.sum(per_patch * weight) / ops.maximum(ops.sum(weight), 1e-12)
        # Each replica's mean, scaled so that the replicas' summed gradients
        # average them (what Keras's own losses do under tf.distribute).
        loss = _scale_for_replicas(loss)
        if self.losses:
            loss = loss + ops.cast(ops.sum(self.losses), "float32")
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        right = ops.cast(
            ops.equal(ops.argmax(y_pred["logits"], axis=-1), y_pred["targets"]),
            "float32",
        )
        self.patch_accuracy.update_state(
            right,
            sample_weight=_patch_weights(y_pred["corrupted"], sample_weight),
        )
        return self.get_metrics_result()

    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "corrupt_rate": self.corrupt_rate,
            "mask_rate": self.mask_rate,
            "replace_rate": self.replace_rate,
            "bits": self.bits,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _patch_weights(corrupted, sample_weight):
    # The corrupted patches count, each weighted by its image's weight.
    weight = ops.cast(corrupted, "float32")
    if sample_weight is not None:
        weight = weight * ops.reshape(
            ops.cast(sample_weight, "float32"), (-1, 1)
        )
    return weight


def _scale_for_replicas(loss):
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas > 1:
            loss = loss / replicas
    return loss
