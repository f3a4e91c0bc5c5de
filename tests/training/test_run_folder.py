"""What a writer killed mid-write left is cleaned up."""

import os
import signal
import subprocess
import sys

import pytest

from keras_vit import files
from tests.training.test_train import _run


def _dead_pid():
    """The id of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _leftover(folder, target, pid, suffix=".tmp", host=None):
    """The name `atomic_file` gives a temporary file of `pid`'s."""
    return f".{target}.tmp-{host or files._HOST}-{pid}-abcd_123{suffix}"


def test_what_a_writer_killed_mid_write_left_goes_with_the_next_write(tmp_path):
    # A SIGKILL during an atomic write left a hidden, full-size temporary
    # file next to the target, forever.
    killed = _run(f"""
        import os, signal
        from keras_vit import files
        with files.atomic_file({str(tmp_path / "model.weights.h5")!r},
                               suffix=".weights.h5") as tmp:
            open(tmp, "wb").write(b"x" * 1_000_000)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    left = os.listdir(tmp_path)
    assert len(left) == 1 and left[0].startswith(".model.weights.h5.tmp-")
    # Leftovers of live processes (this one's parent, init) and of other
    # machines (which cannot be asked) stay.
    kept = [_leftover(tmp_path, "a", os.getppid()), _leftover(tmp_path, "b", 1),
            _leftover(tmp_path, "c", _dead_pid(), host="0123abcd")]
    for name in kept:
        (tmp_path / name).write_bytes(b"partial")
    files.write_text(str(tmp_path / "other.txt"), "hello")
    assert sorted(os.listdir(tmp_path)) == sorted(["other.txt", *kept])


def test_a_folder_writer_killed_between_its_renames_is_completed(tmp_path, monkeypatch):
    target = tmp_path / "saved_model"
    target.mkdir()
    (target / "v").write_text("old")
    # Stopped (Ctrl-C) between moving the old folder aside and the new one
    # in: the target was gone.
    renames = []
    real_replace = os.replace

    def replace(source, destination):
        renames.append(destination)
        if len(renames) == 2:
            raise KeyboardInterrupt
        real_replace(source, destination)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        with files.atomic_directory(str(target)) as tmp:
            open(os.path.join(tmp, "v"), "w").write("new")
    monkeypatch.undo()
    assert (target / "v").read_text() == "old"
    assert os.listdir(tmp_path) == ["saved_model"]
    # Killed there (no cleanup ran): the next write into the folder moves
    # the complete new folder into place and removes the rest.
    pid = _dead_pid()
    new = tmp_path / _leftover(tmp_path, "saved_model", pid)
    old = tmp_path / _leftover(tmp_path, "saved_model", pid, suffix=".old").replace(
        "abcd_123", "efgh_456")
    new.mkdir()
    (new / "v").write_text("new")
    (old / "previous").mkdir(parents=True)
    os.replace(target, old / "previous")
    files.write_text(str(tmp_path / "other.txt"), "x")
    assert (target / "v").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["other.txt", "saved_model"]
