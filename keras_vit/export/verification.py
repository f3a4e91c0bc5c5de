"""Verification of exported models against the Keras model they came from.

A conversion that "succeeds" can still produce a file a phone cannot run
(Flex or custom ops), a file without its weights (it returns NaN and raises
nothing), or numbers that drifted. `verify_tflite` checks all three:

1. the op list, read from the flatbuffer (`keras_vit.export.graph`): no
   Flex or custom op, and for `int8` / `int16x8` no float op between the
   input QUANTIZE and the output DEQUANTIZE;
2. the bytes of constant data against the parameter count (4 bytes per
   parameter for float32, 2 for float16, about 1 for int8 weights);
3. the outputs against Keras's on real images, with three LiteRT
   interpreters: the default (builtin kernels with the XNNPACK delegate),
   builtin kernels without delegates, and the reference kernels (on the
   first `REFERENCE_KERNEL_IMAGES` images only, unless a top-1 floor
   applies: they are slow).

`verify_saved_model` reloads a SavedModel in a fresh Python process that
never imports keras_vit and compares its outputs with Keras's.

The limits (`LIMITS`) are on the model's outputs (probabilities for a
classifier): max |Δ| ≤ 1e-4 for float32 and ≤ 1e-2 for float16; quantized
models are held to a top-1 agreement floor with the Keras model: 0.97 for
dynamic-range int8 and int16x8, 0.95 for full int8. On a small ViT trained
on digits (tests/export/test_trained.py; 93% accuracy, 360 test images)
we measured 0.994 (dynamic), 0.983-0.989 (int8, by runtime) and 0.994
(int16x8). The floors are for trained models with a clear top class: on
random weights the classes are near ties and any rounding flips them.
"""

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from keras_vit import validation
from keras_vit.export import graph as graph_lib
from keras_vit.export import models
from keras_vit.export import representative
from keras_vit.options import INTERPRETERS

#: Images per source the reference kernels check when the limit is on max
#: |Δ| only (float32, float16): they are unoptimized loops (ViT-B/16: 13 s
#: an image, against 2.4 s for the builtin kernels and 0.9 s for XNNPACK),
#: so 100 images would take 22 minutes of a B/16 export's 27. A top-1
#: floor (quantized files) needs every image, so it gets them.
REFERENCE_KERNEL_IMAGES = 8

#: Per quantization mode: `max_abs`, the largest |Δ| allowed on the outputs
#: (or `None`), and `top1`, the least top-1 agreement with Keras.
LIMITS = {
    "none": {"max_abs": 1e-4, "top1": None},
    "float16": {"max_abs": 1e-2, "top1": None},
    "dynamic": {"max_abs": None, "top1": 0.97},
    "int8": {"max_abs": None, "top1": 0.95},
    "int16x8": {"max_abs": None, "top1": 0.97},
    "saved_model": {"max_abs": 1e-4, "top1": None},
}

#: The largest |Δ| allowed between a SavedModel and Keras when the model
#: computes in bfloat16 or float16 (a mixed policy): the SavedModel runs the
#: same reduced-precision ops, whose rounding (unit roundoff 2^-8 and
#: 2^-11) changes with the kernels TensorFlow picks. Measured on the demo's
#: Fashion-MNIST model, 200 test images: 1.5e-2 under mixed_bfloat16 (one
#: near-tie of 200 flipped) and 8.8e-4 under mixed_float16, where the float32
#: limit is 1e-4.
SAVED_MODEL_REDUCED_PRECISION = {"bfloat16": 5e-2, "float16": 5e-3}

#: Per quantization mode, the range of constant bytes per parameter a sound
#: file has. float32 weights take 4 bytes, float16 2 and int8 1; int8 and
#: int16x8 models keep biases in int32 / int64 and dynamic-range models keep
#: small tensors (under 1024 values: biases, norms) in float32, hence the
#: ranges. A file without its weights has almost none.
BYTES_PER_PARAMETER = {
    "none": (3.8, 4.4),
    "float16": (1.9, 2.4),
    "dynamic": (0.95, 4.4),
    "int8": (0.95, 2.0),
    "int16x8": (0.95, 3.0),
}


class VerificationError(ValueError):
    """An exported model failed verification (the message says how)."""


