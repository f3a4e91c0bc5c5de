"""Output paths checked up front and written atomically (exports, training
runs, checkpoints).

An export either leaves a complete, verified file (or SavedModel folder) at
the target path or nothing at all: everything is written to a temporary
sibling first and moved into place with `os.replace`, which is atomic on one
file system. Before any of that, `check_output_path` applies one rule to
every output: never an input, never over something the writer did not
write (unless asked), and only into a folder that can be written.

`read_npz` is the one way keras_vit reads an `.npz` a user gives it
(weights, calibration and verification images): no pickle is loaded, and
any failure names the file.
"""

import contextlib
import os
import re
import shutil
import socket
import tempfile
import zlib


def check_output_path(
    path,
    name="output",
    directory=False,
    inputs=(),
    replaceable=None,
    overwrite=False,
    replaces=None,
):
    """Returns `path` as a string after checking that it can be written safely.

    The rule every writer of exports follows, checked before any work is
    done (so that a bad `output` fails before a conversion, not after):

    - the folder to write into exists and is writable;
    - the output is not one of `inputs` (what the command reads: the model
      file, labels, calibration data), a folder output holds none of them,
      and an existing output is not inside an input folder (an image of a
      `folder:PATH` source), even with `overwrite`;
    - an existing file, or a folder that is not empty, at `path` is replaced
      only if `replaceable(path)` says it is an earlier output of the same
      kind (a SavedModel with keras_vit's metadata, a TFLite flatbuffer,
      ...), or if `overwrite` is true. A writer never deletes what it did
      not write unless asked to; one whose output cannot be told from
      another's (a converted `.keras` from a trained one) has no
      `replaceable` and replaces nothing unasked.

    Args:
        path: str or path-like, the file (or folder) to write.
        name: str, the argument's name for error messages. Defaults to
            `"output"`.
        directory: bool, whether the output is a folder (a SavedModel).
            Defaults to `False`.
        inputs: paths the writer reads (entries that are not paths, or do
            not exist, are skipped). Defaults to `()`.
        replaceable: a function of the path that says whether what exists
            there may be replaced. Defaults to `None`: nothing may.
        replaces: str, what `replaceable` accepts, for the error (`"a
            TFLite file"`). Defaults to `None`: "an earlier output of this
            kind".
        overwrite: bool, whether to replace whatever exists at `path`
            (files and folders not written by keras_vit included); `None`
            when the caller offers no such option (the error then does not
            suggest it). Defaults to `False`.

    Returns:
        The path as a `str`.

    Raises:
        ValueError: if the path is empty, its folder does not exist or is
            not writable, it names an existing folder where a file is
            expected (or the reverse), it is (or holds, or exists inside)
            one of `inputs`, or it names something that may not be
            replaced.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"`{name}` must be a path. Received: {name}={path!r}")
    if overwrite is not None and not isinstance(overwrite, bool):
        raise ValueError(
            "`overwrite` must be True or False. Received: "
            f"overwrite={overwrite!r}"
        )
    path = os.fspath(path)
    _check_writable_place(path, name, directory)
    _check_not_an_input(path, name, inputs)
    _check_replaceable(path, name, overwrite, replaceable, replaces)
    return path


def _check_writable_place(path, name, directory):
    """Raises unless `path`'s folder exists and is writable and `path` is
    not a file where a folder is wanted (or the reverse)."""
    _check_folder(path, name)
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


def _check_folder(path, name):
    """Raises unless the folder that `path` is written into exists and is
    writable."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(
            f"The folder to write `{name}` into does not exist: {parent}. "
            f"Create it first. Received: {name}={path!r}"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(
            f"The folder to write `{name}` into is not writable: {parent}. "
            f"Received: {name}={path!r}"
        )


def _check_not_an_input(path, name, inputs):
    """Raises if `path` is, holds, or (existing) is inside one of
    `inputs`."""
    for source in inputs:
        if _holds(path, source):
            what = "is" if _same(path, source) else "holds"
        elif os.path.lexists(path) and _holds(source, path):
            # An image of a `folder:PATH` source, say: what is there is read.
            what = "is inside"
        else:
            continue
        raise ValueError(
            f"`{name}` {what} an input of this command "
            f"({os.fspath(source)!r}); "
            "writing it would destroy what is being read. Choose another "
            f"path. Received: {name}={path!r}"
        )


