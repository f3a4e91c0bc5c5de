"""Downloading presets: each released checkpoint once, into the Keras cache.

The presets themselves (what they are, their URLs, their names) are data in
`keras_vit.registry.presets`; `PRESETS`, `list_presets`, `find_preset` and
`preset_names` here are deprecated aliases of the registry's, for one
release.
"""

import hashlib
import os
import warnings

from keras_vit.registry import presets as _registry
from keras_vit.registry import variants as _variants

#: Where downloads are cached when no `cache_dir` is given: `None` means
#: Keras's cache folder (`~/.keras`, or `$KERAS_HOME`), under
#: `models/keras_vit/`.
CACHE_DIR = None


#: The names that moved to `keras_vit.registry` (deprecated here).
_MOVED = ("PRESETS", "list_presets", "find_preset", "preset_names")


def __getattr__(name):
    if name not in _MOVED:
        raise AttributeError(
            f"module 'keras_vit.weights.presets' has no attribute {name!r}"
        )
    warnings.warn(
        f"keras_vit.weights.presets.{name} moved to keras_vit.registry.{name}; "
        "the old path will be removed in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_registry, name)


def download(preset, cache_dir=None):
    """Downloads a preset's file once into the Keras cache; returns its path.

    The file is named `<builder>-<short name>` (`ViT_B16-augreg_in21k.npz`),
    under `models/keras_vit/`: the names earlier versions cached under, so
    a file downloaded before is found, not fetched again.

    Uses `keras.utils.get_file` (progress bar, cache). A download that
    fails, or whose sha256 differs from the preset's, is removed: nothing
    half-written stays in the cache.
    """
    import keras

    extension = ".npz" if preset["url"].endswith(".npz") else ".safetensors"
    builder = _variants.BUILDER_OF.get(preset["variant"])
    stem = builder or preset["variant"].replace("/", "")
    fname = f"{stem}-{preset['name']}{extension}"
    cache_dir = cache_dir or CACHE_DIR
    if cache_dir is not None:
        # keras.utils.get_file falls back to /tmp for a folder that does not
        # exist yet; create it so the file lands where it was asked to.
        os.makedirs(cache_dir, exist_ok=True)
    try:
        path = keras.utils.get_file(
            fname=fname,
            origin=preset["url"],
            cache_subdir=os.path.join("models", "keras_vit"),
            cache_dir=cache_dir,
        )
    except Exception as error:  # get_file removes a partial download
        raise ValueError(
            f"Could not download preset {preset['name']!r} for "
            f"{preset['variant']} from {preset['url']}: {error}"
        ) from None
    if preset["sha256"] is not None:
        digest = _sha256(path)
        if digest != preset["sha256"]:
            os.remove(path)
            raise ValueError(
                f"The file of preset {preset['name']!r} from {preset['url']} "
                f"has sha256 {digest}, expected {preset['sha256']}: it was "
                "deleted from the cache. Try again; if it persists, the "
                "published file changed."
            )
    return path


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
