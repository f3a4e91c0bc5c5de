"""The model's labels and input spec, written next to every export.

A phone app needs to know what to feed a model and what its outputs mean.
`keras_vit.export` writes this as JSON: next to a `.tflite`, `.onnx` or
OpenVINO `.xml` file as a sidecar (`model.tflite` -> `model.json`, see
`SIDECAR_FORMATS`), and inside a SavedModel folder as `keras_vit.json`.
The format (all keys always present):

```json
{
  "format": "tflite",
  "keras_vit_version": "0.1.0",
  "model": "vit",
  "num_classes": 10,
  "class_names": ["0", "1", "..."],
  "output": {"kind": "probabilities", "shape": [1, 10], "dtype": "float32"},
  "input": {"shape": [1, 32, 32, 3], "height": 32, "width": 32,
            "channels": 3, "layout": "NHWC", "color": "RGB",
            "dtype": "float32", "pixel_range": [0, 255],
            "normalization": null,
            "image_resize": {"crop_pct": null, "interpolation": "bilinear",
                             "antialias": true},
            "quantization": null},
  "preprocessing": "none: feed RGB pixel values in [0, 255] ...",
  "quantization": "none",
  "batch_size": 1,
  "verified_on": [{"source": "digits (test)", "images": 100,
                   "labelled": false}],
  "output_quantization": null,
  "parameters": 24234,
  "file_bytes": 118072
}
```

`input.normalization` is the model's (`keras_vit.ViT`'s `normalization`):
`null` for the paper's [-1, 1], else `{"mean": [r, g, b], "std": [r, g,
b]}` on [0, 1] pixels; with `pixel_range` [0, 255] the model applies it
itself, with `null` (`include_preprocessing=False`) the inputs must have it
already; `preprocessing` says the same in words.
`input.height` and `input.width` are the size the model was built for,
which `keras-vit predict` resizes images to; `input.shape` is what the
file takes: a SavedModel of a `ViT(dynamic_image_size=True)` takes any
height and width (`[null, null, null, 3]`).
`input.image_resize` is how an image becomes that size, the model's
`image_resize` (`keras_vit.data.resize`; the default for a model that is
no `keras_vit.ViT`): `crop_pct` null squashes the whole image; else the
image is resized, aspect ratio kept, to cover `floor(height / crop_pct)`
x `floor(width / crop_pct)` and the centre `height` x `width` cut out
(timm's evaluation); with `interpolation` (`"bilinear"` or `"bicubic"`)
and `antialias`. Metadata written before it existed describes exports
that were fed squashed images (its default).
`input.quantization` / `output_quantization` are `{"scale", "zero_point"}`
for integer tensors (`export_tflite(..., io_dtype="uint8")`): feed
`round(pixel / scale) + zero_point`, read `(q - zero_point) * scale`.
`verified_on` is what a verified TFLite file or SavedModel was checked
on, per image source (`VerificationReport.data`): `labelled` false means
an agreement with the Keras model and no accuracy (the default digits
carry no labels of another model's classes); `null` for an export
verified on no images (`verify=False`; ONNX and OpenVINO files are
checked against Keras on random pixels).
`file_bytes` counts the model's files: an ONNX model's external `.data`
and an OpenVINO graph's `.bin` included (ONNX and OpenVINO files are
float32: `quantization` is `"none"`, both quantizations `null`). A
SavedModel's file has `signatures` and `output_key` instead of the last
three keys.
"""

import json
import os

from keras_vit import files
from keras_vit.data import datasets
from keras_vit.data import resize
from keras_vit.export import float32_copy
from keras_vit.export import model_io
from keras_vit.export import pixel_inputs
from keras_vit.export import tflite_metadata
from keras_vit.export.loaded_model import inference_model
from keras_vit.training.config import flatten
from keras_vit.training.train import RUN_CONFIG_FILE
from keras_vit.training.train import read_class_names
from keras_vit.version import __version__

SAVED_MODEL_METADATA = "keras_vit.json"

#: The exports whose metadata is a sidecar (`x.tflite` -> `x.json`), by
#: their metadata's `format`: the model file's extension and the format's
#: name in messages. `keras-vit predict` knows them by the extension.
SIDECAR_FORMATS = {
    "tflite": (".tflite", "TFLite"),
    "onnx": (".onnx", "ONNX"),
    "openvino": (".xml", "OpenVINO"),
}