@contextlib.contextmanager
def nothing_written(output):
    """Adds to a `VerificationError` raised inside that `output` was not
    written (exports verify a temporary file before moving it into place)."""
    try:
        yield
    except VerificationError as error:
        raise VerificationError(
            f"{error}\nNothing was written to {output!r}; pass verify=False "
            "(--no-verify) to keep an unverified export."
        ) from None


@dataclasses.dataclass
class Comparison:
    """Outputs of one runtime against Keras's on one image source.

    Attributes:
        source: where the images came from.
        runtime: `"xnnpack"`, `"builtin"`, `"reference"` (LiteRT), or a
            SavedModel signature.
        num_images: images compared.
        max_abs: largest |Δ| of the outputs.
        mean_abs: mean |Δ| of the outputs.
        top1_agreement: fraction of images with the same top-1 class.
        accuracy: top-1 accuracy of the export against the labels, or
            `None` without labels.
        reference_accuracy: the Keras model's accuracy, or `None`.
    """

    source: str
    runtime: str
    num_images: int
    max_abs: float
    mean_abs: float
    top1_agreement: float
    accuracy: float = None
    reference_accuracy: float = None


@dataclasses.dataclass
class VerificationReport:
    """The result of verifying one export.

    Attributes:
        path: the exported file or folder.
        format: `"tflite"` or `"saved_model"`.
        quantization: the quantization mode checked against.
        parameters: the Keras model's parameter count.
        file_bytes: size of the file (TFLite).
        weight_bytes: bytes of constant data in it (TFLite).
        op_histogram: `{op name: count}` (TFLite).
        comparisons: a list of `Comparison`.
        failures: what failed, one sentence each; empty if it passed.
        limits: the limits applied (see `LIMITS`).
        xnnpack_partitions: how many pieces LiteRT's XNNPACK delegate runs
            the graph in (see `xnnpack_partitions`; TFLite).
    """

    path: str
    format: str
    quantization: str
    parameters: int
    file_bytes: int = None
    weight_bytes: int = None
    op_histogram: dict = None
    comparisons: list = dataclasses.field(default_factory=list)
    failures: list = dataclasses.field(default_factory=list)
    limits: dict = None
    xnnpack_partitions: int = None

    @property
    def passed(self):
        return not self.failures

    @property
    def bytes_per_parameter(self):
        if self.weight_bytes is None or not self.parameters:
            return None
        return self.weight_bytes / self.parameters

    def summary(self):
        """The report as text: sizes, ops, a table of comparisons, verdict."""
        lines = [f"{self.format} {self.path} (quantization: {self.quantization})"]
        if self.file_bytes is not None:
            lines.append(
                f"  {'file' if self.format == 'tflite' else 'folder'} "
                f"{self.file_bytes:,} bytes; "
                f"{'constants' if self.format == 'tflite' else 'variables'} "
                f"{self.weight_bytes:,} "
                f"bytes for {self.parameters:,} parameters "
                f"({self.bytes_per_parameter:.2f} bytes/parameter)"
            )
        if self.op_histogram:
            ops = ", ".join(f"{k} {v}" for k, v in sorted(
                self.op_histogram.items(), key=lambda kv: (-kv[1], kv[0])))
            lines.append(f"  ops: {ops}")
        if self.xnnpack_partitions is not None:
            lines.append(
                f"  XNNPACK delegate: {self.xnnpack_partitions} partition(s)"
                + (" (the whole graph)" if self.xnnpack_partitions == 1 else
                   " (ops between them run on LiteRT's builtin kernels)")
            )
        if self.comparisons:
            header = ("source", "runtime", "images", "max|Δ|", "mean|Δ|", "top-1 agree", "accuracy (keras)")
            rows = [
                (
                    c.source,
                    c.runtime,
                    str(c.num_images),
                    f"{c.max_abs:.2e}",
                    f"{c.mean_abs:.2e}",
                    f"{c.top1_agreement:.4f}",
                    "-" if c.accuracy is None
                    else f"{c.accuracy:.4f} ({c.reference_accuracy:.4f})",
                )
                for c in self.comparisons
            ]
            widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
            for row in (header, *rows):
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)))
        limits = self.limits or {}
        stated = [
            f"max|Δ| <= {limits['max_abs']:g}" if limits.get("max_abs") is not None else None,
            f"top-1 agreement >= {limits['top1']:g}" if limits.get("top1") is not None else None,
        ]
        lines.append(f"  limits: {', '.join(s for s in stated if s) or 'none'}")
        if self.failures:
            lines.append("  FAILED:")
            lines.extend(f"  - {f}" for f in self.failures)
        else:
            lines.append("  passed")
        return "\n".join(lines)


