"""Exports never write over what they did not write (issue 22, items 1-3).

Most refusals here happen before any conversion, so these tests are fast;
each checks that the files on disk are byte for byte what they were.
"""

import os
import shutil

import pytest

from keras_vit import cli
from keras_vit import export
from keras_vit import files
from keras_vit.export import onnx as onnx_lib
from keras_vit.export import openvino as openvino_lib
from keras_vit.export import saved_model as saved_model_lib
from keras_vit.export import tflite as tflite_lib
from tests.export.helpers import tf_latency_stand_in
from tests.helpers import unwritable


def snapshot(folder):
    """Every file and folder under `folder`, files with their bytes."""
    result = {}
    for root, dirs, names in os.walk(folder):
        for d in dirs:
            result[os.path.relpath(os.path.join(root, d), folder) + "/"] = None
        for f in names:
            path = os.path.join(root, f)
            with open(path, "rb") as file:
                result[os.path.relpath(path, folder)] = file.read()
    return result


@pytest.fixture
def run(random_model_path, tmp_path):
    """A `keras-vit train` run folder: model.keras, best.keras, backup/,
    logs/."""
    folder = tmp_path / "runs" / "digits"
    (folder / "backup").mkdir(parents=True)
    (folder / "logs").mkdir()
    shutil.copy(random_model_path, folder / "model.keras")
    shutil.copy(random_model_path, folder / "best.keras")
    (folder / "backup" / "training_metadata.json").write_text('{"epoch": 3}')
    (folder / "logs" / "events.out").write_bytes(b"\x00tensorboard")
    (folder / "config.json").write_text('{"dataset": "digits"}')
    return folder


def _cli(*args):
    return cli.main(["export", *map(str, args)])


# Item 1: a SavedModel over the run folder.


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_saved_model_over_the_run_folder_is_refused(
    run, tmp_path, capsys, overwrite
):
    before = snapshot(tmp_path)
    code = _cli(
        run / "model.keras",
        "--format",
        "saved_model",
        "--output",
        run,
        *overwrite,
    )
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "keras-vit: error: `output` holds an input" in err
        and "model.keras" in err
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("overwrite", [False, True])
def test_saved_model_over_the_run_folder_is_refused_in_python(
    run, tmp_path, overwrite
):
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="`output` holds an input"):
        export.export_saved_model(
            str(run / "model.keras"), run, overwrite=overwrite
        )
    assert snapshot(tmp_path) == before


def test_saved_model_over_a_folder_that_is_not_an_export_is_refused(
    run, tmp_path, capsys
):
    # The model is loaded from elsewhere: the run folder is not an input,
    # but it is not a SavedModel either.
    model = tmp_path / "model.keras"
    shutil.copy(run / "model.keras", model)
    before = snapshot(tmp_path)
    code = _cli(model, "--format", "saved_model", "--output", run)
    assert code == 2
    assert "not a SavedModel exported by keras_vit" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"Received: output=.*digits"):
        export.export_saved_model(str(model), run)
    assert snapshot(tmp_path) == before


def test_saved_model_refuses_a_folder_holding_a_data_source_even_with_overwrite(
    random_model_path, tmp_path
):
    data = tmp_path / "out" / "photos"
    data.mkdir(parents=True)
    (data / "a.npz").write_bytes(b"not really")
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="holds an input.*a.npz"):
        export.export_saved_model(
            random_model_path,
            tmp_path / "out",
            verify_data=str(data / "a.npz"),
            overwrite=True,
        )
    with pytest.raises(ValueError, match="holds an input.*photos"):
        export.export_saved_model(
            random_model_path,
            tmp_path / "out",
            verify_data=f"folder:{data}",
            overwrite=True,
        )
    assert snapshot(tmp_path) == before


