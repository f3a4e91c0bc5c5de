"""Tests of `keras_vit.benchmark` and of the scripts in benchmarks/.

The suite's scripts (`suite.py`, `measurement.py`, `profiling.py`,
`worker.py`, `peers/`) import each other by name, as they do when run by
their path: the folder goes first on `sys.path` here, so that the tests
import them as the scripts do (`import suite`)."""

import importlib.util
import os
import sys

#: The repository's benchmarks/ folder.
SCRIPTS = os.path.join(
    os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ),
    "benchmarks",
)
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)


def script(name):
    """The module of `benchmarks/{name}.py`, loaded from its file (the
    folder is no package)."""
    path = os.path.join(SCRIPTS, f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