def _interpreter(path, runtime="xnnpack", num_threads=None):
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_litert.interpreter import OpResolverType

    if runtime not in INTERPRETERS:
        raise ValueError(
            f"`runtime` must be one of {list(INTERPRETERS)}. "
            f"Received: runtime={runtime!r}"
        )
    try:
        return Interpreter(
            model_path=os.fspath(path),
            num_threads=num_threads,
            experimental_op_resolver_type=getattr(OpResolverType, INTERPRETERS[runtime]),
        )
    except (ValueError, RuntimeError) as error:  # a file LiteRT cannot load
        raise ValueError(
            f"LiteRT cannot load the TFLite file ({error}). "
            f"Received: {os.fspath(path)!r}"
        ) from None


def xnnpack_partitions(path, num_threads=1):
    """How many pieces LiteRT's XNNPACK delegate runs a `.tflite` graph in.

    `1` means XNNPACK takes the whole graph. Every op it cannot take (for
    example a `STRIDED_SLICE` with `shrink_axis_mask`) runs on LiteRT's
    builtin kernels and splits the graph: each piece is threaded on its own
    and the hand-offs cost time (keras_vit's float32 ViT-Ti/16 took 2.1x as
    long at 2 threads when every block was cut in two).

    Args:
        path: the `.tflite` file.
        num_threads: int, interpreter threads. Defaults to `1`.

    Returns:
        The number of XNNPACK partitions (`0`: nothing delegated).
    """
    interpreter = _interpreter(path, "xnnpack", num_threads)
    interpreter.allocate_tensors()
    return sum(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details())


def _quantization(details):
    scale, zero_point = details["quantization"]
    if not scale:
        return None
    return {"scale": float(scale), "zero_point": int(zero_point)}


def io_details(path):
    """The input and output dtypes and quantization of a `.tflite` file.

    Returns:
        A dict with `input_dtype`, `output_dtype` (`"float32"`, `"int8"`,
        `"uint8"`...), `input_quantization` and `output_quantization`
        (`{"scale", "zero_point"}` for integer tensors, else `None`), and
        `input_shape` (`-1` for a dynamic batch).
    """
    interpreter = _interpreter(path, "builtin")
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    return {
        "input_dtype": np.dtype(inp["dtype"]).name,
        "output_dtype": np.dtype(out["dtype"]).name,
        "input_quantization": _quantization(inp) if np.dtype(inp["dtype"]).kind in "iu" else None,
        "output_quantization": _quantization(out) if np.dtype(out["dtype"]).kind in "iu" else None,
        "input_shape": [int(s) for s in inp["shape_signature"]],
    }


def run_tflite(path, images, runtime="xnnpack", num_threads=None):
    """Runs a `.tflite` classifier on images with LiteRT.

    Integer inputs are quantized with the input tensor's scale and zero
    point, integer outputs dequantized, so the result compares with Keras's.

    Args:
        path: the `.tflite` file.
        images: float32 `(N, H, W, C)` pixel values.
        runtime: `"xnnpack"` (LiteRT's default), `"builtin"` (no
            delegates) or `"reference"` (reference kernels). Defaults to
            `"xnnpack"`.
        num_threads: int or `None` (1 thread). Defaults to `None`.

    Returns:
        float32 outputs, `(N, ...)`.

    Example:

    >>> probabilities = run_tflite("vit.tflite", images)
    """
    interpreter = _interpreter(path, runtime, num_threads)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    images = np.asarray(images, dtype="float32")
    static = int(inp["shape_signature"][0])
    chunk = static if static > 0 else min(len(images), 32)
    if static <= 0:
        interpreter.resize_tensor_input(inp["index"], [chunk, *images.shape[1:]])
    interpreter.allocate_tensors()
    in_dtype = np.dtype(inp["dtype"])
    in_q = _quantization(inp) if in_dtype.kind in "iu" else None
    out_q = _quantization(out) if np.dtype(out["dtype"]).kind in "iu" else None
    results = []
    for start in range(0, len(images), chunk):
        batch = images[start:start + chunk]
        n = len(batch)
        if n < chunk:
            if static > 0:  # pad a static batch; the padding is dropped
                batch = np.concatenate([batch, np.zeros((chunk - n, *batch.shape[1:]), "float32")])
            else:
                interpreter.resize_tensor_input(inp["index"], [n, *images.shape[1:]])
                interpreter.allocate_tensors()
        if in_q is not None:
            info = np.iinfo(in_dtype)
            batch = np.clip(
                np.round(batch / in_q["scale"]) + in_q["zero_point"], info.min, info.max
            ).astype(in_dtype)
        interpreter.set_tensor(inp["index"], batch.astype(in_dtype, copy=False))
        interpreter.invoke()
        result = interpreter.get_tensor(out["index"])[:n]
        if out_q is not None:
            result = (result.astype("float32") - out_q["zero_point"]) * out_q["scale"]
        results.append(np.asarray(result, dtype="float32"))
    return np.concatenate(results)