def _check_replaceable(path, name, overwrite, replaceable, replaces):
    """Raises if something exists at `path` that neither `overwrite` nor
    `replaceable` lets the writer replace."""
    exists = os.path.isfile(path) or (os.path.isdir(path) and os.listdir(path))
    if (
        not exists
        or overwrite
        or (replaceable is not None and replaceable(path))
    ):
        return
    kind = "folder" if os.path.isdir(path) else "file"
    hint = (
        ""
        if overwrite is None
        else ", or pass overwrite=True (--overwrite) to replace it anyway"
    )
    if replaceable is None:
        what = f"`{name}` names an existing {kind}"
    else:
        what = (
            f"`{name}` names an existing {kind} that is not "
            f"{replaces or 'an earlier output of this kind'} (the only "
            "kind replaced unasked)"
        )
    raise ValueError(
        f"{what}, and writing there would delete it. Choose another "
        f"path, or remove it first{hint}. Received: {name}={path!r}"
    )


def check_companion_path(path, output, name, **kwargs):
    """`check_output_path` for a file an export writes beside `output` (its
    metadata, its weights); the error says which output it belongs to.
    The output's own folder is checked first, and named as `output`'s: a
    missing one is the output's fault, not its companion's.

    Args:
        path: the companion file.
        output: the export's main output.
        name: str, what the file is, for error messages (`"metadata"`).
        **kwargs: passed to `check_output_path`.
    """
    if isinstance(output, (str, os.PathLike)) and os.fspath(output):
        _check_folder(os.fspath(output), "output")
    try:
        return check_output_path(path, name=name, **kwargs)
    except ValueError as error:
        raise ValueError(
            f"{error} (the {name} file written beside "
            f"output={os.fspath(output)!r})"
        ) from None


def _same(path, other):
    """Whether two paths name the same file or folder (links resolved)."""
    real, other_real = os.path.realpath(path), os.path.realpath(other)
    if real == other_real:
        return True
    try:
        return os.path.samefile(path, other)  # a hard link
    except OSError:
        return False


def _holds(path, source):
    """Whether `path` is `source`, or a folder above it."""
    if not isinstance(source, (str, os.PathLike)) or not os.fspath(source):
        return False
    source = os.fspath(source)
    if not os.path.exists(source):
        return False
    if _same(path, source):
        return True
    folder, below = os.path.realpath(path), os.path.realpath(source)
    return (
        os.path.isdir(folder) and os.path.commonpath([folder, below]) == folder
    )


def _umask():
    """The process's umask, without changing it where the system says it.

    Reading it the portable way sets it (`os.umask(0)`, then back): a file
    another thread creates meanwhile gets mode 0666 / 0777. Linux (4.7 and
    later) shows it in `/proc/self/status`; elsewhere it is read that way.
    """
    try:
        with open(
            "/proc/self/status", encoding="ascii", errors="replace"
        ) as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: This machine, in the names of temporary files (a hash: any host name
#: fits in a file name).
_HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"
#: The name of a temporary file or folder of `atomic_file` /
#: `atomic_directory`: `.TARGET.tmp-HOST-PID-RANDOM{suffix}`, the writer's
#: machine and process in it, so that what a killed writer left is known.
#: A target whose name would not fit (`_temporary_name`) is its CRC-32.
_TEMPORARY = re.compile(
    r"^\.(?P<target>.+)\.tmp-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-"
    r"(?P<random>[a-z0-9_]{8})(?P<suffix>.*)$"
)
#: The file in `atomic_directory`'s `.old` folder that names its target
#: (whose name in the folder's own may be a CRC-32).
_TARGET_FILE = "target"


def _name_max(folder):
    """The longest file name, in bytes, that `folder` takes (NAME_MAX)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows)
        return 255


def _temporary_name(path, suffix):
    """`(folder, prefix)` of a temporary sibling of `path` that ends in
    `suffix`, `mkstemp`'s 8 random characters between them. The prefix
    names the target where the whole name fits the folder's NAME_MAX, the
    target's CRC-32 otherwise: a 236-byte output failed with "File name
    too long", ~35 bytes longer."""
    parent, base = os.path.split(os.path.abspath(path))
    tail = f".tmp-{_HOST}-{os.getpid()}-"
    room = _name_max(parent) - len(os.fsencode(f".{tail}{suffix}")) - 8
    if len(os.fsencode(base)) > room:
        base = f"{zlib.crc32(os.fsencode(base)):08x}"
    return parent, f".{base}{tail}"


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


def remove_file(path):
    """Removes the file at `path` if there is one."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


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
        suffixes = {
            suffix: os.path.join(folder, name) for suffix, name in entries
        }
        old, new = suffixes.get(".old"), suffixes.get(".tmp")
        if old:
            target = _named_target(old, target)
        if (
            old
            and os.path.isdir(os.path.join(old, "previous"))
            and not os.path.exists(target)
        ):
            # Killed between its two renames: the new folder was complete
            # (the old one is moved aside only then); else keep the old.
            keep = (
                new
                if new and os.path.isdir(new)
                else os.path.join(old, "previous")
            )
            with contextlib.suppress(OSError):
                os.replace(keep, target)
        for _, name in entries:
            if os.path.lexists(os.path.join(folder, name)):
                _remove(os.path.join(folder, name))
                removed.append(name)
    return removed


def _named_target(old, target):
    """The target of `atomic_directory`'s `.old` folder `old`: the one its
    `_TARGET_FILE` names (beside `old`), else `target`, its name's."""
    try:
        with open(
            os.path.join(old, _TARGET_FILE),
            encoding="utf-8",
            errors="surrogateescape",
        ) as file:
            name = file.read()
    except (OSError, ValueError):
        return target
    return os.path.join(os.path.dirname(old), os.path.basename(name))


#: The exception every atomic write raises at its commit instead of moving
#: its output into place, once the process has been asked to stop
#: (`request_stop`); `None` while it has not.
_stop = None


def request_stop(error):
    """Makes every atomic write that reaches its commit from now on raise
    `error` there, its temporary output removed, until `clear_stop()`.

    For a signal handler that raises `error` to stop the process: Python
    ignores (prints and drops) an exception raised while a garbage
    collector callback or a finalizer runs, so the raise alone can be lost
    and an export go on to write its output.
    """
    global _stop
    _stop = error


def clear_stop():
    """Undoes `request_stop`."""
    global _stop
    _stop = None


def raise_if_stopped():
    """Raises the requested stop's exception (`request_stop`), if any: every
    atomic write calls it before its commit."""
    if _stop is not None:
        raise _stop


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
    parent, prefix = _temporary_name(path, suffix)
    remove_leftovers(parent)
    handle, tmp = tempfile.mkstemp(dir=parent, prefix=prefix, suffix=suffix)
    os.close(handle)
    try:
        yield tmp
        raise_if_stopped()
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
    parent, prefix = _temporary_name(path, ".tmp")  # and ".old"
    remove_leftovers(parent)
    tmp = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp")
    old = None
    try:
        yield tmp
        raise_if_stopped()
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
        if os.path.isdir(path):
            old = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".old")
            # Named for `remove_leftovers`, which completes this write if
            # it is killed between the renames.
            with open(
                os.path.join(old, _TARGET_FILE),
                "w",
                encoding="utf-8",
                errors="surrogateescape",
            ) as file:
                file.write(os.path.basename(os.path.abspath(path)))
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


