"""Helpers shared by the tests: tiny configurations and round-trip checks."""

import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np

from keras_vit import registry
from keras_vit.data import datasets

#: The repository's root.
REPO = pathlib.Path(__file__).resolve().parents[1]

#: The registered tiny variant (no paper's): a ViT small enough to run
#: anywhere in milliseconds.
TEST_VARIANT = "Test/8"

#: `keras_vit.ViT` arguments of a `TEST_VARIANT` model on 32 x 32 images
#: with 5 classes (`ViT.from_variant(TEST_VARIANT, image_size=32,
#: num_classes=5)` builds the same).
TINY = dict(registry.get_variant(TEST_VARIANT), image_size=32, num_classes=5)

#: `TINY` as a hybrid: a ResNet stem of two bottleneck units (stride 8: a
#: 4x4 grid of feature-map tokens at 32 px) under patch size 1.
TINY_HYBRID = dict(
    TINY,
    patch_size=1,
    stem={"block_units": [1, 1], "width": 8, "root_width": 16, "groups": 4},
)

#: `TINY`'s width, heads and MLP in one block, for a test that trains a
#: model of its own image and patch size (an example's or a recipe's):
#: each block more is more to trace and compile.
TINY_BLOCK = dict(
    {key: TINY[key] for key in ("hidden_dim", "num_heads", "mlp_dim")},
    num_layers=1,
)


def backend_env(backend="jax", **variables):
    """os.environ for a subprocess on Keras's `backend`, TensorFlow quiet
    (and XLA at -O0, as conftest.py sets it for every test)."""
    return dict(
        os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", **variables
    )


def run_on_jax(script, *args):
    """Runs the Python `script` (with `args`) on Keras's JAX backend in a
    subprocess; returns the JSON of its last line, which must say
    `"backend": "jax"` (the subprocess ran where it was meant to)."""
    process = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        env=backend_env("jax"),
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    return result


#: Runs each `(script, folder)` of the JSON list in `sys.argv[1]` in turn,
#: in one process; a script's last printed line is written to its folder's
#: `result.json`, or `{"error": its traceback}` where it failed (the next
#: scripts still run).
_RUNNER = r"""
import contextlib, io, json, sys, traceback
for script, folder in json.loads(sys.argv[1]):
    sys.argv[1:] = [folder]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(script, {"__name__": "__main__"})
        result = printed.getvalue().strip().splitlines()[-1]
    except BaseException:
        result = json.dumps({"error": traceback.format_exc()[-3000:]})
    with open(f"{folder}/result.json", "w") as file:
        file.write(result)
"""


def run_scripts(backend, runs):
    """Runs each `(script, folder)` of `runs` (a script reads its folder
    as `sys.argv[1]` and prints its result as JSON on its last line) on
    Keras's `backend`, all in one subprocess from the repository's root: a
    backend's start is most of a small script's time. A script that fails
    leaves its traceback for `script_result` (which its reader calls) and
    the next ones to run."""
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUNNER,
            json.dumps([[script, str(folder)] for script, folder in runs]),
        ],
        capture_output=True,
        text=True,
        env=backend_env(backend),
        cwd=REPO,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]


def script_result(folder, backend=None):
    """What the script run in `folder` (`run_scripts`) printed last; its
    error fails the caller, and with `backend` the result must say it ran
    there."""
    with open(f"{folder}/result.json") as file:
        result = json.load(file)
    assert "error" not in result, result["error"]
    if backend is not None:
        assert result["backend"] == backend
    return result


def made_once(tmp_path_factory, name, make):
    """`folder / name` after `make(folder)` filled it, made once for the
    whole run: pytest-xdist's workers share it (a session fixture is
    otherwise made in every worker). The first worker to ask makes it
    under a file lock; the others wait for it. Without `fcntl` (Windows)
    each worker makes its own."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above the workers' own
    try:
        import fcntl
    except ImportError:
        fcntl, root = None, tmp_path_factory.getbasetemp()
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / f"{name}.made").exists():
            folder.mkdir(exist_ok=True)  # (a failed make: tried again)
            make(folder)
            (root / f"{name}.made").touch()
    return folder


def fewer_digits(monkeypatch=None, train=320, test=80):
    """Makes the "digits" dataset its first `train` training and `test`
    test images (the real scikit-learn digits, split as always): what
    reads, trains on or scores them runs as it would on all 1,797. Without
    `monkeypatch` (in a process a test started) for the rest of the
    process."""
    every = datasets.digits_arrays

    def fewer(*args, **kwargs):
        splits = every(*args, **kwargs)
        return tuple((x[:n], y[:n]) for (x, y), n in zip(splits, (train, test)))

    if monkeypatch is None:
        datasets.digits_arrays = fewer
    else:
        monkeypatch.setattr(datasets, "digits_arrays", fewer)


def unwritable(monkeypatch, folder):
    """`folder` read-only as `os.access` reports it (a real chmod binds no
    one when the tests run as root, as CI's do)."""
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda path, mode, **kw: (
            False
            if os.fspath(path) == str(folder)
            else real_access(path, mode, **kw)
        ),
    )


def random_images(shape, seed=0):
    """uint8-valued float32 pixels, as a user's photos would be."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, shape).astype("float32")


def randomize_weights(model_or_layer, seed=0, scale=0.2):
    """Replaces every weight with random values (zero-init heads included),
    so that numerical tests exercise every parameter."""
    rng = np.random.default_rng(seed)
    for w in model_or_layer.weights:
        w.assign(rng.normal(scale=scale, size=w.shape).astype(w.dtype))


def assert_config_round_trip(layer, inputs, atol=1e-6, **call_kwargs):
    """`from_config(get_config())` rebuilds a layer that computes the same."""
    out = layer(inputs, **call_kwargs)
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config
    clone(inputs, **call_kwargs)  # build
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(clone(inputs, **call_kwargs)),
        keras.ops.convert_to_numpy(out),
        atol=atol,
    )
    # The layer is registered under the keras_vit package.
    name = keras.saving.get_registered_name(layer.__class__)
    assert name == f"keras_vit>{layer.__class__.__name__}"
    assert keras.saving.get_registered_object(name) is layer.__class__
    return clone


def assert_output_shape_matches(layer, inputs):
    out = layer(inputs)
    assert tuple(layer.compute_output_shape(tuple(inputs.shape))) == tuple(
        out.shape
    )


def xla_kernel_op_kinds(graph):
    """The op kinds of each function that XLA must compile in a
    TensorFlow `graph` (`layers/_fused.elementwise`'s kernels)."""
    return [
        {node.op for node in f.node_def}
        for f in graph.as_graph_def().library.function
        if f.attr["_XlaMustCompile"].b
    ]


def record_step_xla(monkeypatch):
    """A list that gets what each attention call's `softmax_dtype` was
    told of XLA (its layer's `step_xla`: True, False or None), as the
    model runs."""
    from keras_vit.layers import _attention_core

    seen = []
    real = _attention_core.softmax_dtype

    def spy(dtype, step_xla=None):
        seen.append(step_xla)
        return real(dtype, step_xla)

    monkeypatch.setattr(_attention_core, "softmax_dtype", spy)
    return seen