def sidecar_path(path):
    """The metadata file of an export: `x.tflite` -> `x.json`.

    For a SavedModel folder it is `keras_vit.json` inside the folder.

    Example:

    >>> sidecar_path("out/vit_int8.tflite")
    'out/vit_int8.json'
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return os.path.join(path, SAVED_MODEL_METADATA)
    root, _ = os.path.splitext(path)
    return root + ".json"


def sidecar_format(path):
    """The `format` of the metadata beside the model file `path`, by its
    extension (`SIDECAR_FORMATS`), or `None` for any other path.

    Example:

    >>> sidecar_format("out/vit.xml")
    'openvino'
    """
    path = os.fspath(path)
    for fmt, (extension, _) in SIDECAR_FORMATS.items():
        if path.endswith(extension):
            return fmt
    return None


def read_labels(path):
    """Class names from a text file, one per line (blank lines skipped).

    Raises:
        ValueError: if the file does not exist or holds no names.
    """
    if not os.path.isfile(path):
        raise ValueError(
            f"The labels file does not exist. Received: labels={path!r}"
        )
    try:
        with open(path, encoding="utf-8") as file:
            names = [line.strip() for line in file if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(
            f"Cannot read the labels file as UTF-8 text ({error}). "
            f"Received: labels={path!r}"
        ) from None
    if not names:
        raise ValueError(f"The labels file is empty. Received: labels={path!r}")
    return names


def training_run_class_names(model_path):
    """Class names of the training run a `.keras` file came from, or `None`
    (also where `model_path` is not a file).

    `keras-vit train` writes `class_names.json` (the names it trained on,
    in the order of the model's outputs) and `config.json` next to
    `model.keras` and `best.keras`; the names are read from
    `class_names.json`. For a run written before that file existed they
    are derived from its `config.json`'s dataset, as then: for `digits`,
    `fashion_mnist` and `folder:PATH` (the sub-folder names as they are
    now). Other datasets' names are not looked up (that may need the
    network).

    Raises:
        ValueError: if the run's `class_names.json` is not a list of names.
    """
    # A builder's or preset's name is no file: its "folder" would be the
    # current directory, whatever run it holds.
    if not isinstance(model_path, (str, os.PathLike)) or not os.path.isfile(
        model_path
    ):
        return None
    recorded = read_class_names(os.path.dirname(os.fspath(model_path)))
    if recorded is not None:
        return recorded
    dataset = training_run_dataset(model_path)
    if dataset == "digits":
        return [str(d) for d in range(10)]
    if dataset == "fashion_mnist":
        return list(datasets.FASHION_MNIST_CLASSES)
    if isinstance(dataset, str) and dataset.startswith("folder:"):
        images = dataset[len("folder:") :]
        if os.path.isdir(images):
            return datasets.class_folders(images)
    return None


def training_run_dataset(model_path):
    """The dataset the training run of a `.keras` file trained on, as its
    `config.json` names it (`"digits"`, `"folder:PATH"`, a
    `tensorflow_datasets` name), or `None`: no such file or run. The
    commands verify an export of a run's model on its test split when
    not told what to verify on: the model's own labelled images."""
    if not isinstance(model_path, (str, os.PathLike)) or not os.path.isfile(
        model_path
    ):
        return None
    config_path = os.path.join(
        os.path.dirname(os.fspath(model_path)), RUN_CONFIG_FILE
    )
    try:
        with open(config_path, encoding="utf-8") as file:
            # Nested (`data.dataset`), or flat as earlier versions wrote it.
            dataset = flatten(json.load(file)).get("dataset")
    except (OSError, ValueError, AttributeError):
        return None
    return dataset if isinstance(dataset, str) and dataset else None


def class_names(model, labels=None, model_source=None):
    """The class names of `model`'s outputs.

    Args:
        model: the exported `keras.Model`.
        labels: `None`, a list of names, or the path of a text file with one
            name per line. Defaults to `None`.
        model_source: where the model came from (a `.keras` path), to find
            its training run's class names. Defaults to `None`.

    Returns:
        A list of `num_classes` names: `labels`, else the model's own (a
        `keras_vit.ViT`'s `class_names`, its `Preprocessing`'s), else the
        training run's (`class_names.json`, for a `.keras` file saved
        before models carried their names), else `"class_0"`,
        `"class_1"`, ...; `[]` for a feature extractor.

    Raises:
        ValueError: if `labels` holds a different number of names than the
            model has classes.
    """
    if model_io.output_kind(model) == "features":
        return []
    num_classes = int(model.output_shape[-1])
    if labels is not None:
        names = (
            read_labels(labels)
            if isinstance(labels, (str, os.PathLike))
            else [str(n) for n in labels]
        )
        if len(names) != num_classes:
            raise ValueError(
                f"`labels` holds {len(names)} class names but the model has "
                f"{num_classes} classes. Received: labels={labels!r}"
                if isinstance(labels, (str, os.PathLike))
                else f"`labels` holds {len(names)} class names but the model "
                f"has {num_classes} classes."
            )
        return names
    own = getattr(model, "class_names", None)
    if own is not None:
        return list(own)
    names = training_run_class_names(model_source)
    if names is not None and len(names) == num_classes:
        return names
    return model_io.placeholder_class_names(num_classes)


