"""ONNX export for ONNX Runtime, the peer the benchmarks compare against.

Like Keras's `model.export(path, format="onnx")`, `export_onnx` converts
with tf2onnx, with two differences. tf2onnx has no converter for
TensorFlow's `Erfc`, the op TensorFlow's exact GELU is built on
(`0.5 * x * erfc(-x / sqrt(2))`); one is registered: `erfc(z) = 1 - erf(z)`
with ONNX's `Erf`, exact in float32. And the weights are not frozen into
the graph that tf2onnx copies and optimizes but added afterwards (see
`_convert`): a fraction of the memory and time, and models over ONNX's
2 GiB file limit are written with external data. ONNX Runtime's outputs
are then checked against Keras's, and the labels and input spec written
beside the file (`vit.onnx` -> `vit.json`, `keras_vit.export.metadata`).

Optional: needs `tf2onnx` and `onnxruntime`, the optional extra
`pip install ".[onnx]"` in a checkout, not required dependencies
of keras_vit.
"""

import functools
import os

import numpy as np

from keras_vit import arg_checks
from keras_vit import extras
from keras_vit import files
from keras_vit.export import metadata as metadata_lib
from keras_vit.export import model_io
from keras_vit.export.report import ExportResult
from keras_vit.export.report import VerificationError

#: The oldest ONNX opset the graph converts to: `Erf` (the exact GELU)
#: arrived in opset 9.
MIN_OPSET = 9


def _require(module):
    """`module` (tf2onnx, onnx, onnxruntime), or `MissingExtraError` naming
    the `onnx` extra."""
    return extras.require(module, "ONNX export")


def available():
    """Whether `tf2onnx` and `onnxruntime` are installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("tf2onnx", "onnxruntime"))


def _tf2onnx_constants():
    _require("tf2onnx")
    from tf2onnx import constants

    return constants


def _tf2onnx_version():
    return _require("tf2onnx").__version__


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
            one = ctx.make_const(
                utils.make_name(f"{node.name}_one"), np.array(1, dtype)
            )
            erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
            node.type = "Sub"
            ctx.replace_inputs(node, [one.output[0], erf.output[0]])


# An ONNX file is one protocol buffer, which cannot exceed 2 GiB; above this
# many bytes of weights (ViT-H/14 has 2.5 GB) they go to a `<file>.data`
# file beside the model, ONNX's external-data format.
EXTERNAL_DATA_BYTES = 2_000_000_000


def _patch_tf2onnx():
    """Keras's numpy-2 fixes for tf2onnx, as `model.export` applies them."""
    try:
        from keras.src.export.tf2onnx_lib import patch_tf2onnx
    except ImportError:  # a Keras that no longer needs (or has) it
        return
    patch_tf2onnx()


def _convert(model, spec, opset):
    """The ONNX `ModelProto` of `model`, its weights as initializers.

    tf2onnx converts a frozen graph: every variable becomes a constant,
    copied by the freezing, by grappler and by each of tf2onnx's optimizer
    passes, which deep-copy the whole graph: time and memory grow with the
    weights' size times the passes. Instead the forward pass is traced
    with the weights as inputs (Keras's `StatelessScope`, as in
    `model.stateless_call`), so the graph that is frozen and optimized
    carries no weights (ViT-B/16 both ways:
    `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`);
    the inputs then become initializers, which ONNX Runtime treats as
    constants (same nodes, same latency). One difference: grappler can no
    longer fold weights whose values make ops no-ops (LayerNorm scales of
    exactly 1, zero biases), which only freshly initialized models have.
    """
    import keras
    import tensorflow as tf

    tf2onnx = _require("tf2onnx")
    numpy_helper = _require("onnx.numpy_helper")

    _patch_tf2onnx()
    weights = list(model.variables)
    names = [f"keras_vit_weight_{i}" for i in range(len(weights))]
    specs = [spec] + [
        tf.TensorSpec(w.shape, w.dtype, name=n) for w, n in zip(weights, names)
    ]

    def forward(images, *values):
        with keras.StatelessScope(state_mapping=list(zip(weights, values))):
            return model(images, training=False)

    proto, _ = tf2onnx.convert.from_function(
        tf.function(forward, input_signature=specs), specs, opset=opset
    )
    by_name = dict(zip(names, weights))
    used = {name for node in proto.graph.node for name in node.input}
    inputs = list(proto.graph.input)
    del proto.graph.input[:]
    for graph_input in inputs:
        weight = by_name.get(graph_input.name)
        if weight is None:  # the images
            proto.graph.input.append(graph_input)
        elif graph_input.name in used:  # not, e.g., a dropout's seed state
            proto.graph.initializer.append(
                numpy_helper.from_array(
                    np.asarray(weight.numpy()), graph_input.name
                )
            )
    return proto


def _weights_bytes(proto):
    return sum(len(t.raw_data) for t in proto.graph.initializer)