def compare(outputs, expected, labels=None, source="", runtime=""):
    """A `Comparison` of `outputs` with `expected` (Keras's)."""
    outputs = np.asarray(outputs, "float64")
    expected = np.asarray(expected, "float64")
    delta = np.abs(outputs - expected)
    if not np.all(np.isfinite(outputs)):
        max_abs = mean_abs = float("inf")
    else:
        max_abs, mean_abs = float(delta.max()), float(delta.mean())
    top1 = outputs.reshape(len(outputs), -1).argmax(-1)
    ref_top1 = expected.reshape(len(expected), -1).argmax(-1)
    accuracy = reference_accuracy = None
    if labels is not None:
        accuracy = float(np.mean(top1 == labels))
        reference_accuracy = float(np.mean(ref_top1 == labels))
    return Comparison(
        source=source,
        runtime=runtime,
        num_images=len(outputs),
        max_abs=max_abs,
        mean_abs=mean_abs,
        top1_agreement=float(np.mean(top1 == ref_top1)),
        accuracy=accuracy,
        reference_accuracy=reference_accuracy,
    )


def _check_limits(report, limits):
    for c in report.comparisons:
        where = f"{c.runtime} on {c.source}"
        if not np.isfinite(c.max_abs):
            report.failures.append(f"{where}: NaN or infinite outputs")
            continue
        if limits.get("max_abs") is not None and c.max_abs > limits["max_abs"]:
            report.failures.append(
                f"{where}: max |Δ| {c.max_abs:.3g} > {limits['max_abs']:g}"
            )
        if limits.get("top1") is not None and c.top1_agreement < limits["top1"]:
            report.failures.append(
                f"{where}: top-1 agreement {c.top1_agreement:.4f} < {limits['top1']:g}"
            )


def _sources(data):
    """`data` as a list of image sources; an empty one is refused (nothing
    would be compared, and the verification would pass vacuously)."""
    sources = list(data) if isinstance(data, (list, tuple)) else [data]
    if not sources or any(s is None for s in sources):
        raise ValueError(
            "`data` must name the images to compare on (a source of "
            f"load_images, or a list of them). Received: data={data!r}"
        )
    return sources


def check_limits(min_top1_agreement=None, max_abs=None):
    """Checks the limit overrides of a verification: a top-1 agreement
    floor in [0, 1] and a max |Δ| >= 0, finite (a NaN limit would switch
    its check off); `None` keeps the mode's limit."""
    if min_top1_agreement is not None:
        validation.fraction("min_top1_agreement", min_top1_agreement)
    if max_abs is not None:
        validation.non_negative_float("max_abs", max_abs)


def _image_sets(data, model, num_images):
    height, width, channels = models.input_spec(model)
    sources = _sources(data)
    return [
        representative.load_images(
            source,
            (height, width),
            channels,
            limit=num_images,
            split="test",
            name="data",
            value_range=(0.0, 255.0) if models.takes_pixels(model) else None,
        )
        for source in sources
    ]


def _reference_outputs(model, images):
    """Keras's outputs, called eagerly in chunks of 32 (no retracing)."""
    import keras

    return np.concatenate([
        np.asarray(keras.ops.convert_to_numpy(model(images[i:i + 32], training=False)), "float32")
        for i in range(0, len(images), 32)
    ])


