"""Images for calibration (full-integer quantization) and verification.

A source is a dataset name (`"digits"`, `"fashion_mnist"`, a
`tensorflow_datasets` name; read with `keras_vit.data.load` and resized by
`keras_vit.data.eval_pipeline`), an image folder (`"folder:PATH"`, with or
without one sub-folder per class), an `.npz` file holding an array of images
(`images`, or its only array; optional `labels`), or a NumPy array. Images
are float32, shaped like the model's input (a dataset or folder read for a
one-channel model is converted to grayscale), and hold what the model
takes: pixel values in [0, 255], or for a model built with
`include_preprocessing=False` its normalised inputs. A dataset or folder
gives pixels, which `load_model_inputs` normalises for such a model; an
array or `.npz` is taken as the model's inputs as it is.
"""

import dataclasses
import os

import numpy as np

from keras_vit import arg_checks
from keras_vit import data
from keras_vit import files
from keras_vit.data import resize
from keras_vit.data.images import model_pixels
from keras_vit.export import model_io
from keras_vit.export import pixel_inputs


@dataclasses.dataclass
class ImageSet:
    """Images shaped for a model, with their labels when known.

    Attributes:
        images: float32 `(N, H, W, C)` inputs of the model: pixel values in
            [0, 255], or normalised ones for a model that takes them.
        labels: int `(N,)` class indices, or `None`.
        source: a short description of where they came from.
        class_names: the names of the classes `labels` index (a
            dataset's, or a folder's sorted sub-folders), or `None`.
    """

    images: np.ndarray
    labels: np.ndarray = None
    source: str = ""
    class_names: list = None

    def __len__(self):
        return len(self.images)


def load_images(
    source,
    image_size,
    num_channels=3,
    limit=100,
    split="test",
    name="representative_data",
    value_range=(0.0, 255.0),
    normalize=None,
    image_resize=None,
):
    """Loads images from `source` shaped `(N, *image_size, num_channels)`.

    `load_model_inputs` calls it with a model's size, range and
    normalisation.

    Args:
        source: a dataset name, `"folder:PATH"`, the path of an `.npz` file,
            a NumPy array `(N, H, W, C)`, or an `ImageSet`.
        image_size: `(height, width)` of the model input.
        num_channels: int, channels of the model input. Defaults to `3`.
        limit: int or `None`, the most images to take (from the start).
            Defaults to `100`.
        split: `"train"` or `"test"`, the split of a named dataset (the
            other one is used when a dataset has only one). Defaults to
            `"test"`.
        name: str, the argument's name for error messages. Defaults to
            `"representative_data"`.
        value_range: `(low, high)` the values must lie in, or `None`.
            Defaults to `(0, 255)`.
        normalize: a function from the [0, 255] pixels a dataset or folder
            gives to the model's inputs (for a model built with
            `include_preprocessing=False`), or `None` to keep pixels; it is
            not applied to an array or `.npz`, which hold the model's
            inputs already. Defaults to `None`.
        image_resize: how a dataset's or folder's images are resized to
            `image_size`: a model's `image_resize`
            (`keras_vit.data.resize.of_model(model)`: a preset's
            evaluation, timm's centre crop or the squash). Defaults to
            `None`: the whole image squashed, bilinear, antialiased.

    Returns:
        An `ImageSet`.

    Raises:
        ValueError: for an unknown source, a missing file, images of another
            shape than the model's input, or values outside `value_range`.

    Example:

    >>> load_images("digits", (32, 32), limit=8).images.shape
    (8, 32, 32, 3)
    """
    image_size = arg_checks.size_2d("image_size", image_size)
    if limit is not None:
        limit = arg_checks.positive_int("limit", limit)
    result = _read_source(
        source,
        image_size,
        num_channels,
        limit,
        split,
        name,
        normalize,
        image_resize,
    )
    images = _checked_pixels(
        result.images, (*image_size, num_channels), value_range, name, source
    )
    labels = result.labels
    if limit is not None:
        images = images[:limit]
        labels = None if labels is None else labels[:limit]
    return ImageSet(images, labels, result.source, result.class_names)


def _read_source(
    source,
    image_size,
    num_channels,
    limit,
    split,
    name,
    normalize,
    image_resize,
):
    """The `ImageSet` that `source` names, as it is (unchecked; a dataset's
    or folder's pixels through `normalize`, if not `None`)."""
    if isinstance(source, ImageSet):
        return source
    if isinstance(source, np.ndarray):
        return ImageSet(source, None, "array")
    if isinstance(source, (str, os.PathLike)) and os.fspath(source):
        text = os.fspath(source)
        if text.endswith(".npz"):
            return _from_npz(text, name)
        if text.startswith("folder:") or _is_dataset_name(text):
            result = _from_dataset(
                text, image_size, num_channels, limit, split, name, image_resize
            )
            if result is not None and normalize is not None:
                result.images = normalize(result.images)
            if result is not None:
                return result
    raise ValueError(
        f"`{name}` must be a dataset name, 'folder:PATH', an .npz file "
        f"or an array of images. Received: {name}={source!r}"
    )