def _save(proto, path, external_data):
    """Writes `proto` to `path`, weights beside it as `<name>.data` if asked."""
    onnx = _require("onnx")

    size = _weights_bytes(proto)
    if external_data is None:
        external_data = size > EXTERNAL_DATA_BYTES
    elif not external_data and size >= 1 << 31:
        raise ValueError(
            f"The model's weights ({size / 1e9:.2f} GB) do not fit in one ONNX "
            "file (2 GiB at most); export with external_data=None or True. "
            "Received: external_data=False"
        )
    if external_data:
        onnx.save_model(
            proto,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=os.path.basename(path) + ".data",
        )
    else:
        onnx.save_model(proto, path)
    return external_data


def is_onnx(path):
    """Whether `path` is an ONNX file tf2onnx wrote (which an export may
    replace). An ONNX model is a protocol buffer whose fields are written in
    order: `ir_version` (field 1, a varint) first, then `producer_name`
    (field 2), which tf2onnx sets to "tf2onnx"."""
    try:
        with open(path, "rb") as file:
            head = file.read(32)
    except OSError:
        return False
    return head[:1] == b"\x08" and b"\x12\x07tf2onnx" in head[:16]


def check_output(output, inputs=(), overwrite=False):
    """Checks the paths an ONNX export writes before any work is done: the
    `.onnx` file, its external data (`<output>.data`) and its metadata
    (`x.onnx` -> `x.json`), by the rule of
    `keras_vit.files.check_output_path`. An existing file is replaced only
    if it is an ONNX export (the data file: if the `.onnx` beside it is;
    the metadata: keras_vit's of an ONNX export), or with `overwrite`.

    Returns:
        The `.onnx` path as a string.
    """
    metadata_lib.check_sidecar(output, inputs, overwrite, "onnx")
    output = files.check_output_path(
        output,
        inputs=inputs,
        replaceable=is_onnx,
        overwrite=overwrite,
        replaces="an ONNX model written by tf2onnx",
    )
    files.check_companion_path(
        output + ".data",
        output,
        "data",
        inputs=inputs,
        replaceable=lambda _: is_onnx(output),
        overwrite=overwrite,
        replaces="the external data of an ONNX model at output",
    )
    metadata_lib.check_extension(output, "onnx")
    return output


def export_onnx(
    model,
    output,
    batch_size=1,
    opset=17,
    verify=True,
    atol=1e-4,
    external_data=None,
    overwrite=False,
    labels=None,
):
    """Exports a model to an `.onnx` file for ONNX Runtime, checked.

    The graph takes float32 RGB pixels `[batch, H, W, 3]` (preprocessing
    inside, as in Keras) and returns the model's outputs. With `verify`,
    ONNX Runtime's outputs on random pixels are compared with Keras's before
    the file is moved into place; nothing is left at `output` on failure.
    The model's labels and input spec go to a JSON sidecar (`vit.onnx` ->
    `vit.json`, see `keras_vit.export.metadata`), as for TFLite.
    A mixed-precision model is exported as its float32 copy (see
    `keras_vit.export.float32_copy.float32_model`).

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name.
        output: str, the `.onnx` path; its folder must exist. An earlier
            ONNX export there is replaced; any other file is refused, unless
            `overwrite`. It must not be the model file.
        batch_size: int, the static batch, or `None` for a dynamic batch.
            Defaults to `1`.
        opset: int, the ONNX opset, from `MIN_OPSET` (9) to the newest
            tf2onnx writes (18 in tf2onnx 1.17). Defaults to `17`.
        verify: bool, whether to compare against Keras. Defaults to `True`.
        atol: float, the largest |difference| allowed. Defaults to `1e-4`.
            A larger difference raises `VerificationError` (a `ValueError`).
        external_data: bool or `None`, whether the weights go to a separate
            `<output>.data` file (ONNX's external-data format; keep it
            beside the model). Defaults to `None`: only above
            `EXTERNAL_DATA_BYTES` (2 GB) of weights, since one ONNX file
            cannot exceed 2 GiB (ViT-H/14's weights are 2.5 GB).
        overwrite: bool, whether to replace an existing file at `output`
            (or `<output>.data`, or its sidecar) that is not an ONNX
            export. Defaults to `False`.
        labels: class names: a list, or a text file with one per line.
            Defaults to `None`: the training run's if known, else
            `"class_0"`, ...

    Returns:
        An `ExportResult` (its `report` is `None`: the check raises).

    Example:

    >>> result = export_onnx(keras_vit.ViT_Ti16(), "vit_ti16.onnx")
    """
    output = check_output(
        output,
        [p for p in (model, labels) if isinstance(p, (str, os.PathLike))],
        overwrite,
    )
    opset, atol = _check_arguments(
        batch_size, opset, verify, atol, external_data
    )
    # ONNX Runtime has no bfloat16 kernels on CPU: a mixed-precision model
    # is exported, and checked, as its float32 copy.
    model, class_names = metadata_lib.load_labelled(model, labels)
    _register_erfc()
    x = model_io.check_pixels(model, batch_size)
    # (The model must have been called.)
    expected = np.asarray(model(x, training=False))
    checked = (x, expected, atol) if verify else None
    meta = _write_checked(
        model, batch_size, opset, output, external_data, checked, class_names
    )
    return ExportResult(output, metadata_lib.sidecar_path(output), meta)


