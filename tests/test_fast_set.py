"""`make test-fast` (`-m "not slow"`) still reaches every module.

Read from the source, as tests/test_layering.py reads the package: the
modules a fast test's file imports (at its top or in a function), with
everything those import in turn, and the modules they run as programs
(`-m keras_vit.cli`, a script's path, the launcher's folder).
`import keras_vit` alone reaches most of the package; the command line,
the benchmark and the export helpers it leaves out are reached only where
a test file imports or runs them. Reaching a module is not running its
functions: `make coverage-fast` lists the modules and functions the fast
set never runs.
"""

import ast
import collections
import json
import pathlib

from tests.conftest import DURATIONS
from tests.conftest import FAST_SECONDS
from tests.test_layering import GRAPH
from tests.test_layering import MODULES

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent


def _file_names():
    """Module by the name a path to it ends in: its file's name, or a
    package's folder (a name that two modules share, such as `config.py`,
    names neither)."""
    pairs = [
        (path.parent.name if path.name == "__init__.py" else path.name, name)
        for name, path in MODULES.items()
    ]
    counts = collections.Counter(file for file, _ in pairs)
    return {file: name for file, name in pairs if counts[file] == 1}


FILE_NAMES = _file_names()


def _programs(path):
    """The package's modules that the file `path` runs as programs: a
    dotted name after `"-m"` in a list (with the package's `__main__`), or
    a file or folder name passed to a call (`os.path.join(..., "x.py")`).
    (A name elsewhere, as tests/test_layering.py lists them, runs
    nothing.)"""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.List, ast.Tuple)):
            values = [getattr(e, "value", None) for e in node.elts]
            for flag, module in zip(values, values[1:]):
                if flag == "-m" and module in MODULES:
                    found |= {module, f"{module}.__main__"}
        elif isinstance(node, ast.Call):
            for arg in node.args:
                name = getattr(arg, "value", None)
                if isinstance(name, str) and name in FILE_NAMES:
                    found.add(FILE_NAMES[name])
    return {m for m in found if m in MODULES}


def _reached(roots):
    """`roots` and every module they import or run, directly or not, with
    the packages above each (importing `a.b.c` runs `a` and `a.b` first)
    and a package's `__main__` where the package is run."""
    seen, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module in seen or module not in MODULES:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += GRAPH[module] | _programs(MODULES[module])
    return seen


def _imported_by(path):
    """The package's modules a test file imports or runs."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES} | _programs(path)


def _fast_files():
    """Test files with a test `make test-fast` runs: one that took at most
    `FAST_SECONDS` in the recorded run, or one the record does not know
    (conftest.py counts those fast)."""
    with open(DURATIONS, encoding="utf-8") as file:
        seconds = json.load(file)
    by_file = {}
    for node, took in seconds.items():
        by_file.setdefault(node.split("::")[0], []).append(took)
    return [
        path
        for path in TESTS.rglob("test_*.py")
        if min(by_file.get(path.relative_to(ROOT).as_posix(), [0.0]))
        <= FAST_SECONDS
    ]


def test_the_fast_set_imports_every_module():
    reached = _reached(
        set().union(*(_imported_by(path) for path in _fast_files()))
    )
    assert sorted(set(MODULES) - reached) == []


def test_reaching_follows_imports_and_packages():
    # (the check above would pass on an empty graph)
    reached = _reached({"keras_vit.export.tflite"})
    assert {"keras_vit", "keras_vit.export", "keras_vit.training"} <= reached
    assert "keras_vit.cli" not in reached
