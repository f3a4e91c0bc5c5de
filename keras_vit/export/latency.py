"""Latency of a model as Keras, as a SavedModel and as each TFLite variant.

`benchmark_export` (`keras-vit benchmark-export`) prints a table; it
asserts nothing. Keras and the SavedModel run in a fresh process per thread
count (TensorFlow fixes its thread pools when it starts): the program
`keras_vit.export.tf_latency`. The TFLite files run in this process with
LiteRT's default interpreter (XNNPACK) and `num_threads`, the ONNX and
OpenVINO files with their runtimes. Every latency follows
`keras_vit.timing`'s rule, as `keras-vit benchmark`'s figures do.
"""

import json
import numbers
import os
import subprocess
import sys
import tempfile

import numpy as np

from keras_vit import arg_checks
from keras_vit import timing
from keras_vit.export import model_io
from keras_vit.export import onnx as onnx_lib
from keras_vit.export import openvino as openvino_lib
from keras_vit.export import runtime
from keras_vit.export import saved_model as saved_model_lib
from keras_vit.export import tflite as tflite_lib
from keras_vit.export.loaded_model import inference_model


def _percentiles(times):
    return timing.percentile(times, 50), timing.percentile(times, 90)


def _folder_bytes(path):
    return sum(
        os.path.getsize(os.path.join(root, f))
        for root, _, names in os.walk(path)
        for f in names
    )


def _latencies(call, runs, warmup):
    """Milliseconds of each of `runs` calls of `call`, after `warmup`."""
    return [1e3 * t for t in timing.latencies(call, runs, warmup)]


def time_tflite(path, num_threads=1, runs=50, warmup=5):
    """Per-call latencies (ms) of a `.tflite` file at its input's batch.

    Runs LiteRT's default interpreter (XNNPACK) on random pixels.

    Args:
        path: the `.tflite` file.
        num_threads: int. Defaults to `1`.
        runs: int, timed calls. Defaults to `50`.
        warmup: int, untimed calls first. Defaults to `5`.

    Returns:
        A list of `runs` latencies in milliseconds.
    """
    interpreter = runtime.load_interpreter(path, "xnnpack", num_threads)
    inp = interpreter.get_input_details()[0]
    shape = [max(int(s), 1) for s in inp["shape_signature"]]
    if int(inp["shape_signature"][0]) <= 0:
        interpreter.resize_tensor_input(inp["index"], shape)
    interpreter.allocate_tensors()
    dtype = np.dtype(inp["dtype"])
    rng = np.random.default_rng(0)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    else:
        x = rng.uniform(0, 255, shape).astype(dtype)
    output = interpreter.get_output_details()[0]["index"]

    def call():
        interpreter.set_tensor(inp["index"], x)
        interpreter.invoke()
        interpreter.get_tensor(output)

    return _latencies(call, runs, warmup)


def time_onnx(path, num_threads=1, runs=50, warmup=5):
    """Per-call latencies (ms) of an `.onnx` file with ONNX Runtime (CPU,
    all graph optimisations) on random pixels at its input's batch."""
    session = onnx_lib.session(path, num_threads)
    inp = session.get_inputs()[0]
    shape = [s if isinstance(s, int) else 1 for s in inp.shape]
    x = np.random.default_rng(0).uniform(0, 255, shape).astype("float32")
    return _latencies(lambda: session.run(None, {inp.name: x}), runs, warmup)


def time_openvino(path, num_threads=1, runs=50, warmup=5, precision="float32"):
    """Per-call latencies (ms) of an OpenVINO `.xml` file with OpenVINO
    Runtime (CPU, computing in `precision`) on random pixels at its
    input's batch."""
    compiled = openvino_lib.compile_openvino(path, precision, num_threads)
    shape = [
        d if d > 0 else 1
        for d in compiled.inputs[0].get_partial_shape().get_min_shape()
    ]
    x = np.random.default_rng(0).uniform(0, 255, shape).astype("float32")
    return _latencies(lambda: compiled(x), runs, warmup)