def load_labelled(model, labels=None):
    """`(model, class_names)`: `model` (a `keras.Model`, a `.keras` file
    or a builder name) loaded (`inference_model`) as the float32 copy
    an export holds (`float32_copy.float32_model`), and its `class_names(...,
    labels, model_source=model)` (a training run's, for a `.keras` path).
    """
    loaded = inference_model(model)
    names = class_names(loaded, labels, model)
    return float32_copy.float32_model(loaded), names


def build(
    model,
    fmt,
    quantization,
    class_names,
    input_shape,
    input_dtype,
    output_shape,
    output_dtype="float32",
    input_quantization=None,
    extra=None,
):
    """The metadata dict of one export (see the module docstring)."""

    height, width, channels = model_io.input_spec(model)
    pixels = pixel_inputs.takes_pixels(model)
    metadata = {
        "format": fmt,
        "keras_vit_version": __version__,
        "model": model.name,
        "num_classes": len(class_names),
        "class_names": list(class_names),
        "output": {
            "kind": model_io.output_kind(model),
            "shape": list(output_shape),
            "dtype": output_dtype,
        },
        "input": {
            "shape": list(input_shape),
            "height": height,
            "width": width,
            "channels": channels,
            "layout": "NHWC",
            "color": "RGB",
            "dtype": input_dtype,
            "pixel_range": [0, 255] if pixels else None,
            "normalization": _normalization(model),
            "image_resize": resize.check(resize.of_model(model)),
            "quantization": input_quantization,
        },
        "preprocessing": preprocessing_text(model),
        "quantization": quantization,
        "batch_size": input_shape[0],
        # Filled by an export verified on images (`VerificationReport.data`).
        "verified_on": None,
    }
    if extra:
        metadata.update(extra)
    return metadata


def for_file(
    model, fmt, quantization, class_names, batch_size, file_bytes, io=None
):
    """The sidecar's contents for a model file of format `fmt` (a key of
    `SIDECAR_FORMATS`) at a static `batch_size` (`None`: dynamic).

    Args:
        io: the file's tensors as `keras_vit.export.runtime.io_details`
            gives them for a `.tflite` file, or `None` for float32 input
            and output without quantization (ONNX, OpenVINO). Defaults to
            `None`.
    """
    if io is None:
        io = {
            "input_dtype": "float32",
            "output_dtype": "float32",
            "input_quantization": None,
            "output_quantization": None,
        }
    height, width, channels = model_io.input_spec(model)
    return build(
        model,
        fmt,
        quantization,
        class_names,
        input_shape=[batch_size, height, width, channels],
        input_dtype=io["input_dtype"],
        output_shape=[batch_size, *model.output_shape[1:]],
        output_dtype=io["output_dtype"],
        input_quantization=io["input_quantization"],
        extra={
            "output_quantization": io["output_quantization"],
            "parameters": int(model.count_params()),
            "file_bytes": file_bytes,
        },
    )


def _normalization(model):
    """The model's `normalization` as JSON: `None` (the paper's [-1, 1], or
    a model that is no `keras_vit.ViT`) or per-channel mean and std lists."""
    norm = pixel_inputs.normalization(model)
    return None if norm is None else {k: list(v) for k, v in norm.items()}


def preprocessing_text(model):
    """What to feed the model, in words (the metadata's `preprocessing`):
    the normalisation it applies to [0, 255] pixels itself, or the one its
    inputs must already have."""
    norm = pixel_inputs.normalization(model)
    if norm is None:
        formula = "pixels / 127.5 - 1, in [-1, 1]"
    else:
        formula = (
            f"(pixels / 255 - mean) / std per channel, with "
            f"mean={list(norm['mean'])} and std={list(norm['std'])}"
        )
    if pixel_inputs.takes_pixels(model):
        return (
            "none outside the model: feed RGB pixel values in [0, 255] "
            "(resized to height x width as input.image_resize says); the "
            f"model normalises them itself: {formula}"
        )
    if not hasattr(model, "normalization"):  # not a keras_vit.ViT
        return (
            "the model takes already-normalised inputs (it was built "
            "with include_preprocessing=False)"
        )
    return (
        "the model takes already-normalised inputs (it was built with "
        "include_preprocessing=False): feed RGB pixels in [0, 255] "
        "(resized to height x width as input.image_resize says) as "
        f"{formula}"
    )


def write(path, metadata):
    """Writes `metadata` as JSON to `path`, atomically."""
    files.write_text(path, json.dumps(metadata, indent=2) + "\n")


