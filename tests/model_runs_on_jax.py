"""The model tests' runs on Keras's JAX backend, all in one process.

A JAX start and keras_vit's import are most of a small run's time. Each
module of `MODULES` has `jax_runs()`: a dict of run names to
`(script, prepare)`, where `prepare(folder)` fills the run's folder, which
the script reads as `sys.argv[1]` (`helpers.run_scripts`). The first test
to ask runs them all, once for the test session (`helpers.made_once`).
"""

import importlib

from tests.helpers import made_once
from tests.helpers import run_scripts
from tests.helpers import script_result

MODULES = (
    "tests.test_families_everywhere",
    "tests.test_model_keras_api",
    "tests.test_model_options",
)


def ran(tmp_path_factory, name):
    """`(folder, result)` of run `name`: its folder and the JSON its
    script printed last (which said it ran on JAX)."""
    folder = made_once(tmp_path_factory, "model_runs_on_jax", _run_all) / name
    return folder, script_result(folder, "jax")


def _run_all(root):
    runs = {}
    for module in MODULES:
        runs.update(importlib.import_module(module).jax_runs())
    for name, (_, prepare) in runs.items():
        (root / name).mkdir(exist_ok=True)
        prepare(root / name)
    run_scripts("jax", [(script, root / n) for n, (script, _) in runs.items()])
