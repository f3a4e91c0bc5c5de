"""ONNX export for ONNX Runtime, the peer the benchmarks compare against.

Keras exports ONNX through tf2onnx (`model.export(path, format="onnx")`),
which has no converter for TensorFlow's `Erfc`, the op TensorFlow's exact
GELU is built on (`0.5 * x * erfc(-x / sqrt(2))`). `export_onnx` registers
one before converting: `erfc(z) = 1 - erf(z)` with ONNX's `Erf`, exact in
float32, then checks ONNX Runtime's outputs against Keras's.

Optional: needs `tf2onnx` and `onnxruntime`, the optional extra
`pip install "keras-vit[onnx]"`, not required dependencies of keras_vit.
"""

import contextlib
import functools
import gc

import numpy as np

from keras_vit import files
from keras_vit import validation
from keras_vit.export import models


def _require(module):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"ONNX export needs `{module}`: pip install tf2onnx onnxruntime"
        ) from error


def available():
    """Whether `tf2onnx` and `onnxruntime` are installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("tf2onnx", "onnxruntime"))


@functools.cache
def _register_erfc():
    """Teaches tf2onnx TensorFlow's `Erfc` as `1 - Erf(x)` (once)."""
    _require("tf2onnx")
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")  # registers the converter
    class Erfc:
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype))
            erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
            node.type = "Sub"
            ctx.replace_inputs(node, [one.output[0], erf.output[0]])


@contextlib.contextmanager
def _collect_between_passes():
    """Frees each discarded graph copy while tf2onnx optimizes (a memory fix).

    tf2onnx's `optimize_graph` deep-copies the whole graph, weights
    included, before each of its dozen optimizer passes, on every round.
    Graph and nodes reference each other, so a discarded copy is freed only
    by a full garbage collection, which rarely runs in time: copies pile up.
    Converting ViT-B/16 peaked at 18.8 GB of RSS, 8.3 GB with a collection
    before each pass (ViT-Ti/16: 2.1 -> 1.4 GB), for a few seconds more.
    The wrapper is a no-op if tf2onnx's private `_get_optimizers` is gone.
    """
    from tf2onnx import optimizer

    original = getattr(optimizer, "_get_optimizers", None)
    if original is None:
        yield
        return

    def collecting(factory):
        def make():
            gc.collect()
            return factory()

        return make

    optimizer._get_optimizers = lambda: {
        name: collecting(factory) for name, factory in original().items()
    }
    try:
        yield
    finally:
        optimizer._get_optimizers = original


def export_onnx(model, output, batch_size=1, opset=17, verify=True, atol=1e-4):
    """Exports a model to an `.onnx` file for ONNX Runtime, checked.

    The graph takes float32 RGB pixels `[batch, H, W, 3]` (preprocessing
    inside, as in Keras) and returns the model's outputs. With `verify`,
    ONNX Runtime's outputs on random pixels are compared with Keras's before
    the file is moved into place; nothing is left at `output` on failure.

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name.
        output: str, the `.onnx` path; its folder must exist.
        batch_size: int, the static batch, or `None` for a dynamic batch.
            Defaults to `1`.
        opset: int, the ONNX opset. Defaults to `17`.
        verify: bool, whether to compare against Keras. Defaults to `True`.
        atol: float, the largest |difference| allowed. Defaults to `1e-4`.

    Returns:
        The path written.

    Example:

    >>> export_onnx(keras_vit.ViT_Ti16(), "vit_ti16.onnx")
    """
    import tensorflow as tf

    model = models.load_model(model)
    output = files.check_output_path(output)
    if batch_size is not None:
        validation.positive_int("batch_size", batch_size)
    _register_erfc()
    height, width, channels = models.input_spec(model)
    spec = tf.TensorSpec((batch_size, height, width, channels), tf.float32, name="images")
    x = np.random.default_rng(0).uniform(0, 255, (batch_size or 2, height, width, channels))
    x = x.astype("float32")
    expected = np.asarray(model(x, training=False))  # the model must have been called
    with files.atomic_file(output, suffix=".onnx") as tmp:
        with _collect_between_passes():
            model.export(tmp, format="onnx", input_signature=[spec],
                         opset_version=opset, verbose=False)
        if verify:
            got = run_onnx(tmp, x)
            error = float(np.max(np.abs(got - expected)))
            if not error <= atol:
                raise RuntimeError(
                    f"The ONNX export differs from Keras by up to {error:.3g} "
                    f"(limit {atol:g}); {output!r} was not written."
                )
    return output


def session(path, num_threads=None):
    """An `onnxruntime.InferenceSession` on `path` with all graph optimisations."""
    ort = _require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if num_threads:
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def run_onnx(path, images, num_threads=None):
    """The first output of an `.onnx` model on `images` (float32 pixels)."""
    sess = session(path, num_threads)
    name = sess.get_inputs()[0].name
    return sess.run(None, {name: np.asarray(images, "float32")})[0]
