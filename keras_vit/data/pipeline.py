"""`tf.data` input pipelines for training and evaluation.

Examples from `keras_vit.data.load` (uint8 images of any size, 1 or 3
channels, integer labels) become batches of float32 RGB pixel values in
[0, 255] at the model's resolution (the model rescales them itself) and
one-hot float32 labels (so MixUp / CutMix and label smoothing apply).
"""

import dataclasses

import numpy as np

from keras_vit import validation


@dataclasses.dataclass
class Augmentation:
    """What the training pipeline does to each image and batch.

    Attributes:
        random_resized_crop: bool, Inception-style crop: a random box of
            `crop_area` of the image (aspect ratio 3/4 to 4/3), resized to
            the model's resolution (big_vision's `inception_crop`, via
            `tf.image.sample_distorted_bounding_box`). If `False`, the image
            is resized whole.
        crop_area: `(min, max)` fraction of the image area to crop.
        flip: bool, random left-right flips.
        rand_augment: int, RandAugment operations per image (0 = off;
            `keras.layers.RandAugment`).
        rand_augment_magnitude: float in [0, 1], RandAugment's factor.
        mixup: float, MixUp's alpha (0 = off; `keras.layers.MixUp`).
        cutmix: float, CutMix's alpha (0 = off; `keras.layers.CutMix`).
    """

    random_resized_crop: bool = True
    crop_area: tuple = (0.35, 1.0)
    flip: bool = True
    rand_augment: int = 0
    rand_augment_magnitude: float = 0.5
    mixup: float = 0.0
    cutmix: float = 0.0

    def __post_init__(self):
        validation.boolean("random_resized_crop", self.random_resized_crop)
        validation.boolean("flip", self.flip)
        if isinstance(self.rand_augment, bool) or not isinstance(self.rand_augment, int) or self.rand_augment < 0:
            raise ValueError(
                "`rand_augment` must be a number of operations >= 0. "
                f"Received: rand_augment={self.rand_augment!r}"
            )
        for name in ("mixup", "cutmix"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(
                    f"`{name}` must be an alpha >= 0 (0 = off). "
                    f"Received: {name}={value!r}"
                )
        low, high = self.crop_area
        if not 0 < low <= high <= 1:
            raise ValueError(
                "`crop_area` must be (min, max) with 0 < min <= max <= 1. "
                f"Received: crop_area={self.crop_area!r}"
            )


NO_AUGMENTATION = Augmentation(random_resized_crop=False, flip=False)


def _to_rgb(image):
    import tensorflow as tf

    image = tf.convert_to_tensor(image)
    channels = tf.shape(image)[-1]
    image = tf.cond(
        channels == 1,
        lambda: tf.image.grayscale_to_rgb(image[..., :1]),
        lambda: image[..., :3],
    )
    image.set_shape([None, None, 3])
    return image


def _resize(image, image_size):
    import tensorflow as tf

    return tf.image.resize(
        tf.cast(image, "float32"), image_size, method="bilinear", antialias=True
    )


def _inception_crop(image, image_size, area, seed):
    import tensorflow as tf

    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=tf.zeros([1, 0, 4]),
        seed=seed,
        area_range=area,
        aspect_ratio_range=(3 / 4, 4 / 3),
        min_object_covered=0.0,
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    crop = tf.slice(image, begin, size)
    crop.set_shape([None, None, image.shape[-1]])
    return _resize(crop, image_size)


def _augment_batch(example, seeds, aug, image_size, num_classes):
    """The training augmentation for a batch of same-sized images.

    The Inception crop is sampled per image (area and log-aspect-ratio
    uniform, position uniform) and applied to the whole batch at once with
    `tf.image.crop_and_resize`.
    """
    import math

    import tensorflow as tf

    images, labels = example
    images = tf.cast(images, "float32")
    if images.shape[-1] == 1:
        images = tf.image.grayscale_to_rgb(images)
    images = images[..., :3]
    batch = tf.shape(images)[0]
    seed = seeds[0]
    if aug.random_resized_crop:
        uniform = tf.random.stateless_uniform([batch, 4], seed=seed)
        low, high = aug.crop_area
        area = low + (high - low) * uniform[:, 0]
        log_ratio = math.log(3 / 4) + math.log(16 / 9) * uniform[:, 1]
        ratio = tf.exp(log_ratio)
        height = tf.minimum(tf.sqrt(area / ratio), 1.0)
        width = tf.minimum(tf.sqrt(area * ratio), 1.0)
        top = (1.0 - height) * uniform[:, 2]
        left = (1.0 - width) * uniform[:, 3]
        boxes = tf.stack([top, left, top + height, left + width], axis=1)
        images = tf.image.crop_and_resize(
            images, boxes, tf.range(batch), image_size, method="bilinear"
        )
    elif tuple(images.shape[1:3]) != tuple(image_size):
        images = tf.image.resize(images, image_size, antialias=True)
    if aug.flip:
        flip = tf.random.stateless_uniform([batch, 1, 1, 1], seed=seed + 1) < 0.5
        images = tf.where(flip, tf.reverse(images, axis=[2]), images)
    return images, tf.one_hot(labels, num_classes)


def train_pipeline(
    dataset,
    num_classes,
    image_size,
    batch_size,
    augmentation=None,
    shuffle=True,
    shuffle_buffer=10_000,
    seed=0,
    deterministic=False,
    repeat=False,
    num_examples=None,
):
    """Batches of augmented training images and one-hot labels.

    Args:
        dataset: `tf.data.Dataset` of `(image, label)` (see
            `keras_vit.data.load`).
        num_classes: int, the one-hot depth.
        image_size: `(height, width)` of the model input.
        batch_size: int, the global batch; the last partial batch is
            dropped (static shapes for TPUs and XLA).
        augmentation: an `Augmentation`. Defaults to `Augmentation()`.
        shuffle: bool, whether to shuffle each epoch. Defaults to `True`.
        shuffle_buffer: int, the shuffle buffer. Defaults to `10_000`.
        seed: int, seeds the shuffle and every random augmentation.
        deterministic: bool, whether the output order must not depend on
            thread timing (slower). Defaults to `False`.
        repeat: bool, whether to repeat forever. Defaults to `False`.
        num_examples: int, the dataset's size; with `repeat`, each pass is
            cut to whole batches. Defaults to `None`.

    Returns:
        A `tf.data.Dataset` of `(images, labels)`: float32
        `(batch, H, W, 3)` in [0, 255] and float32 `(batch, num_classes)`.
    """
    import keras
    import tensorflow as tf

    aug = augmentation or Augmentation()
    image_size = validation.size_2d("image_size", image_size)
    batch_size = validation.positive_int("batch_size", batch_size)
    options = tf.data.Options()
    options.deterministic = bool(deterministic)
    ds = dataset.with_options(options)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        if num_examples is not None:
            # Whole batches only, so every pass over the data is exactly one
            # epoch and a resumed run starts its epochs where they began.
            ds = ds.take(num_examples // batch_size * batch_size)
        ds = ds.repeat()
    # One stateless seed pair per example, continuing across epochs, so
    # augmentation is reproducible from the seed and differs every epoch.
    ds = tf.data.Dataset.zip((ds, tf.data.Dataset.random(seed=seed).batch(2)))

    def augment(example, pair):
        image, label = example
        image = _to_rgb(image)
        if aug.random_resized_crop:
            image = _inception_crop(image, image_size, aug.crop_area, pair)
        else:
            image = _resize(image, image_size)
        if aug.flip:
            image = tf.image.stateless_random_flip_left_right(image, pair + 1)
        return image, tf.one_hot(label, num_classes)

    fixed_size = dataset.element_spec[0].shape.is_fully_defined()
    if fixed_size:
        # Same-sized images (in-memory datasets): batch first, then crop,
        # resize and flip whole batches with vectorised ops, several times
        # faster than per-image maps on a small CPU.
        ds = ds.batch(batch_size, drop_remainder=True)
        ds = ds.map(
            lambda example, seeds: _augment_batch(
                example, seeds, aug, image_size, num_classes
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    else:
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    if aug.rand_augment:
        rand_augment = keras.layers.RandAugment(
            value_range=(0, 255),
            num_ops=aug.rand_augment,
            factor=aug.rand_augment_magnitude,
            seed=seed,
        )
        ds = ds.map(
            lambda x, y: (rand_augment(x), y),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    if not fixed_size:
        ds = ds.batch(batch_size, drop_remainder=True)
    mixers = []
    if aug.mixup:
        mixers.append(keras.layers.MixUp(alpha=aug.mixup, seed=seed))
    if aug.cutmix:
        mixers.append(keras.layers.CutMix(factor=aug.cutmix, seed=seed))
    if mixers:

        def mix(images, labels):
            data = {"images": images, "labels": labels}
            if len(mixers) == 1:
                data = mixers[0](data)
            else:  # half the batches each, as timm does with both on
                data = tf.cond(
                    tf.random.uniform([]) < 0.5,
                    lambda: mixers[0](data),
                    lambda: mixers[1](data),
                )
            return data["images"], data["labels"]

        ds = ds.map(mix, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def eval_pipeline(dataset, num_classes, image_size, batch_size, drop_remainder=False):
    """Batches of resized evaluation images and one-hot labels, in order.

    Args:
        dataset: `tf.data.Dataset` of `(image, label)`.
        num_classes: int, the one-hot depth.
        image_size: `(height, width)` of the model input.
        batch_size: int.
        drop_remainder: bool; `True` for static shapes (TPUs). Defaults to
            `False`.

    Returns:
        A `tf.data.Dataset` of `(images, labels)` like `train_pipeline`'s.
    """
    import tensorflow as tf

    image_size = validation.size_2d("image_size", image_size)
    batch_size = validation.positive_int("batch_size", batch_size)

    def prepare(image, label):
        return _resize(_to_rgb(image), image_size), tf.one_hot(label, num_classes)

    return (
        dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(batch_size, drop_remainder=drop_remainder)
        .prefetch(tf.data.AUTOTUNE)
    )


def holdout_indices(num_examples, fraction, seed=0):
    """`(train, held_out)`: increasing indices of `num_examples` examples, a
    random `fraction` held out (at least one), the same for the same seed."""
    if not 0 < fraction < 1:
        raise ValueError(
            "`validation_split` must be in (0, 1). "
            f"Received: validation_split={fraction!r}"
        )
    if num_examples is None:
        raise ValueError(
            "A validation split needs the dataset's size, which is unknown "
            "for this dataset."
        )
    num_held = max(1, int(round(num_examples * fraction)))
    order = np.random.default_rng(seed).permutation(num_examples)
    return np.sort(order[num_held:]), np.sort(order[:num_held])


def select_indices(dataset, indices):
    """The examples of `dataset` at `indices` (increasing), by filtering its
    stream: every example up to the last chosen one is read, none is kept
    in memory."""
    import tensorflow as tf

    indices = np.asarray(indices, "int64")
    # Nothing after the last chosen example is read.
    size = int(indices.max()) + 1 if len(indices) else 0
    chosen = np.zeros(size, bool)
    chosen[indices] = True
    mask = tf.constant(chosen)
    return (
        dataset.take(size)
        .enumerate()
        .filter(lambda i, example: mask[i])
        .map(lambda i, example: example)
    )


def split_validation(dataset, num_examples, fraction, seed=0):
    """Splits a held-out fraction off a dataset, the same way every time.

    The examples are chosen by index and filtered out of the stream: no
    shuffle buffer holds the dataset (an image folder's decoded images would
    not fit). `keras_vit.data.Dataset.holdout` reads only each split's own
    images where the source allows.

    Returns:
        `(train, validation, num_train, num_validation)`.
    """
    train, held = holdout_indices(num_examples, fraction, seed)
    return (
        select_indices(dataset, train),
        select_indices(dataset, held),
        len(train),
        len(held),
    )