def benchmark_export(
    model,
    quantizations=tflite_lib.QUANTIZATIONS,
    representative_data="digits",
    threads=(1, 2),
    runs=50,
    warmup=5,
    output_dir=None,
    tensorflow=True,
    onnx="auto",
    openvino="auto",
    print_fn=print,
):
    """Times a model at batch 1 as Keras, SavedModel and TFLite variants.

    Exports the model to every TFLite variant in `quantizations` (batch 1,
    unverified: this measures, it does not check) and to a SavedModel, then
    prints p50 / p90 latency at batch 1 for each thread count, with sizes.

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name.
        quantizations: TFLite variants to time. Defaults to all of
            `QUANTIZATIONS`.
        representative_data: calibration images for `"int8"` /
            `"int16x8"` (see `load_images`). Defaults to `"digits"`.
        threads: thread counts to time. Defaults to `(1, 2)`.
        runs: int, timed calls per row. Defaults to `50`.
        warmup: int, untimed calls first. Defaults to `5`.
        output_dir: an existing folder to keep the exports in (named after
            the model: `<name>_<quantization>.tflite`,
            `<name>_saved_model/`, `<name>.onnx`, `<name>_openvino.xml`,
            each with its metadata); earlier exports of those names are
            replaced, other files of those names refused. Defaults to
            `None`: a temporary folder, removed afterwards.
        tensorflow: bool, whether to time Keras and the SavedModel (in a
            subprocess per thread count). Defaults to `True`.
        onnx: `"auto"`, `True` or `False`: whether to also export the model
            to ONNX (`keras_vit.export.onnx`) and time it with ONNX Runtime,
            the usual peer; `"auto"` does so when `tf2onnx` and
            `onnxruntime` are installed. Defaults to `"auto"`.
        openvino: `"auto"`, `True` or `False`: likewise for OpenVINO
            Runtime (`keras_vit.export.openvino`), computing in float32;
            `"auto"` when `openvino` is installed. Defaults to `"auto"`.
        print_fn: where the table goes. Defaults to `print`.

    Returns:
        A list of dicts with `runtime`, `variant`, `threads`, `p50_ms`,
        `p90_ms` and `bytes`.

    Example:

    >>> benchmark_export("runs/digits/model.keras", threads=(1, 2))
    """
    # Long: its docstring documents eleven arguments; the body is the
    # steps: check, load, export and time each runtime, print.
    threads, runs, onnx, openvino = _check_arguments(
        quantizations,
        threads,
        runs,
        warmup,
        tensorflow,
        onnx,
        openvino,
        output_dir,
    )
    source = model
    model = inference_model(model)
    if any(q in tflite_lib.CALIBRATED for q in quantizations):
        # Loaded, and so checked, once before the first export: a bad
        # source failed after the uncalibrated variants were converted.
        representative_data = tflite_lib.load_calibration(
            model, representative_data
        )
    if output_dir is not None:
        _check_outputs(
            os.fspath(output_dir),
            model.name,
            quantizations,
            tensorflow,
            onnx,
            openvino,
            [source] if isinstance(source, (str, os.PathLike)) else [],
        )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = tmp if output_dir is None else os.fspath(output_dir)
        files = _tflite_variants(
            model, folder, quantizations, representative_data
        )
        if tensorflow:
            rows += _tensorflow_rows(model, tmp, folder, threads, runs, warmup)
        if onnx:
            rows += _onnx_rows(model, folder, threads, runs, warmup)
        if openvino:
            rows += _openvino_rows(model, folder, threads, runs, warmup)
        rows += _tflite_rows(files, threads, runs, warmup)
    if print_fn is not None:
        print_fn(format_table(rows, model))
    return rows


def _onnx_rows(model, folder, threads, runs, warmup):
    """Exports `model` to ONNX in `folder` and times it with ONNX Runtime
    (the size is the `.onnx` and its external `.data` together)."""
    result = onnx_lib.export_onnx(
        model, os.path.join(folder, f"{model.name}.onnx")
    )
    path = result.path
    return _rows(
        "onnxruntime",
        "float32",
        threads,
        result.metadata["file_bytes"],
        lambda t: time_onnx(path, t, runs, warmup),
    )


def _openvino_rows(model, folder, threads, runs, warmup):
    """Exports `model` to OpenVINO IR in `folder` and times it with OpenVINO
    Runtime (the size is the `.xml` and `.bin` together)."""
    result = openvino_lib.export_openvino(
        model, os.path.join(folder, _openvino_name(model.name))
    )
    path = result.path
    return _rows(
        "openvino",
        "float32",
        threads,
        result.metadata["file_bytes"],
        lambda t: time_openvino(path, t, runs, warmup),
    )


def _openvino_name(name):
    """The OpenVINO file of model `name`: not `<name>.xml`, whose metadata
    (`<name>.json`) would be the ONNX file's."""
    return f"{name}_openvino.xml"


def _tflite_rows(files, threads, runs, warmup):
    """Times each TFLite variant in `files` (quantization -> path)."""
    rows = []
    for q, path in files.items():
        # `_rows` calls the lambda before the loop moves on.
        rows += _rows(
            "tflite (xnnpack)",
            q,
            threads,
            os.path.getsize(path),
            lambda t: time_tflite(path, t, runs, warmup),  # noqa: B023
        )
    return rows


def _tflite_variants(model, folder, quantizations, representative_data):
    """`{quantization: path}` of `model` exported unverified to each TFLite
    variant in `folder`."""
    files = {}
    for q in quantizations:
        path = os.path.join(folder, f"{model.name}_{q}.tflite")
        calibration = (
            representative_data if q in tflite_lib.CALIBRATED else None
        )
        tflite_lib.export_tflite(
            model,
            path,
            quantize=q,
            representative_data=calibration,
            verify=False,
        )
        files[q] = path
    return files