def test_an_earlier_saved_model_export_with_files_added_is_not_replaced(
    tmp_path,
):
    folder = tmp_path / "sm"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"pb")
    (folder / "keras_vit.json").write_text(
        '{"format": "saved_model", "keras_vit_version": "0"}'
    )
    assert saved_model_lib.is_saved_model_export(folder)
    # TF Serving's warm-up requests, added by hand after the export.
    (folder / "assets.extra").mkdir()
    assert not saved_model_lib.is_saved_model_export(folder)
    # A SavedModel that keras_vit did not write (no keras_vit.json).
    other = tmp_path / "other"
    other.mkdir()
    (other / "saved_model.pb").write_bytes(b"pb")
    assert not saved_model_lib.is_saved_model_export(other)
    with pytest.raises(
        ValueError, match="not a SavedModel exported by keras_vit"
    ):
        saved_model_lib.check_output(other)


# Item 2: the sidecar over the .tflite file, or over a user's file.


def test_tflite_output_ending_in_json_is_refused(
    random_model_path, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code = _cli(
        random_model_path,
        "--format",
        "tflite",
        "--output",
        "vit.json",
        "--no-verify",
    )
    assert code == 2
    assert "its own metadata" in capsys.readouterr().err
    with pytest.raises(ValueError, match="output='vit.json'"):
        export.export_tflite(random_model_path, "vit.json", verify=False)
    assert os.listdir(tmp_path) == []


def test_the_sidecar_never_replaces_a_users_json_or_an_input(
    random_model_path, tmp_path, capsys
):
    mine = tmp_path / "vit.json"
    mine.write_text('{"my": "settings"}')
    labels = tmp_path / "names.json"
    labels.write_text("".join(f"c{i}\n" for i in range(10)))
    before = snapshot(tmp_path)
    code = _cli(
        random_model_path,
        "--format",
        "tflite",
        "--output",
        tmp_path / "vit.tflite",
        "--no-verify",
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "metadata" in err and "vit.json" in err and "vit.tflite" in err
    with pytest.raises(ValueError, match="is an input.*names.json"):
        export.export_tflite(
            random_model_path,
            tmp_path / "names.tflite",
            labels=str(labels),
            verify=False,
            overwrite=True,
        )
    assert snapshot(tmp_path) == before


# Item 3: the TFLite bytes over the trained model.


def test_tflite_over_the_input_model_is_refused(run, tmp_path, capsys):
    before = snapshot(tmp_path)
    model = run / "model.keras"
    for extra in ([], ["--overwrite"]):
        assert (
            _cli(
                model,
                "--format",
                "tflite",
                "--output",
                model,
                "--no-verify",
                *extra,
            )
            == 2
        )
        assert "`output` is an input" in capsys.readouterr().err
    # Through a symbolic link too.
    link = tmp_path / "link.keras"
    link.symlink_to(model)
    before = snapshot(tmp_path)
    for path in (model, link):
        with pytest.raises(ValueError, match="`output` is an input"):
            export.export_tflite(str(model), path, verify=False, overwrite=True)
    assert snapshot(tmp_path) == before


def test_tflite_over_another_file_is_refused_unless_overwrite(
    run, tmp_path, capsys
):
    # best.keras is not the input, but it is not a TFLite file either.
    before = snapshot(tmp_path)
    best = run / "best.keras"
    assert (
        _cli(
            run / "model.keras",
            "--format",
            "tflite",
            "--output",
            best,
            "--no-verify",
        )
        == 2
    )
    assert "pass overwrite=True (--overwrite)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a TFLite file"):
        export.export_tflite(str(run / "model.keras"), best, verify=False)
    assert snapshot(tmp_path) == before


def test_tflite_outputs_replace_earlier_exports_and_with_overwrite_other_files(
    random_model_path, tmp_path
):
    out = tmp_path / "vit.tflite"
    export.export_tflite(random_model_path, out, verify=False)
    first = snapshot(tmp_path)
    export.export_tflite(
        random_model_path, out, verify=False, batch_size=None
    )  # replaced
    assert sorted(snapshot(tmp_path)) == ["vit.json", "vit.tflite"]
    assert snapshot(tmp_path) != first
    other = tmp_path / "notes.bin"
    other.write_bytes(b"mine")
    export.export_tflite(random_model_path, other, verify=False, overwrite=True)
    assert tflite_lib.is_tflite(other)


def test_the_cli_sees_a_weights_file_as_an_input(
    random_model_path, tmp_path, capsys
):
    weights = tmp_path / "w.npz"
    weights.write_bytes(b"weights")
    before = snapshot(tmp_path)
    code = _cli(
        random_model_path,
        "--weights",
        weights,
        "--format",
        "tflite",
        "--output",
        weights,
        "--overwrite",
        "--no-verify",
    )
    assert code == 2
    assert "`output` is an input" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


# The other exporters follow the same rule.


def test_onnx_and_openvino_outputs_follow_the_rule(random_model_path, tmp_path):
    model_copy = tmp_path / "m.keras"
    shutil.copy(random_model_path, model_copy)
    (tmp_path / "vit.onnx").write_bytes(b"mine")
    (tmp_path / "new.onnx.data").write_bytes(b"mine")
    (tmp_path / "vit.xml").write_text("<notes/>")
    (tmp_path / "new.bin").write_bytes(b"mine")
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="`output` is an input"):
        onnx_lib.check_output(
            str(model_copy), [str(model_copy)], overwrite=True
        )
    with pytest.raises(ValueError, match="`weights` is an input"):
        openvino_lib.check_output(
            tmp_path / "new.xml", [tmp_path / "new.bin"], overwrite=True
        )
    with pytest.raises(ValueError, match="not an ONNX model"):
        export.export_onnx(str(model_copy), tmp_path / "vit.onnx")
    with pytest.raises(
        ValueError, match=r"data.*Received: data=.*new.onnx.data.*beside output"
    ):
        onnx_lib.check_output(tmp_path / "new.onnx")
    with pytest.raises(ValueError, match="not an OpenVINO model"):
        openvino_lib.check_output(tmp_path / "vit.xml")
    with pytest.raises(
        ValueError, match=r"Received: weights=.*new.bin.*beside output"
    ):
        openvino_lib.check_output(tmp_path / "new.xml")
    assert snapshot(tmp_path) == before
    # What the exporters write is recognised as theirs.
    (tmp_path / "t.onnx").write_bytes(b"\x08\x08\x12\x07tf2onnx\x1a\x0b1.17.0")
    (tmp_path / "t.xml").write_text(
        '<?xml version="1.0"?>\n<net name="x" version="11">\n'
    )
    assert onnx_lib.check_output(tmp_path / "t.onnx") == str(
        tmp_path / "t.onnx"
    )
    assert openvino_lib.check_output(tmp_path / "t.xml") == str(
        tmp_path / "t.xml"
    )


