"""TFLite Metadata: what MediaPipe Tasks and the LiteRT support library
read from a `.tflite` file itself.

The metadata is a flatbuffer of the published schema (tflite-support's,
also shipped by MediaPipe as `mediapipe/tasks/metadata/metadata_schema.fbs`,
file identifier `M001`), stored in one of the model's buffers and named
`TFLITE_METADATA` in the model's `metadata` list. Its associated files (the
class names, one a line, as a `TENSOR_AXIS_LABELS` file) are a zip archive
appended to the model's bytes, as the schema's populator writes them; the
interpreter ignores bytes after the model, and MediaPipe opens the zip.

What it says, for a model `m` (`attach`):

- the model: its name, a description, keras_vit's version; for a model
  built from a preset (`m.weights_preset`) the preset's licence and, in
  the description, its unique name and URL (author only where given).
- input: RGB, the model's height and width, and the `NormalizationOptions`
  that map [0, 255] pixels to what the model takes, `(pixel - mean) / std`
  per channel: mean 0 / std 1 for a model that normalises pixels itself;
  `255 * mean` / `255 * std` for one built with `include_preprocessing=False`
  (its normalisation is on [0, 1] pixels); 127.5 / 127.5 for the paper's
  [-1, 1]. An integer (uint8) input is fed pixels as they are.
- output: named after `keras_vit.export.model_io.output_kind`. A
  probabilities classifier's scores are in [0, 1] (`Stats`); a logits
  classifier's scores are its logits, unnormalised: MediaPipe ranks them
  correctly (softmax keeps the order) and its scores are the logits (the
  output's description says so; take a softmax for probabilities). A
  feature model (`include_top=False`) has no labels: `ImageEmbedder` reads
  the input metadata and takes the output as the embedding.

Only fields of schema version 1.0.0 are written (`min_parser_version`).
"""

import io
import math
import struct
import zipfile

import flatbuffers
import numpy as np
from flatbuffers.number_types import Float32Flags
from flatbuffers.number_types import Uint32Flags
from flatbuffers.table import Table

from keras_vit import registry
from keras_vit.export import model_io
from keras_vit.export import pixel_inputs
from keras_vit.version import __version__

#: The model's `metadata` entry naming the metadata's buffer.
METADATA_NAME = "TFLITE_METADATA"
#: The metadata flatbuffer's file identifier (the schema's
#: `file_identifier`).
METADATA_IDENTIFIER = b"M001"
#: The TFLite model flatbuffer's file identifier.
MODEL_IDENTIFIER = b"TFL3"
#: The label file's name in the appended zip and the metadata.
LABELS_FILE = "labels.txt"
#: The oldest metadata parser that reads every field written here.
MIN_PARSER_VERSION = "1.0.0"

# Enum and union values of the schema.
_TENSOR_AXIS_LABELS = 2  # AssociatedFileType
_RGB = 1  # ColorSpaceType
_FEATURE_PROPERTIES = 1  # ContentProperties
_IMAGE_PROPERTIES = 2  # ContentProperties
_NORMALIZATION_OPTIONS = 1  # ProcessUnitOptions


def pixel_normalization(model):
    """`(mean, std)` per channel that map [0, 255] RGB pixels to `model`'s
    input as `(pixel - mean) / std` (MediaPipe's `NormalizationOptions`)."""
    channels = model_io.input_spec(model)[2]
    if pixel_inputs.takes_pixels(model):
        return [0.0] * channels, [1.0] * channels
    norm = pixel_inputs.normalization(model)
    if norm is None:  # the paper's pixels / 127.5 - 1
        return [127.5] * channels, [127.5] * channels
    return (
        [255.0 * float(m) for m in norm["mean"]],
        [255.0 * float(s) for s in norm["std"]],
    )


