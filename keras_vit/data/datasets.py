"""Image classification datasets as `tf.data` pipelines of raw examples.

`load(name)` returns a `Dataset`: `train` / `test` `tf.data.Dataset`s of
`(image, label)` with `image` a `uint8` `(H, W, C)` tensor (C = 1 or 3) and
`label` an `int64` scalar, plus class names and sizes. Names:

- `"fashion_mnist"`: Fashion-MNIST (60,000 + 10,000 28x28 grayscale),
  read from the Keras cache, else the Debian package
  `dataset-fashion-mnist` (`/usr/share/datasets/fashion-mnist`), else
  downloaded by `keras.datasets.fashion_mnist`.
- `"digits"`: scikit-learn's 8x8 digits (1,797 images; a fixed 80/20 split).
- `"folder:PATH"`: one sub-folder of images per class (JPEG, PNG, GIF,
  BMP, WebP), each holding some; with `labels=False` (self-supervised
  pre-training), every image under `PATH`, sub-folders or not, as one
  class `"unlabelled"`. Hidden files and folders (a name starting with
  `.`) are skipped.
- any other name: a `tensorflow_datasets` dataset (`"cifar10"`,
  `"imagenet2012"`, `"oxford_flowers102"`, ...), from `data_dir` (which
  may be a `gs://` path for TPUs): its `supervised_keys` (image, label);
  with `labels=False` its image feature alone, as one class
  `"unlabelled"`, from the `"train"` split and the `"unlabelled"` split
  where there is one (`"stl10"`). JPEGs decode as PIL decodes them; for
  training, after the shuffle (`Dataset.training_source`).
"""

import dataclasses
import gzip
import os
import zlib

import numpy as np

from keras_vit import extras
from keras_vit.data.pipeline import Encoded
from keras_vit.data.pipeline import Indexed
from keras_vit.data.pipeline import holdout_indices
from keras_vit.data.pipeline import select_indices

#: The one class name of an image folder read without labels.
UNLABELLED = "unlabelled"

FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: Where the Debian package `dataset-fashion-mnist` installs the files.
DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
#: The message of `read_image`'s check, followed by the file's path.
NOT_AN_IMAGE = "Not a JPEG, PNG, GIF, BMP or WebP image:"
#: The message of `read_images` for a file that starts like an image but
#: does not decode, followed by the file's path.
NOT_DECODABLE = "An image that does not decode (cut short or corrupt):"
#: The first bytes of each format `tf.io.decode_image` reads, at an offset
#: (WebP is a RIFF file whose type, at byte 8, is "WEBP").
IMAGE_SIGNATURES = (
    (0, b"\xff\xd8\xff"),  # JPEG
    (0, b"\x89PNG"),
    (0, b"GIF8"),
    (0, b"BM"),
    (8, b"WEBP"),
)