def test_export_openvino_refuses_a_file_it_did_not_write(
    random_model_path, tmp_path
):
    pytest.importorskip("openvino")
    (tmp_path / "vit.bin").write_bytes(b"mine")
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="weights"):
        export.export_openvino(random_model_path, tmp_path / "vit.xml")
    assert snapshot(tmp_path) == before


def test_benchmark_export_checks_its_outputs_before_the_first_export(
    random_model, tmp_path, monkeypatch
):
    name = random_model.name
    (tmp_path / f"{name}_dynamic.tflite").write_bytes(b"mine")
    before = snapshot(tmp_path)
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    with pytest.raises(ValueError, match=f"{name}_dynamic.tflite") as info:
        export.benchmark_export(
            random_model,
            quantizations=("none", "dynamic"),
            threads=(1,),
            runs=1,
            tensorflow=False,
            onnx=False,
            openvino=False,
            output_dir=tmp_path,
        )
    assert "overwrite" not in str(
        info.value
    )  # benchmark_export has no such option
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_benchmark_export_keeps_its_keras_copy_out_of_output_dir(
    random_model, tmp_path, monkeypatch
):
    # It used to save `<name>.keras` into output_dir, over any file of that
    # name.
    tf_latency_stand_in(monkeypatch)
    mine = tmp_path / f"{random_model.name}.keras"
    mine.write_bytes(b"my own model")
    export.benchmark_export(
        random_model,
        quantizations=(),
        threads=(1,),
        runs=1,
        warmup=0,
        output_dir=tmp_path,
        onnx=False,
        openvino=False,
        print_fn=None,
    )
    assert mine.read_bytes() == b"my own model"
    assert sorted(os.listdir(tmp_path)) == [
        mine.name,
        f"{random_model.name}_saved_model",
    ]