def _table(builder, fields):
    """A table of `fields`, `(slot, kind, value)` with `kind` one of
    `"offset"`, `"int8"` or `"uint32"`; `None` values are left out. The
    slot is the field's index in the schema's table (a union field takes
    two: its `_type` byte, then its value)."""
    builder.StartObject(1 + max(slot for slot, _, _ in fields))
    for slot, kind, value in fields:
        if value is None:
            continue
        if kind == "offset":
            builder.PrependUOffsetTRelativeSlot(slot, value, 0)
        elif kind == "int8":
            builder.PrependInt8Slot(slot, value, 0)
        else:
            builder.PrependUint32Slot(slot, value, 0)
    return builder.EndObject()


def _vector(builder, offsets):
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _string(builder, text):
    return None if text is None else builder.CreateString(text)


def _floats(builder, values):
    return builder.CreateNumpyVector(np.asarray(values, "float32"))


def _labels_file(builder):
    # AssociatedFile: name, description, type, locale, version.
    name = builder.CreateString(LABELS_FILE)
    description = builder.CreateString("The class names, one a line.")
    return _table(
        builder,
        [
            (0, "offset", name),
            (1, "offset", description),
            (2, "int8", _TENSOR_AXIS_LABELS),
        ],
    )


def _input_tensor(builder, model):
    height, width, _ = model_io.input_spec(model)
    mean, std = pixel_normalization(model)
    # NormalizationOptions: mean, std. ProcessUnit: options_type, options.
    norm = _table(
        builder,
        [
            (0, "offset", _floats(builder, mean)),
            (1, "offset", _floats(builder, std)),
        ],
    )
    unit = _table(
        builder,
        [(0, "int8", _NORMALIZATION_OPTIONS), (1, "offset", norm)],
    )
    # ImageSize: width, height. ImageProperties: color_space, default_size.
    size = _table(builder, [(0, "uint32", width), (1, "uint32", height)])
    image = _table(builder, [(0, "int8", _RGB), (1, "offset", size)])
    # Content: content_properties_type, content_properties, range.
    content = _table(
        builder, [(0, "int8", _IMAGE_PROPERTIES), (1, "offset", image)]
    )
    name = builder.CreateString("image")
    description = builder.CreateString(
        f"RGB image, {height} x {width}, pixels in [0, 255] mapped to the "
        "model's input as (pixel - mean) / std."
    )
    # TensorMetadata: name, description, dimension_names, content,
    # process_units, stats, associated_files.
    return _table(
        builder,
        [
            (0, "offset", name),
            (1, "offset", description),
            (3, "offset", content),
            (4, "offset", _vector(builder, [unit])),
        ],
    )


#: The output tensor's description, by `model_io.output_kind`.
OUTPUT_DESCRIPTIONS = {
    "probabilities": "Class probabilities (softmax), in [0, 1].",
    "logits": (
        "Class logits, unnormalised: ranked as the probabilities are; "
        "take a softmax for probabilities."
    ),
    "features": "Image embedding (the model's pooled features).",
    "outputs": "Class scores (the classifier's own activation).",
}


def _output_tensor(builder, kind, labelled):
    files = _vector(builder, [_labels_file(builder)]) if labelled else None
    stats = None
    if kind == "probabilities":  # Stats: max, min.
        stats = _table(
            builder,
            [
                (0, "offset", _floats(builder, [1.0])),
                (1, "offset", _floats(builder, [0.0])),
            ],
        )
    # A FeatureProperties table has no fields.
    builder.StartObject(0)
    feature = builder.EndObject()
    content = _table(
        builder, [(0, "int8", _FEATURE_PROPERTIES), (1, "offset", feature)]
    )
    name = builder.CreateString(kind)
    description = builder.CreateString(OUTPUT_DESCRIPTIONS[kind])
    return _table(
        builder,
        [
            (0, "offset", name),
            (1, "offset", description),
            (3, "offset", content),
            (5, "offset", stats),
            (6, "offset", files),
        ],
    )


def _preset(model):
    """The preset record `model`'s weights came from (a `keras_vit.ViT`'s
    `weights_preset`), or `None`."""
    name = getattr(model, "weights_preset", None)
    return None if name is None else registry.named_preset(name)