@dataclasses.dataclass
class Dataset:
    """A classification dataset's splits and what it holds.

    Attributes:
        name: the dataset's name as given to `load`.
        train: `tf.data.Dataset` of `(uint8 image, int64 label)`.
        test: the held-out split, or `None` when the source has none.
        class_names: list of class names; `num_classes` is its length.
        num_train: examples in `train` (`None` if unknown).
        num_test: examples in `test`.
        channels: image channels (1 or 3), or `None` if they vary.
        train_labels: the labels of `train` in order, when they are known
            without reading the images (arrays, image folders), else `None`.
        select: `select(indices)` -> the `train` examples at `indices`, in
            that order, reading only those (arrays, image folders), or `None`.
        select_range: `select_range(start, stop)` -> a contiguous run of
            `train` read alone (tensorflow_datasets' split slicing), or `None`.
        read_at: `read_at(order)` -> the `train` examples at the int64
            indices of the `tf.data.Dataset` `order`, in that order, reading
            only those (arrays, image folders), or `None`: what
            `training_source` reads.
        training_range: `training_range(start, stop)` -> what
            `training_source` gives for the `train` examples from `start`
            to `stop` (`None`: from the first, to the last) of a source
            read by split slicing (tensorflow_datasets): a
            `keras_vit.data.pipeline.Encoded` source of their records, the
            images not yet decoded, where keras_vit decodes them (JPEGs),
            else the decoded examples; or `None`.
        read_train_labels: `read_train_labels()` -> a `tf.data.Dataset` of
            `train`'s labels in order, read without decoding an image
            (tensorflow_datasets), or `None`.
        train_digest: what `train`'s examples are, in order, where their
            number does not tell (an image folder: the SHA-256 of its files'
            paths below it, `files_digest`), else `None`. A validation split
            is drawn by index (`holdout`): a folder whose files changed
            since holds other images out.
    """

    name: str
    train: object
    test: object
    class_names: list
    num_train: int = None
    num_test: int = None
    channels: int = None
    train_labels: object = dataclasses.field(default=None, repr=False)
    select: object = dataclasses.field(default=None, repr=False)
    select_range: object = dataclasses.field(default=None, repr=False)
    read_at: object = dataclasses.field(default=None, repr=False)
    training_range: object = dataclasses.field(default=None, repr=False)
    read_train_labels: object = dataclasses.field(default=None, repr=False)
    train_digest: str = dataclasses.field(default=None, repr=False)

    @property
    def num_classes(self):
        return len(self.class_names)

    def subset(self, indices):
        """The training examples at `indices` (increasing), in order: read
        alone where the source allows, else filtered out of `train` (a
        tensorflow_datasets split of JPEGs: out of its records, so that
        only the chosen images are decoded, not all those before the last
        chosen one: few-shot's shots of ImageNet)."""
        indices = np.asarray(indices, "int64")
        if self.select is not None:
            return self.select(indices)

        if self.training_range is not None:
            source = self.training_range(None, None)
            if isinstance(source, Encoded):
                return source.decoded(select_indices(source.examples, indices))
        return select_indices(self.train, indices)

    def training_source(self, indices=None):
        """What `train_pipeline` shuffles to train on `train` (or on the
        examples at `indices`, increasing): where the source allows, they
        are shuffled before any image is read or decoded.

        - arrays, image folders: a `keras_vit.data.pipeline.Indexed`
          source, which `train_pipeline` shuffles whole, by index, before
          reading an image (a buffer of an image folder's class-ordered
          files mixed a few classes at a time);
        - a tensorflow_datasets split of JPEGs: a
          `keras_vit.data.pipeline.Encoded` source, whose records
          `train_pipeline` shuffles through its buffer still encoded,
          decoding each image after it (a buffer of decoded full-size
          images held some four times the memory; big_vision and timm
          shuffle the encoded records too);
        - otherwise (a tensorflow_datasets split of PNGs, which
          tensorflow_datasets decodes and caches when small) the decoded
          examples, a `tf.data.Dataset` (`train`, or `subset(indices)`).
        """
        import tensorflow as tf

        chosen = None if indices is None else np.asarray(indices, "int64")
        if self.read_at is not None:
            if chosen is None:
                return Indexed(self.num_train, self.read_at)

            def read(order):
                table = tf.constant(chosen)
                return self.read_at(order.map(lambda i: tf.gather(table, i)))

            return Indexed(len(chosen), read)
        if self.training_range is None:
            return self.train if chosen is None else self.subset(chosen)
        source = self.training_range(None, None)
        if chosen is None:
            return source
        if isinstance(source, Encoded):
            return dataclasses.replace(
                source, examples=select_indices(source.examples, chosen)
            )
        return select_indices(source, chosen)

    def holdout(self, fraction, seed=0, training=False):
        """Holds a fraction of `train` out, the same way every time.

        Image folders and arrays hold out a random `fraction` (by `seed`),
        read without the other images; a tensorflow_datasets split its last
        `fraction` (its records were shuffled when it was prepared), read
        with split slicing; any other source filters its examples by index.
        Nothing is buffered in memory. With `training`, the training part
        is what `training_source` gives for it (what `train_pipeline`
        shuffles before reading or decoding the images), else decoded
        examples.

        Returns:
            `(train, validation, num_train, num_validation)`.
        """

        train, held = holdout_indices(self.num_train, fraction, seed)
        if self.select is None and self.select_range is not None:
            num_kept = len(train)
            kept = (
                self.training_range
                if training and self.training_range is not None
                else self.select_range
            )(0, num_kept)
            return (
                kept,
                self.select_range(num_kept, self.num_train),
                num_kept,
                len(held),
            )
        kept = self.training_source(train) if training else self.subset(train)
        return kept, self.subset(held), len(train), len(held)