def verify_tflite(path, reference, data="digits", num_images=100,
                  quantization=None, runtimes=tuple(INTERPRETERS),
                  min_top1_agreement=None, max_abs=None, num_threads=None,
                  raise_on_failure=True):
    """Verifies a `.tflite` file against the Keras model it came from.

    Args:
        path: the `.tflite` file.
        reference: the Keras model (or a `.keras` file or builder name, see
            `load_model`).
        data: images to compare on: a source of `load_images` or a list of
            them. Defaults to `"digits"` (its test split, resized).
        num_images: int, the most images per source. Defaults to `100`.
        quantization: the mode the file was made with (see `LIMITS`).
            Defaults to `None`: read from the file's tensor types.
        runtimes: the LiteRT interpreters to run (keys of `INTERPRETERS`).
            Defaults to all three. The reference kernels see only the first
            `REFERENCE_KERNEL_IMAGES` (8) images of each source unless a
            top-1 floor applies (they are slow: 13 s an image for B/16).
        min_top1_agreement: float in [0, 1], overrides the mode's floor.
            Defaults to `None`.
        max_abs: float >= 0, overrides the mode's max |Δ|. Defaults to
            `None`.
        num_threads: int, interpreter threads. Defaults to `None`: every
            CPU core (XNNPACK runs ~1.7x faster at 2 threads than at 1,
            with bitwise the same outputs; the builtin kernels measured
            no faster, and the reference kernels run on one thread).
        raise_on_failure: bool, whether a failure raises. Defaults to
            `True`.

    Returns:
        A `VerificationReport`.

    Raises:
        VerificationError: if a check fails and `raise_on_failure`.

    Example:

    >>> report = verify_tflite("vit.tflite", "runs/digits/model.keras")
    >>> print(report.summary())
    """
    num_images = validation.positive_int("num_images", num_images)
    check_limits(min_top1_agreement, max_abs)
    validation.boolean("raise_on_failure", raise_on_failure)
    num_threads = validation.optional_positive_int("num_threads", num_threads)
    runtimes = tuple(runtimes) if isinstance(runtimes, (list, tuple)) else (runtimes,)
    if not runtimes or any(r not in INTERPRETERS for r in runtimes):
        raise ValueError(
            f"`runtimes` must hold one or more of {list(INTERPRETERS)}. "
            f"Received: runtimes={runtimes!r}"
        )
    _sources(data)
    if quantization is not None and quantization not in BYTES_PER_PARAMETER:
        raise ValueError(
            f"`quantization` must be one of {list(BYTES_PER_PARAMETER)}. "
            f"Received: quantization={quantization!r}"
        )
    graph = graph_lib.read_graph(path)
    detected = graph_lib.detect_quantization(graph)
    quantization = detected if quantization is None else quantization
    # A mixed-precision reference is compared as the float32 model its
    # export converted (see `export_tflite`).
    model = models.float32_model(models.load_model(reference))
    threads = (os.cpu_count() or 1) if num_threads is None else num_threads
    limits = dict(LIMITS[quantization])
    if min_top1_agreement is not None:
        limits["top1"] = float(min_top1_agreement)
    if max_abs is not None:
        limits["max_abs"] = float(max_abs)
    parameters = int(model.count_params())
    report = VerificationReport(
        path=os.fspath(path),
        format="tflite",
        quantization=quantization,
        parameters=parameters,
        file_bytes=graph.file_bytes,
        weight_bytes=graph.weight_bytes,
        op_histogram=dict(graph.histogram()),
        limits=limits,
    )
    # 1. Ops.
    unsupported = graph.unsupported_ops()
    if unsupported:
        report.failures.append(
            "Flex or custom ops, which a phone's builtin runtime cannot run: "
            + ", ".join(f"{k} (x{v})" for k, v in sorted(unsupported.items()))
        )
    variables = {k: v for k, v in report.op_histogram.items() if k in ("VAR_HANDLE", "READ_VARIABLE")}
    if variables:
        report.failures.append(
            "resource-variable ops ("
            + ", ".join(f"{k} x{v}" for k, v in sorted(variables.items()))
            + "): the weights were not frozen into the file"
        )
    if detected != quantization:
        report.failures.append(
            f"the file's tensor types say quantization {detected!r}, not "
            f"{quantization!r}"
        )
    if quantization in ("int8", "int16x8"):
        floats = graph.float_ops()
        if floats:
            report.failures.append(
                "float ops inside a fully quantized graph: "
                + ", ".join(f"{k} (x{v})" for k, v in sorted(floats.items()))
            )
    degenerate = graph.degenerate_ranges()
    if degenerate:
        report.failures.append(
            f"{len(degenerate)} quantized activation(s) hold a range of a single "
            f"value (narrower than {graph_lib.MIN_RANGE:g}): "
            + ", ".join(degenerate[:4]) + (" ..." if len(degenerate) > 4 else "")
            + " (a constant output, such as a new model's zero head); "
            "LiteRT's reference kernels abort on them, so they were not run"
        )
    # 2. Weights.
    low, high = BYTES_PER_PARAMETER[quantization]
    ratio = report.bytes_per_parameter
    if ratio is not None and not low <= ratio <= high:
        report.failures.append(
            f"{graph.weight_bytes:,} bytes of constants for {parameters:,} "
            f"parameters ({ratio:.2f} bytes/parameter; expected "
            f"{low:g}-{high:g} for {quantization!r})"
            + (": the weights are missing" if ratio < low / 2 else "")
        )
    # 3. Outputs.
    if not unsupported:
        report.xnnpack_partitions = xnnpack_partitions(path)
        for images in _image_sets(data, model, num_images):
            expected = _reference_outputs(model, images.images)
            labels = images.labels
            for runtime in runtimes:
                if runtime == "reference" and degenerate:
                    continue  # it would abort the process (see above)
                n = len(expected)
                if runtime == "reference" and limits.get("top1") is None:
                    n = min(n, REFERENCE_KERNEL_IMAGES)
                try:
                    outputs = run_tflite(path, images.images[:n], runtime, threads)
                except RuntimeError as error:  # e.g. an op without a kernel for its type
                    report.failures.append(f"{runtime} cannot run the file: {error}")
                    continue
                report.comparisons.append(compare(
                    outputs, expected[:n], None if labels is None else labels[:n],
                    images.source, runtime,
                ))
    _check_limits(report, limits)
    if report.failures and raise_on_failure:
        raise VerificationError("Verification failed.\n" + report.summary())
    return report


