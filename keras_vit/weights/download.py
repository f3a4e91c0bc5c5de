"""Downloading presets: each released checkpoint once, into the Keras cache.

The presets themselves (what they are, their URLs, their names) are data in
`keras_vit.registry.presets`.
"""

import contextlib
import hashlib
import os
import tempfile
import warnings
import zipfile

from keras_vit import files
from keras_vit.registry import variants as _variants

#: Where downloads are cached when no `cache_dir` is given: `None` means
#: Keras's cache folder (`~/.keras`, or `$KERAS_HOME`), under
#: `models/keras_vit/`.
CACHE_DIR = None


def download(preset, cache_dir=None):
    """Downloads a preset's file once into the Keras cache; returns its path.

    The file is named `<builder>-<short name>` (`ViT_B16-augreg_in21k.npz`),
    under `models/keras_vit/`: the names earlier versions cached under, so
    a file downloaded before is found, not fetched again.

    Uses `keras.utils.get_file` (progress bar) into a temporary file beside
    it, named for this process (`keras_vit.files.atomic_file`), which takes
    the preset's name only once whole (an `.npz` with its zip directory, a
    `.safetensors` whose tensors end where the file does) and matching the
    preset's sha256 where it records one: nothing half-written stays in the
    cache, even from a killed process (the next download into the folder
    removes what it left). A cached file that is not whole (a download an
    earlier version was killed in) or has another sha256 is deleted and
    downloaded again, with a warning.
    """
    import keras

    extension = ".npz" if preset["url"].endswith(".npz") else ".safetensors"
    builder = _variants.BUILDER_OF.get(preset["variant"])
    stem = builder or preset["variant"].replace("/", "")
    folder = _cache_folder(cache_dir)
    path = os.path.join(folder, f"{stem}-{preset['name']}{extension}")
    if os.path.exists(path):
        problem = _problem(path, preset, extension)
        if problem is None:
            return path
        warnings.warn(
            f"The cached download of preset {preset['name']!r}, {path}, "
            f"{problem}: it was deleted and is downloaded again from "
            f"{preset['url']}.",
            stacklevel=2,
        )
        files.remove_file(path)
    with files.atomic_file(path, suffix=extension) as part:
        try:
            keras.utils.get_file(
                fname=os.path.basename(part),
                origin=preset["url"],
                cache_subdir=folder,  # absolute: the folder itself
                force_download=True,  # `part` exists, empty
            )
        except Exception as error:  # urllib's, and Keras's own
            raise ValueError(
                f"Could not download preset {preset['name']!r} for "
                f"{preset['variant']} from {preset['url']}: {error}"
            ) from None
        problem = _problem(part, preset, extension)
        if problem is not None:
            raise ValueError(
                f"The file of preset {preset['name']!r} from {preset['url']} "
                f"{problem}: it was deleted, nothing was cached. Try again; "
                "if it persists, the published file changed."
            )
    return path


def _cache_folder(cache_dir):
    """`models/keras_vit/` under `cache_dir` (else `CACHE_DIR`, else Keras's
    cache, `$KERAS_HOME` or `~/.keras`), created; under `/tmp/.keras` where
    that cannot be written, as `keras.utils.get_file` falls back."""
    base = os.path.expanduser(
        cache_dir or CACHE_DIR or os.environ.get("KERAS_HOME") or "~/.keras"
    )
    with contextlib.suppress(OSError):
        os.makedirs(base, exist_ok=True)
    if not os.access(base, os.W_OK):
        base = os.path.join(tempfile.gettempdir(), ".keras")
    folder = os.path.join(base, "models", "keras_vit")
    os.makedirs(folder, exist_ok=True)
    return folder


def _problem(path, preset, extension):
    """What makes a downloaded file unusable, in words, or `None`: not
    whole (a zip's directory is written last; a `.safetensors` header says
    where its tensors end), or another sha256 than the preset records."""
    try:
        if extension == ".npz":
            zipfile.ZipFile(path).close()
        else:
            import safetensors

            with safetensors.safe_open(path, framework="numpy"):
                pass
    except Exception:  # noqa: BLE001 - BadZipFile, SafetensorError, OSError
        return f"is no whole {extension} file (a download cut short?)"
    if preset["sha256"] is not None:
        digest = _sha256(path)
        if digest != preset["sha256"]:
            return f"has sha256 {digest}, expected {preset['sha256']}"
    return None


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