def _checked_pixels(images, expected, value_range, name, source):
    """`images` as float32, once they are finite numbers of shape
    `(N, *expected)`, N > 0, within `value_range` (or raises, naming
    `source`)."""
    images = np.asarray(images)
    if images.dtype.kind not in "uif":
        raise ValueError(
            f"`{name}` must hold pixel values (numbers); it holds an array of "
            f"dtype {images.dtype}. Received: {name}={_describe(source)}"
        )
    if images.ndim != 4 or tuple(images.shape[1:]) != expected:
        raise ValueError(
            f"`{name}` holds images of shape {tuple(images.shape)}, but the "
            f"model takes (N, {', '.join(map(str, expected))}) images. "
            f"Received: {name}={_describe(source)}"
        )
    if len(images) == 0:
        raise ValueError(
            f"`{name}` holds no images. Received: {name}={_describe(source)}"
        )
    images = np.asarray(images, dtype="float32")
    if not np.all(np.isfinite(images)):
        raise ValueError(
            f"`{name}` holds NaN or infinite values. Received: "
            f"{name}={_describe(source)}"
        )
    if value_range is not None:
        low, high = float(images.min()), float(images.max())
        if low < value_range[0] or high > value_range[1]:
            raise ValueError(
                f"`{name}` must hold values in [{value_range[0]:g}, "
                f"{value_range[1]:g}], what the model takes ([0, 255] pixels, "
                "or normalised ones for a model built with "
                "include_preprocessing=False); its values span "
                f"[{low:g}, {high:g}]. Received: {name}={_describe(source)}"
            )
    return images


def _describe(source):
    if isinstance(source, np.ndarray):
        return f"<array of shape {source.shape}>"
    if isinstance(source, ImageSet):
        return f"<images from {source.source}>"
    return repr(source)


def _is_dataset_name(text):
    # Paths (with a separator or an extension of a file) are not names.
    return os.sep not in text and not os.path.splitext(text)[1]


def source_paths(source):
    """The files and folders an image source reads (`folder:PATH`'s folder,
    an `.npz` file), so that an export can refuse to write over them.

    Args:
        source: a source of `load_images`, or a list of them.

    Returns:
        A list of paths (empty for a dataset name or an array).
    """
    if isinstance(source, (list, tuple)):
        return [path for s in source for path in source_paths(s)]
    if not isinstance(source, (str, os.PathLike)):
        return []
    text = os.fspath(source)
    if text.startswith("folder:"):
        return [text[len("folder:") :]]
    if text.endswith(".npz"):
        return [text]
    return []


def _from_npz(path, name):
    contents = files.read_npz(path, name=name)
    if "images" in contents:
        images = contents["images"]
    else:
        candidates = [k for k, v in contents.items() if v.ndim == 4]
        if len(candidates) != 1:
            raise ValueError(
                "The .npz file must hold an `images` array, or exactly one "
                f"4-D array. It holds {sorted(contents)}. Received: "
                f"{name}={path!r}"
            )
        images = contents[candidates[0]]
    labels = contents.get("labels")
    count = (
        images.shape[0] if images.ndim else 1
    )  # a 0-d array fails the shape check
    if labels is not None and (
        labels.dtype.kind not in "iu"
        or labels.ndim != 1
        or len(labels) != count
    ):
        raise ValueError(
            "The .npz file's `labels` must be one integer class index per "
            f"image ({count}); they are of shape {labels.shape} and dtype "
            f"{labels.dtype}. Received: {name}={path!r}"
        )
    return ImageSet(images, labels, path)


def _from_dataset(
    source, image_size, num_channels, limit, split, name, image_resize
):
    """The `ImageSet` of a dataset name or `"folder:PATH"`, its images
    resized to `image_size` as `image_resize` says (by
    `keras_vit.data.eval_pipeline`)."""

    if num_channels not in (1, 3):
        raise ValueError(
            "Datasets and image folders give RGB or grayscale images, but the "
            f"model takes {num_channels} channels; pass an .npz or an array "
            f"instead. Received: {name}={source!r}"
        )
    labelled = True
    if source.startswith("folder:"):
        folder = source[len("folder:") :]
        if not os.path.isdir(folder):
            raise ValueError(
                f"The image folder does not exist. Received: {name}={source!r}"
            )
        try:
            dataset = data.load(source)
        except ValueError:  # no class sub-folders: every image, unlabelled
            try:
                dataset = data.load(source, labels=False)
            except ValueError as error:
                raise ValueError(f"{error} (from {name}={source!r})") from None
            labelled = False
        pairs, num_classes = dataset.train, dataset.num_classes
    else:
        try:
            dataset = data.load(source)
        except ValueError as error:
            raise ValueError(f"{error} (from {name}={source!r})") from None
        first, second = (
            (dataset.test, dataset.train)
            if split == "test"
            else (dataset.train, dataset.test)
        )
        pairs = first if first is not None else second
        num_classes = dataset.num_classes
    if limit is not None:
        pairs = pairs.take(limit)
    batches = data.eval_pipeline(
        pairs, num_classes, image_size, 64, image_resize=image_resize
    )
    images, labels = [], []
    for x, y in batches.as_numpy_iterator():
        images.append(x)
        labels.append(np.argmax(y, axis=-1))
    if not images:
        raise ValueError(
            f"`{name}` holds no images. Received: {name}={source!r}"
        )
    images = model_pixels(np.concatenate(images), num_channels)
    return ImageSet(
        images,
        np.concatenate(labels) if labelled else None,
        source if source.startswith("folder:") else f"{source} ({split})",
        list(dataset.class_names) if labelled else None,
    )