# Run by `verify_saved_model` in a fresh interpreter: TensorFlow only.
_SAVED_MODEL_CHECK = r"""
import json, sys
import numpy as np
import tensorflow as tf

path, images_path, out_path = sys.argv[1:4]
images = np.load(images_path)
loaded = tf.saved_model.load(path)
result = {"signatures": sorted(loaded.signatures.keys())}
arrays = {}
for name, dtype in (("serving_default", tf.float32), ("serving_uint8", tf.uint8)):
    fn = loaded.signatures[name]
    x = images if dtype == tf.float32 else np.round(images).astype("uint8")
    chunks = [fn(images=tf.constant(x[i:i + 16], dtype))
              for i in range(0, len(x), 16)]
    key = sorted(chunks[0])[0]
    arrays[name] = np.concatenate([c[key].numpy() for c in chunks])
    # One image alone: the batch is dynamic.
    arrays[name + "_single"] = fn(images=tf.constant(x[:1], dtype))[key].numpy()
    result["output_key"] = key
result["keras_vit_imported"] = "keras_vit" in sys.modules
np.savez(out_path, **arrays)
print(json.dumps(result))
"""


def verify_saved_model(path, reference, data="digits", num_images=32,
                       max_abs=None, raise_on_failure=True):
    """Verifies a SavedModel in a fresh process that never imports keras_vit.

    The subprocess loads it with `tf.saved_model.load` and runs both
    signatures (`serving_default` on float pixels, `serving_uint8` on the
    same images rounded to uint8) in batches of 16 and on one image alone;
    the outputs are compared with Keras's.

    Args:
        path: the SavedModel folder.
        reference: the Keras model (or a `.keras` file or builder name).
        data: images to compare on (see `load_images`). Defaults to
            `"digits"`.
        num_images: int. Defaults to `32`.
        max_abs: float >= 0, the largest |Δ| allowed. Defaults to `None`: 1e-4,
            or `SAVED_MODEL_REDUCED_PRECISION`'s limit for a model that
            computes in bfloat16 or float16.
        raise_on_failure: bool. Defaults to `True`.

    Returns:
        A `VerificationReport`.

    Raises:
        VerificationError: if a check fails and `raise_on_failure`.
    """
    num_images = validation.positive_int("num_images", num_images)
    check_limits(max_abs=max_abs)
    validation.boolean("raise_on_failure", raise_on_failure)
    _sources(data)
    if not os.path.isfile(os.path.join(os.fspath(path), "saved_model.pb")):
        raise ValueError(
            "Not a SavedModel folder (it holds no saved_model.pb). "
            f"Received: {os.fspath(path)!r}"
        )
    model = models.load_model(reference)
    limits = dict(LIMITS["saved_model"])
    for dtype in models.non_float32_dtypes(model):
        limits["max_abs"] = max(limits["max_abs"], SAVED_MODEL_REDUCED_PRECISION.get(dtype, 0.0))
    if max_abs is not None:
        limits["max_abs"] = float(max_abs)
    variables = os.path.join(os.fspath(path), "variables")
    report = VerificationReport(
        path=os.fspath(path),
        format="saved_model",
        quantization="none",
        parameters=int(model.count_params()),
        file_bytes=_folder_bytes(path),
        weight_bytes=_folder_bytes(variables),
        limits=limits,
    )
    held = models.weight_bytes(model)  # less than 4 a parameter when int8
    if report.weight_bytes is not None and report.weight_bytes < 0.9 * held:
        report.failures.append(
            f"{report.weight_bytes:,} bytes of variables for "
            f"{report.parameters:,} parameters ({held:,} bytes in Keras): "
            "the weights are missing"
        )
    with tempfile.TemporaryDirectory() as tmp:
        for images in _image_sets(data, model, num_images):
            images_path = os.path.join(tmp, "images.npy")
            out_path = os.path.join(tmp, "outputs.npz")
            np.save(images_path, images.images)
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
            process = subprocess.run(
                [sys.executable, "-c", _SAVED_MODEL_CHECK, os.path.abspath(path),
                 images_path, out_path],
                capture_output=True, text=True, cwd=tmp, env=env,
            )
            if process.returncode != 0:
                report.failures.append(
                    "tf.saved_model.load in a fresh process failed:\n"
                    + process.stderr[-3000:]
                )
                break
            info = json.loads(process.stdout.strip().splitlines()[-1])
            if info["keras_vit_imported"]:
                report.failures.append("loading the SavedModel imported keras_vit")
            with np.load(out_path) as arrays:
                outputs = {k: arrays[k] for k in arrays.files}
            expected = _reference_outputs(model, images.images)
            rounded = _reference_outputs(model, np.round(images.images))
            for name, keras_out in (("serving_default", expected), ("serving_uint8", rounded)):
                report.comparisons.append(
                    compare(outputs[name], keras_out, images.labels, images.source, name)
                )
                single = compare(outputs[name + "_single"], keras_out[:1])
                if not single.max_abs <= limits["max_abs"]:
                    report.failures.append(f"{name} on a batch of one: max |Δ| {single.max_abs:.3g}")
    _check_limits(report, limits)
    if report.failures and raise_on_failure:
        raise VerificationError("Verification failed.\n" + report.summary())
    return report


def _folder_bytes(path):
    return sum(
        os.path.getsize(os.path.join(root, f))
        for root, _, names in os.walk(path)
        for f in names
    )


def verify(exported, reference, data="digits", **kwargs):
    """Verifies an export: a `.tflite` file or a SavedModel folder.

    Args:
        exported: the `.tflite` file or SavedModel folder.
        reference: the Keras model it came from (a model, a `.keras` file or
            a builder name).
        data: images to compare on (see `load_images`). Defaults to
            `"digits"`.
        **kwargs: passed to `verify_tflite` or `verify_saved_model`.

    Returns:
        A `VerificationReport`.

    Example:

    >>> print(verify("vit_int8.tflite", "runs/digits/model.keras").summary())
    """
    path = os.fspath(exported)
    if os.path.isdir(path):
        return verify_saved_model(path, reference, data=data, **kwargs)
    if os.path.isfile(path):
        return verify_tflite(path, reference, data=data, **kwargs)
    raise ValueError(
        "`exported` must be a .tflite file or a SavedModel folder. "
        f"Received: exported={path!r}"
    )