# Item 10: an unwritable folder fails before the conversion.


@pytest.mark.parametrize("fmt", ["tflite", "saved_model"])
def test_an_unwritable_output_folder_fails_before_the_conversion(
    random_model_path, tmp_path, monkeypatch, capsys, fmt
):
    folder = tmp_path / "readonly"
    folder.mkdir()
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    monkeypatch.setattr(
        saved_model_lib, "build_archive", lambda *a: pytest.fail("converted")
    )
    unwritable(monkeypatch, folder)
    out = folder / ("vit.tflite" if fmt == "tflite" else "sm")
    assert _cli(random_model_path, "--format", fmt, "--output", out) == 2
    assert f"is not writable: {folder}" in capsys.readouterr().err
    assert os.listdir(folder) == []


def test_a_read_only_output_folder_fails_before_the_conversion(
    random_model_path, tmp_path, monkeypatch
):
    # The API's path (the test above runs the command's).
    folder = tmp_path / "readonly"
    folder.mkdir()
    monkeypatch.setattr(
        tflite_lib, "tflite_bytes", lambda *a, **k: pytest.fail("converted")
    )
    unwritable(monkeypatch, folder)
    with pytest.raises(ValueError, match="not writable"):
        export.export_tflite(random_model_path, folder / "vit.tflite")
    assert os.listdir(folder) == []


def test_a_re_export_never_leaves_the_old_metadata_beside_the_new_model(
    random_model_path, tmp_path, monkeypatch
):
    # Stopped after the new model took the file's place but before its
    # metadata was written: the old metadata (class names, input size) is
    # gone, not left to describe the new model.
    output = tmp_path / "vit.tflite"
    export.export_tflite(random_model_path, output, verify=False)
    old_model = output.read_bytes()
    assert (tmp_path / "vit.json").exists()

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tflite_lib.metadata_lib, "write", stopped)
    with pytest.raises(KeyboardInterrupt):
        export.export_tflite(
            random_model_path, output, verify=False, quantize="float16"
        )
    assert output.read_bytes() != old_model
    assert not (tmp_path / "vit.json").exists()


def test_a_re_export_stopped_before_its_commit_keeps_the_old_metadata(
    random_model_path, tmp_path, monkeypatch
):
    # A stop requested (SIGTERM) while the new model was checked keeps the
    # old model at `output`: its metadata must stay beside it, or
    # `keras-vit predict` refuses the old model.
    output = tmp_path / "vit.tflite"
    export.export_tflite(random_model_path, output, verify=False)
    old_model, old_meta = (
        output.read_bytes(),
        (tmp_path / "vit.json").read_text(),
    )
    io_details = tflite_lib.runtime.io_details

    def stop_while_checking(path):
        files.request_stop(SystemExit(143))
        return io_details(path)

    monkeypatch.setattr(tflite_lib.runtime, "io_details", stop_while_checking)
    try:
        with pytest.raises(SystemExit):
            export.export_tflite(
                random_model_path, output, verify=False, quantize="float16"
            )
    finally:
        files.clear_stop()
    assert output.read_bytes() == old_model
    assert (tmp_path / "vit.json").read_text() == old_meta
    assert sorted(os.listdir(tmp_path)) == ["vit.json", "vit.tflite"]
