"""The checks of a verification and the limits they hold exports to.

Each check is a pure function of what was measured (an op list, byte
counts, outputs) that returns what failed, one sentence each, so that a
report lists every fault at once (`keras_vit.export.verification` runs
them, `keras_vit.export.report` holds the results):

- `op_failures(graph, quantization)`: no Flex or custom op, no unfrozen
  variable, the tensor types of the mode the file claims, for `int8` /
  `int16x8` no float op between the input QUANTIZE and the output
  DEQUANTIZE, no degenerate quantized range;
- `weight_failures(...)`: the bytes of constant data against the parameter
  count (4 bytes per parameter for float32, 2 for float16, about 1 for
  int8 weights; `BYTES_PER_PARAMETER`); `saved_model_weight_failures` for
  a SavedModel's variables;
- `compare(outputs, expected)` (a `Comparison`) and
  `limit_failures(comparisons, limits)`: an export's outputs against
  Keras's, and against the limits.

The limits (`LIMITS`) are on the model's outputs (probabilities for a
classifier): max |Δ| ≤ 1e-4 for float32 and ≤ 1e-2 for float16; quantized
models are held to a top-1 agreement floor with the Keras model: 0.97 for
dynamic-range int8 and int16x8, 0.95 for full int8. On a small ViT trained
on digits (tests/export/test_trained.py; 93% accuracy, 360 test images)
we measured 0.994 (dynamic), 0.983-0.989 (int8, by runtime) and 0.994
(int16x8). The floors are for trained models with a clear top class: on
random weights the classes are near ties and any rounding flips them.
"""

import dataclasses

import numpy as np

from keras_vit import arg_checks
from keras_vit.export import graph as graph_lib

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


def check_limits(min_top1_agreement=None, max_abs=None):
    """Checks the limit overrides of a verification: a top-1 agreement
    floor in [0, 1] and a max |Δ| >= 0, finite (a NaN limit would switch
    its check off); `None` keeps the mode's limit."""
    if min_top1_agreement is not None:
        arg_checks.fraction("min_top1_agreement", min_top1_agreement)
    if max_abs is not None:
        arg_checks.non_negative_float("max_abs", max_abs)


def tflite_limits(quantization, min_top1_agreement=None, max_abs=None):
    """The limits a `.tflite` file made with `quantization` is held to:
    `LIMITS`'s, with the caller's overrides (`None` keeps the mode's)."""
    limits = dict(LIMITS[quantization])
    if min_top1_agreement is not None:
        limits["top1"] = float(min_top1_agreement)
    if max_abs is not None:
        limits["max_abs"] = float(max_abs)
    return limits


def saved_model_limits(dtypes, max_abs=None):
    """The limits a SavedModel is held to: `LIMITS["saved_model"]`, widened
    to `SAVED_MODEL_REDUCED_PRECISION` for a model computing in one of
    `dtypes` (its non-float32 compute dtypes), or the caller's `max_abs`."""
    limits = dict(LIMITS["saved_model"])
    for dtype in dtypes:
        limits["max_abs"] = max(
            limits["max_abs"], SAVED_MODEL_REDUCED_PRECISION.get(dtype, 0.0)
        )
    if max_abs is not None:
        limits["max_abs"] = float(max_abs)
    return limits


def op_failures(graph, quantization):
    """What is wrong with a `.tflite` graph's ops for a file that should be
    of `quantization` (a `keras_vit.export.graph.Graph`); `[]` if nothing."""
    failures = []
    unsupported = graph.unsupported_ops()
    if unsupported:
        failures.append(
            "Flex or custom ops, which a phone's builtin runtime cannot run: "
            + ", ".join(f"{k} (x{v})" for k, v in sorted(unsupported.items()))
        )
    variables = {
        k: v
        for k, v in graph.histogram().items()
        if k in ("VAR_HANDLE", "READ_VARIABLE")
    }
    if variables:
        failures.append(
            "resource-variable ops ("
            + ", ".join(f"{k} x{v}" for k, v in sorted(variables.items()))
            + "): the weights were not frozen into the file"
        )
    detected = graph_lib.detect_quantization(graph)
    if detected != quantization:
        failures.append(
            f"the file's tensor types say quantization {detected!r}, not "
            f"{quantization!r}"
        )
    if quantization in ("int8", "int16x8"):
        floats = graph.float_ops()
        if floats:
            failures.append(
                "float ops inside a fully quantized graph: "
                + ", ".join(f"{k} (x{v})" for k, v in sorted(floats.items()))
            )
    degenerate = graph.degenerate_ranges()
    if degenerate:
        failures.append(
            f"{len(degenerate)} quantized activation(s) hold a range of a "
            "single "
            f"value (narrower than {graph_lib.MIN_RANGE:g}): "
            + ", ".join(degenerate[:4])
            + (" ..." if len(degenerate) > 4 else "")
            + " (a constant output, such as a new model's zero head); "
            "LiteRT's reference kernels abort on them, so they were not run"
        )
    return failures


def weight_failures(weight_bytes, parameters, quantization):
    """Whether a `.tflite` file's `weight_bytes` of constants are what
    `parameters` take in `quantization` (`BYTES_PER_PARAMETER`); a file
    that lost its weights has almost none. `[]` if they are."""
    low, high = BYTES_PER_PARAMETER[quantization]
    ratio = (
        weight_bytes / parameters
        if weight_bytes is not None and parameters
        else None
    )
    if ratio is None or low <= ratio <= high:
        return []
    return [
        f"{weight_bytes:,} bytes of constants for {parameters:,} "
        f"parameters ({ratio:.2f} bytes/parameter; expected "
        f"{low:g}-{high:g} for {quantization!r})"
        + (": the weights are missing" if ratio < low / 2 else "")
    ]


def saved_model_weight_failures(weight_bytes, parameters, held):
    """Whether a SavedModel's `weight_bytes` of variables hold the Keras
    model's `held` bytes of weights (less than 4 a parameter when int8)."""
    if weight_bytes is not None and weight_bytes < 0.9 * held:
        return [
            f"{weight_bytes:,} bytes of variables for "
            f"{parameters:,} parameters ({held:,} bytes in Keras): "
            "the weights are missing"
        ]
    return []


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


def limit_failures(comparisons, limits):
    """What of `comparisons` (a list of `Comparison`) breaks `limits` (a
    dict like `LIMITS`'s values): non-finite outputs, max |Δ| over
    `max_abs`, top-1 agreement under `top1`. `[]` if nothing."""
    failures = []
    for c in comparisons:
        where = f"{c.runtime} on {c.source}"
        if not np.isfinite(c.max_abs):
            failures.append(f"{where}: NaN or infinite outputs")
            continue
        if limits.get("max_abs") is not None and c.max_abs > limits["max_abs"]:
            failures.append(
                f"{where}: max |Δ| {c.max_abs:.3g} > {limits['max_abs']:g}"
            )
        if limits.get("top1") is not None and c.top1_agreement < limits["top1"]:
            failures.append(
                f"{where}: top-1 agreement {c.top1_agreement:.4f} < "
                f"{limits['top1']:g}"
            )
    return failures
