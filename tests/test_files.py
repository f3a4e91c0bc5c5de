"""`keras_vit.files.check_output_path`: the one rule every export's outputs
follow."""

import os

import pytest

from keras_vit import files
from tests.helpers import unwritable


def test_an_output_is_never_an_input_nor_a_folder_above_one(tmp_path):
    model = tmp_path / "run" / "model.keras"
    model.parent.mkdir()
    model.write_bytes(b"trained")
    link = tmp_path / "link.keras"
    link.symlink_to(model)
    hard = tmp_path / "hard.keras"
    os.link(model, hard)
    for output, kind in [
        (model, "is"),
        (link, "is"),
        (hard, "is"),
        (tmp_path / "run", "holds"),
        (tmp_path, "holds"),
    ]:
        directory = os.path.isdir(output)
        with pytest.raises(ValueError, match=f"`output` {kind} an input"):
            files.check_output_path(
                output,
                directory=directory,
                inputs=[str(model)],
                replaceable=lambda p: True,
                overwrite=True,
            )
    # What exists inside an input folder (an image of a `folder:PATH`
    # source) is read too: --overwrite replaced it with the export's bytes.
    images = tmp_path / "images"
    (images / "cat").mkdir(parents=True)
    (images / "cat" / "1.jpg").write_bytes(b"jpeg")
    for output, directory in [
        (images / "cat" / "1.jpg", False),
        (images / "cat", True),
    ]:
        with pytest.raises(ValueError, match="`output` is inside an input"):
            files.check_output_path(
                output,
                directory=directory,
                inputs=[str(images)],
                replaceable=lambda p: True,
                overwrite=True,
            )
    # A new file there deletes nothing.
    out = images / "vit.tflite"
    assert files.check_output_path(out, inputs=[str(images)]) == str(out)
    # Inputs that are not paths on disk (a dataset name, an array) are skipped.
    out = tmp_path / "new.tflite"
    assert files.check_output_path(
        out, inputs=["digits", None, object()]
    ) == str(out)


def test_only_an_earlier_export_is_replaced_unless_overwrite(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    with pytest.raises(
        ValueError,
        match=r"^`output` names an existing file, and writing "
        r"there would delete it.*overwrite=True.*notes.txt",
    ):
        files.check_output_path(mine)
    # The error says what the writer replaces unasked, in the caller's words
    # (it said "not an export of this kind" to convert and save_npz too).
    with pytest.raises(
        ValueError,
        match=r"existing file that is not a TFLite file \(the "
        r"only kind replaced unasked\)",
    ):
        files.check_output_path(
            mine, replaceable=lambda p: False, replaces="a TFLite file"
        )
    with pytest.raises(ValueError, match="not an earlier output of this kind"):
        files.check_output_path(mine, replaceable=lambda p: False)
    with pytest.raises(ValueError, match="remove it first. Received"):
        files.check_output_path(
            mine, overwrite=None
        )  # no overwrite option offered
    assert files.check_output_path(mine, replaceable=lambda p: True) == str(
        mine
    )
    assert files.check_output_path(mine, overwrite=True) == str(mine)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert files.check_output_path(folder, directory=True) == str(
        folder
    )  # empty
    (folder / "a").write_text("a")
    with pytest.raises(
        ValueError, match="names an existing folder, and writing"
    ):
        files.check_output_path(folder, directory=True)
    assert mine.read_text() == "mine" and os.listdir(folder) == ["a"]


def test_an_unwritable_folder_is_refused(tmp_path, monkeypatch):
    unwritable(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match=f"not writable: {tmp_path}"):
        files.check_output_path(tmp_path / "vit.tflite")


def test_a_companion_file_names_its_output(tmp_path):
    (tmp_path / "vit.bin").write_bytes(b"mine")
    with pytest.raises(
        ValueError,
        match=r"Received: weights=.*vit.bin.*beside output='vit.xml'",
    ):
        files.check_companion_path(tmp_path / "vit.bin", "vit.xml", "weights")


@pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="Linux only"
)
def test_the_umask_is_read_on_linux_without_setting_it(monkeypatch):
    # os.umask(0) and back left other threads a window in which they
    # created world-writable files.
    old = os.umask(0o027)
    try:
        calls = []
        real_umask = os.umask
        monkeypatch.setattr(
            os, "umask", lambda mask: calls.append(mask) or real_umask(mask)
        )
        assert files._umask() == 0o027
        assert calls == []
        monkeypatch.undo()
        os.umask(0o002)
        assert files._umask() == 0o002
    finally:
        os.umask(old)