def _unreadable(path, why):
    return ValueError(
        f"A Fashion-MNIST file is unreadable ({why}); delete it to "
        f"download it again. Received: path={path!r}"
    )


def _read_idx(path, ndim):
    """The uint8 array of a gzipped IDX file of `ndim` dimensions; raises
    naming the file for one cut short or not IDX (an error page saved as
    .gz): gzip's and NumPy's own errors named no file."""
    try:
        with gzip.open(path, "rb") as file:
            data = file.read()
    except (OSError, EOFError, zlib.error) as error:  # BadGzipFile: OSError
        raise _unreadable(path, f"{type(error).__name__}: {error}") from None
    header = 4 + 4 * ndim
    # The magic: two zero bytes, 0x08 (uint8) and the number of dimensions.
    if len(data) < header or data[:4] != bytes([0, 0, 8, ndim]):
        raise _unreadable(path, f"not a {ndim}-dimensional uint8 IDX file")
    shape = tuple(np.frombuffer(data[4:header], dtype=">u4").astype(int))
    if len(data) - header != np.prod(shape):
        raise _unreadable(
            path,
            f"{len(data) - header} bytes of data for its shape {shape}, "
            "cut short",
        )
    return np.frombuffer(data[header:], dtype=np.uint8).reshape(shape)


def _read_fashion_mnist(folder):
    """Fashion-MNIST's `((x_train, y_train), (x_test, y_test))` from the
    IDX files in `folder`."""
    splits = []
    for images, labels in FASHION_MNIST_FILES.values():
        images, labels = (os.path.join(folder, f) for f in (images, labels))
        x, y = _read_idx(images, 3), _read_idx(labels, 1)
        if len(x) != len(y):
            raise _unreadable(
                labels,
                f"{len(y)} labels for the {len(x)} images of {images}",
            )
        splits.append((x, y))
    return tuple(splits)


def fashion_mnist_arrays():
    """Fashion-MNIST as NumPy arrays: `((x_train, y_train), (x_test, y_test))`.

    Looks in the Keras cache, then the Debian package, then downloads.
    """
    import keras

    keras_cache = os.path.join(
        os.path.expanduser(os.environ.get("KERAS_HOME", "~/.keras")),
        "datasets",
        "fashion-mnist",
    )
    for folder in (keras_cache, DEBIAN_FASHION_MNIST):
        files = [
            os.path.join(folder, f)
            for pair in FASHION_MNIST_FILES.values()
            for f in pair
        ]
        if all(os.path.isfile(f) for f in files):
            return _read_fashion_mnist(folder)
    return keras.datasets.fashion_mnist.load_data()


def digits_arrays(seed=0):
    """scikit-learn's digits, as uint8 8x8 images, split 80/20 (seeded)."""
    sklearn_datasets = extras.require(
        "sklearn.datasets", "The 'digits' dataset"
    )
    digits = sklearn_datasets.load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    cut = int(0.8 * len(images))
    train, test = order[:cut], order[cut:]
    return (images[train], labels[train]), (images[test], labels[test])