def metadata_bytes(model, description=None, author=None, licence=None):
    """The metadata flatbuffer of `model`'s `.tflite` file (see the module
    docstring); `description`, `author`, `licence`: strings or `None`. For
    a model built from a preset (`weights_preset`), `licence` defaults to
    the preset's and the default description names the preset and its
    URL."""
    preset = _preset(model)
    if licence is None and preset is not None:
        licence = preset["license"]
    builder = flatbuffers.Builder(1024)
    kind = model_io.output_kind(model)
    labelled = kind != "features"
    inputs = _vector(builder, [_input_tensor(builder, model)])
    outputs = _vector(builder, [_output_tensor(builder, kind, labelled)])
    # SubGraphMetadata: name, description, input_tensor_metadata,
    # output_tensor_metadata, ...
    subgraph = _table(builder, [(2, "offset", inputs), (3, "offset", outputs)])
    if description is None:
        description = (
            "Image embedder" if kind == "features" else "Image classifier"
        ) + f" exported by keras_vit {__version__}."
        if preset is not None:
            description += (
                f" Weights: preset {preset['unique_name']} ({preset['url']})."
            )
    # ModelMetadata: name, description, version, subgraph_metadata, author,
    # license, associated_files, min_parser_version.
    fields = [
        (0, "offset", builder.CreateString(model.name)),
        (1, "offset", builder.CreateString(description)),
        (2, "offset", builder.CreateString(__version__)),
        (3, "offset", _vector(builder, [subgraph])),
        (4, "offset", _string(builder, author)),
        (5, "offset", _string(builder, licence)),
        (7, "offset", builder.CreateString(MIN_PARSER_VERSION)),
    ]
    builder.Finish(_table(builder, fields), METADATA_IDENTIFIER)
    return bytes(builder.Output())


def attach(data, model, class_names=None, **fields):
    """The `.tflite` flatbuffer `data` with `model`'s metadata in a buffer
    named `METADATA_NAME` (replacing an earlier one) and, for a classifier,
    `class_names` as the appended zip's `LABELS_FILE`; `data` as it is for
    a file whose weights follow the flatbuffer (over 2 GB). `fields`: the
    `description`, `author` and `licence` of `metadata_bytes`."""
    # TensorFlow's copy of the model schema, imported here: `import
    # keras_vit` on the JAX or torch backend must not import TensorFlow.
    from tensorflow.lite.python import schema_py_generated as schema

    labelled = model_io.output_kind(model) != "features"
    refuse_line_breaks(class_names if labelled and class_names else ())
    model_t = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    _refuse_integer_input_of_another_scale(model_t, schema)
    if any(b.offset > 1 for b in model_t.buffers):
        # A file over 2 GB keeps its weights after the flatbuffer, at
        # offsets a repacked flatbuffer would no longer match: left as the
        # converter wrote it (its JSON sidecar still says what it takes).
        return data
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(metadata_bytes(model, **fields), dtype="uint8")
    model_t.metadata = [
        entry
        for entry in model_t.metadata or []
        if entry.name.decode() != METADATA_NAME
    ]
    model_t.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = METADATA_NAME
    entry.buffer = len(model_t.buffers) - 1
    model_t.metadata.append(entry)
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model_t.Pack(builder), MODEL_IDENTIFIER)
    out = io.BytesIO(bytes(builder.Output()))
    if labelled:
        # Appended as the schema's populator appends it: zip "a" mode on
        # the model's bytes, offsets from the file's start.
        with zipfile.ZipFile(out, "a") as archive:
            archive.writestr(LABELS_FILE, "\n".join(class_names) + "\n")
    return out.getvalue()


def refuse_line_breaks(class_names):
    """The label file holds one name a line: a name with a line break in
    it would shift every later name by one (in MediaPipe and in `read`).
    `tflite_bytes` asks before converting, `attach` again (it is public)."""
    for index, name in enumerate(class_names):
        if len((name + "\n").splitlines()) != 1:
            raise ValueError(
                "The TFLite Metadata's label file holds one class name a "
                f"line: class name {index} holds a line break. Received: "
                f"class_names[{index}]={name!r}"
            )


