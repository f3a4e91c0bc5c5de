"""What `keras-vit` imports: its parser and `keras_vit.options` need neither
Keras nor TensorFlow, and TensorFlow's C++ start-up lines stay hidden."""

import os
import runpy
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "keras_vit")

#: Makes `keras_vit`, `keras_vit.export` and `keras_vit.training` bare
#: packages, so that the modules a script imports run their own imports only
#: (the packages' `__init__` import the whole library, Keras and TensorFlow
#: with it).
BARE = f"""
import sys, types
for name, path in [("keras_vit", {PACKAGE!r}),
                   ("keras_vit.export", {os.path.join(PACKAGE, "export")!r}),
                   ("keras_vit.training",
                    {os.path.join(PACKAGE, "training")!r})]:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
"""

HEAVY = ("tensorflow", "keras", "numpy")


def _frameworks(imported):
    return [m for m in imported.split(",") if m in ("tensorflow", "keras")]


def _python(script, *args):
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


def _imported_by(code, bare=True):
    script = (
        (BARE if bare else "")
        + f"""
import sys
{code}
print("imported:" + ",".join(m for m in {HEAVY!r} if m in sys.modules))
"""
    )
    process = _python(script)
    assert process.returncode == 0, process.stderr[-3000:]
    return process.stdout.rsplit("imported:", 1)[1].strip()


def test_the_options_import_nothing_heavy():
    assert _imported_by("import keras_vit.options") == ""


PARSER_RUNS = """
from keras_vit.cli import main
for argv in {argv!r}:
    try:
        main(argv)
    except SystemExit as error:
        assert error.code == 0, (argv, error.code)
"""


def test_help_and_version_import_neither_keras_nor_tensorflow():
    argv = [
        ["--help"],
        ["--version"],
        ["train", "--help"],
        ["export", "--help"],
        ["benchmark", "--help"],
        ["inspect", "--help"],
    ]
    assert _frameworks(_imported_by(PARSER_RUNS.format(argv=argv))) == []


#: Runs the installed `keras-vit` (`keras_vit_cli.main`) from this source
#: tree, where its package is keras_vit/_launcher/ (pyproject.toml maps it
#: to the top-level name); at exit it prints which frameworks were imported
#: and the TensorFlow log level the command ran with.
LAUNCHER = f"""
import atexit, importlib.util, os, sys
spec = importlib.util.spec_from_file_location(
    "keras_vit_cli", {os.path.join(PACKAGE, "_launcher", "__init__.py")!r})
launcher = importlib.util.module_from_spec(spec)
sys.modules["keras_vit_cli"] = launcher
spec.loader.exec_module(launcher)
atexit.register(lambda: print(
    "imported:" + ",".join(m for m in {HEAVY!r} if m in sys.modules),
    "level:" + os.environ.get("TF_CPP_MIN_LOG_LEVEL", "unset")))
sys.exit(launcher.main(sys.argv[1:]))
"""


def _keras_vit(*args):
    """`keras-vit ARGS...` as the console script runs it, without the test
    run's TF_CPP_MIN_LOG_LEVEL; (process, imported frameworks, level)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    process = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    imported, level = process.stdout.rsplit("imported:", 1)[1].split()
    return process, _frameworks(imported), level.split(":")[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["models"],
        ["presets"],
        ["presets", "--model", "ViT_B16"],
        ["models", "--help"],
        ["train", "--help"],
        [],
    ],
)
def test_the_console_script_lists_and_helps_without_tensorflow(argv):
    process, frameworks, _ = _keras_vit(*argv)
    assert process.returncode == 0, process.stderr[-3000:]
    assert frameworks == [] and process.stderr == ""
    assert process.stdout.split("imported:")[0].strip()


def test_the_console_script_lists_what_the_library_lists():
    process, _, _ = _keras_vit("models")
    assert "ViT_H14" in process.stdout and "632,045,800" in process.stdout
    process, _, _ = _keras_vit("presets", "--model", "ViT_B16")
    assert "vit_b16_augreg_in21k_ft_in1k" in process.stdout
    assert "vit_l16" not in process.stdout


@pytest.mark.slow
def test_a_command_that_imports_tensorflow_runs_quietly(tmp_path):
    command = [
        "convert",
        str(tmp_path / "missing.npz"),
        "--output",
        str(tmp_path / "out.weights.h5"),
    ]
    quiet, frameworks, level = _keras_vit(*command)
    assert quiet.returncode == 2 and "tensorflow" in frameworks
    assert level == "3"
    (line,) = quiet.stderr.strip().splitlines()
    assert line.startswith("keras-vit: error: ") and "missing.npz" in line
    loud, _, level = _keras_vit("--verbose", *command)
    # (JAX, which Keras imports where installed, sets "1" unless set.)
    assert loud.returncode == 2 and level in ("unset", "1")
    lines = loud.stderr.strip().splitlines()
    assert lines[-1] == line
    if len(lines) == 1:
        pytest.skip("this TensorFlow writes no start-up lines")
    assert any("tensorflow" in n.lower() or ".cc:" in n for n in lines[:-1])


def test_python_dash_m_runs_the_command(capsys, monkeypatch):
    # `python -m keras_vit.cli` (how the multi-worker test starts
    # each worker) needs the package's __main__, which runpy runs as `-m`
    # does; here in this process, whose imports are not the claim (the
    # pipe test below starts `python -m keras_vit.cli` afresh).
    monkeypatch.setattr(sys, "argv", ["python", "--version"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("keras_vit.cli", run_name="__main__", alter_sys=True)
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("keras-vit ")


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-c", LAUNCHER, "presets"],
        [sys.executable, "-c", LAUNCHER, "models", "--help"],
        [sys.executable, "-m", "keras_vit.cli", "models"],
    ],
    ids=["presets", "models --help", "python -m keras_vit.cli models"],
)
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(command):
    # `keras-vit presets | head -1` ended in a BrokenPipeError traceback.
    # The pipe's reading end is closed before the command writes, as
    # `head` closes it once it has its line; stdout is buffered, as it is
    # on a pipe unless PYTHONUNBUFFERED is set.
    read, write = os.pipe()
    os.close(read)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONUNBUFFERED", None)
    try:
        process = subprocess.run(
            command,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
    finally:
        os.close(write)
    # (`python -m` imports TensorFlow, whose start-up lines may show.)
    for noise in ("Traceback", "Exception ignored", "BrokenPipeError"):
        assert noise not in process.stderr, process.stderr[-3000:]
    assert process.returncode == 1
