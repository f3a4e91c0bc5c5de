"""The `keras-vit` command's entry point, which answers `--help`,
`--version`, `models` and `presets` without importing Keras or TensorFlow.

Installed as the top-level package `keras_vit_cli` (its source is
`keras_vit/_launcher/`, mapped by pyproject.toml's `package-dir`), so that
importing it runs none of keras_vit's package `__init__` files: `keras_vit`'s
imports the whole library (it must: loading a `.keras` file relies on the
import registering keras_vit's classes), and so do `keras_vit.export`'s and
`keras_vit.training`'s. `main` imports `keras_vit.cli` with those three held
back (`HELD_BACK`: made as bare packages whose `__init__` does not run, as
`importlib` would make them, so their Keras-free modules import alone) and
builds the one parser, `keras_vit.cli.build_parser`. A listing command
(`keras_vit.cli.LIGHT_COMMANDS`) runs there and then. Any other command
imports TensorFlow with its start-up log lines held back (unless `--verbose`,
`keras_vit.cli.quiet_tensorflow`), forgets the modules imported so far and
runs through `keras_vit.cli.main` with the library imported as usual.
"""

import contextlib
import importlib
import importlib.util
import sys

#: The packages whose `__init__` imports Keras or TensorFlow, held back
#: while the parser is built (tests/test_cli_imports.py checks that nothing
#: else imports them).
HELD_BACK = ("keras_vit", "keras_vit.export", "keras_vit.training")


def main(argv=None):
    """Runs `keras-vit ARGV...` (default: `sys.argv[1:]`); returns the exit
    status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "keras_vit" not in sys.modules:
        with _held_back():
            cli = importlib.import_module("keras_vit.cli")
            with cli.quiet_closed_stdout():  # `keras-vit --help | head -1`
                args = cli.build_parser().parse_args(argv)
            if args.command in cli.LIGHT_COMMANDS:
                return cli.main(argv)
            if not args.tensorflow_logs:
                cli.quiet_tensorflow()
    return importlib.import_module("keras_vit.cli").main(argv)


@contextlib.contextmanager
def _held_back():
    """`HELD_BACK` as bare packages; on the way out, every `keras_vit`
    module imported meanwhile is forgotten (a later import runs them all)."""
    for name in HELD_BACK:
        parent, _, child = name.rpartition(".")
        spec = importlib.util.find_spec(name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if parent:
            setattr(sys.modules[parent], child, module)
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "keras_vit"]:
            del sys.modules[name]
