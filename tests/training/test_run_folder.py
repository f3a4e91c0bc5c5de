"""A run folder has one writer, and what a killed writer left is cleaned up."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from keras_vit import files
from tests.helpers import fewer_digits
from tests.training.test_train import REPO
from tests.training.test_train import _run
from tests.training.test_train import tiny_config


def _dead_pid():
    """The id of a process that has ended."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
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
    kept = [
        _leftover(tmp_path, "a", os.getppid()),
        _leftover(tmp_path, "b", 1),
        _leftover(tmp_path, "c", _dead_pid(), host="0123abcd"),
    ]
    for name in kept:
        (tmp_path / name).write_bytes(b"partial")
    files.write_text(str(tmp_path / "other.txt"), "hello")
    assert sorted(os.listdir(tmp_path)) == sorted(["other.txt", *kept])


def test_a_folder_writer_killed_between_its_renames_is_completed(
    tmp_path, monkeypatch
):
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
    old = tmp_path / _leftover(
        tmp_path, "saved_model", pid, suffix=".old"
    ).replace("abcd_123", "efgh_456")
    new.mkdir()
    (new / "v").write_text("new")
    (old / "previous").mkdir(parents=True)
    os.replace(target, old / "previous")
    files.write_text(str(tmp_path / "other.txt"), "x")
    assert (target / "v").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["other.txt", "saved_model"]


#: A run that holds its folder: it stops at its first epoch until killed.
HOLD = """
    import sys, time
    import keras
    from keras_vit.training import TrainConfig, train
    from tests.helpers import fewer_digits
    from tests.training.test_train import TINY

    fewer_digits()  # as the test's own runs

    class Hold(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            print("training", flush=True)
            time.sleep(600)

    train(TrainConfig.from_dict(
              {{**TINY, "output": {output!r}, "epochs": 1}}),
          callbacks=[Hold()])
"""


