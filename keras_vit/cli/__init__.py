"""The `keras-vit` command line: one module per command.

`build_parser()` assembles the commands' parsers, the one definition of
every command's arguments; `main(argv)` runs one. Building the parser
imports neither Keras nor TensorFlow (the flags' choices come from
`keras_vit.options`), and neither do the listing commands
(`LIGHT_COMMANDS`): each other command imports what it needs when it runs.
Before such a command runs, TensorFlow is imported with its C++ start-up
log lines (oneDNN, CPU features, CUDA) and its Python warnings held back,
unless `--verbose` comes before the command (`quiet_tensorflow`).

The installed `keras-vit` is `keras_vit_cli.main` (keras_vit/_launcher/),
which builds this parser without running `keras_vit/__init__.py`, so that
`keras-vit --help` or `keras-vit presets` answers at once;
`python -m keras_vit.cli` imports the whole library first.
"""

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import threading

from keras_vit import files
from keras_vit.cli import benchmark
from keras_vit.cli import convert
from keras_vit.cli import export
from keras_vit.cli import few_shot
from keras_vit.cli import inspection
from keras_vit.cli import models
from keras_vit.cli import predict
from keras_vit.cli import presets
from keras_vit.cli import train
from keras_vit.version import __version__

#: The commands that import neither Keras nor TensorFlow (`None`: no command,
#: which prints the help).
LIGHT_COMMANDS = frozenset({None, "models", "presets"})


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-vit",
        description="Vision Transformers (arXiv 2010.11929) for Keras 3.",
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-vit {__version__}"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        dest="tensorflow_logs",
        help="show TensorFlow's C++ log lines (oneDNN, CPU features, "
        "CUDA) and Python warnings; before the command (`keras-vit --verbose "
        "train ...`: train's own --verbose sets its progress output)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    models.add_parser(sub)
    presets.add_parser(sub)
    predict.add_parser(sub)
    convert.add_parser(sub)
    train.add_parser(sub)
    export.add_parsers(sub)  # export, verify, benchmark-export
    inspection.add_parser(sub)
    few_shot.add_parser(sub)
    benchmark.add_parser(sub)
    return parser


def main(argv=None):
    with quiet_closed_stdout():
        return _main(argv)


def export_as(export_format, argv):
    """`keras-vit export --format export_format` with `argv` (the export/
    folder's scripts). A `--format` of the user's own, in any spelling
    argparse takes (`--format=X`, `--form X`), is refused: the last one
    given would win, and `export_tflite.py --format saved_model` wrote a
    SavedModel without a word."""
    command = ["export", "--format", export_format, *argv]
    given = build_parser().parse_args(command).format
    if given != export_format:
        print(
            f"keras-vit: error: this script exports --format {export_format}; "
            "leave --format out, or run `keras-vit export`. Received: "
            f"--format={given}",
            file=sys.stderr,
        )
        return 2
    return main(command)


def _main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 0
    if args.command not in LIGHT_COMMANDS and not args.tensorflow_logs:
        quiet_tensorflow()
    try:
        with _terminate_cleanly():
            args.run(args)
    except ValueError as error:
        print(f"keras-vit: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - only the one below is caught
        found = _not_an_image(error)
        if found is None:
            raise
        print(f"keras-vit: error: {found[0]} {found[1]}", file=sys.stderr)
        return 2
    return 0


@contextlib.contextmanager
def quiet_closed_stdout():
    """Ends a command whose reader closed its stdout (`keras-vit presets |
    head -1`) quietly, with status 1, where a `BrokenPipeError` traceback
    ended it: stdout is flushed here, and on a closed pipe pointed at
    /dev/null, so that the interpreter's own flush at exit does not fail
    again (the Python documentation's recipe, `signal` module); so does
    a command that exits itself (`--help`, `--version`)."""
    try:
        try:
            yield
        except SystemExit:
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a closed pipe fails here, not at exit
    except BrokenPipeError:
        _stdout_to_devnull()
        raise SystemExit(1) from None


def _stdout_to_devnull():
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def quiet_tensorflow():
    """Imports TensorFlow without its C++ start-up log lines or its Python
    warnings.

    TensorFlow's C++ start-up chatter (oneDNN, CPU features, CUDA) is noise
    for a command line. `TF_CPP_MIN_LOG_LEVEL=3` holds back its later C++
    log lines (set here unless the user set it), but not those it writes
    while it is imported, before its logging is set up (TF 2.21): those are
    written to a temporary file instead of stderr, and shown only if the
    import fails. Its Python logger (absl's) is set to show errors only.
    Does nothing if TensorFlow is imported already.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    tensorflow.get_logger().setLevel("ERROR")


def _not_an_image(error):
    """`(message, path)` of the file that `keras_vit.data`'s image reader
    refused (`read_image`, `read_images`) in a TensorFlow error raised from a
    `tf.data` pipeline, or `None`."""
    from keras_vit.data.datasets import NOT_AN_IMAGE
    from keras_vit.data.datasets import NOT_DECODABLE

    messages = "|".join(re.escape(m) for m in (NOT_AN_IMAGE, NOT_DECODABLE))
    found = re.search(
        r"assertion failed: \[(" + messages + r")\] \[(.*?)\]\n",
        str(error) + "\n",
    )
    return None if found is None else (found.group(1), found.group(2))


class _Terminated(SystemExit):
    """Raised in the main thread when SIGTERM arrives during a command."""


def _raise_terminated(signum, frame):
    error = _Terminated(128 + signum)
    files.request_stop(error)
    raise error


@contextlib.contextmanager
def _terminate_cleanly():
    """Turns SIGTERM into `SystemExit(143)` while a command runs.

    Python's default SIGTERM ends the process on the spot, so a `timeout`
    or `kill` during an export would leave its hidden temporary file (or
    folder) beside the output. As an exception, the cleanup code of
    `keras_vit.files` runs and nothing half-written is left, as with Ctrl-C.
    Like Ctrl-C, it takes effect when the interpreter next runs Python code
    (a TFLite conversion in progress finishes its C++ step first). Code that
    turns the exception into another one on its way up (an extension
    module's import does) still exits with status 143, without a traceback.
    A handler someone else installed is left alone, and so is a call from a
    thread other than the main one (signals can only be handled there).
    Should the exception be lost (Python drops one raised while a garbage
    collector callback or a finalizer runs: JAX registers such a callback),
    the next atomic write raises it at its commit and leaves nothing, and
    a command that finishes all the same still exits with status 143.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
        files.raise_if_stopped()  # a command that ran on past a lost one
    except BaseException as error:
        cause = error
        while cause is not None and not isinstance(cause, _Terminated):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise SystemExit(cause.code) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        files.clear_stop()