def _refuse_integer_input_of_another_scale(model_t, schema):
    """A uint8 input is fed the image's pixels as they are (MediaPipe
    Tasks, the metadata's readers, most apps): refused unless its scale is
    1 and its zero point 0 (`tflite.pinned_input_range` makes it so for a
    model that takes pixels), so no file computes on misread pixels."""
    graph = model_t.subgraphs[0]
    tensor = graph.tensors[graph.inputs[0]]
    if tensor.type != schema.TensorType.UINT8:
        return
    quantization = tensor.quantization
    scale = (
        float(quantization.scale[0]) if quantization.scale is not None else 0.0
    )
    zero = (
        int(quantization.zeroPoint[0])
        if quantization.zeroPoint is not None
        else -1
    )
    if abs(scale - 1.0) > 1e-6 or zero != 0:
        raise ValueError(
            "A uint8 input is fed the image's pixels as they are (MediaPipe "
            "Tasks and the TFLite Metadata's readers do), but this model's "
            f"uint8 input maps to its inputs with scale={scale:g}, "
            f"zero_point={zero} (a model built with "
            "include_preprocessing=False takes normalised values): export it "
            "with io_dtype='float32', or from a model that takes [0, 255] "
            "pixels. Received: io_dtype='uint8'"
        )


def _field(table, slot):
    """The position of field `slot` of `table` (a `flatbuffers.table.Table`)
    in its buffer, or 0 if it (or the table: `None`) is absent."""
    return 0 if table is None else table.Offset(4 + 2 * slot)


def _child(table, slot):
    offset = _field(table, slot)
    if not offset:
        return None
    return Table(table.Bytes, table.Indirect(table.Pos + offset))


def _children(table, slot):
    offset = _field(table, slot)
    if not offset:
        return []
    start = table.Vector(offset)
    return [
        Table(table.Bytes, table.Indirect(start + 4 * i))
        for i in range(table.VectorLen(offset))
    ]


def _text(table, slot):
    offset = _field(table, slot)
    return table.String(table.Pos + offset).decode() if offset else None


def _float_list(table, slot):
    offset = _field(table, slot)
    if not offset:
        return None
    return [float(v) for v in table.GetVectorAsNumpy(Float32Flags, offset)]


def metadata_buffer(data):
    """The metadata flatbuffer in the `.tflite` bytes `data`, or `None`."""
    model = Table(
        data, flatbuffers.encode.Get(flatbuffers.packer.uoffset, data, 0)
    )
    # Model: version, operator_codes, subgraphs, description, buffers,
    # metadata_buffer, metadata, signature_defs.
    buffers = _children(model, 4)
    for entry in _children(model, 6):
        if _text(entry, 0) == METADATA_NAME:
            buffer = buffers[_uint(entry, 1)]
            offset = _field(buffer, 0)
            if offset:
                start = buffer.Vector(offset)
                return bytes(data[start : start + buffer.VectorLen(offset)])
    return None


def _uint(table, slot):
    offset = _field(table, slot)
    return table.Get(Uint32Flags, table.Pos + offset) if offset else 0