@pytest.mark.slow
def test_a_second_run_into_a_folder_is_refused_while_the_first_runs(
    tmp_path, monkeypatch
):
    # Two runs started into one folder raced (both resume the same backup
    # and write the same files) and the second one crashed.
    from keras_vit.training import train

    fewer_digits(monkeypatch)  # an epoch of a few steps

    config = tiny_config(tmp_path, epochs=1)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO}
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(HOLD.format(output=config.run.output)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert first.stdout.readline() == "training\n", first.stderr.read()[
            -3000:
        ]
        with pytest.raises(
            ValueError,
            match=f"Another run is writing into the output "
            f"folder \\(process {first.pid} on .*output=",
        ):
            train(config)
    finally:
        first.kill()  # SIGKILL: the lock goes with the process
        first.communicate()
    # A killed run leaves no stale lock, and what it was writing goes.
    backup = os.path.join(config.run.output, "backup")
    os.makedirs(backup, exist_ok=True)
    left = os.path.join(
        backup, _leftover(backup, "epoch-0001.weights.h5", first.pid)
    )
    open(left, "wb").write(b"partial")
    result = train(config)
    assert result.initial_epoch == 0 and len(result.history["loss"]) == 1
    assert not os.path.exists(left)


@pytest.mark.slow
def test_the_log_holds_the_epochs_of_the_backup_once(tmp_path, monkeypatch):
    # The CSV logger ran after the backup (a kill between them lost the
    # epoch's row for good) and appended on resuming (a row written before
    # a kill was repeated).
    from keras_vit.training import train

    fewer_digits(monkeypatch)  # epochs of a few steps

    first = train(tiny_config(tmp_path, epochs=1))
    log = os.path.join(first.output, "log.csv")
    header, row = open(log).read().splitlines()
    assert header == "epoch,accuracy,loss"
    assert row.startswith("0,")
    open(log, "w").write(header + "\n")  # killed after the backup: no row
    resumed = train(tiny_config(tmp_path, epochs=2))
    lines = open(log).read().splitlines()
    assert (
        lines[:2] == [header, row]
        and len(lines) == 3
        and lines[2].startswith("1,")
    )
    assert lines[2].split(",")[2] == repr(resumed.history["loss"][1])
    open(log, "a").write(lines[2] + "\n")  # a row of an epoch to be redone
    train(tiny_config(tmp_path, epochs=2))
    assert open(log).read().splitlines() == lines


@pytest.mark.slow
def test_a_run_does_not_overwrite_a_folder_it_did_not_write(
    tmp_path, monkeypatch
):
    # `--output .` in a project folder replaced its config.json, log.csv
    # and model.keras with the run's, silently.
    from keras_vit.training import train

    fewer_digits(monkeypatch)  # epochs of a few steps

    config = tiny_config(tmp_path, epochs=1)
    os.makedirs(config.run.output)
    mine = {
        "config.json": '{"my": "project"}',
        "model.keras": "my model",
        "notes.txt": "kept",
    }
    for name, text in mine.items():
        open(os.path.join(config.run.output, name), "w").write(text)
    with pytest.raises(
        ValueError,
        match=r"not a keras_vit run's.*config\.json, "
        r"model\.keras\. .*output=",
    ):
        train(config)
    for name, text in mine.items():
        assert open(os.path.join(config.run.output, name)).read() == text
    assert sorted(os.listdir(config.run.output)) == sorted(mine)
    # A folder with none of a run's files is trained into; its own files
    # stay, and a rerun resumes it.
    os.remove(os.path.join(config.run.output, "config.json"))
    os.remove(os.path.join(config.run.output, "model.keras"))
    assert train(config).initial_epoch == 0
    assert open(os.path.join(config.run.output, "notes.txt")).read() == "kept"
    assert train(tiny_config(tmp_path, epochs=2)).initial_epoch == 1


def test_a_config_json_as_runs_write_it_today_loads_to_resume():
    # tests/training/flat_config.json is a run's config.json in the flat
    # form of earlier versions; a later config layout must keep reading it
    # (a rerun resumes).
    import importlib

    from keras_vit.training.config import load_config

    train_module = importlib.import_module("keras_vit.training.train")

    path = os.path.join(os.path.dirname(__file__), "flat_config.json")
    assert train_module._is_run_config(path)
    config = load_config(path)
    assert (
        config.model.name,
        config.data.dataset,
        config.run.epochs,
        config.model.kwargs,
    ) == ("Ti/16", "digits", 2, {"hidden_dim": 16, "num_heads": 2})
    assert config.augmentation.crop_area == (0.35, 1.0)  # a list in JSON
    config.check()


def test_a_nested_config_json_loads_to_the_same_settings_as_the_flat_one():
    # tests/training/nested_config.json is flat_config.json's run as this
    # version writes it (sections).
    import importlib

    from keras_vit.training.config import load_config

    train_module = importlib.import_module("keras_vit.training.train")
    here = os.path.dirname(__file__)
    nested = os.path.join(here, "nested_config.json")
    assert train_module._is_run_config(nested)
    with open(nested) as f:
        assert json.load(f)["run"]["epochs"] == 2
    assert load_config(nested) == load_config(
        os.path.join(here, "flat_config.json")
    )


def _rerun_of(tmp_path, monkeypatch, form):
    """`(train module, config)`: a run folder holding `form`'s config.json
    (as if with a backup) and a config of the same settings to rerun it."""
    import importlib
    import shutil

    from keras_vit.training.config import load_config

    train_module = importlib.import_module("keras_vit.training.train")
    here = os.path.dirname(__file__)
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(
        os.path.join(here, f"{form}_config.json"), folder / "config.json"
    )
    monkeypatch.setattr(  # as if the folder held a backup
        train_module.run_callbacks, "read_backup", lambda path: ({}, None)
    )
    config = load_config(os.path.join(here, "flat_config.json"))
    config.run.output = str(folder)
    return train_module, config


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_a_rerun_compares_its_settings_with_either_form(
    tmp_path, monkeypatch, form
):
    # A run folder of an earlier version holds a flat config.json: a rerun
    # with the same settings resumes it (no "other settings" refusal), and
    # one with another seed is refused, naming it, whichever form it holds.
    train_module, config = _rerun_of(tmp_path, monkeypatch, form)
    train_module._check_run_folder(config)
    train_module._check_resumable(config)
    config.run.seed = 1
    with pytest.raises(ValueError, match="seed=0 there, 1 here"):
        train_module._check_resumable(config)


def test_a_run_that_named_no_model_before_none_meant_it_resumes(
    tmp_path, monkeypatch
):
    # Before `model.name=None` (the default: a Hub repo's architecture,
    # else ViT_Ti16), a run that named no model recorded "ViT_Ti16".
    train_module, config = _rerun_of(tmp_path, monkeypatch, "nested")
    path = tmp_path / "run" / "config.json"
    recorded = json.loads(path.read_text())
    recorded["model"]["name"] = "ViT_Ti16"
    path.write_text(json.dumps(recorded))
    config.model.name = None
    train_module._check_resumable(config)
    config.model.name = "S/16"
    with pytest.raises(ValueError, match="model='ViT_Ti16' there"):
        train_module._check_resumable(config)


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_a_rerun_with_another_batch_size_is_refused(
    tmp_path, monkeypatch, form
):
    # The backup's optimizer step counts batches of the run's size, and the
    # schedule's length is counted in the rerun's: at batch 16 instead of 8
    # a resumed run trained a whole epoch at a learning rate of 0.
    train_module, config = _rerun_of(tmp_path, monkeypatch, form)
    config.run.epochs = 5  # may change: the run goes on longer
    train_module._check_resumable(config)
    config.data.batch_size = 16
    with pytest.raises(
        ValueError, match=r"batch_size=32 there, 16 here.*Received: output="
    ):
        train_module._check_resumable(config)


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_exports_find_the_class_names_in_either_form(tmp_path, form):
    # keras_vit.export reads the run's dataset from its config.json to name
    # the classes; it read the flat form's top-level "dataset" only.
    import shutil

    from keras_vit.export.metadata import training_run_class_names

    here = os.path.dirname(__file__)
    shutil.copy(
        os.path.join(here, f"{form}_config.json"), tmp_path / "config.json"
    )
    (tmp_path / "model.keras").write_bytes(b"")
    names = training_run_class_names(str(tmp_path / "model.keras"))
    assert names == [str(d) for d in range(10)]  # digits


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"epoch": 2, "weig',
        '{"epoch": 2}',
        "[]",
        '{"epoch": 1, "weights": 3, "history": {}}',
        '{"epoch": "1", "weights": "epoch-0001.weights.h5", "history": {}}',
    ],
)
def test_a_damaged_backup_state_is_named_with_how_to_start_over(tmp_path, text):
    # A state.json cut short or edited failed with a bare JSONDecodeError or
    # KeyError('weights'), naming nothing, on every rerun.
    import shutil

    from keras_vit.training import train

    run = tmp_path / "run"
    (run / "backup").mkdir(parents=True)
    here = os.path.dirname(__file__)
    shutil.copy(os.path.join(here, "nested_config.json"), run / "config.json")
    (run / "backup" / "state.json").write_text(text)
    (run / "backup" / "epoch-0001.weights.h5").write_bytes(b"")
    with pytest.raises(ValueError) as error:
        train(tiny_config(tmp_path, epochs=2))
    message = str(error.value)
    assert f"{run / 'backup' / 'state.json'} is damaged" in message
    assert f"Remove the backup folder ({run / 'backup'})" in message
    assert message.endswith(f"Received: output={str(run)!r}")
    # Refused before anything was written.
    assert sorted(os.listdir(run)) == ["backup", "config.json"]
    assert (run / "backup" / "state.json").read_text() == text


def test_the_run_folder_file_names_have_one_home_each():
    """`model.keras` (what a command's MODEL means by a run's folder,
    `model_argument.RUN_MODEL_FILE`), `best.keras` and `class_names.json`
    are spelled once each: train.py spelled the first itself, so the
    file it writes and the one the commands look for could drift apart."""
    import ast
    import importlib
    import pathlib

    from keras_vit import model_argument

    # (`keras_vit.training.train` is also the function's name.)
    train = importlib.import_module("keras_vit.training.train")

    source = pathlib.Path(train.__file__).read_text()
    strings = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    assert strings.count(model_argument.RUN_MODEL_FILE) == 0
    for name in (train.BEST_MODEL_FILE, train.CLASS_NAMES_FILE):
        assert strings.count(name) == 1, name
    entries = set(train.RUN_ENTRIES)
    assert {
        model_argument.RUN_MODEL_FILE,
        train.BEST_MODEL_FILE,
        train.CLASS_NAMES_FILE,
    } <= entries