def load_model_inputs(
    model,
    source,
    limit=100,
    split="test",
    name="data",
    class_names=None,
    strict=True,
):
    """`load_images` for `model`: at its input size and channels, a
    dataset's or folder's images resized as its `image_resize` says and
    their pixels turned into what it takes
    (`keras_vit.export.pixel_inputs.inputs_from_pixels`: normalised for a model
    built with `include_preprocessing=False`), and every source's values
    checked against its input range (`pixel_inputs.input_range`). The
    calibration and the verification of every export read their images
    here, so that both see what the model takes. The labels of a dataset
    or folder are those of `model`'s outputs (`model_labels`), or `None`.

    Args:
        class_names: the names of `model`'s outputs (an export's), or
            `None` (or `"class_0"`, ... placeholders): none known.
            Defaults to `None`.
        strict: bool, whether a folder whose labels cannot be matched is
            refused (else its labels are dropped). Defaults to `True`.

    Raises:
        ValueError: as `load_images` and `model_labels`; and for a dataset
            or folder given to a model that takes normalised inputs and
            records no normalisation.
    """
    height, width, channels = model_io.input_spec(model)
    images = load_images(
        source,
        (height, width),
        channels,
        limit=limit,
        split=split,
        name=name,
        value_range=pixel_inputs.input_range(model),
        # Refused only when pixels must be converted (an array is not).
        normalize=lambda pixels: pixel_inputs.inputs_from_pixels(model)(pixels),
        # As the model is evaluated: a preset's centre crop or the squash.
        image_resize=resize.of_model(model),
    )
    if model_io.output_kind(model) == "features":
        return images
    return model_labels(
        images, class_names, int(model.output_shape[-1]), name, source, strict
    )


def model_labels(
    images, class_names, num_classes, name="data", source=None, strict=True
):
    """`images` (an `ImageSet`) with labels that index a model's outputs,
    so that an accuracy compares like with like.

    A folder's labels index its own sorted sub-folders, not the model's
    classes: a folder missing one class shifted every later label by one,
    and the accuracy was wrong with no error. So where both sides have
    names the labels are mapped by name; where the model has none (`None`
    or placeholders) they are kept if the counts agree. A folder that
    cannot be mapped is refused; a dataset's labels (the default
    `"digits"`, which verifies any model) are dropped: no accuracy.

    Args:
        images: an `ImageSet`.
        class_names: the names of the model's outputs, or `None`.
        num_classes: int, the model's outputs.
        name: str, the argument's name for the error. Defaults to
            `"data"`.
        source: what the caller passed, for the error. Defaults to `None`:
            `images.source`.
        strict: bool, whether a folder that cannot be matched is refused;
            `False` drops its labels. Defaults to `True`.

    Returns:
        An `ImageSet` (`class_names` the model's where they were mapped).

    Raises:
        ValueError: for an image folder whose sub-folders are not among
            the model's class names, or, where the model has none, whose
            count differs from the model's classes.
    """
    own = images.class_names
    if images.labels is None or own is None:
        return images
    placeholders = model_io.placeholder_class_names(len(class_names or ()))
    named = class_names is not None and list(class_names) != placeholders
    if named:
        index = {str(n): i for i, n in enumerate(class_names)}
        unknown = [n for n in own if str(n) not in index]
        if not unknown:
            mapping = np.array([index[str(n)] for n in own], "int64")
            labels = mapping[np.asarray(images.labels, "int64")]
            return dataclasses.replace(
                images, labels=labels, class_names=list(class_names)
            )
        problem = (
            f"its classes {unknown[:5]}{' ...' if len(unknown) > 5 else ''} "
            f"are not among the model's class names ({list(class_names)[:10]}"
            f"{' ...' if len(class_names) > 10 else ''})"
        )
    elif len(own) == num_classes:
        return images
    else:
        problem = (
            f"it has {len(own)} classes ({own[:10]}), the model "
            f"{num_classes}, and records no class names to match them by"
        )
    if not strict or not images.source.startswith("folder:"):
        return dataclasses.replace(images, labels=None)
    raise ValueError(
        f"The image folder's labels cannot be matched to the model's "
        f"outputs: {problem}. Name the sub-folders as the model's classes "
        "(an export's `labels`), or pass a folder without class "
        f"sub-folders. Received: {name}="
        f"{_describe(images.source if source is None else source)}"
    )
