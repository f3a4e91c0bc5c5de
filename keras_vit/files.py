"""Output paths checked up front and written atomically (exports, training runs, checkpoints).

An export either leaves a complete, verified file (or SavedModel folder) at
the target path or nothing at all: everything is written to a temporary
sibling first and moved into place with `os.replace`, which is atomic on one
file system.
"""

import contextlib
import os
import shutil
import tempfile


def check_output_path(path, name="output", directory=False):
    """Returns `path` as a string after checking that it can be written.

    Args:
        path: str or path-like, the file (or folder) to write.
        name: str, the argument's name for error messages. Defaults to
            `"output"`.
        directory: bool, whether the output is a folder (a SavedModel).
            Defaults to `False`.

    Returns:
        The path as a `str`.

    Raises:
        ValueError: if the path is empty, its folder does not exist, or it
            names an existing folder where a file is expected (or the
            reverse).
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"`{name}` must be a path. Received: {name}={path!r}")
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(
            f"The folder to write `{name}` into does not exist: {parent}. "
            f"Create it first. Received: {name}={path!r}"
        )
    if directory and os.path.isfile(path):
        raise ValueError(
            f"`{name}` names an existing file, but a SavedModel is a folder. "
            f"Received: {name}={path!r}"
        )
    if not directory and os.path.isdir(path):
        raise ValueError(
            f"`{name}` names an existing folder, but the output is a file. "
            f"Received: {name}={path!r}"
        )
    return path


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary_name(path):
    parent, base = os.path.split(os.path.abspath(path))
    return parent, f".{base}."


@contextlib.contextmanager
def atomic_file(path, suffix=".tmp"):
    """Yields a temporary path next to `path`; moves it there on success.

    If the body raises, the temporary file is removed and `path` is left as
    it was.

    Args:
        path: the file to write.
        suffix: str, the end of the temporary file's name (some writers
            insist on an extension). Defaults to `".tmp"`.

    Example:

    >>> with atomic_file("model.tflite") as tmp:
    ...     open(tmp, "wb").write(data)
    """
    parent, prefix = _temporary_name(path)
    handle, tmp = tempfile.mkstemp(dir=parent, prefix=prefix, suffix=suffix)
    os.close(handle)
    try:
        yield tmp
        # mkstemp makes the file private (0600); give it the usual mode.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temporary folder next to `path`; moves it there on success.

    An existing folder at `path` is replaced only once the new one is
    complete. If the body raises, the temporary folder is removed and `path`
    is left as it was.
    """
    parent, prefix = _temporary_name(path)
    tmp = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp")
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
        if os.path.isdir(path):
            old = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".old")
            os.replace(path, os.path.join(old, "previous"))
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path, text):
    """Writes `text` to `path` atomically (UTF-8)."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(text)
