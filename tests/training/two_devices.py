"""Scripts that train on two logical CPUs, all run in one process.

A process of its own for each cost each test a TensorFlow start (seconds);
the devices of a process are set once, before TensorFlow starts, so these
scripts cannot run in the test process itself. A test file registers its
script (`register`) when it is imported; the `two_devices` fixture
(conftest.py) runs, once for the whole run, the scripts of the test files
that have a selected test using it (`select`): a run of some tests (the
fast loop, `-k`) starts none of the others' scripts.
"""

import functools
import sys
import textwrap

import tensorflow as tf

from tests.helpers import made_once
from tests.helpers import run_scripts
from tests.helpers import script_result

#: The start of a registered script: two logical CPUs and `STRATEGIES`
#: (`strategies`). A script reads a folder of its own as `sys.argv[1]`
#: and prints its result as JSON on its last line.
TWO_DEVICES = """
    import json, sys, numpy as np, tensorflow as tf
    from tests.training.two_devices import strategies
    STRATEGIES = strategies()
    import keras, keras_vit
"""

#: Each registered script (`TWO_DEVICES` and its body), by name.
SCRIPTS = {}

#: The module that registered each script, by name.
OWNERS = {}

#: The modules whose scripts run (`select`).
SELECTED = set()

#: The scripts that run after the others, by name.
LAST = set()


@functools.cache
def strategies():
    """Two logical CPUs, and `[("one", OneDeviceStrategy on the first),
    ("two", MirroredStrategy over both)]`, made once in a process: a
    second MirroredStrategy over the same devices reuses the first one's
    collective keys, and its collectives fail ("Shape mismatch in the
    collective instance")."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    return [
        ("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
        ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
    ]


def register(name, body, last=False):
    """Adds the script `TWO_DEVICES + body` as `name`; with `last`, to run
    after the others (a step that fails on the replicas aborts the
    process's collectives)."""
    SCRIPTS[name] = textwrap.dedent(TWO_DEVICES) + textwrap.dedent(body)
    OWNERS[name] = sys._getframe(1).f_globals["__name__"]
    if last:
        LAST.add(name)


def select(items):
    """Runs the scripts of the modules of those test `items` that use the
    `two_devices` fixture (the run's selected tests: the same in every
    xdist worker)."""
    SELECTED.update(
        item.module.__name__
        for item in items
        if "two_devices" in getattr(item, "fixturenames", ())
    )


def _selected():
    return [name for name in SCRIPTS if OWNERS[name] in SELECTED]


def _run_all(folder):
    names = sorted(_selected(), key=lambda name: (name in LAST, name))
    for name in names:
        (folder / name).mkdir()
    run_scripts("tensorflow", [(SCRIPTS[n], folder / n) for n in names])


def results(tmp_path_factory):
    """`{name: its folder}` of every selected script, run once
    (`made_once`) in one process."""
    folder = made_once(tmp_path_factory, "two_devices", _run_all)
    return {name: folder / name for name in _selected()}


def result(results, name):
    """What the script `name` printed last (its error fails the test)."""
    return script_result(results[name])
