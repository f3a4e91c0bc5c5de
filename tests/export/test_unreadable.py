"""Unreadable inputs are `keras-vit: error: ...` naming the file (issue 22,
item 10): a truncated `.tflite`, corrupt calibration data, a cut `.keras`
file, labels or metadata that are not text."""

import os

import numpy as np
import pytest

from keras_vit import cli
from keras_vit import export
from keras_vit.export import tflite as tflite_lib


def _cli(*args):
    return cli.main(["export", *map(str, args)])


def test_a_truncated_tflite_file_is_an_error_naming_it(
    random_tflite_path, random_model_path, tmp_path, capsys
):
    data = random_tflite_path.read_bytes()
    for size in (len(data) - 1, len(data) // 2, 30):
        cut = tmp_path / "cut.tflite"
        cut.write_bytes(data[:size])
        code = cli.main(
            [
                "verify",
                str(cut),
                "--reference",
                random_model_path,
                "--num-images",
                "2",
            ]
        )
        assert code == 2
        err = capsys.readouterr().err
        assert (
            "keras-vit: error: The TFLite file is truncated or corrupt" in err
        ), err
        assert str(cut) in err


def test_corrupt_calibration_files_are_errors_naming_them(
    random_model_path, tmp_path, capsys, monkeypatch
):
    from tests.export.helpers import digits_npz

    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    good = digits_npz(tmp_path / "good.npz")
    data = open(good, "rb").read()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    np.save(tmp_path / "array.npy", np.zeros((2, 32, 32, 3)))
    os.replace(tmp_path / "array.npy", tmp_path / "array.npz")
    np.savez(tmp_path / "text.npz", images=np.full((2, 32, 32, 3), "x"))
    np.savez(
        tmp_path / "onehot.npz",
        images=np.zeros((2, 32, 32, 3)),
        labels=np.eye(2),
    )
    for name, message in [
        ("cut.npz", "Cannot read the .npz file"),
        ("array.npz", "holds a single array"),
        ("text.npz", "must hold pixel values"),
        ("onehot.npz", "one integer class index per image"),
    ]:
        path = str(tmp_path / name)
        code = _cli(
            random_model_path,
            "--format",
            "tflite",
            "--output",
            tmp_path / "m.tflite",
            "--quantize",
            "int8",
            "--representative-data",
            path,
        )
        assert code == 2, name
        err = capsys.readouterr().err
        assert message in err, err
        assert f"representative_data={path!r}" in err, err
    assert not (tmp_path / "m.tflite").exists()


def test_an_image_folder_with_a_bad_file_is_an_error_naming_it(
    random_model_path, tmp_path, capsys
):
    # Folders are read by keras_vit.data's read_image, which names the file.
    from PIL import Image

    for name in ("a", "b"):
        (tmp_path / "photos" / name).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(tmp_path / "photos" / name / "ok.png")
    bad = tmp_path / "photos" / "b" / "page.jpg"
    bad.write_text("<html>")
    code = _cli(
        random_model_path,
        "--format",
        "tflite",
        "--output",
        tmp_path / "m.tflite",
        "--representative-data",
        f"folder:{tmp_path / 'photos'}",
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "keras-vit: error:" in err and str(bad) in err
    assert not (tmp_path / "m.tflite").exists()


def test_a_corrupt_model_labels_or_metadata_file_is_an_error_naming_it(
    random_model_path, tmp_path, capsys
):
    data = open(random_model_path, "rb").read()
    cut = tmp_path / "cut.keras"
    cut.write_bytes(data[: len(data) // 2])
    assert (
        _cli(cut, "--format", "tflite", "--output", tmp_path / "m.tflite") == 2
    )
    err = capsys.readouterr().err
    assert (
        "keras-vit: error: Cannot load the .keras file" in err
        and str(cut) in err
    )
    labels = tmp_path / "labels.txt"
    labels.write_bytes(b"\xff\xfe\x00cat")
    with pytest.raises(ValueError, match=f"UTF-8.*labels={str(labels)!r}"):
        export.export_tflite(
            random_model_path, tmp_path / "m.tflite", labels=str(labels)
        )
    (tmp_path / "x.tflite").write_bytes(b"")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="x.json"):
        export.read_metadata(tmp_path / "x.tflite")