def _check_arguments(
    quantizations, threads, runs, warmup, tensorflow, onnx, openvino, output_dir
):
    """`benchmark_export`'s checks, before anything is loaded or exported;
    returns the thread counts, runs, and whether to time ONNX / OpenVINO."""
    if (
        isinstance(quantizations, str)
        or not isinstance(quantizations, (list, tuple))
        or any(q not in tflite_lib.QUANTIZATIONS for q in quantizations)
    ):
        raise ValueError(
            "`quantizations` must be a list of values of "
            f"{list(tflite_lib.QUANTIZATIONS)}. "
            f"Received: quantizations={quantizations!r}"
        )
    if not isinstance(threads, (list, tuple)) or not threads:
        raise ValueError(
            "`threads` must be a list of thread counts. Received: "
            f"threads={threads!r}"
        )
    threads = [arg_checks.positive_int("threads", t) for t in threads]
    runs = arg_checks.positive_int("runs", runs)
    if (
        isinstance(warmup, bool)
        or not isinstance(warmup, numbers.Integral)
        or warmup < 0
    ):
        raise ValueError(
            f"`warmup` must be an integer >= 0. Received: warmup={warmup!r}"
        )
    arg_checks.boolean("tensorflow", tensorflow)
    onnx = arg_checks.one_of("onnx", onnx, ("auto", True, False))
    openvino = arg_checks.one_of("openvino", openvino, ("auto", True, False))
    if output_dir is not None and (
        not isinstance(output_dir, (str, os.PathLike))
        or not os.path.isdir(output_dir)
    ):
        raise ValueError(
            "`output_dir` must be an existing folder. Received: "
            f"output_dir={output_dir!r}"
        )
    if onnx == "auto":
        onnx = onnx_lib.available()
    if openvino == "auto":
        openvino = openvino_lib.available()
    return threads, runs, onnx, openvino


def _rows(runtime, variant, threads, size, time_fn):
    """A table row per thread count: `time_fn(threads)`'s p50 and p90."""
    rows = []
    for t in threads:
        p50, p90 = _percentiles(time_fn(t))
        rows.append(
            dict(
                runtime=runtime,
                variant=variant,
                threads=t,
                p50_ms=p50,
                p90_ms=p90,
                bytes=size,
            )
        )
    return rows


def _tensorflow_rows(model, tmp, folder, threads, runs, warmup):
    """The rows of Keras and the SavedModel: the program
    `keras_vit.export.tf_latency`, in a fresh process per thread count."""
    # The subprocess's copy of the model: not an export, so never in
    # `output_dir` (where it could replace a user's .keras file).
    keras_path = os.path.join(tmp, f"{model.name}.keras")
    model.save(keras_path)
    saved_path = os.path.join(folder, f"{model.name}_saved_model")
    saved_model_lib.export_saved_model(model, saved_path, verify=False)
    sizes = {
        "keras": os.path.getsize(keras_path),
        "saved_model": _folder_bytes(saved_path),
    }
    rows = []
    for t in threads:
        process = subprocess.run(
            [
                sys.executable,
                "-m",
                "keras_vit.export.tf_latency",
                str(t),
                keras_path,
                saved_path,
                str(runs),
                str(warmup),
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        if process.returncode != 0:
            raise RuntimeError(
                "Timing Keras / SavedModel failed:\n" + process.stderr[-3000:]
            )
        timed = json.loads(process.stdout.strip().splitlines()[-1])
        for name, times in timed.items():
            p50, p90 = _percentiles(times)
            rows.append(
                dict(
                    runtime=name,
                    variant="float32",
                    threads=t,
                    p50_ms=p50,
                    p90_ms=p90,
                    bytes=sizes[name],
                )
            )
    return rows


def _check_outputs(
    folder, name, quantizations, tensorflow, onnx, openvino, inputs
):
    """Checks every file `benchmark_export` would keep in `folder`, before
    the first export (see `keras_vit.files.check_output_path`)."""
    for q in quantizations:
        tflite_lib.check_output(
            os.path.join(folder, f"{name}_{q}.tflite"), inputs, None
        )
    if tensorflow:
        saved_model_lib.check_output(
            os.path.join(folder, f"{name}_saved_model"), inputs, None
        )
    if onnx:
        onnx_lib.check_output(
            os.path.join(folder, f"{name}.onnx"), inputs, None
        )
    if openvino:
        openvino_lib.check_output(
            os.path.join(folder, _openvino_name(name)), inputs, None
        )


def format_table(rows, model=None):
    """The rows of `benchmark_export` as a text table."""
    header = ("runtime", "variant", "threads", "p50 ms", "p90 ms", "size")
    lines = []
    if model is not None:
        h, w, c = model_io.input_spec(model)
        lines.append(
            f"{model.name}: {model.count_params():,} parameters, input "
            f"{h}x{w}x{c}, batch 1, {os.cpu_count()} CPU cores"
        )
    body = [
        (
            r["runtime"],
            r["variant"],
            str(r["threads"]),
            f"{r['p50_ms']:.3f}",
            f"{r['p90_ms']:.3f}",
            _size(r["bytes"]),
        )
        for r in rows
    ]
    widths = [
        max(len(r[i]) for r in (header, *body)) for i in range(len(header))
    ]
    for row in (header, *body):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
