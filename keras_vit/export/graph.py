"""What a `.tflite` file holds: its ops, tensor types and weight bytes.

Read straight from the flatbuffer with LiteRT's generated schema
(`ai_edge_litert.schema_py_generated`), not from an interpreter: a file with
Flex or custom ops cannot even be loaded by a builtin-only interpreter, and
an interpreter with XNNPACK applied reports its delegated nodes as one
`DELEGATE` op. The flatbuffer lists every op as the converter wrote it.
"""

import collections
import dataclasses
import os

from keras_vit import extras
from keras_vit.export import tflite_metadata

#: Ops that only move values between float and integer at a model's edges.
CONVERSION_OPS = ("QUANTIZE", "DEQUANTIZE")

#: A quantized activation whose range (scale × the integer levels) is
#: narrower than this is degenerate: calibration saw a single value. The
#: converter gives such a range a width of 2e-6 in int8 (scale 8e-9) and
#: about 0 in int16 (scale 4e-43); real activations span 1e-2 and more.
MIN_RANGE = 1e-5

#: Integer levels of each quantized activation type.
LEVELS = {"INT8": 255, "UINT8": 255, "INT16": 65535}


@dataclasses.dataclass
class Op:
    """One operator: its name and the types of its tensors.

    Attributes:
        name: builtin name (`"FULLY_CONNECTED"`), or the custom code of a
            custom op (`"FlexExtractImagePatches"` for a Flex op).
        custom: whether it is a custom (or Flex) op, not a builtin.
        input_types: type names (`"FLOAT32"`, `"INT8"`...) of the
            non-constant inputs.
        constant_types: type names of the constant inputs (weights).
        output_types: type names of the outputs.
    """

    name: str
    custom: bool
    input_types: tuple
    constant_types: tuple
    output_types: tuple

    @property
    def float_activations(self):
        """Whether a float tensor flows into or out of the op at run time."""
        return any(
            t in ("FLOAT32", "FLOAT16")
            for t in (*self.input_types, *self.output_types)
        )


@dataclasses.dataclass
class Graph:
    """The contents of a `.tflite` file.

    Attributes:
        ops: every `Op` of every subgraph, in order.
        weight_bytes: bytes of constant data (weights, biases, tables).
        weight_types: `Counter` of constant-tensor types, weighted by bytes.
        file_bytes: size of the file.
        ranges: tensor name → the width of its quantized range (its
            smallest scale × its integer levels), for every 8- or 16-bit
            quantized activation (tensors that are not constants).
    """

    ops: list
    weight_bytes: int
    weight_types: collections.Counter
    file_bytes: int
    ranges: dict = dataclasses.field(default_factory=dict)

    def histogram(self):
        """`Counter` of op names."""
        return collections.Counter(op.name for op in self.ops)

    def unsupported_ops(self):
        """`Counter` of the Flex and custom ops (a phone's builtin runtime
        cannot run them)."""
        return collections.Counter(op.name for op in self.ops if op.custom)

    def degenerate_ranges(self, min_range=MIN_RANGE):
        """Quantized activations whose range is narrower than `min_range`:
        a range the calibration saw as (all but) a single value, such as the
        constant logits of a new model's all-zero head. LiteRT's reference
        kernels abort the process on them (TF 2.21), and every value in them
        quantizes to one number."""
        return sorted(
            name for name, width in self.ranges.items() if width < min_range
        )

    def float_ops(self):
        """`Counter` of ops computing on float tensors, other than the
        QUANTIZE / DEQUANTIZE at the edges of an integer model."""
        return collections.Counter(
            op.name
            for op in self.ops
            if op.float_activations and op.name not in CONVERSION_OPS
        )


def _schema():
    """LiteRT's flatbuffer schema (`ai_edge_litert`, the `export` extra)."""
    return extras.require(
        "ai_edge_litert.schema_py_generated", "Reading a .tflite file's graph"
    )


def _type_names():
    schema = _schema()

    return {
        value: key
        for key, value in vars(schema.TensorType).items()
        if not key.startswith("_")
    }


def _builtin_names():
    schema = _schema()

    return {
        value: key
        for key, value in vars(schema.BuiltinOperator).items()
        if not key.startswith("_")
    }


