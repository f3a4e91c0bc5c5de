"""The scripts that tests of the layers and models run on Keras's JAX
backend, all in one process made once for the test run.

A process has one Keras backend, and its start (Python, TensorFlow with
keras_vit, JAX's first compilation) is most of a small script's time. Each
module of `MODULES` has a `JAX_RUNS` dict of `name: (script, prepare)`: the
script reads its folder as `sys.argv[1]` and prints its JSON last
(`tests.helpers.run_scripts`); `prepare(folder)`, when not None, fills the
folder first, in the test process."""

import importlib
import json

import pytest

from tests.helpers import made_once
from tests.helpers import run_scripts

#: The modules whose `JAX_RUNS` run, in this order: the fused-attention
#: script last, which wraps `keras.ops.dot_product_attention` and replaces
#: the MLP's `gelu_dense` for the rest of its process.
MODULES = (
    "tests.layers.test_rope_augmentation",
    "tests.layers.test_every_layer",
    "tests.test_backends",
    "tests.layers.test_attention_jax",
)


def _runs():
    """`(name, script, prepare)` of every run, in order."""
    runs = [
        (name, script, prepare)
        for module in MODULES
        for name, (script, prepare) in importlib.import_module(
            module
        ).JAX_RUNS.items()
    ]
    names = [name for name, _, _ in runs]
    assert len(set(names)) == len(names), names  # a folder each
    return runs


def _run_all(root):
    runs = []
    for name, script, prepare in _runs():
        folder = root / name
        folder.mkdir(exist_ok=True)  # (a failed run: tried again)
        if prepare is not None:
            prepare(folder)
        runs.append((script, folder))
    run_scripts("jax", runs)


def ran_on_jax(tmp_path_factory, name):
    """The folder of the run `name` (every run of `MODULES` made once for
    the test run) and the JSON its script printed last."""
    pytest.importorskip("jax")
    folder = made_once(tmp_path_factory, "jax_runs", _run_all) / name
    with open(folder / "result.json") as file:
        return folder, json.load(file)
