"""OpenVINO export, for OpenVINO Runtime on CPUs (and OpenVINO Model Server).

The conversion is Keras's own (`model.export(path, format="openvino")`,
which hands the TensorFlow graph to OpenVINO's converter); `export_openvino`
adds what the other exports here do: a static batch if asked, the float32
copy of a mixed-precision model, a check of OpenVINO Runtime's outputs
against Keras's, files moved into place only once checked, and the labels
and input spec beside them (`vit.xml` -> `vit.json`,
`keras_vit.export.metadata`).

The IR (`.xml` graph, `.bin` weights beside it) holds float32 weights; the
precision OpenVINO computes in is chosen when it compiles the model
(`compile_openvino(..., precision=)`). Left to itself OpenVINO computes
in bfloat16 on CPUs with AVX-512 BF16 or AMX, even for a float32 model, so
the precision is always given here.

Optional: needs `openvino` (`pip install ".[openvino]"` in a checkout),
not a required dependency of keras_vit.
"""

import os

import numpy as np

from keras_vit import arg_checks
from keras_vit import extras
from keras_vit import files
from keras_vit.export import metadata as metadata_lib
from keras_vit.export import model_io
from keras_vit.export.report import ExportResult
from keras_vit.export.report import VerificationError

#: Compute precisions OpenVINO's CPU plugin takes (its
#: `INFERENCE_PRECISION_HINT`), by Keras's dtype names.
PRECISIONS = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def _require():
    """`openvino`, or `MissingExtraError` naming the `openvino` extra."""
    return extras.require("openvino", "OpenVINO export")


def available():
    """Whether `openvino` is installed."""
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


def compile_openvino(path_or_graph, precision="float32", num_threads=None):
    """An OpenVINO `CompiledModel` for the CPU.

    Args:
        path_or_graph: an `.xml` file or an `openvino.Model`.
        precision: `"float32"`, `"bfloat16"` or `"float16"`: what OpenVINO
            computes in. Defaults to `"float32"`.
        num_threads: int, threads for inference. Defaults to `None`:
            OpenVINO's choice (all cores).

    Raises:
        ValueError: naming the file, if OpenVINO Runtime cannot load it.
    """
    precision = arg_checks.one_of("precision", precision, tuple(PRECISIONS))
    config = {"INFERENCE_PRECISION_HINT": PRECISIONS[precision]}
    if num_threads is not None:
        config["INFERENCE_NUM_THREADS"] = arg_checks.positive_int(
            "num_threads", num_threads
        )
    core = _require().Core()
    if not isinstance(path_or_graph, (str, os.PathLike)):
        return core.compile_model(path_or_graph, "CPU", config)
    try:
        return core.compile_model(os.fspath(path_or_graph), "CPU", config)
    except RuntimeError as error:  # a damaged .xml or .bin: a raw traceback
        raise ValueError(
            "OpenVINO Runtime cannot load the OpenVINO IR (.xml and its "
            f".bin), damaged or not OpenVINO's ({' '.join(str(error).split())}"
            f"). Received: path_or_graph={os.fspath(path_or_graph)!r}"
        ) from None


def run_openvino(path, images, precision="float32", num_threads=None):
    """The first output of an OpenVINO `.xml` model on `images` (float32
    pixels)."""
    compiled = compile_openvino(path, precision, num_threads)
    return np.asarray(compiled(np.asarray(images, "float32"))[0])


def is_openvino(path):
    """Whether `path` is an OpenVINO IR graph (`<?xml ...?>` then `<net`),
    which an export may replace."""
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return False
    return head.startswith(b"<?xml") and b"<net " in head


def check_output(output, inputs=(), overwrite=False):
    """Checks the paths an OpenVINO export writes before any work is done:
    the `.xml` graph, the `.bin` weights and the metadata (`x.xml` ->
    `x.json`) beside it, by the rule of `keras_vit.files.check_output_path`.
    An existing file is replaced only if it is an OpenVINO graph (the
    `.bin`: if the `.xml` beside it is; the metadata: keras_vit's of an
    OpenVINO export), or with `overwrite`.

    Returns:
        The `.xml` path as a string.
    """
    metadata_lib.check_extension(output, "openvino")  # its .bin's name
    metadata_lib.check_sidecar(output, inputs, overwrite, "openvino")
    output = files.check_output_path(
        output,
        inputs=inputs,
        replaceable=is_openvino,
        overwrite=overwrite,
        replaces="an OpenVINO model",
    )
    files.check_companion_path(
        _weights(output),
        output,
        "weights",
        inputs=inputs,
        replaceable=lambda _: is_openvino(output),
        overwrite=overwrite,
        replaces="the weights of an OpenVINO model at output",
    )
    return output