def read(data):
    """What `attach` wrote in the `.tflite` bytes `data`, as a dict:
    `name`, `description`, `version`, `author`, `licence`, `input`
    (`height`, `width`, `mean`, `std`), `output_kind` and `class_names`
    (`None` without a label file); `None` if `data` has no metadata."""
    buffer = metadata_buffer(data)
    if buffer is None:
        return None
    if buffer[4:8] != METADATA_IDENTIFIER:
        raise ValueError(
            "The model's TFLITE_METADATA buffer is not TFLite Metadata "
            f"(file identifier {buffer[4:8]!r}, not {METADATA_IDENTIFIER!r})"
        )
    root = Table(
        buffer, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buffer, 0)
    )
    # Another writer's metadata may leave any of these out: `None`.
    subgraph = _first(_children(root, 3))
    image = _first(_children(subgraph, 2))
    size = _child(_child(_child(image, 3), 1), 1)
    norm = _child(_first(_children(image, 4)), 1)
    output = _first(_children(subgraph, 3))
    return {
        "name": _text(root, 0),
        "description": _text(root, 1),
        "version": _text(root, 2),
        "author": _text(root, 4),
        "licence": _text(root, 5),
        "min_parser_version": _text(root, 7),
        "input": {
            "height": _uint(size, 1),
            "width": _uint(size, 0),
            "mean": _float_list(norm, 0),
            "std": _float_list(norm, 1),
        },
        "output_kind": _text(output, 0),
        "class_names": _labels(
            data, [_text(f, 0) for f in _children(output, 6)]
        ),
    }


def _first(tables):
    return tables[0] if tables else None


def _labels(data, names):
    if LABELS_FILE not in names:
        return None
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read(LABELS_FILE).decode().splitlines()


def as_sidecar(path):
    """The TFLite Metadata of the `.tflite` file at `path` in the shape of
    keras_vit's JSON sidecar (`keras_vit.export.metadata.build`), for what
    the metadata says (`format`, `model`, `class_names`, `output.kind`,
    `input` size, `pixel_range` and `normalization`), or `None` if the file
    has none. The image goes in whole, stretched, as MediaPipe feeds it
    (`input.image_resize` `None`): the crop is the sidecar's alone."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        found = read(data)
    # A damaged file fails anywhere in the flatbuffer's offsets (struct,
    # flatbuffers' own TypeError for a number out of range, a cycle's
    # RecursionError), its strings (UnicodeDecodeError) or the zip (a
    # missing member's KeyError, an unknown compression's
    # NotImplementedError).
    except (
        ValueError,
        LookupError,
        NotImplementedError,
        AttributeError,
        TypeError,
        OverflowError,
        RecursionError,
        struct.error,
        zipfile.BadZipFile,
    ) as error:
        raise ValueError(
            "Cannot read the TFLite file's metadata, damaged or not "
            f"keras_vit's ({type(error).__name__}: {error}). Received: "
            f"{path!r}"
        ) from None
    if found is None:
        return None
    spec = found["input"]
    if spec["mean"] is None or found["output_kind"] not in OUTPUT_DESCRIPTIONS:
        raise ValueError(
            "The TFLite file's metadata is not keras_vit's (its input's "
            "normalization or its output's kind is missing). Received: "
            f"{path!r}"
        )
    _refuse_unusable_normalization(spec["mean"], spec["std"], path)
    pixels = spec["mean"] == [0.0] * len(spec["mean"]) and spec["std"] == [
        1.0
    ] * len(spec["std"])
    return {
        "format": "tflite",
        "model": found["name"],
        "class_names": found["class_names"],
        "output": {"kind": found["output_kind"]},
        "input": {
            "height": spec["height"],
            "width": spec["width"],
            "channels": len(spec["mean"]),
            "pixel_range": [0, 255] if pixels else None,
            "normalization": {
                "mean": [m / 255.0 for m in spec["mean"]],
                "std": [s / 255.0 for s in spec["std"]],
            },
            "image_resize": None,
        },
        "batch_size": None,
    }


def _refuse_unusable_normalization(mean, std, path):
    """Another writer's metadata (or a damaged one) may give a mean and
    std that no image can be normalised by: refused by name rather than
    divided by zero or turned into NaN scores."""
    problems = []
    if not all(math.isfinite(m) for m in mean) or len(mean) != len(std):
        problems.append(f"mean={mean} (finite numbers, one per std)")
    if not all(math.isfinite(s) and s > 0 for s in std):
        problems.append(f"std={std} (finite and positive)")
    if problems:
        raise ValueError(
            "The TFLite file's metadata gives a normalization no image can "
            f"take: {', '.join(problems)}. Received: {path!r}"
        )
