"""Running `.tflite` files with LiteRT: interpreters, inputs, outputs.

The runtime side of verification (`keras_vit.export.verification`) and of
the latency tables (`keras_vit.export.latency`):

- `INTERPRETERS`: the three LiteRT interpreters a file is checked with;
- `load_interpreter(path, runtime)`: one of them for a file;
- `run_tflite(path, images)`: a classifier's float32 outputs, integer
  inputs quantized and outputs dequantized;
- `io_details(path)`: the input and output dtypes and quantization, which
  an export writes to its metadata;
- `xnnpack_partitions(path)`: how many pieces XNNPACK runs the graph in.

`ai_edge_litert` is imported when an interpreter is made, not before.
"""

import os

import numpy as np

from keras_vit import extras
from keras_vit.options import INTERPRETERS


def load_interpreter(path, runtime="xnnpack", num_threads=None):
    """A LiteRT interpreter for a `.tflite` file (tensors not allocated).

    Args:
        path: the `.tflite` file.
        runtime: a key of `INTERPRETERS`. Defaults to `"xnnpack"`.
        num_threads: int or `None` (1 thread). Defaults to `None`.

    Returns:
        An `ai_edge_litert.interpreter.Interpreter`.

    Raises:
        ValueError: for an unknown `runtime`, or a file LiteRT cannot load.
    """
    litert = extras.require(
        "ai_edge_litert.interpreter", "Running a .tflite file (LiteRT)"
    )
    Interpreter = litert.Interpreter
    OpResolverType = litert.OpResolverType

    if runtime not in INTERPRETERS:
        raise ValueError(
            f"`runtime` must be one of {list(INTERPRETERS)}. "
            f"Received: runtime={runtime!r}"
        )
    try:
        return Interpreter(
            model_path=os.fspath(path),
            num_threads=num_threads,
            experimental_op_resolver_type=getattr(
                OpResolverType, INTERPRETERS[runtime]
            ),
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
    and the hand-offs cost time (keras_vit's float32 ViT-Ti/16 with every
    block cut in two: `benchmarks/results/2026-11-29-export-latency-ti16.md`).

    Args:
        path: the `.tflite` file.
        num_threads: int, interpreter threads. Defaults to `1`.

    Returns:
        The number of XNNPACK partitions (`0`: nothing delegated).
    """
    interpreter = load_interpreter(path, "xnnpack", num_threads)
    interpreter.allocate_tensors()
    return sum(
        op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details()
    )


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
        `input_shape` and `output_shape` (`-1` for a dynamic batch).
    """
    interpreter = load_interpreter(path, "builtin")
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    return {
        "input_dtype": np.dtype(inp["dtype"]).name,
        "output_dtype": np.dtype(out["dtype"]).name,
        "input_quantization": _quantization(inp)
        if np.dtype(inp["dtype"]).kind in "iu"
        else None,
        "output_quantization": _quantization(out)
        if np.dtype(out["dtype"]).kind in "iu"
        else None,
        "input_shape": [int(s) for s in inp["shape_signature"]],
        "output_shape": [int(s) for s in out["shape_signature"]],
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
    interpreter = load_interpreter(path, runtime, num_threads)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    images = np.asarray(images, dtype="float32")
    static = int(inp["shape_signature"][0])
    chunk = static if static > 0 else min(len(images), 32)
    if static <= 0:
        interpreter.resize_tensor_input(
            inp["index"], [chunk, *images.shape[1:]]
        )
    interpreter.allocate_tensors()
    in_dtype = np.dtype(inp["dtype"])
    in_q = _quantization(inp) if in_dtype.kind in "iu" else None
    out_q = _quantization(out) if np.dtype(out["dtype"]).kind in "iu" else None
    results = []
    for start in range(0, len(images), chunk):
        batch = images[start : start + chunk]
        n = len(batch)
        if n < chunk:
            if static > 0:  # pad a static batch; the padding is dropped
                batch = np.concatenate(
                    [batch, np.zeros((chunk - n, *batch.shape[1:]), "float32")]
                )
            else:
                interpreter.resize_tensor_input(
                    inp["index"], [n, *images.shape[1:]]
                )
                interpreter.allocate_tensors()
        if in_q is not None:
            info = np.iinfo(in_dtype)
            batch = np.clip(
                np.round(batch / in_q["scale"]) + in_q["zero_point"],
                info.min,
                info.max,
            ).astype(in_dtype)
        interpreter.set_tensor(inp["index"], batch.astype(in_dtype, copy=False))
        interpreter.invoke()
        result = interpreter.get_tensor(out["index"])[:n]
        if out_q is not None:
            result = (result.astype("float32") - out_q["zero_point"]) * out_q[
                "scale"
            ]
        results.append(np.asarray(result, dtype="float32"))
    return np.concatenate(results)
