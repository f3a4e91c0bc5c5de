"""Tests of `keras_vit.benchmark` and of the scripts in benchmarks/."""

import importlib.util
import os

#: The repository's benchmarks/ folder.
SCRIPTS = os.path.join(
    os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ),
    "benchmarks",
)


def script(name):
    """The module of `benchmarks/{name}.py`, loaded from its file (the
    folder is no package)."""
    path = os.path.join(SCRIPTS, f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