def _from_arrays(name, splits, class_names):
    import tensorflow as tf

    (x_train, y_train), (x_test, y_test) = splits
    if x_train.ndim == 3:
        x_train, x_test = x_train[..., None], x_test[..., None]
    y_train = y_train.astype("int64")

    def select(indices):
        return tf.data.Dataset.from_tensor_slices(
            (x_train[indices], y_train[indices])
        )

    def read_at(order):
        images, labels = tf.constant(x_train), tf.constant(y_train)
        return order.map(
            lambda i: (tf.gather(images, i), tf.gather(labels, i)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    return Dataset(
        name=name,
        train=tf.data.Dataset.from_tensor_slices((x_train, y_train)),
        test=tf.data.Dataset.from_tensor_slices(
            (x_test, y_test.astype("int64"))
        ),
        class_names=list(class_names),
        num_train=len(x_train),
        num_test=len(x_test),
        channels=x_train.shape[-1],
        train_labels=y_train,
        select=select,
        read_at=read_at,
    )


def _hidden(name):
    """Whether a file or folder name is hidden (`.ipynb_checkpoints`, the
    `._` files macOS leaves): never an image or a class of the dataset."""
    return name.startswith(".")


def _visible_walk(folder):
    """`(folder, file names)` of `folder` and every folder below it that is
    not hidden (nor below a hidden one)."""
    for root, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if not _hidden(name)]
        yield root, files


def class_folders(folder):
    """The class names of an image folder: its sub-folders, sorted. Hidden
    folders are no classes (as for Keras's `image_dataset_from_directory`):
    a notebook's `.ipynb_checkpoints` took label 0 and shifted every
    class's label by one."""
    return sorted(
        d
        for d in os.listdir(folder)
        if os.path.isdir(os.path.join(folder, d)) and not _hidden(d)
    )


def images_under(folder):
    """The image files below `folder`, in a fixed (sorted) order; hidden
    files and folders are skipped (a notebook's `.ipynb_checkpoints` holds
    copies of images)."""
    return [
        os.path.join(root, file)
        for root, files in sorted(_visible_walk(folder))
        for file in sorted(files)
        if file.lower().endswith(IMAGE_EXTENSIONS) and not _hidden(file)
    ]


def files_digest(folder, paths):
    """The SHA-256 (hex) of `paths`' places below `folder`, in order: it
    changes when a file is added, removed, renamed or moved to another
    class, not when the folder moves."""
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        relative = os.path.relpath(path, folder).replace(os.sep, "/")
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def _known_format(contents):
    """Whether `contents` (a scalar string tensor) starts like an image."""
    import tensorflow as tf

    # Padded, so that a file shorter than a signature's end compares unequal
    # (`substr` fails on a position past the end of its string).
    head = tf.strings.join([tf.strings.substr(contents, 0, 12), b"\x00" * 12])
    return tf.reduce_any(
        [
            tf.equal(tf.strings.substr(head, offset, len(signature)), signature)
            for offset, signature in IMAGE_SIGNATURES
        ]
    )


def read_image(path):
    """Reads and decodes an image file as `uint8 (H, W, 3)`, in a graph.

    A file that is not an image of a known format (an HTML error page saved
    as `.jpg`, an empty file from a failed download) fails with an error
    that names the file: `tf.io.decode_image`'s own says only "Unknown
    image file format", deep in a training run. (A file that starts like an
    image but does not decode, truncated or corrupt, fails unnamed here:
    `read_images` names it.)
    """
    import tensorflow as tf

    contents = tf.io.read_file(path)
    check = tf.debugging.Assert(
        _known_format(contents), [NOT_AN_IMAGE, path], summarize=1
    )
    with tf.control_dependencies([check]):
        return decode_image(contents)


def decode_image(contents, channels=3):
    """Decodes an image file's `contents` (a scalar string tensor) as
    `uint8 (H, W, channels)`, JPEGs as PIL decodes them.

    `tf.io.decode_image` decodes JPEGs with TensorFlow's default (fast) DCT,
    which differs from PIL's (timm's, torchvision's), by up to 18 levels
    on photos; `dct_method="INTEGER_ACCURATE"` is libjpeg's default and
    PIL's, and gives the same pixels. Other formats decode exactly anyway.

    Args:
        contents: the file's bytes, a scalar string tensor.
        channels: 3, 1, or 0 for the file's own. Defaults to 3.
    """
    import tensorflow as tf

    jpeg = IMAGE_SIGNATURES[0][1]
    return tf.cond(
        tf.equal(tf.strings.substr(contents, 0, len(jpeg)), jpeg),
        lambda: tf.io.decode_jpeg(
            contents, channels=channels, dct_method="INTEGER_ACCURATE"
        ),
        lambda: tf.io.decode_image(
            contents, channels=channels, expand_animations=False
        ),
    )


def _refuse_image(path):
    """Fails, naming `path` and why it is no image (`read_images`)."""
    import tensorflow as tf

    known = _known_format(tf.io.read_file(path))
    message = tf.where(known, NOT_DECODABLE, NOT_AN_IMAGE)
    check = tf.debugging.Assert(False, [message, path], summarize=1)
    with tf.control_dependencies([check]):
        return tf.zeros([0, 0, 3], tf.uint8)


def read_images(paths, labels):
    """A `tf.data.Dataset` of `(uint8 (H, W, 3) image, label)` read from
    image files, in order (`read_image`'s images).

    A file that is not an image, or that starts like one but does not decode
    (a JPEG or PNG cut short by a failed copy, a corrupt one), stops the
    pipeline where it is read with an error naming it and why (`NOT_AN_IMAGE`
    or `NOT_DECODABLE`, then the path: "assertion failed: [message]
    [path]"), which the `keras-vit` command prints as one line. TensorFlow's
    own decoding error names no file, and cannot be caught in a graph: each
    file is decoded in a one-element dataset of its own whose errors are
    dropped, then the file is refused by name if that left nothing.

    Args:
        paths: the image files (a sequence or 1-D string array).
        labels: an int64 label per file.
    """
    import tensorflow as tf

    return _decoded(tf.data.Dataset.from_tensor_slices((paths, labels)))


def _decoded(files):
    """`read_images`'s examples of a `tf.data.Dataset` of `(path, label)`."""
    import tensorflow as tf

    def one(path, label):
        decoded = (
            tf.data.Dataset.from_tensors(path).map(read_image).ignore_errors()
        )
        refused = tf.data.Dataset.from_tensors(path).map(_refuse_image)
        return (
            decoded.concatenate(refused)
            .take(1)
            .map(lambda image: (image, label))
        )

    return files.interleave(
        one, block_length=1, num_parallel_calls=tf.data.AUTOTUNE
    )


def _from_folder(name, folder, labels=True):
    if not os.path.isdir(folder):
        raise ValueError(
            f"The image folder does not exist. Received: dataset={name!r}"
        )
    if not labels:
        class_names = [UNLABELLED]
        paths = images_under(folder)
        indices = [0] * len(paths)
        if not paths:
            raise ValueError(
                "The image folder holds no images "
                f"({', '.join(IMAGE_EXTENSIONS)})."
                f" Received: dataset={name!r}"
            )
    else:
        class_names = class_folders(folder)
        paths, indices, empty = [], [], []
        for index, class_name in enumerate(class_names):
            found = images_under(os.path.join(folder, class_name))
            paths += found
            indices += [index] * len(found)
            if not found:
                empty.append(class_name)
        if empty and paths:
            # A class of no images would shift the labels of the classes
            # after it, and the model would have an output never trained.
            raise ValueError(
                "Class folders with no images "
                f"({', '.join(IMAGE_EXTENSIONS)}): "
                f"{', '.join(map(repr, empty))}. Add images to them or "
                f"move them out of the folder. Received: dataset={name!r}"
            )
        if len(class_names) < 2 or not paths:
            _refuse_loose_images(name, folder)
            raise ValueError(
                "An image folder needs at least two class sub-folders holding "
                f"images ({', '.join(IMAGE_EXTENSIONS)}). Found "
                f"{len(class_names)} "
                f"sub-folders and {len(paths)} images. Received: "
                f"dataset={name!r}"
            )
        _warn_loose_images(folder)

    paths = np.asarray(paths)
    labels = np.asarray(indices, "int64")

    def select(chosen):
        return read_images(paths[chosen], labels[chosen])

    def read_at(order):
        import tensorflow as tf

        files, classes = tf.constant(paths), tf.constant(labels)
        return _decoded(
            order.map(lambda i: (tf.gather(files, i), tf.gather(classes, i)))
        )

    return Dataset(
        name=name,
        train=select(np.arange(len(paths))),
        test=None,
        class_names=class_names,
        num_train=len(paths),
        channels=3,
        train_labels=labels,
        select=select,
        read_at=read_at,
        train_digest=files_digest(folder, paths),
    )


def _loose_images(folder):
    """The image files lying directly in an image folder, sorted: with
    class sub-folders, images of no class."""
    return sorted(
        file
        for file in os.listdir(folder)
        if os.path.isfile(os.path.join(folder, file))
        and file.lower().endswith(IMAGE_EXTENSIONS)
        and not _hidden(file)
    )


def _loose_count(loose):
    """`1 image lies` or `N images lie`, for `loose` images."""
    return "1 image lies" if len(loose) == 1 else f"{len(loose)} images lie"


def _refuse_loose_images(name, folder):
    """Raises, for an image folder that is not one of classes, if images
    lie in it directly: the classes are its sub-folders, so those images
    belong to none (they are no class of their own either)."""
    loose = _loose_images(folder)
    if loose:
        raise ValueError(
            f"{_loose_count(loose)} directly in the image folder, in no "
            "class: each class needs its own sub-folder "
            f"({os.path.join(folder, 'CLASS', '')}{loose[0]}), and an image "
            "folder needs at least two class sub-folders. Received: "
            f"dataset={name!r}"
        )


def _warn_loose_images(folder):
    """Warns, once, if images lie directly in an image folder of classes:
    they are read as no class (as Keras's `image_dataset_from_directory`
    does), which said nothing, so a class left loose went untrained."""
    import warnings

    loose = _loose_images(folder)
    if loose:
        warnings.warn(
            f"{_loose_count(loose)} directly in the image folder {folder!r}, "
            "next to its class sub-folders, and are ignored: each class "
            "needs its own sub-folder "
            f"({os.path.join(folder, 'CLASS', '')}{loose[0]}).",
            UserWarning,
            stacklevel=4,
        )


def _tfds_image_key(name, info):
    """The feature holding the image: the first supervised key, else the one
    image feature."""
    tfds = extras.require("tensorflow_datasets", f"Dataset {name!r}")

    if info.supervised_keys:
        return info.supervised_keys[0]
    images = [
        key
        for key, feature in info.features.items()
        if isinstance(feature, tfds.features.Image)
    ]
    if len(images) != 1:
        raise ValueError(
            "Expected one image feature in the dataset, found "
            f"{len(images)} ({', '.join(images) or 'none'}). Received: "
            f"dataset={name!r}"
        )
    return images[0]


def _close_names(name, tfds):
    """The dataset names closest to a misspelt `name` (at most three):
    this module's and tensorflow_datasets' own (not the community's, whose
    list is downloaded)."""
    import difflib

    try:
        known = tfds.list_builders(with_community_datasets=False)
    except Exception:  # noqa: BLE001 - a hint only, never the error
        known = []
    return difflib.get_close_matches(name, ["digits", *known], n=3)


def _test_split(builder, labels):
    """The split to test on: "test", else "validation"; with labels, not
    one whose labels are -1 (tensorflow_datasets' mark for unlabelled, as
    in imagenet2012's test split), which would score against no class."""
    splits = builder.info.splits
    for split in ("test", "validation"):
        if split not in splits:
            continue
        if labels:
            first = builder.as_dataset(split=f"{split}[:1]", as_supervised=True)
            if any(int(label) < 0 for _, label in first):
                continue
        return split
    return None


def _expand(data_dir):
    """`data_dir` with "~" expanded, but not a URL's (gs://...):
    tensorflow_datasets took "~/tfds" for a folder named "~"."""
    if isinstance(data_dir, str) and "://" not in data_dir:
        return os.path.expanduser(data_dir)
    return data_dir


def _prepare(builder, name, data_dir):
    """Downloads and prepares a tensorflow_datasets dataset not yet in
    `data_dir`; raises naming both when that fails (offline: a raw
    ConnectionError after minutes, naming neither)."""
    try:
        builder.download_and_prepare()
    except Exception as error:  # noqa: BLE001 - network, manual data, ...
        first = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(
            "The dataset is not prepared in data_dir and could not be "
            f"downloaded and prepared ({type(error).__name__}: {first}). "
            f"Prepare it where it can be (`tfds build {name} --data_dir "
            "DIR`) and give that folder. Received: "
            f"dataset={name!r}, data_dir={data_dir!r}"
        ) from error


def _tfds_stores_jpegs(builder, key, tfds):
    """Whether the image feature `key` of a prepared tensorflow_datasets
    dataset holds JPEGs: its `encoding_format`, else (unset: files stored
    as given, imagenet2012's and oxford_flowers102's JPEGs, CIFAR's arrays
    as PNGs) its first file's signature."""
    feature = builder.info.features[key]
    if feature.encoding_format is not None:
        return feature.encoding_format == "jpeg"
    first = builder.as_dataset(
        split=f"{next(iter(builder.info.splits))}[:1]",
        decoders={key: tfds.decode.SkipDecoding()},
    )
    contents = next(iter(first.take(1)))[key].numpy()
    return contents.startswith(IMAGE_SIGNATURES[0][1])


def _tfds_image_decoder(builder, key, tfds):
    """`decode(contents)` for the image feature `key` of a prepared
    tensorflow_datasets dataset that holds JPEGs, else `None`.

    tensorflow_datasets decodes JPEGs with TensorFlow's default DCT, up to
    18 levels off PIL's (timm's) pixels; `decode_image` gives PIL's. PNGs
    decode exactly with its own decoder, which also caches a small
    dataset's decoded images (CIFAR's: decoded once, not every epoch).
    """
    feature = builder.info.features[key]
    channels = feature.shape[-1] if feature.shape else None
    if (
        feature.np_dtype != np.uint8
        or channels not in (None, 1, 3)
        or not _tfds_stores_jpegs(builder, key, tfds)
    ):
        return None

    def decode(contents):
        image = decode_image(contents, channels=channels or 0)
        image.set_shape(feature.shape)
        return image

    return decode


def _tfds_reader(builder, key, labels):
    """`(read, records, decode)` of a tensorflow_datasets builder.

    `records(split, encoded)` -> a `tf.data.Dataset` of `(image, label)`
    records; without labels the image feature `key` alone, label 0; with
    `encoded`, each image its file's bytes, not decoded. `decode(image,
    label)` -> the example of such a record, its JPEG decoded as PIL
    decodes it (`_tfds_image_decoder`), or `None` where the images are
    not JPEGs (tensorflow_datasets decodes them). `read(split)` -> the
    examples, decoded.
    """
    import tensorflow as tf

    tfds = extras.require("tensorflow_datasets", "A tensorflow_datasets name")
    decode_file = _tfds_image_decoder(builder, key, tfds)

    def pair(example):
        return example[key], tf.constant(0, tf.int64)

    def records(split, encoded):
        dataset = builder.as_dataset(
            split=split,
            as_supervised=labels,
            decoders={key: tfds.decode.SkipDecoding()} if encoded else None,
        )
        if not labels:
            dataset = dataset.map(pair, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset

    decode = None
    if decode_file is not None:

        def decode(image, label):
            return decode_file(image), label

    def read(split):
        if decode is None:
            return records(split, encoded=False)
        return records(split, encoded=True).map(
            decode, num_parallel_calls=tf.data.AUTOTUNE
        )

    return read, records, decode


def _tfds_training_range(split, records, decode):
    """`training_range(start, stop)` (see `Dataset`) of the training split
    `split` of a tensorflow_datasets builder's `records` and `decode`
    (`_tfds_reader`): the records of its JPEGs as an `Encoded` source,
    decoded by `train_pipeline` after its shuffle buffer (the buffer holds
    the files' bytes, not full-size images), else its decoded examples."""

    def training_range(start, stop):
        part = split
        if (start, stop) != (None, None):  # one split: split slicing
            part = f"{split}[{start or ''}:{'' if stop is None else stop}]"
        if decode is None:
            return records(part, encoded=False)
        return Encoded(records(part, encoded=True), decode)

    return training_range


def _from_tfds(name, data_dir, labels=True):
    tfds = extras.require("tensorflow_datasets", f"Dataset {name!r}")
    try:
        builder = tfds.builder(name, data_dir=_expand(data_dir))
    except Exception as error:  # tfds raises DatasetNotFoundError et al.
        # Its first line alone: DatasetNotFoundError's message lists every
        # dataset tfds has (some 460 lines).
        first = (str(error).strip().splitlines() or [""])[0]
        if os.path.isdir(name):
            raise ValueError(
                "The dataset is not a tensorflow_datasets name, and "
                f"{name!r} is a folder here: an image folder is given as "
                f"'folder:{name}'. Received: dataset={name!r}"
            ) from None
        close = " or ".join(map(repr, _close_names(name, tfds)))
        hint = f" (did you mean {close}?)" if close else ""
        raise ValueError(
            "Unknown dataset. Expected 'fashion_mnist', 'digits', "
            f"'folder:PATH' or a tensorflow_datasets name{hint}. Received: "
            f"dataset={name!r} ({type(error).__name__}: {first})"
        ) from None
    info = builder.info
    if labels and not info.supervised_keys:
        raise ValueError(
            "The dataset has no (image, label) pair (tensorflow_datasets "
            "`supervised_keys`), so it cannot train a classifier; masked "
            "patch pre-training reads its images alone (labels=False). "
            f"Received: dataset={name!r}"
        )
    _prepare(builder, name, data_dir)
    splits = info.splits
    test_split = _test_split(builder, labels)
    key = _tfds_image_key(name, info)
    image_shape = info.features[key].shape
    read, records, decode = _tfds_reader(builder, key, labels)
    if labels:
        class_names = list(info.features[info.supervised_keys[1]].names)
        train_split = "train"
    else:
        # Without labels, a dataset's unlabelled split (STL-10's 100,000
        # images) is training data too.
        class_names = [UNLABELLED]
        train_split = "+".join(
            s for s in ("train", "unlabelled") if s in splits
        )

    if not all(s in splits for s in train_split.split("+")):
        raise ValueError(
            'The dataset has no training split ("train"; without labels '
            f'also "unlabelled"): it has {", ".join(splits) or "none"}. '
            f"Received: dataset={name!r}"
        )
    single = "+" not in train_split

    def read_train_labels():
        # The images' bytes, never decoded: a pass for the labels alone.
        return records(train_split, encoded=True).map(
            lambda image, label: label
        )

    return Dataset(
        name=name,
        train=read(train_split),
        training_range=_tfds_training_range(train_split, records, decode),
        read_train_labels=read_train_labels,
        test=None if test_split is None else read(test_split),
        select_range=(
            lambda start, stop: read(f"{train_split}[{start}:{stop}]")
        )
        if single
        else None,
        class_names=class_names,
        num_train=sum(splits[s].num_examples for s in train_split.split("+")),
        num_test=None
        if test_split is None
        else splits[test_split].num_examples,
        channels=image_shape[-1] if image_shape else None,
    )


def check_data_dir(name, data_dir):
    """Raises for a `data_dir` given with a dataset that is not read by
    `tensorflow_datasets` (`"fashion_mnist"`, `"digits"`, `"folder:PATH"`):
    they never read it, and a run that named a folder of its own went on
    without it."""
    local = name in ("fashion_mnist", "digits") or (
        isinstance(name, str) and name.startswith("folder:")
    )
    if data_dir is not None and local:
        raise ValueError(
            "`data_dir` is the folder of a tensorflow_datasets dataset, and "
            f"{name!r} is not one (it is read from its own place). Received: "
            f"data_dir={data_dir!r}, dataset={name!r}"
        )


def load(name, data_dir=None, labels=True):
    """Loads a dataset by name (see the module docstring for the names).

    Args:
        name: `"fashion_mnist"`, `"digits"`, `"folder:PATH"` or a
            `tensorflow_datasets` name.
        data_dir: where `tensorflow_datasets` keeps its data; a
            `tensorflow_datasets` name only. Defaults to `None`, its
            default (`~/tensorflow_datasets`).
        labels: bool, whether the labels are needed. Without them an image
            folder needs no class sub-folders (every image is read, one
            class `"unlabelled"`); a `tensorflow_datasets` dataset is read
            for its image feature alone, its `"unlabelled"` split (if any)
            added to `"train"`; the arrays keep their labels, unused.
            Defaults to `True`.

    Returns:
        A `Dataset`.

    Raises:
        ValueError: for a name that is none of these, or a `data_dir` with
            a dataset that is not tensorflow_datasets' (`check_data_dir`).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"`dataset` must be a name. Received: dataset={name!r}"
        )
    check_data_dir(name, data_dir)
    if name == "fashion_mnist":
        return _from_arrays(name, fashion_mnist_arrays(), FASHION_MNIST_CLASSES)
    if name == "digits":
        return _from_arrays(name, digits_arrays(), [str(d) for d in range(10)])
    if name.startswith("folder:"):
        return _from_folder(name, name[len("folder:") :], labels)
    return _from_tfds(name, data_dir, labels)