def read_metadata(path):
    """The metadata of an export (a SavedModel folder, or a `.tflite`,
    `.onnx` or OpenVINO `.xml` file), or `None`. A `.tflite` file without
    its sidecar gives what its own TFLite Metadata says
    (`tflite_metadata.as_sidecar`).

    Raises:
        ValueError: if the metadata file is not a JSON object (it names the
            file).
    """
    sidecar = sidecar_path(path)
    if not os.path.isfile(sidecar):
        if sidecar_format(path) == "tflite" and os.path.isfile(path):
            return tflite_metadata.as_sidecar(path)
        return None
    metadata = _read_json(sidecar)
    if not isinstance(metadata, dict):
        raise ValueError(
            "The export's metadata file is not keras_vit's JSON. Received: "
            f"{sidecar!r}"
        )
    return metadata


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (
        OSError,
        ValueError,
    ) as error:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(
            f"Cannot read the export's metadata file ({error}). Received: "
            f"{path!r}"
        ) from None


def is_metadata(path, fmt=None):
    """Whether `path` is a metadata file keras_vit wrote (of format `fmt`,
    e.g. `"tflite"`, if given), which an export may replace."""
    try:
        metadata = _read_json(path)
    except ValueError:
        return False
    return (
        isinstance(metadata, dict)
        and "keras_vit_version" in metadata
        and (metadata.get("format") == fmt if fmt else "format" in metadata)
    )


def check_sidecar(output, inputs, overwrite, fmt):
    """The sidecar of the model file `output` of format `fmt` (a key of
    `SIDECAR_FORMATS`), checked as outputs are (see
    `keras_vit.files.check_output_path`): it must differ from `output`
    (`vit.json` would be overwritten by its own metadata) and replaces only
    an earlier sidecar of keras_vit's of the same format (`vit.tflite` and
    `vit.onnx` would share `vit.json`: the second export is refused).


    Returns:
        The sidecar's path.
    """
    extension, name = SIDECAR_FORMATS[fmt]
    if not isinstance(output, (str, os.PathLike)):
        raise ValueError(
            f"`output` must be a path. Received: output={output!r}"
        )
    sidecar = sidecar_path(output)
    if os.path.normcase(os.path.abspath(sidecar)) == os.path.normcase(
        os.path.abspath(output)
    ):
        raise ValueError(
            "`output` ends in .json, which is the name of its own metadata "
            f"file (x{extension} -> x.json): the metadata would overwrite "
            f"the model. Name the file {extension}. Received: "
            f"output={os.fspath(output)!r}"
        )
    _refuse_another_exports_sidecar(sidecar, output, fmt)
    return files.check_companion_path(
        sidecar,
        output,
        "metadata",
        inputs=inputs,
        replaceable=lambda p: is_metadata(p, fmt),
        overwrite=overwrite,
        replaces=f"keras_vit's metadata of an export to {name}",
    )


def check_extension(output, fmt):
    """Refuses an `output` of format `fmt` (a key of `SIDECAR_FORMATS`)
    that does not end in its extension: `keras-vit predict` tells the
    formats apart by it (an ONNX model written as `vit.tflite` was run by
    LiteRT, one named `model` taken for a builder name). TFLite files,
    which LiteRT reads by any name, are left to the caller."""
    extension, name = SIDECAR_FORMATS[fmt]
    if not os.fspath(output).endswith(extension):
        raise ValueError(
            f"The {name} export must be a `{extension}` file: `keras-vit "
            f"predict` and its metadata (x{extension} -> x.json) go by the "
            f"name. Received: output={os.fspath(output)!r}"
        )


def _refuse_another_exports_sidecar(sidecar, output, fmt):
    """Refuses, even with `overwrite`, a `sidecar` that is keras_vit's
    metadata of an export of another format than `fmt` (`vit.tflite` and
    `vit.onnx` share `vit.json`): replacing it would leave that export
    without its class names and input spec, which `overwrite` (for files
    keras_vit did not write) does not ask for."""
    if not os.path.isfile(sidecar) or not is_metadata(sidecar):
        return
    other = _read_json(sidecar).get("format")
    if other == fmt:
        return
    raise ValueError(
        f"{sidecar} is the metadata of the {other} export beside it: this "
        f"export's would replace it, leaving that one without its class "
        "names and input spec. Give this export another name. Received: "
        f"output={os.fspath(output)!r}"
    )


def clear_sidecar(sidecar):
    """Removes an export's earlier metadata just before its new model files
    take their place; the new metadata is written right after them
    (`write`). A stop requested by then (`keras_vit.files.request_stop`)
    is honoured first, keeping the old model with its metadata. A run
    stopped, or failing, between the two leaves the new model without
    metadata, which `keras-vit predict` refuses, never the new model beside
    the old model's class names and input size."""
    files.raise_if_stopped()
    files.remove_file(sidecar)
