"""`tf.data` input pipelines for training and evaluation.

Examples from `keras_vit.data.load` (uint8 images of any size, 1 or 3
channels, integer labels) become batches of float32 RGB pixel values in
[0, 255] at the model's resolution (the model rescales them itself) and
one-hot float32 labels (so MixUp / CutMix and label smoothing apply).
"""

import dataclasses
import functools
import numbers

import numpy as np

from keras_vit import arg_checks
from keras_vit.data import resize


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
            Defaults to `(0.35, 1.0)`, milder than big_vision's
            `inception_crop` (from 0.05) and timm's `RandomResizedCrop`
            (from 0.08; pass `(0.08, 1.0)` for it). TensorFlow's sampler
            draws the aspect ratio uniformly in 3/4 to 4/3 (timm:
            log-uniformly) and takes the whole image after 10 misses.
        flip: bool, random left-right flips.
        rand_augment: int, RandAugment operations per image, drawn per
            image (0 = off; `keras.layers.RandAugment`'s operations).
        rand_augment_magnitude: float in [0, 1], RandAugment's magnitude:
            timm's magnitude / 10 (`rand-m9` is 0.9). Each operation is
            drawn per image within the paper's range at that magnitude,
            either sign: rotation +-30 m degrees, translation +-0.45 m of
            the side, shear +-0.3 m, brightness, contrast, colour and
            sharpness factors 1 +- 0.9 m; solarization inverts the pixels
            at or above a threshold of 256 down to 256 - 256 m (timm's),
            posterization keeps 8 down to 8 - int(4 m) bits (the paper's 8
            to 4 bits, fewer as m grows). Magnitude 0 changes nothing but
            auto-contrast and equalization, which have no magnitude.
        mixup: float, MixUp's alpha (0 = off; `keras.layers.MixUp`).
        cutmix: float, CutMix's alpha (0 = off): the mixing weight is
            drawn from Beta(alpha, alpha) and labels are weighed by the
            pixels pasted (the paper's, not `keras.layers.CutMix`'s
            `factor`, which draws alpha itself in [0, factor]).
    """

    random_resized_crop: bool = True
    crop_area: tuple = (0.35, 1.0)
    flip: bool = True
    rand_augment: int = 0
    rand_augment_magnitude: float = 0.5
    mixup: float = 0.0
    cutmix: float = 0.0

    def __post_init__(self):
        arg_checks.boolean("random_resized_crop", self.random_resized_crop)
        arg_checks.boolean("flip", self.flip)
        if (
            isinstance(self.rand_augment, bool)
            or not isinstance(self.rand_augment, int)
            or self.rand_augment < 0
        ):
            raise ValueError(
                "`rand_augment` must be a number of operations >= 0. "
                f"Received: rand_augment={self.rand_augment!r}"
            )
        arg_checks.fraction(
            "rand_augment_magnitude", self.rand_augment_magnitude
        )
        for name in ("mixup", "cutmix"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value < float("inf")
            ):
                raise ValueError(
                    f"`{name}` must be a finite alpha >= 0 (0 = off). "
                    f"Received: {name}={value!r}"
                )
        area = self.crop_area
        if (
            not isinstance(area, (tuple, list))
            or len(area) != 2
            or any(
                isinstance(v, bool) or not isinstance(v, (int, float))
                for v in area
            )
            or not 0 < area[0] <= area[1] <= 1
        ):
            raise ValueError(
                "`crop_area` must be (min, max) with 0 < min <= max <= 1. "
                f"Received: crop_area={self.crop_area!r}"
            )


NO_AUGMENTATION = Augmentation(random_resized_crop=False, flip=False)


@dataclasses.dataclass(frozen=True)
class Indexed:
    """Training examples read by index, so that `train_pipeline` orders
    the whole split before reading any image.

    A shuffle buffer over the decoded examples mixed only a window of
    them: an image folder lists its files class by class, so with more
    files than the buffer every batch held a few neighbouring classes,
    and the buffer held thousands of full-size images. Here each epoch is
    a permutation of the indices (`tf.random.experimental.index_shuffle`,
    no buffer), and only then are the images read. See
    `keras_vit.data.Dataset.training_source`.

    Attributes:
        size: int, the number of examples.
        read: `read(order)` -> a `tf.data.Dataset` of `(image, label)`:
            the examples at the int64 indices of the `tf.data.Dataset`
            `order`, in that order, reading only those.
    """

    size: int
    read: object = dataclasses.field(repr=False)

    @property
    def element_spec(self):
        """The `(image, label)` spec of the examples."""
        return _none_read(self).element_spec


@dataclasses.dataclass(frozen=True)
class Encoded:
    """Training examples whose images are decoded after the shuffle, so
    that `train_pipeline`'s shuffle buffer holds encoded images (a JPEG's
    bytes), not decoded ones.

    A tensorflow_datasets split went through the buffer of
    `shuffle_buffer` examples decoded: for ImageNet some 10,000 full-size
    images (about 4 GB) where their JPEGs take about 1.1 GB. big_vision's
    and timm's readers shuffle the encoded records and decode after the
    buffer, as here: each epoch shuffles `examples` as a `tf.data.Dataset`
    is shuffled (the same seeds), then decodes them in a parallel map. See
    `keras_vit.data.Dataset.training_source`.

    Attributes:
        examples: a `tf.data.Dataset` of `(encoded image, label)` records
            (a scalar string and an integer label).
        decode: `decode(image, label)` -> `(image, label)`: a record's
            example, the image decoded (a function `tf.data` traces).
    """

    examples: object
    decode: object = dataclasses.field(repr=False)

    @property
    def element_spec(self):
        """The `(image, label)` spec of the examples, decoded."""
        return _none_read(self).element_spec

    def decoded(self, records):
        """The examples of `records` (some of `examples`), decoded in a
        parallel map."""
        import tensorflow as tf

        return records.map(self.decode, num_parallel_calls=tf.data.AUTOTUNE)


def _none_read(source):
    """A `tf.data.Dataset` of `source`'s examples (as `train_pipeline`
    takes it) that reads none: their decoded spec, for checks."""
    if isinstance(source, Indexed):
        return source.read(_range(0))
    if isinstance(source, Encoded):
        return source.decoded(source.examples.take(0))
    return source


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
    """The whole image squashed to `image_size` (`resize.DEFAULT`), as
    training resizes without a random crop, and after one."""
    return resize.resize_image(image, image_size)


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


def _one_hot(labels, num_classes):
    """One-hot labels, refusing any outside [0, num_classes): `tf.one_hot`
    gives all zeros for them (ImageNet's test split has label -1), which
    would score and train silently against no class."""
    import tensorflow as tf

    labels = tf.cast(labels, tf.int64)
    message = (
        f"Labels must be in [0, num_classes). Received: num_classes="
        f"{num_classes} and a label outside it (-1 marks an unlabelled "
        "split, such as ImageNet's test split)"
    )
    with tf.control_dependencies(
        [
            tf.debugging.assert_non_negative(labels, message=message),
            tf.debugging.assert_less(
                labels, tf.constant(num_classes, tf.int64), message=message
            ),
        ]
    ):
        return tf.one_hot(labels, num_classes)


@functools.cache
def _keyed_seeds_class():
    # Defined on first use: importing keras_vit.data imports no Keras.
    import keras

    class KeyedSeeds(keras.random.SeedGenerator):
        """The seeds of a Keras preprocessing layer, drawn from a key set
        at each call instead of from a variable.

        Keras's RandAugment, MixUp and CutMix draw their randomness from a
        `SeedGenerator` whose state is a variable: it restarts with the
        process (a resumed run would replay the first epoch's draws) and
        parallel `tf.data` calls race on it. Here the n-th draw of a call is
        `stateless_fold_in(key, n)`, the key being the batch's (or image's)
        own seed: a batch is augmented the same way in any run, on any
        thread, in any order.
        """

        def __init__(self):  # pylint: disable=super-init-not-called
            # No state variable: nothing to restore, nothing to race on.
            self.name = "keyed_seeds"
            self.key = None
            self.draws = 0

        def next(self, ordered=True):
            self.draws += 1
            return _fold(self.key, self.draws)

    return KeyedSeeds


@functools.cache
def _per_image_rand_augment_class():
    # Defined on first use: importing keras_vit.data imports no Keras.
    import keras

    class PerImageRandAugment(keras.layers.RandAugment):
        """`keras.layers.RandAugment` that draws its operations per image
        of a batch, not once for the whole batch, with the paper's ranges.

        Keras's computes every operation on the whole batch and keeps the
        drawn one with `where`, so drawing one per image costs nothing
        more; its magnitudes are drawn per image already. (A single image
        takes Keras's own path.)

        Keras passes its `factor` m to every operation as the range
        `(0, m)`: at m = 0.5 rotations of 0 to 180 degrees, always
        counter-clockwise, one-way translations of up to half the image,
        brightness and contrast only up. `magnitude` here is timm's
        magnitude / 10 and sets the operations' ranges as the reference
        does (`_rand_augment_bounds`): both signs, bounded.
        """

        def __init__(self, magnitude, **kwargs):
            super().__init__(factor=magnitude, **kwargs)
            _use_reference_ranges(self, magnitude)

        def get_random_transformation(self, data, training=True, seed=None):
            transformation = super().get_random_transformation(
                data, training=training, seed=seed
            )
            images = data["images"] if isinstance(data, dict) else data
            if transformation is None or len(images.shape) != 4:
                return transformation
            batch = images.shape[0] or self.backend.core.shape(images)[0]
            transformation["layer_idxes"] = self.backend.random.randint(
                (batch, self.num_ops),
                0,
                len(self._AUGMENT_LAYERS),
                seed=self._get_seed_generator(self.backend._backend),
            )
            return transformation

        def transform_images(self, images, transformation, training=True):
            choices = transformation and transformation["layer_idxes"]
            if not training or len(choices.shape) != 2:
                return super().transform_images(
                    images, transformation, training=training
                )
            numpy = self.backend.numpy
            images = self.backend.cast(images, self.compute_dtype)
            for i in range(self.num_ops):
                chosen = numpy.reshape(choices[:, i], (-1, 1, 1, 1))
                for index, (name, value) in enumerate(
                    transformation["transforms"].items()
                ):
                    layer = getattr(self, name)
                    images = numpy.where(
                        chosen == index,
                        layer.transform_images(images, value),
                        images,
                    )
            return self.backend.cast(images, self.compute_dtype)

    return PerImageRandAugment


#: RandAugment's ranges at magnitude 1 (timm's magnitude 10; Cubuk et al.,
#: arXiv 1909.13719): rotation in degrees, translation as a fraction of the
#: side, shear coefficient, the enhancement factor's distance from 1
#: (brightness, contrast, colour, sharpness), solarization's threshold's
#: distance from 256 (which inverts no pixel) and the bits posterization
#: drops. Magnitude m scales them.
_RAND_AUGMENT_AT_ONE = dict(
    rotation=30.0,
    translation=0.45,
    shear=0.3,
    enhance=0.9,
    solarize=256.0,
    posterize=4.0,
)


def _rand_augment_bounds(magnitude):
    """The bounds b of RandAugment's operations at `magnitude`: each is
    drawn in `[-b, b]` about no change (solarization's and
    posterization's in `[0, b]`: they have one direction). timm draws a
    random sign for its fixed magnitude; the range keeps both signs within
    its bound."""
    return {
        name: value * magnitude for name, value in _RAND_AUGMENT_AT_ONE.items()
    }


def _use_reference_ranges(layer, magnitude):
    """Sets the operations of `layer` (a Keras RandAugment) to the
    reference's ranges at `magnitude` (`_rand_augment_bounds`)."""
    import keras

    # A single number b is the range [-b, b] for Keras's geometric
    # layers and brightness; contrast takes (b, b) for [1 - b, 1 + b]
    # (from b alone it draws in [1, 1 + b]).
    bound = _rand_augment_bounds(magnitude)
    # The layer's own dtype (float32, `_augmented_batches`): under a global
    # mixed precision policy the new layers computed in bfloat16.
    options = dict(
        interpolation=layer.interpolation,
        seed=layer.seed,
        dtype=layer.dtype_policy,
    )
    layer.random_rotation = keras.layers.RandomRotation(
        bound["rotation"] / 360.0, **options
    )
    layer.random_translation = keras.layers.RandomTranslation(
        bound["translation"], bound["translation"], **options
    )
    layer.random_shear = keras.layers.RandomShear(
        bound["shear"], bound["shear"], **options
    )
    enhance = bound["enhance"]
    colour = dict(
        value_range=layer.value_range,
        seed=layer.seed,
        dtype=layer.dtype_policy,
    )
    layer.random_brightness = _multiplicative_brightness_class()(
        enhance, **colour
    )
    layer.random_contrast = keras.layers.RandomContrast(
        (enhance, enhance), **colour
    )
    # Keras's factor s blurs at 0 and leaves the image at 0.5: the
    # enhancement factor is 2 s.
    layer.random_sharpness = keras.layers.RandomSharpness(
        (0.5 - enhance / 2, 0.5 + enhance / 2), **colour
    )
    # Keras's factor c moves the image c of the way to grey (PIL's
    # enhancement factor 1 - c); its check refuses c < 0, which
    # saturates, so the range is set after it.
    colour_layer = keras.layers.RandomColorDegeneration(0.0, **colour)
    colour_layer.factor = (-enhance, enhance)
    layer.random_color_degeneration = colour_layer
    layer.solarization = _solarization_class()(bound["solarize"], **colour)
    # Bits kept drawn in [8 - int(4 m), 8] (Keras draws in [low, high)):
    # the paper's (AutoAugment's) 4 to 8 bits, fewer as m grows as in
    # timm's increasing operations. timm's `_posterize_increasing_level_
    # to_arg` (4 - int(4 m) bits, TF models' and UDA's) keeps 4 bits at
    # magnitude 0 and none at 1 (a black image); Keras kept int(8 m).
    layer.random_posterization = keras.layers.RandomPosterization(
        (8 - int(bound["posterize"]), 9), **colour
    )


@functools.cache
def _solarization_class():
    # Defined on first use: importing keras_vit.data imports no Keras.
    import keras

    class ReferenceSolarization(keras.layers.Solarization):
        """Solarization as timm's and big_vision's (PIL's
        `ImageOps.solarize`): every pixel at or above a threshold is
        inverted, nothing is added. The threshold is drawn in
        `[256 - bound, 256]`: at magnitude m, `bound` = 256 m, timm's
        `_solarize_increasing_level_to_arg` (256 - int(256 m) at timm's
        magnitude 10 m); 256 inverts nothing.

        Keras's draws an addition and a threshold in [0, 255 m]: at
        magnitude 0 a threshold of 0 inverted the whole image, and at 0.9
        it changed every pixel of a ramp of the 256 values (this changes
        m / 2 of them on average).
        """

        def __init__(self, bound, **kwargs):
            # No addition; thresholds first drawn in [0, 255].
            super().__init__(threshold_factor=(0.0, 1.0), **kwargs)
            self.bound = bound

        def get_random_transformation(self, data, training=True, seed=None):
            transformation = super().get_random_transformation(
                data, training=training, seed=seed
            )
            if transformation is None:
                return None
            drawn = transformation["thresholds"] / 255.0  # U(0, 1)
            transformation["thresholds"] = 256.0 - self.bound * drawn
            return transformation

    return ReferenceSolarization


@functools.cache
def _multiplicative_brightness_class():
    # Defined on first use: importing keras_vit.data imports no Keras.
    import keras

    class MultiplicativeBrightness(keras.layers.RandomBrightness):
        """Brightness as RandAugment's (PIL's `ImageEnhance.Brightness`):
        the image times a factor `1 + d`, `d` drawn in `factor`; Keras's
        adds `d` times the value range instead, which lifts black."""

        def transform_images(self, images, transformation, training=True):
            if not training:
                return images
            low, high = self.value_range
            gain = 1.0 + self.backend.cast(
                transformation["rgb_delta"], images.dtype
            ) / (high - low)
            return self.backend.numpy.clip(images * gain, low, high)

    return MultiplicativeBrightness


@functools.cache
def _cut_mix_class():
    # Defined on first use: importing keras_vit.data imports no Keras.
    import keras

    class CutMix(keras.layers.CutMix):
        """CutMix as the paper's (Yun et al., arXiv 1905.04899): the mixing
        weight drawn from Beta(alpha, alpha) for the given alpha, and each
        label weighed by the pixels it holds.

        Keras's `factor` a draws alpha uniformly in [0, a] for each batch
        (mostly small: weights near 0 or 1, little mixing), refuses a > 1,
        and weighs labels by the box's continuous area, not the whole
        pixels pasted.
        """

        _FACTOR_BOUNDS = (0, float("inf"))

        def __init__(self, alpha, **kwargs):
            super().__init__(factor=(alpha, alpha), **kwargs)

        def _generate_batch_mask(self, images_shape, box_corners):
            masks, _ = super()._generate_batch_mask(images_shape, box_corners)
            numpy = self.backend.numpy
            pasted = numpy.mean(
                self.backend.cast(masks, self.compute_dtype), axis=(1, 2, 3)
            )
            return masks, 1.0 - pasted

    return CutMix


def _keyed(layer):
    """`layer` (a Keras preprocessing layer) as a function of
    `(inputs, key)` whose random draws depend on `key` alone."""
    seeds = _keyed_seeds_class()()
    # Set past Keras's attribute tracking (which would list it among the
    # layer's state variables), for both of Keras's look-ups
    # (`DataLayer._get_seed_generator`).
    object.__setattr__(layer, "generator", seeds)
    object.__setattr__(layer, "_backend_generators", {"tensorflow": seeds})

    def call(inputs, key):
        seeds.key, seeds.draws = key, 0
        return layer(inputs)

    return call


#: Where each use of a batch's or image's seed folds in (so that no two
#: uses draw the same numbers).
_CROP, _FLIP, _RAND_AUGMENT, _MIXUP, _CUTMIX, _CHOICE = range(1, 7)
#: The first halves of the keys of the examples' seeds and of the shuffle
#: seeds of a run (the second half is the run's seed).
_EXAMPLE_KEY, _SHUFFLE_KEY = 0x5EED, 0x5EEE
#: Example `i` of epoch `e` is at position `e * _EPOCH_STRIDE + i` of the
#: stream: unique for any epoch size.
_EPOCH_STRIDE = 2**40
#: The bound of the epochs whose positions an int64 holds.
_MAX_EPOCH = 2**63 // _EPOCH_STRIDE


def _check_dataset(dataset):
    """Raises unless `dataset` is a `tf.data.Dataset` of `(image, label)`."""
    import tensorflow as tf

    spec = getattr(dataset, "element_spec", None)
    if (
        not isinstance(dataset, tf.data.Dataset)
        or not isinstance(spec, tuple)
        or len(spec) != 2
        or not all(isinstance(s, tf.TensorSpec) for s in spec)
        or spec[0].shape.rank not in (3, None)
        or not spec[1].dtype.is_integer
    ):
        raise ValueError(
            "`dataset` must be a tf.data.Dataset of (image, label) pairs: "
            "(height, width, channels) images and integer labels (see "
            f"keras_vit.data.load). Received: dataset={dataset!r}"
        )


def _fold(key, data):
    import tensorflow as tf

    return tf.random.experimental.stateless_fold_in(key, tf.cast(data, "int64"))


def _example_seed(seed, position):
    """The stateless seed pair of the example at `position` of the stream
    of a run seeded with `seed`."""
    import tensorflow as tf

    return _fold(tf.constant([_EXAMPLE_KEY, seed], "int64"), position)


def _shuffle_key(seed, epoch):
    """The stateless seed pair of epoch `epoch`'s shuffle."""
    import tensorflow as tf

    return _fold(tf.constant([_SHUFFLE_KEY, seed], "int64"), epoch)


def _shuffle_seed(seed, epoch):
    """The shuffle seed (an int64 scalar) of epoch `epoch`, for a buffer."""
    import tensorflow as tf

    key = _shuffle_key(seed, epoch)
    return tf.random.stateless_uniform(
        [], seed=key, minval=1, maxval=2**31 - 1, dtype="int64"
    )


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
    initial_epoch=0,
):
    """Batches of augmented training images and one-hot labels.

    What `keras_vit.data.Dataset.training_source` gives is shuffled
    before any image is read or decoded where the source allows: an
    `Indexed` source (an image folder's or arrays' examples) whole, by
    index, before any image is read; an `Encoded` source (a
    tensorflow_datasets split of JPEGs) through a buffer of
    `shuffle_buffer` encoded records, each image decoded after it; a
    `tf.data.Dataset` through a buffer of `shuffle_buffer` examples. A
    buffer only mixes a window of the examples: they must be in random
    order already, as tensorflow_datasets writes them.

    Every random choice, the shuffle order included, is a function of
    `(seed, epoch, position in the epoch)`, so the epochs of a stream that
    starts at `initial_epoch` are exactly those of one that started at 0:
    a resumed run (`keras_vit.training.train`) trains on what the
    uninterrupted one would have. With `repeat`, the stream is epoch
    `initial_epoch`, then the next, and so on; without it, each iteration
    of the dataset (each `iter()`, as `model.fit` makes one an epoch) is
    the next epoch, the first one `initial_epoch`: anything else that
    starts an iteration of the same dataset object (a look at its first
    batch) takes an epoch too.

    Args:
        dataset: `tf.data.Dataset` of `(image, label)` (see
            `keras_vit.data.load`), or an `Indexed` or `Encoded` source of
            them.
        num_classes: int, the one-hot depth.
        image_size: `(height, width)` of the model input.
        batch_size: int, the global batch; the last partial batch is
            dropped (static shapes for TPUs and XLA).
        augmentation: an `Augmentation`. Defaults to `Augmentation()`.
        shuffle: bool, whether to shuffle each epoch. Defaults to `True`.
        shuffle_buffer: int, the shuffle buffer of a `tf.data.Dataset`
            or of an `Encoded` source's records (an `Indexed` source needs
            none). Defaults to `10_000`.
        seed: int >= 0, seeds the shuffle and every random augmentation.
        deterministic: bool, whether the output order must not depend on
            thread timing (slower). Defaults to `False`.
        repeat: bool, whether to repeat forever, one epoch after another.
            Without it each iteration is one epoch, the next one each time
            (reshuffled, with that epoch's augmentation). Defaults to
            `False`.
        num_examples: int, the dataset's size; with `repeat`, each pass is
            cut to whole batches. Defaults to `None`.
        initial_epoch: int >= 0, the (0-based) epoch the stream starts
            at. Defaults to `0`.

    Returns:
        A `tf.data.Dataset` of `(images, labels)`: float32
        `(batch, H, W, 3)` in [0, 255] and float32 `(batch, num_classes)`.
    """
    # Long: the docstring states the epoch contract a resumed run relies on
    # and twelve arguments; the body is the checks, then three named steps.
    import tensorflow as tf

    (
        num_classes,
        image_size,
        batch_size,
        aug,
        shuffle_buffer,
        seed,
        num_examples,
        initial_epoch,
    ) = _check_train_arguments(
        dataset,
        num_classes,
        image_size,
        batch_size,
        augmentation,
        shuffle,
        shuffle_buffer,
        seed,
        deterministic,
        repeat,
        num_examples,
        initial_epoch,
    )
    options = tf.data.Options()
    options.deterministic = bool(deterministic)
    ds = _epoch_stream(
        _with_options(dataset, options),
        options,
        shuffle=shuffle,
        shuffle_buffer=shuffle_buffer,
        seed=seed,
        repeat=repeat,
        num_examples=num_examples,
        batch_size=batch_size,
        initial_epoch=initial_epoch,
    )
    fixed_size = dataset.element_spec[0].shape.is_fully_defined()
    ds = _augmented_batches(
        ds, fixed_size, seed, aug, image_size, num_classes, batch_size
    )
    return _mixed(ds, aug).prefetch(tf.data.AUTOTUNE)


def _with_options(source, options):
    """`source` (as `train_pipeline` takes it) with `options` on the
    `tf.data.Dataset` it shuffles (an `Indexed` source has none: its
    `read` makes a new one each epoch)."""
    if isinstance(source, Indexed):
        return source
    if isinstance(source, Encoded):
        return dataclasses.replace(
            source, examples=source.examples.with_options(options)
        )
    return source.with_options(options)


def _check_train_arguments(
    dataset,
    num_classes,
    image_size,
    batch_size,
    augmentation,
    shuffle,
    shuffle_buffer,
    seed,
    deterministic,
    repeat,
    num_examples,
    initial_epoch,
):
    """`train_pipeline`'s arguments checked, in order: the normalised
    `(num_classes, image_size, batch_size, augmentation, shuffle_buffer,
    seed, num_examples, initial_epoch)`."""
    _check_dataset(_none_read(dataset))
    num_classes = arg_checks.positive_int("num_classes", num_classes)
    image_size = arg_checks.size_2d("image_size", image_size)
    batch_size = arg_checks.int_below(
        "batch_size", batch_size, arg_checks.INT64_BOUND, minimum=1
    )
    if augmentation is not None and not isinstance(augmentation, Augmentation):
        raise ValueError(
            "`augmentation` must be a keras_vit.data.Augmentation or None. "
            f"Received: augmentation={augmentation!r}"
        )
    aug = augmentation or Augmentation()
    arg_checks.boolean("shuffle", shuffle)
    shuffle_buffer = arg_checks.int_below(
        "shuffle_buffer",
        shuffle_buffer,
        arg_checks.INT64_BOUND,
        minimum=1,
        why="the number of examples the shuffle holds; 1 does not shuffle",
    )
    seed = arg_checks.int_below(
        "seed", seed, arg_checks.INT64_BOUND, why="an int64 seed"
    )
    arg_checks.boolean("deterministic", deterministic)
    arg_checks.boolean("repeat", repeat)
    if num_examples is None and isinstance(dataset, Indexed):
        num_examples = dataset.size
    if num_examples is not None:
        num_examples = arg_checks.int_below(
            "num_examples", num_examples, arg_checks.INT64_BOUND, minimum=1
        )
        if repeat and num_examples < batch_size:
            # Each pass would be cut to no batch at all: an endless loop.
            raise ValueError(
                "`num_examples` must be at least the batch size "
                f"({batch_size}) "
                "to repeat whole batches. Received: "
                f"num_examples={num_examples}"
            )
    initial_epoch = arg_checks.int_below(
        "initial_epoch",
        initial_epoch,
        _MAX_EPOCH,
        why="the stream's positions are int64",
    )
    return (
        num_classes,
        image_size,
        batch_size,
        aug,
        shuffle_buffer,
        seed,
        num_examples,
        initial_epoch,
    )


def _epoch_stream(
    source,
    options,
    *,
    shuffle,
    shuffle_buffer,
    seed,
    repeat,
    num_examples,
    batch_size,
    initial_epoch,
):
    """The `(position, example)` pairs of epoch `initial_epoch` and the
    next ones, each epoch shuffled by its own seed (see `train_pipeline`
    for when the next epoch starts)."""
    import tensorflow as tf

    encoded = isinstance(source, Encoded)
    # An `Encoded` source's records are shuffled as they are, and their
    # images decoded after the buffer (below).
    records = source.examples if encoded else source

    def epoch_of(epoch):
        if isinstance(source, Indexed):
            ds = source.read(_epoch_order(source.size, shuffle, seed, epoch))
        elif shuffle:
            # A graph-level seed, so that the shuffle's seeds are
            # (1, f(seed, epoch)) whatever the global seed is (a tensor
            # seed under a global seed of 0 fails in TensorFlow).
            tf.random.set_seed(1)
            ds = records.shuffle(
                shuffle_buffer,
                seed=_shuffle_seed(seed, epoch),
                reshuffle_each_iteration=False,
            )
        else:
            ds = records
        if repeat and num_examples is not None:
            # Whole batches only, so every pass over the data is exactly
            # one epoch and a resumed run starts its epochs where they
            # began.
            ds = ds.take(num_examples // batch_size * batch_size)
        if encoded:
            ds = source.decoded(ds)
        # Each example's seed is a function of its position (epoch and
        # place in it), which is all that is attached here (`enumerate` is
        # cheap; the seeds are made in the parallel maps).
        return ds.enumerate(start=epoch * _EPOCH_STRIDE)

    if repeat:
        epochs = tf.data.Dataset.counter(initial_epoch)
    else:
        # One epoch per iteration: each new iterator (`model.fit` makes one
        # an epoch) takes the next epoch number from this counter.
        with tf.init_scope():
            counter = tf.Variable(
                initial_epoch - 1,
                dtype="int64",
                trainable=False,
                name="train_pipeline_epoch",
            )
        epochs = tf.data.Dataset.from_tensors(tf.constant(0, "int64")).map(
            lambda _: counter.assign_add(1)
        )
    # (The options of `source` do not reach past `flat_map`.)
    return epochs.flat_map(epoch_of).with_options(options)


def _range(size):
    import tensorflow as tf

    return tf.data.Dataset.range(size)


def _epoch_order(size, shuffle, seed, epoch):
    """The indices of the `size` examples of epoch `epoch` in the order it
    reads them: with `shuffle`, a permutation of them all drawn from
    `(seed, epoch)` alone (stateless: the same in a resumed run, on every
    worker), held by no buffer."""
    import tensorflow as tf

    order = _range(size)
    if not shuffle:
        return order
    key = _shuffle_key(seed, epoch)
    return order.map(
        lambda index: tf.random.experimental.index_shuffle(
            index, key, tf.constant(size - 1, "int64")
        )
    )


def _augmented_batches(
    ds, fixed_size, seed, aug, image_size, num_classes, batch_size
):
    """`(images, labels, seeds)` batches of the `(position, example)`
    stream `ds`, cropped or resized, flipped and RandAugmented, each by its
    own seed (RandAugment's per batch, keyed by its first image's, if
    `fixed_size`); every draw is per image either way."""
    import tensorflow as tf

    def augment(position, example):
        pair = _example_seed(seed, position)
        image, label = example
        image = _to_rgb(image)
        if aug.random_resized_crop:
            image = _inception_crop(
                image, image_size, aug.crop_area, _fold(pair, _CROP)
            )
        else:
            image = _resize(image, image_size)
        if aug.flip:
            image = tf.image.stateless_random_flip_left_right(
                image, _fold(pair, _FLIP)
            )
        return image, _one_hot(label, num_classes), pair

    rand_augment = None
    if aug.rand_augment:
        keyed_rand_augment = _keyed(
            _per_image_rand_augment_class()(
                value_range=(0, 255),
                num_ops=aug.rand_augment,
                magnitude=aug.rand_augment_magnitude,
                # float32 pixels, whatever the global policy (under
                # mixed_bfloat16 the images came out bfloat16).
                dtype="float32",
            )
        )

        def rand_augment(x, key):
            return keyed_rand_augment(x, _fold(key, _RAND_AUGMENT))

    if fixed_size:
        # Same-sized images are cropped one by one too: a batched
        # `crop_and_resize` drew the aspect ratio relative to the image's
        # (2:1 images gave 1.6 to 2.6) and aliased without antialiasing.
        # RandAugment then runs on whole batches, keyed by the first
        # image's seed.
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(batch_size, drop_remainder=True)
        if rand_augment is not None:
            ds = ds.map(
                lambda x, y, pairs: (rand_augment(x, pairs[0]), y, pairs),
                num_parallel_calls=tf.data.AUTOTUNE,
            )
    else:
        ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
        if rand_augment is not None:
            ds = ds.map(
                lambda x, y, pair: (rand_augment(x, pair), y, pair),
                num_parallel_calls=tf.data.AUTOTUNE,
            )
        ds = ds.batch(batch_size, drop_remainder=True)
    return ds


def _mixed(ds, aug):
    """The `(images, labels)` batches of the `(images, labels, seeds)`
    batches `ds`, MixUp or CutMix applied (half the batches each when both
    are on)."""
    import keras
    import tensorflow as tf

    # float32, whatever the global policy: under mixed_bfloat16 Keras's
    # MixUp raised a TypeError and CutMix a ValueError (bfloat16 weights
    # against float32 images).
    mixers = []
    if aug.mixup:
        mixers.append(
            (keras.layers.MixUp(alpha=aug.mixup, dtype="float32"), _MIXUP)
        )
    if aug.cutmix:
        mixers.append((_cut_mix_class()(aug.cutmix, dtype="float32"), _CUTMIX))
    if not mixers:
        return ds.map(lambda images, labels, seeds: (images, labels))
    mixers = [(_keyed(layer), where) for layer, where in mixers]

    def mix(images, labels, seeds):
        key = seeds[0]  # the batch's: its first image's
        data = {"images": images, "labels": labels}
        calls = [
            lambda data, m=m, w=w: m(data, _fold(key, w)) for m, w in mixers
        ]
        if len(calls) == 1:
            data = calls[0](data)
        else:  # half the batches each, as timm does with both on
            data = tf.cond(
                tf.random.stateless_uniform([], seed=_fold(key, _CHOICE)) < 0.5,
                lambda: calls[0](data),
                lambda: calls[1](data),
            )
        return data["images"], data["labels"]

    return ds.map(mix, num_parallel_calls=tf.data.AUTOTUNE)


def eval_pipeline(
    dataset,
    num_classes,
    image_size,
    batch_size,
    drop_remainder=False,
    pad=False,
    num_examples=None,
    image_resize=None,
):
    """Batches of resized evaluation images and one-hot labels, in order.

    Args:
        dataset: `tf.data.Dataset` of `(image, label)`.
        num_classes: int, the one-hot depth.
        image_size: `(height, width)` of the model input.
        batch_size: int.
        drop_remainder: bool; `True` for static shapes, the last partial
            batch dropped. Defaults to `False`.
        pad: bool; `True` for static shapes in which every example counts
            (TPUs): the split is padded to whole batches with blank
            examples, and the batches are `(images, labels,
            sample_weights)` for Keras's `evaluate`: weight 0 for the
            padding, `padded / num_examples` for every example (Keras
            averages a loss over all the batches' rows, padding included,
            so that its loss, and every weighted metric, come out as the
            unpadded split's means). Defaults to `False`.
        num_examples: int, the split's size, for `pad`. Defaults to `None`:
            the dataset's cardinality, which must then be known.
        image_resize: how each image is resized to `image_size`: a model's
            `image_resize` (a preset's evaluation: timm's centre crop, or
            the whole image squashed; see `keras_vit.data.resize.check`).
            Defaults to `None`: the whole image squashed, bilinear,
            antialiased.

    Returns:
        A `tf.data.Dataset` of `(images, labels)` like `train_pipeline`'s,
        or with `pad` `(images, labels, sample_weights)`.
    """
    import tensorflow as tf

    _check_dataset(dataset)
    num_classes = arg_checks.positive_int("num_classes", num_classes)
    image_size = arg_checks.size_2d("image_size", image_size)
    batch_size = arg_checks.int_below(
        "batch_size", batch_size, arg_checks.INT64_BOUND, minimum=1
    )
    arg_checks.boolean("drop_remainder", drop_remainder)
    arg_checks.boolean("pad", pad)
    image_resize = resize.check(image_resize)
    if pad and drop_remainder:
        raise ValueError(
            "`pad` fills the last partial batch that `drop_remainder` drops: "
            "pass one of them. Received: drop_remainder=True and pad=True"
        )

    def prepare(image, label):
        image = resize.resize_image(_to_rgb(image), image_size, image_resize)
        return image, _one_hot(label, num_classes)

    dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
    if pad:
        dataset = _padded(dataset, batch_size, num_examples)
    return dataset.batch(
        batch_size, drop_remainder=drop_remainder or pad
    ).prefetch(tf.data.AUTOTUNE)


def _padded(dataset, batch_size, num_examples):
    """The `(image, label)` examples of `dataset` as `(image, label,
    weight)`, followed by blank examples of weight 0 up to a whole number
    of batches (see `eval_pipeline`'s `pad`)."""
    import tensorflow as tf

    if num_examples is None:
        num_examples = int(dataset.cardinality())
        if num_examples < 0:  # INFINITE or UNKNOWN
            raise ValueError(
                "`pad` needs the split's size, which this dataset does not "
                "know: pass `num_examples`. Received: num_examples=None"
            )
    num_examples = arg_checks.positive_int("num_examples", num_examples)
    padded = -(-num_examples // batch_size) * batch_size
    weight = tf.constant(padded / num_examples, "float32")
    image_spec, label_spec = dataset.element_spec
    blank = (
        tf.zeros(image_spec.shape, image_spec.dtype),
        tf.zeros(label_spec.shape, label_spec.dtype),
        tf.constant(0.0, "float32"),
    )
    return (
        dataset.apply(tf.data.experimental.assert_cardinality(num_examples))
        .map(lambda image, label: (image, label, weight))
        .concatenate(
            tf.data.Dataset.from_tensors(blank).repeat(padded - num_examples)
        )
    )


def holdout_indices(num_examples, fraction, seed=0, name="validation_split"):
    """`(train, held_out)`: increasing indices of `num_examples` examples, a
    random `fraction` held out (at least one), the same for the same seed;
    `name` is the fraction's argument, for errors."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, numbers.Real)
        or not 0 < fraction < 1
    ):
        raise ValueError(
            f"`{name}` must be in (0, 1). Received: {name}={fraction!r}"
        )
    seed = arg_checks.non_negative_int("seed", seed)
    if num_examples is None:
        raise ValueError(
            "A validation split needs the dataset's size, which is unknown "
            "for this dataset."
        )
    num_examples = arg_checks.positive_int("num_examples", num_examples)
    num_held = max(1, int(round(num_examples * fraction)))
    if num_held >= num_examples:
        raise ValueError(
            f"Holding out {fraction!r} of {num_examples} examples (at least "
            f"one) leaves none in the rest. Received: {name}={fraction!r}"
        )
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