def export_openvino(
    model,
    output,
    batch_size=1,
    verify=True,
    atol=1e-4,
    overwrite=False,
    labels=None,
):
    """Exports a model to OpenVINO IR (`output` and its `.bin`), checked.

    The graph takes float32 RGB pixels `[batch, H, W, 3]` (preprocessing
    inside, as in Keras) and returns the model's outputs. With `verify`,
    OpenVINO Runtime's float32 outputs on random pixels are compared with
    Keras's before the files are moved into place; nothing is left at
    `output` on failure. The model's labels and input spec go to a JSON
    sidecar (`vit.xml` -> `vit.json`, see `keras_vit.export.metadata`), as
    for TFLite. A mixed-precision model is exported as its float32
    copy (`keras_vit.export.float32_copy.float32_model`); compile it with
    `precision="bfloat16"` to compute in bfloat16.

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name.
        output: str, the `.xml` path; its folder must exist. The weights go
            to the `.bin` file of the same name beside it. An earlier
            OpenVINO export there is replaced; any other file is refused,
            unless `overwrite`. Neither may be the model file.
        batch_size: int, the static batch, or `None` for a dynamic batch.
            Defaults to `1`.
        verify: bool, whether to compare against Keras. Defaults to `True`.
        atol: float, the largest |difference| allowed. Defaults to `1e-4`.
            A larger difference raises `VerificationError` (a `ValueError`).
        overwrite: bool, whether to replace existing files at `output`, its
            `.bin` and its sidecar that are not an OpenVINO export.
            Defaults to `False`.
        labels: class names: a list, or a text file with one per line.
            Defaults to `None`: the training run's if known, else
            `"class_0"`, ...

    Returns:
        An `ExportResult` (its `report` is `None`: the check raises).

    Example:

    >>> result = export_openvino(keras_vit.ViT_Ti16(), "vit_ti16.xml")
    """
    openvino = _require()
    output = check_output(
        output,
        [p for p in (model, labels) if isinstance(p, (str, os.PathLike))],
        overwrite,
    )
    if batch_size is not None:
        arg_checks.positive_int("batch_size", batch_size)
    atol = arg_checks.non_negative_float("atol", atol)
    arg_checks.boolean("verify", verify)
    model, class_names = metadata_lib.load_labelled(model, labels)
    # Written in a private folder beside `output`, checked there, then
    # moved into place: weights first, graph last, the metadata after them.
    with files.temporary_folder(output) as folder:
        tmp = _save_ir(openvino, model, folder, output, batch_size)
        if verify:
            _check(tmp, model, batch_size, atol, output)
        meta = metadata_lib.for_file(
            model,
            "openvino",
            "none",
            class_names,
            batch_size,
            sum(os.path.getsize(p) for p in (tmp, _weights(tmp))),
        )
        _move_into_place(tmp, output)
        metadata_lib.write(metadata_lib.sidecar_path(output), meta)
    return ExportResult(output, metadata_lib.sidecar_path(output), meta)


def _weights(graph):
    """The `.bin` weights file of the `.xml` graph `graph`."""
    return graph[: -len(".xml")] + ".bin"


def _check(path, model, batch_size, atol, output):
    """Raises `VerificationError` unless OpenVINO Runtime's float32
    outputs of the IR at `path` on random pixels are within `atol` of
    Keras's."""
    x = model_io.check_pixels(model, batch_size)
    expected = np.asarray(model(x, training=False))
    error = float(np.max(np.abs(run_openvino(path, x) - expected)))
    if not error <= atol:
        raise VerificationError(
            f"The OpenVINO export differs from Keras by up to {error:.3g} "
            f"(limit {atol:g}); {output!r} was not written."
        )


def _save_ir(openvino, model, folder, output, batch_size):
    """Saves `model` as OpenVINO IR in `folder` under `output`'s name
    (float32 weights; inputs `(batch_size, height, width, channels)`, the
    batch dynamic if `batch_size` is `None`); returns the `.xml` path."""
    keras_graph = os.path.join(folder, "keras.xml")
    model.export(keras_graph, format="openvino", verbose=False)
    graph = openvino.Core().read_model(keras_graph)
    if batch_size is not None:
        graph.reshape([batch_size, *model_io.input_spec(model)])
    tmp = os.path.join(folder, os.path.basename(output))
    openvino.save_model(graph, tmp, compress_to_fp16=False)
    del graph
    return tmp


def _move_into_place(tmp, output):
    """Moves the IR at `tmp` (and its `.bin`) to `output`, weights first,
    with the permissions of a new file. An earlier export's metadata is
    removed first (`metadata.clear_sidecar`): a run killed between the two
    renames, which leaves the new weights beside the old graph, leaves them
    without metadata too."""
    mode = 0o666 & ~files._umask()
    for path in (_weights(tmp), tmp):
        os.chmod(path, mode)
    metadata_lib.clear_sidecar(metadata_lib.sidecar_path(output))
    os.replace(_weights(tmp), _weights(output))
    os.replace(tmp, output)