@contextlib.contextmanager
def temporary_folder(path):
    """Yields a private temporary folder next to `path`, removed afterwards.

    For an export of several files (an ONNX model and its `.data`, an
    OpenVINO `.xml` and its `.bin`): they are written and checked in it,
    then moved into place one by one with `os.replace`, which is atomic on
    the one file system they share. Named as `atomic_file`'s temporary
    files, so one that a killed writer left is removed by the next atomic
    write into the folder (`remove_leftovers`).
    """
    parent, prefix = _temporary_name(path, ".tmp")
    remove_leftovers(parent)
    folder = tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def atomic_write(path, write):
    """Calls `write(temporary_path)`, then renames it to `path`.

    The temporary file sits next to `path` (same file system, same suffix
    for Keras's extension checks), so the rename is atomic: a process killed
    at any moment leaves either the old file or the new one, never half of
    one (`keras_vit.files.atomic_file`).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    suffix = (
        ".weights.h5"
        if path.endswith(".weights.h5")
        else os.path.splitext(path)[1]
    )
    with atomic_file(path, suffix=suffix) as temporary:
        write(temporary)


def read_npz(path, what="the .npz file", name=None):
    """The arrays of an `.npz` archive by name, read into memory without
    unpickling anything (`allow_pickle=False`).

    Args:
        path: str or path-like, the file.
        what: str, what the file is, for error messages (`"the .npz
            weights file"`). Defaults to `"the .npz file"`.
        name: str or `None`, the argument that gave the file; errors end in
            `Received: name=path` when given. Defaults to `None`.

    Returns:
        A dict from array name to NumPy array.

    Raises:
        ValueError: naming the file, if it does not exist, cannot be read
            (truncated, corrupt, a pickled member), or is a single array
            (an `.npy` file renamed) rather than an archive of named arrays.
    """
    import numpy as np

    path = os.fspath(path)
    received = "" if name is None else f" Received: {name}={path!r}"
    if not os.path.isfile(path):
        raise ValueError(
            f"{what[:1].upper()}{what[1:]} does not exist: {path!r}.{received}"
        )
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded as archive:
                return {key: archive[key] for key in archive.files}
    # zipfile, zlib and NumPy each raise their own errors.
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            f"Cannot read {what} {path!r}: it may be truncated or corrupt "
            f"({type(error).__name__}: {error}).{received}"
        ) from None
    raise ValueError(
        f"{what[:1].upper()}{what[1:]} {path!r} holds a single array, as an "
        ".npy file does, not a .npz archive of named arrays (np.savez)."
        f"{received}"
    )


def write_text(path, text):
    """Writes `text` to `path` atomically (UTF-8)."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(text)
