"""ImageNet-1k's class names, shipped with the package (no download)."""

import functools
import importlib.resources

#: The data file: a WordNet id and a name per line, in ILSVRC-2012 order
#: (made by tests/golden/make_imagenet_class_names.py).
CLASS_NAMES_FILE = "imagenet_class_names.txt"


@functools.cache
def _classes():
    text = (
        importlib.resources.files("keras_vit.data")
        .joinpath(CLASS_NAMES_FILE)
        .read_text(encoding="utf-8")
    )
    return tuple(tuple(line.split(" ", 1)) for line in text.splitlines())


def imagenet_class_names():
    """The names of ImageNet-1k's 1000 classes, in the order of the outputs
    of the ImageNet-1k presets (and of Keras's `decode_predictions`).

    ILSVRC-2012's order (the sorted WordNet ids); each name is its synset's
    first WordNet 3.0 lemma (`"tench"`, `"goldfish"`,
    `"great_white_shark"`). Two pairs of classes share a name (`"crane"`,
    `"maillot"`), as in Keras's class index.

    Returns:
        A list of 1000 strings.

    Example:

    >>> names = keras_vit.imagenet_class_names()
    >>> names[int(np.argmax(model.predict(images)[0]))]
    'tench'
    """
    return [name for _, name in _classes()]


def imagenet_wordnet_ids():
    """The WordNet ids of ImageNet-1k's classes (`"n01440764"`, ...), in the
    order of `imagenet_class_names`."""
    return [wnid for wnid, _ in _classes()]