def test_the_umask_without_proc_is_set_and_restored(monkeypatch):
    import builtins

    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if os.fspath(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    old = os.umask(0o037)
    try:
        assert files._umask() == 0o037
        assert os.umask(0o037) == 0o037  # restored
    finally:
        os.umask(old)


def test_read_npz_reads_safely_and_names_the_file_and_argument(tmp_path):
    import numpy as np

    good = tmp_path / "good.npz"
    np.savez(good, a=np.arange(3), b=np.eye(2))
    arrays = files.read_npz(good)
    assert sorted(arrays) == ["a", "b"]
    np.testing.assert_array_equal(arrays["b"], np.eye(2))
    (tmp_path / "cut.npz").write_bytes(good.read_bytes()[:100])
    np.save(tmp_path / "array.npy", np.zeros(3))
    os.replace(tmp_path / "array.npy", tmp_path / "array.npz")
    np.savez(tmp_path / "pickled.npz", a=np.array([{"x": 1}], dtype=object))
    for name, message in [
        ("missing.npz", "The .npz file does not exist"),
        ("cut.npz", "Cannot read the .npz file"),
        ("array.npz", "holds a single array"),
        ("pickled.npz", "Cannot read the .npz file"),
    ]:
        path = str(tmp_path / name)
        with pytest.raises(ValueError) as info:
            files.read_npz(path, name="data")
        assert message in str(info.value)
        assert str(info.value).endswith(f"Received: data={path!r}"), str(
            info.value
        )


def test_weights_and_images_read_npz_files_one_way(tmp_path, monkeypatch):
    # Written twice before (keras_vit.weights.reader and
    # keras_vit.export.representative), each with its own gaps.
    from keras_vit.export import representative
    from keras_vit.weights import reader

    seen = []

    def read_npz(path, what="the .npz file", name=None):
        seen.append((os.fspath(path), what, name))
        raise ValueError("read by files.read_npz")

    monkeypatch.setattr(files, "read_npz", read_npz)
    path = tmp_path / "x.npz"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="read by files.read_npz"):
        reader.read_checkpoint(path)
    with pytest.raises(ValueError, match="read by files.read_npz"):
        representative.load_images(
            str(path), (8, 8), name="representative_data"
        )
    assert seen == [
        (str(path), "the .npz weights file", "weights"),
        (str(path), "the .npz file", "representative_data"),
    ]


def test_atomic_write_writes_through_a_temporary_file_of_the_same_suffix(
    tmp_path,
):
    # It called `files.atomic_file` inside keras_vit.files itself, where
    # `files` is no name: every checkpoint, plot and page it saved failed.
    seen = []

    def write(temporary):
        seen.append(temporary)
        with open(temporary, "w") as f:
            f.write("new")

    path = tmp_path / "run" / "model.weights.h5"
    files.atomic_write(str(path), write)
    assert path.read_text() == "new"
    assert seen[0] != str(path) and seen[0].endswith(".weights.h5")
    assert os.listdir(path.parent) == ["model.weights.h5"]


@pytest.mark.parametrize("writer", ["atomic_file", "atomic_directory"])
def test_a_requested_stop_stops_an_atomic_write_at_its_commit(tmp_path, writer):
    target = tmp_path / "out"
    target.mkdir() if writer == "atomic_directory" else target.write_text("old")
    try:
        with pytest.raises(SystemExit):
            with getattr(files, writer)(str(target)) as tmp:
                files.request_stop(SystemExit(143))
                if writer == "atomic_file":
                    with open(tmp, "w") as file:
                        file.write("new")
    finally:
        files.clear_stop()
    # The earlier output as it was, and no temporary file beside it.
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    if writer == "atomic_file":
        assert target.read_text() == "old"
    files.raise_if_stopped()  # cleared: nothing raised


#: Names of the longest legal length (NAME_MAX, 255 bytes): ASCII, and
#: mostly 2-byte characters with a long suffix.
LONGEST = ["x" * 248 + ".tflite", "é" * 121 + "xx.weights.h5"]


@pytest.mark.parametrize("name", LONGEST)
@pytest.mark.parametrize(
    "writer", ["atomic_file", "atomic_directory", "temporary_folder"]
)
def test_an_output_of_the_longest_legal_name_is_written(tmp_path, name, writer):
    # The temporary sibling's name added about 35 bytes to the output's: a
    # 236-byte output failed with "OSError: File name too long".
    target = tmp_path / name
    assert len(os.fsencode(name)) == os.pathconf(tmp_path, "PC_NAME_MAX")
    suffix = {"atomic_file": {"suffix": "".join(target.suffixes)}}
    for content in ("old", "new"):  # a folder is replaced the second time
        with getattr(files, writer)(
            str(target), **suffix.get(writer, {})
        ) as tmp:
            assert os.path.dirname(tmp) == str(tmp_path)
            if writer == "atomic_file":
                (tmp_path / tmp).write_text(content)
            else:
                (tmp_path / tmp / "v").write_text(content)
    if writer == "temporary_folder":  # removed afterwards
        assert os.listdir(tmp_path) == []
        return
    assert os.listdir(tmp_path) == [name]
    inside = target if writer == "atomic_file" else target / "v"
    assert inside.read_text() == "new"


def test_a_long_named_folder_killed_between_its_renames_is_completed(
    tmp_path, monkeypatch
):
    # Its temporary names hold a CRC-32, not its name: the next write into
    # the folder finds the target in the folder that holds the old one.
    target = tmp_path / LONGEST[0]
    target.mkdir()
    (target / "v").write_text("old")
    renames = []

    def killed(source, destination):  # at the second rename, no cleanup
        renames.append(destination)
        if len(renames) > 1:
            raise OSError("killed")
        os.rename(source, destination)

    monkeypatch.setattr(files.os, "replace", killed)
    monkeypatch.setattr(files.shutil, "rmtree", lambda *a, **k: None)
    with pytest.raises(OSError, match="killed"):
        with files.atomic_directory(str(target)) as tmp:
            open(os.path.join(tmp, "v"), "w").write("new")
    monkeypatch.undo()
    assert not target.exists() and len(os.listdir(tmp_path)) == 2
    monkeypatch.setattr(files, "_writer_is_gone", lambda host, pid: True)
    files.write_text(str(tmp_path / "other.txt"), "x")
    assert (target / "v").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["other.txt", target.name]