def _check_arguments(batch_size, opset, verify, atol, external_data):
    """The checks of `export_onnx`'s arguments; returns `(opset, atol)`."""
    if batch_size is not None:
        arg_checks.positive_int("batch_size", batch_size)
    opset = arg_checks.positive_int("opset", opset)
    highest = max(_tf2onnx_constants().OPSET_TO_IR_VERSION)
    if not MIN_OPSET <= opset <= highest:
        raise ValueError(
            f"`opset` must be between {MIN_OPSET} (ONNX's Erf, for the exact "
            f"GELU) and {highest} (the newest tf2onnx "
            f"{_tf2onnx_version()} writes). Received: opset={opset}"
        )
    atol = arg_checks.non_negative_float("atol", atol)
    arg_checks.boolean("verify", verify)
    if external_data is not None and not isinstance(external_data, bool):
        raise ValueError(
            "external_data must be True, False or None. Received: "
            f"external_data={external_data!r}"
        )
    if verify:
        _require("onnxruntime")
    return opset, atol


def _write_checked(
    model, batch_size, opset, output, external_data, checked, class_names
):
    """Converts `model` and writes it to `output` (and `<output>.data`)
    once ONNX Runtime's outputs on `checked`'s pixels are within its `atol`
    of Keras's (`checked`: `(x, expected, atol)`, or `None`), its metadata
    (with `class_names`) beside it; returns the metadata."""
    import tensorflow as tf

    spec = tf.TensorSpec(
        (batch_size, *model_io.input_spec(model)), tf.float32, name="images"
    )
    # Written in a private folder beside `output` (the model may be two
    # files), checked there, then moved into place: data first, model last,
    # the metadata after them.
    with files.temporary_folder(output) as folder:
        tmp = os.path.join(folder, os.path.basename(output))
        external = _save(_convert(model, spec, opset), tmp, external_data)
        if checked is not None:
            x, expected, atol = checked
            got = run_onnx(tmp, x)
            error = float(np.max(np.abs(got - expected)))
            if not error <= atol:
                raise VerificationError(
                    f"The ONNX export differs from Keras by up to {error:.3g} "
                    f"(limit {atol:g}); {output!r} was not written."
                )
        size = os.path.getsize(tmp)
        if external:
            size += os.path.getsize(tmp + ".data")
        meta = metadata_lib.for_file(
            model, "onnx", "none", class_names, batch_size, size
        )
        _move_into_place(tmp, output, external)
        metadata_lib.write(metadata_lib.sidecar_path(output), meta)
    return meta


def _move_into_place(tmp, output, external):
    """Moves the checked model at `tmp` (and its `.data` if `external`) to
    `output`, data first, with the permissions of a new file. An earlier
    export's metadata is removed first (`metadata.clear_sidecar`): a run
    killed between the two renames, which leaves the new data beside the
    old model, leaves them without metadata too."""
    mode = 0o666 & ~files._umask()  # onnx writes the data file 0600
    metadata_lib.clear_sidecar(metadata_lib.sidecar_path(output))
    if external:
        os.chmod(tmp + ".data", mode)
        os.replace(tmp + ".data", output + ".data")
    os.chmod(tmp, mode)
    os.replace(tmp, output)
    if not external:
        # An earlier export's weights, which the new model does not
        # read (`check_output` allowed replacing them).
        files.remove_file(output + ".data")


def session(path, num_threads=None):
    """An `onnxruntime.InferenceSession` on `path`, all graph optimisations
    on; a `ValueError` naming the file if ONNX Runtime cannot load it."""
    ort = _require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if num_threads:
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(
            path, options, providers=["CPUExecutionProvider"]
        )
    # ONNX Runtime's errors (InvalidProtobuf, Fail, ...) are Exception's
    # own subclasses: a damaged file was a raw traceback.
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            "ONNX Runtime cannot load the ONNX file, damaged or not an ONNX "
            f"model ({type(error).__name__}: {' '.join(str(error).split())}"
            f"). Received: path={os.fspath(path)!r}"
        ) from None


def run_onnx(path, images, num_threads=None):
    """The first output of an `.onnx` model on `images` (float32 pixels)."""
    sess = session(path, num_threads)
    name = sess.get_inputs()[0].name
    return sess.run(None, {name: np.asarray(images, "float32")})[0]