def read_graph(model):
    """Reads the ops and weights of a `.tflite` model.

    Args:
        model: the path of a `.tflite` file, or its bytes.

    Returns:
        A `Graph`.

    Raises:
        ValueError: if the file is missing or not a TFLite flatbuffer.

    Example:

    >>> graph = read_graph("vit.tflite")
    >>> graph.histogram().most_common(3)
    [('FULLY_CONNECTED', 12), ('ADD', 11), ('MUL', 10)]
    """
    schema = _schema()

    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ValueError(
                f"The TFLite file does not exist. Received: {path!r}"
            )
        with open(path, "rb") as file:
            data = file.read()
    else:
        data = bytes(model)
    where = (
        repr(os.fspath(model))
        if isinstance(model, (str, os.PathLike))
        else "<bytes>"
    )
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError(
            f"Not a TFLite flatbuffer (no 'TFL3' identifier). Received: {where}"
        )
    try:
        # The metadata and the label zip appended after the model are read
        # too: a file cut inside them loads in the interpreter.
        tflite_metadata.read(data)
        return _parse(schema, data)
    except Exception as error:  # noqa: BLE001 - a cut flatbuffer fails anywhere
        raise ValueError(
            f"The TFLite file is truncated or corrupt: reading it failed "
            f"({type(error).__name__}: {error}). Received: {where}"
        ) from None


def _operator_codes(schema, root):
    """`[(op name, custom)]` of the file's operator codes, by index."""
    builtin_names = _builtin_names()
    codes = []
    for i in range(root.OperatorCodesLength()):
        code = root.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            codes.append((code.CustomCode().decode("utf-8"), True))
        else:
            codes.append(
                (builtin_names.get(builtin, f"BUILTIN_{builtin}"), False)
            )
    return codes


def _parse(schema, data):
    root = schema.Model.GetRootAs(data, 0)
    type_names = _type_names()
    codes = _operator_codes(schema, root)

    def buffer_bytes(index):
        if index <= 0 or index >= root.BuffersLength():
            return 0
        buffer = root.Buffers(index)
        # Small models keep the data inline; models over 2 GB keep an
        # offset and size into the file instead.
        return buffer.DataLength() or buffer.Size()

    ops = []
    ranges = {}
    weight_bytes = 0
    weight_types = collections.Counter()
    seen_buffers = set()
    for s in range(root.SubgraphsLength()):
        subgraph = root.Subgraphs(s)
        constant = {}
        for t in range(subgraph.TensorsLength()):
            tensor = subgraph.Tensors(t)
            size = buffer_bytes(tensor.Buffer())
            constant[t] = size > 0
            quantization = tensor.Quantization()
            # Activations only: a constant may legitimately hold a single
            # value (LayerNorm's epsilon, 1e-6, has a scale of 8e-9 in
            # int8), and biases (INT32 / INT64) have the derived scale
            # input × weight. Activations are 8- or 16-bit and calibrated.
            levels = LEVELS.get(type_names.get(tensor.Type()))
            if (
                not size
                and levels
                and quantization is not None
                and quantization.ScaleLength()
            ):
                name = tensor.Name().decode("utf-8", "replace")
                ranges[name] = float(quantization.ScaleAsNumpy().min()) * levels
            if size and tensor.Buffer() not in seen_buffers:
                seen_buffers.add(tensor.Buffer())
                weight_bytes += size
                weight_types[
                    type_names.get(tensor.Type(), str(tensor.Type()))
                ] += size

        # Called only in this subgraph's loop below, so its `subgraph` and
        # `constant` are this subgraph's.
        def types(indices, want_constant):
            return tuple(
                type_names.get(subgraph.Tensors(i).Type(), "?")  # noqa: B023
                for i in indices
                if i >= 0 and constant[i] == want_constant  # noqa: B023
            )

        for j in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(j)
            name, custom = codes[op.OpcodeIndex()]
            inputs = list(op.InputsAsNumpy()) if op.InputsLength() else []
            outputs = list(op.OutputsAsNumpy()) if op.OutputsLength() else []
            ops.append(
                Op(
                    name=name,
                    custom=custom,
                    input_types=types(inputs, False),
                    constant_types=types(inputs, True),
                    output_types=types(outputs, False),
                )
            )
    return Graph(
        ops=ops,
        weight_bytes=weight_bytes,
        weight_types=weight_types,
        file_bytes=len(data),
        ranges=ranges,
    )


def op_histogram(model):
    """`Counter` of the op names in a `.tflite` file (path or bytes).

    Example:

    >>> op_histogram("vit.tflite")["FULLY_CONNECTED"]
    12
    """
    return read_graph(model).histogram()


def detect_quantization(graph):
    """The quantization mode a converted graph was made with.

    Returns:
        `"int16x8"` (int16 activations), `"int8"` (int8 activations),
        `"float16"` (float16 weights), `"dynamic"` (int8 weights, float
        activations) or `"none"`.
    """
    compute = [op for op in graph.ops if op.name not in CONVERSION_OPS]
    activation_types = {
        t for op in compute for t in (*op.input_types, *op.output_types)
    }
    if "INT16" in activation_types:
        return "int16x8"
    if "INT8" in activation_types:
        return "int8"
    if "FLOAT16" in graph.weight_types:
        return "float16"
    if "INT8" in graph.weight_types:
        return "dynamic"
    return "none"
