"""Output paths checked up front and written atomically (exports, training runs, checkpoints).

An export either leaves a complete, verified file (or SavedModel folder) at
the target path or nothing at all: everything is written to a temporary
sibling first and moved into place with `os.replace`, which is atomic on one
file system.
"""

import contextlib
import os
import re
import shutil
import socket
import tempfile
import zlib


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


#: This machine, in the names of temporary files (a hash: any host name
#: fits in a file name).
_HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"
#: The name of a temporary file or folder of `atomic_file` /
#: `atomic_directory`: `.TARGET.tmp-HOST-PID-RANDOM{suffix}`, the writer's
#: machine and process in it, so that what a killed writer left is known.
_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.tmp-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-"
    r"(?P<random>[a-z0-9_]{8})(?P<suffix>.*)$"
)


def _temporary_name(path):
    parent, base = os.path.split(os.path.abspath(path))
    return parent, f".{base}.tmp-{_HOST}-{os.getpid()}-"


def _writer_is_gone(host, pid):
    """Whether the process that made a temporary file no longer runs: only
    for this machine's processes, and never for a live or unknown one."""
    if host != _HOST or pid == os.getpid() or os.name == "nt":
        # (On Windows, os.kill would end the process, not test it.)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def remove_leftovers(folder):
    """Removes from `folder` the temporary files and folders of
    `atomic_file` / `atomic_directory` whose writer was killed (SIGKILL, a
    power cut: no cleanup ran), where that writer ran on this machine.

    A writer of `atomic_directory` killed between moving the old folder
    aside and the new one into place left the target missing and the new
    folder complete: it is moved into place. Every atomic write calls this
    for its folder first; returns the names removed.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    gone = {}
    for name in names:
        found = _TEMPORARY.match(name)
        if found and _writer_is_gone(found["host"], int(found["pid"])):
            gone.setdefault((found["target"], found["pid"]), []).append(
                (found["suffix"], name)
            )
    removed = []
    for (target, _), entries in gone.items():
        target = os.path.join(folder, target)
        suffixes = {suffix: os.path.join(folder, name) for suffix, name in entries}
        old, new = suffixes.get(".old"), suffixes.get(".tmp")
        if old and os.path.isdir(os.path.join(old, "previous")) and not os.path.exists(target):
            # Killed between its two renames: the new folder was complete
            # (the old one is moved aside only then); else keep the old.
            keep = new if new and os.path.isdir(new) else os.path.join(old, "previous")
            with contextlib.suppress(OSError):
                os.replace(keep, target)
        for _, name in entries:
            if os.path.lexists(os.path.join(folder, name)):
                _remove(os.path.join(folder, name))
                removed.append(name)
    return removed


@contextlib.contextmanager
def atomic_file(path, suffix=".tmp"):
    """Yields a temporary path next to `path`; moves it there on success.

    If the body raises, the temporary file is removed and `path` is left as
    it was. The temporary file's name says which process writes it
    (`.NAME.tmp-HOST-PID-RANDOM{suffix}`): one left by a killed writer is
    removed by the next atomic write into the folder (`remove_leftovers`).

    Args:
        path: the file to write.
        suffix: str, the end of the temporary file's name (some writers
            insist on an extension). Defaults to `".tmp"`.

    Example:

    >>> with atomic_file("model.tflite") as tmp:
    ...     open(tmp, "wb").write(data)
    """
    parent, prefix = _temporary_name(path)
    remove_leftovers(parent)
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
    is left as it was; what a killed writer left is cleaned up (or, if it
    was killed between its two renames, completed) by the next atomic write
    into the folder (`remove_leftovers`).
    """
    parent, prefix = _temporary_name(path)
    remove_leftovers(parent)
    tmp = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp")
    old = None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
        if os.path.isdir(path):
            old = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".old")
            os.replace(path, os.path.join(old, "previous"))
            os.replace(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        if old is not None and not os.path.exists(path):
            # Stopped between the two renames: put the old folder back.
            with contextlib.suppress(OSError):
                os.replace(os.path.join(old, "previous"), path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def write_text(path, text):
    """Writes `text` to `path` atomically (UTF-8)."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(text)
