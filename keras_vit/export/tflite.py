"""TFLite (LiteRT) export: builtin ops only, quantized, verified.

The conversion goes through Keras's own path, `model.export(path,
format="litert", ...)` (an `ExportArchive` SavedModel converted by
`tf.lite.TFLiteConverter.from_saved_model`), with the converter restricted
to LiteRT's builtin ops: Keras enables Flex (SELECT_TF_OPS) by default, and
a phone's runtime cannot run Flex ops.
"""

import os
import re
import tempfile

import numpy as np

from keras_vit import arg_checks
from keras_vit import files
from keras_vit.export import float32_copy
from keras_vit.export import graph as graph_lib
from keras_vit.export import metadata as metadata_lib
from keras_vit.export import model_io
from keras_vit.export import pixel_inputs
from keras_vit.export import report as report_lib
from keras_vit.export import representative
from keras_vit.export import runtime
from keras_vit.export import tflite_metadata
from keras_vit.export import verification as verify_lib
from keras_vit.export import verification_checks
from keras_vit.export.report import ExportResult
from keras_vit.models import model_checks
from keras_vit.options import IO_DTYPES
from keras_vit.options import QUANTIZATIONS

#: Modes that calibrate activation ranges on representative images.
CALIBRATED = ("int8", "int16x8")
#: How many representative images calibrate a quantization, by default.
NUM_CALIBRATION_IMAGES = 100


def converter_options(
    quantize="none", calibration_images=None, io_dtype="float32"
):
    """`tf.lite.TFLiteConverter` settings for a quantization mode.

    Args:
        quantize: one of `QUANTIZATIONS`. Defaults to `"none"`.
        calibration_images: float32 `(N, H, W, C)` images for `"int8"` and
            `"int16x8"`. Defaults to `None`.
        io_dtype: one of `IO_DTYPES`; `"int8"` / `"uint8"` (with
            `quantize="int8"` only) make the model's input and output
            integer tensors. Defaults to `"float32"`.

    Returns:
        A dict of converter attributes, as `model.export(...,
        format="litert", **options)` takes them.
    """
    import tensorflow as tf

    ops = tf.lite.OpsSet
    options = {"target_spec": {"supported_ops": [ops.TFLITE_BUILTINS]}}
    if quantize == "none":
        return options
    options["optimizations"] = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        options["target_spec"]["supported_types"] = [tf.float16]
    elif quantize in CALIBRATED:
        images = calibration_images

        def dataset():
            for image in images:
                yield [image[None].astype("float32")]

        options["representative_dataset"] = dataset
        options["target_spec"]["supported_ops"] = [
            ops.TFLITE_BUILTINS_INT8
            if quantize == "int8"
            else ops.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        ]
        if io_dtype != "float32":
            options["inference_input_type"] = getattr(tf, io_dtype)
            options["inference_output_type"] = getattr(tf, io_dtype)
    return options


def pinned_input_range(model, images):
    """`images` with the model's whole input range in the first: for a
    model that takes [0, 255] pixels, one pixel 0 and one 255. An integer
    input's scale and zero point come from the range calibration saw, so
    this makes a uint8 input the pixels themselves (scale 1, zero point
    0), which is what MediaPipe Tasks and most apps feed it; two pixels of
    one image leave the other ranges as they were."""
    if not pixel_inputs.takes_pixels(model) or not len(images):
        return images
    images = np.array(images, "float32", copy=True)
    images[0, 0, 0, :] = 0.0
    images[0, 0, 1, :] = 255.0
    return images


def _export(model, path, batch_size, options):
    import tensorflow as tf

    height, width, channels = model_io.input_spec(model)
    spec = tf.TensorSpec(
        (batch_size, height, width, channels), tf.float32, name="images"
    )
    model.export(
        path, format="litert", input_signature=[spec], verbose=False, **options
    )


def _flex_ops(model, batch_size):
    """The Flex / custom ops a conversion with Flex allowed produces, or
    `None` if that conversion fails too."""
    import tensorflow as tf

    options = {
        "target_spec": {
            "supported_ops": [
                tf.lite.OpsSet.TFLITE_BUILTINS,
                tf.lite.OpsSet.SELECT_TF_OPS,
            ]
        },
        "allow_custom_ops": True,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "flex.tflite")
        try:
            _export(model, path, batch_size, options)
        except Exception:  # noqa: BLE001 - only a diagnosis
            return None
        return graph_lib.read_graph(path).unsupported_ops()


def _error_lines(error, limit=8):
    """The lines of a converter error that say what went wrong."""
    lines = [
        line.strip()
        for line in str(error).splitlines()
        if re.search(r"error|not supported|failed|unsupported", line, re.I)
    ]
    # The converter repeats a line for every op it fails on.
    lines = list(dict.fromkeys(lines))
    return "\n".join(lines[:limit]) or str(error)[:1000]


def _norm_cause(model, quantize):
    """Why a full-integer conversion of `model` may keep float ops or fail
    (Keras's own normalisation layers), or `""`."""
    norms = (
        float32_copy.keras_norm_layers(model) if quantize in CALIBRATED else []
    )
    if not norms:
        return ""
    return (
        f"\nKeras's normalisation layers {', '.join(norms[:4])}"
        f"{f' ... ({len(norms)} in all)' if len(norms) > 4 else ''} leave "
        "float NEG / SQUARE ops "
        f"under quantize={quantize!r}: write them as keras_vit.layers."
        "LayerNorm does, (x - mean) * rsqrt(mean((x - mean)^2) + epsilon) "
        "* gamma + beta, or export with quantize='dynamic'."
    )


def _refuse_float_ops(graph, model, quantize):
    """Refuses a full-integer (`CALIBRATED`) graph that still computes in
    float: its sidecar would say int8 (or int16x8) of a file that is not,
    and an integer-only accelerator cannot run it. Here, not only in the
    verification, so that `verify=False` cannot write such a file."""
    floats = graph.float_ops() if quantize in CALIBRATED else {}
    if floats:
        listing = ", ".join(f"{k} (x{v})" for k, v in sorted(floats.items()))
        raise ValueError(
            f"quantize={quantize!r} left float ops in the graph of model "
            f"{model.name!r}: {listing}. A fully quantized file computes in "
            f"integers only, so none was written.{_norm_cause(model, quantize)}"
        )


def _refuse_unsupported(unsupported, model):
    listing = ", ".join(
        f"{name} (x{n})" for name, n in sorted(unsupported.items())
    )
    raise ValueError(
        f"Model {model.name!r} needs ops that are not LiteRT builtins: "
        f"{listing}. Phones run builtin ops only (Flex ops need TensorFlow "
        "linked into the app), so the export is refused. Write the layer "
        "with keras.ops (e.g. keras.ops.image.extract_patches rather than "
        "tf.image.extract_patches) or another builtin-convertible op."
    )


def tflite_bytes(
    model,
    quantize="none",
    calibration_images=None,
    batch_size=1,
    io_dtype="float32",
    labels=None,
):
    """Converts a Keras model to TFLite bytes with LiteRT builtin ops only,
    with its TFLite Metadata (`tflite_metadata.attach`), as every `.tflite`
    keras_vit writes.

    Args:
        model: a `keras.Model` with one `(B, H, W, C)` image input.
        quantize: one of `QUANTIZATIONS`. Defaults to `"none"`.
        calibration_images: float32 `(N, H, W, C)` pixel values, needed by
            `"int8"` and `"int16x8"`. Defaults to `None`.
        batch_size: int, the static batch, or `None` for a dynamic batch.
            Defaults to `1`.
        io_dtype: one of `IO_DTYPES`. Defaults to `"float32"`.
        labels: the class names written as the metadata's label file (see
            `keras_vit.export.metadata.class_names`). Defaults to `None`:
            the model's own, else `"class_0"`, ...

    A model computing under a mixed (or other reduced-precision) policy is
    converted as its float32 copy
    (`keras_vit.export.float32_copy.float32_model`): LiteRT's float16 is
    `quantize="float16"`.

    Returns:
        The `.tflite` flatbuffer as `bytes`.

    Raises:
        ValueError: if the conversion needs Flex or custom ops (they are
            named), leaves float ops in an `"int8"` or `"int16x8"` graph
            (named), or fails for another reason (the converter's
            message).

    Example:

    >>> data = tflite_bytes(model, quantize="dynamic")
    """
    quantize = arg_checks.one_of("quantize", quantize, QUANTIZATIONS)
    io_dtype = arg_checks.one_of("io_dtype", io_dtype, IO_DTYPES)
    if quantize in CALIBRATED and calibration_images is None:
        raise ValueError(
            f"quantize={quantize!r} needs representative images to calibrate "
            "activation ranges. Received: representative_data=None"
        )
    model_checks.refuse_quantized(
        model,
        "LiteRT's converter cannot take its int8 layers",
        "convert the float model and let the export quantize it, with "
        "quantize='dynamic' (int8 weights, as Keras's int8) or 'int8' "
        f"(weights and activations; received quantize={quantize!r})",
    )
    class_names = metadata_lib.class_names(model, labels)
    tflite_metadata.refuse_line_breaks(class_names)  # before converting
    model = float32_copy.float32_model(model)
    if quantize in CALIBRATED and io_dtype != "float32":
        calibration_images = pinned_input_range(model, calibration_images)
    options = converter_options(quantize, calibration_images, io_dtype)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.tflite")
        try:
            _export(model, path, batch_size, options)
        except Exception as error:  # noqa: BLE001 - the converter's errors vary
            unsupported = _flex_ops(model, batch_size)
            if unsupported:
                _refuse_unsupported(unsupported, model)
            raise ValueError(
                f"TFLite conversion of model {model.name!r} with "
                f"quantize={quantize!r} failed:\n{_error_lines(error)}"
                f"{_norm_cause(model, quantize)}"
            ) from None
        with open(path, "rb") as file:
            data = file.read()
    _check_graph(graph_lib.read_graph(data), model, quantize)
    return tflite_metadata.attach(data, model, class_names)


def _check_graph(graph, model, quantize):
    """Refuses a converted graph no phone should get, whatever the
    verification: Flex or custom ops, float ops in a full-integer graph,
    and degenerate calibration ranges."""
    unsupported = graph.unsupported_ops()
    if unsupported:
        _refuse_unsupported(unsupported, model)
    _refuse_float_ops(graph, model, quantize)
    degenerate = graph.degenerate_ranges() if quantize in CALIBRATED else []
    if degenerate:
        raise ValueError(
            f"quantize={quantize!r} gave {len(degenerate)} activation(s) of "
            "model "
            f"{model.name!r} a range of a single value (narrower than "
            f"{graph_lib.MIN_RANGE:g}): {', '.join(degenerate[:4])}"
            f"{' ...' if len(degenerate) > 4 else ''}. "
            f"{_degenerate_cause(model)}LiteRT's reference kernels abort on "
            "such a file, so none was written."
        )


def _inputs(model, labels, *image_sources):
    """The files and folders an export reads, which it must not write over."""
    paths = [p for p in (model, labels) if isinstance(p, (str, os.PathLike))]
    return paths + representative.source_paths(list(image_sources))


def _degenerate_cause(model):
    """The likely reason for a degenerate calibration range, or `""`."""
    head = next((layer for layer in model.layers if layer.name == "head"), None)
    kernel = getattr(head, "kernel", None)
    if kernel is not None and not np.any(np.asarray(kernel)):
        return (
            "The model's head is all zeros, as in a new model (the head is "
            "zero-initialised): its logits are constant. Train the model or "
            "load weights before a quantized export. "
        )
    return ""


def is_tflite(path):
    """Whether `path` is a TFLite flatbuffer (which an export may replace)."""
    try:
        with open(path, "rb") as file:
            return file.read(8)[4:8] == b"TFL3"
    except OSError:
        return False


def check_output(output, inputs=(), overwrite=False):
    """Checks the paths a TFLite export writes before any work is done.

    The rule is `keras_vit.files.check_output_path`'s, for the `.tflite`
    file and for its metadata sidecar (`x.tflite` -> `x.json`): neither may
    be one of `inputs`; an existing file there is replaced only if it is a
    TFLite file (for the sidecar: keras_vit's metadata), or with
    `overwrite`; and an output ending in `.json` is refused, since its own
    metadata would overwrite it.

    Args:
        output: the `.tflite` path.
        inputs: paths the export reads. Defaults to `()`.
        overwrite: bool. Defaults to `False`.

    Returns:
        `(output, sidecar)` as strings.
    """
    sidecar = metadata_lib.check_sidecar(output, inputs, overwrite, "tflite")
    output = files.check_output_path(
        output,
        inputs=inputs,
        replaceable=is_tflite,
        overwrite=overwrite,
        replaces="a TFLite file",
    )
    return output, sidecar


def export_tflite(
    model,
    output,
    quantize="none",
    representative_data=None,
    batch_size=1,
    io_dtype="float32",
    labels=None,
    verify=True,
    verify_data="digits",
    num_calibration_images=NUM_CALIBRATION_IMAGES,
    num_verify_images=100,
    min_top1_agreement=None,
    overwrite=False,
):
    """Exports a model to a `.tflite` file for LiteRT, verified.

    The file holds LiteRT builtin ops only. The model's labels and input
    spec go to a JSON sidecar (`model.tflite` -> `model.json`, see
    `keras_vit.export.metadata`). Unless `verify=False`, the converted file
    is checked before it is moved into place (`verify_tflite`): its op list,
    its weight bytes against the parameter count, and its outputs against
    Keras's on real images (and on the representative images) with LiteRT's
    XNNPACK, builtin and reference kernels. Nothing is left at `output` when
    an argument is wrong, the conversion fails or the verification fails,
    and nothing but an earlier TFLite export is replaced (see
    `check_output`).
    A model trained under a mixed policy (`mixed_bfloat16`,
    `mixed_float16`) is exported, and verified, as the same model computing
    in float32 (`keras_vit.export.float32_copy.float32_model`);
    `quantize="float16"` is LiteRT's reduced precision.

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name (see
            `inference_model`).
        output: str, the `.tflite` path; its folder must exist. An existing
            TFLite file there (and its keras_vit sidecar) is replaced; any
            other file is refused, unless `overwrite`. It must not be one
            of the export's inputs.
        quantize: `"none"` (float32), `"float16"` (float16 weights),
            `"dynamic"` (int8 weights, float activations), `"int8"` (full
            integer, calibrated) or `"int16x8"` (int16 activations, int8
            weights, calibrated). Defaults to `"none"`.
        representative_data: images to calibrate `"int8"` / `"int16x8"`
            with: a dataset name, `"folder:PATH"`, an `.npz` or an array
            (see `load_images`; a dataset's train split is used). Also used
            for verification. Defaults to `None`.
        batch_size: int, the static batch of the file, or `None` for a
            dynamic batch. Defaults to `1` (a smaller graph that XNNPACK
            delegates whole; what a phone app wants).
        io_dtype: `"float32"`, or with `quantize="int8"` also `"int8"` or
            `"uint8"` (integer input and output tensors; the input's scale
            and zero point are in the sidecar). Defaults to `"float32"`.
        labels: class names: a list, or a text file with one per line.
            Defaults to `None`: the training run's if known, else
            `"class_0"`, ...
        verify: bool, whether to verify before writing. Defaults to `True`.
        verify_data: images to verify on (see `load_images`; a dataset's
            test split): the model's own, labelled, for an accuracy.
            Defaults to `"digits"`, which checks agreement with the Keras
            model (the report and `verified_on` in the metadata say so).
        num_calibration_images: int, representative images used to
            calibrate. Defaults to `100`.
        num_verify_images: int, images per verification source. Defaults
            to `100`.
        min_top1_agreement: float in [0, 1], overrides the mode's top-1
            agreement floor (`keras_vit.export.verification_checks.LIMITS`).
            Defaults to `None`.
        overwrite: bool, whether to replace an existing file at `output`
            (or its sidecar) that is not a TFLite export. Defaults to
            `False`.

    Returns:
        An `ExportResult`.

    Raises:
        ValueError: for a bad argument, a conversion that needs Flex or
            custom ops, or a failed conversion.
        VerificationError: (a `ValueError`) if verification fails.

    Example:

    >>> export_tflite("runs/digits/model.keras", "vit_int8.tflite",
    ...               quantize="int8", representative_data="digits")
    """
    # Long: over 80 lines for its docstring (thirteen arguments); the body
    # is the steps: check, load, calibrate, convert, verify and write,
    # metadata.
    (
        quantize,
        io_dtype,
        batch_size,
        num_calibration_images,
        num_verify_images,
    ) = _check_arguments(
        quantize,
        io_dtype,
        batch_size,
        verify,
        verify_data,
        representative_data,
        num_calibration_images,
        num_verify_images,
        min_top1_agreement,
    )
    output, meta_path = check_output(
        output,
        _inputs(model, labels, representative_data, verify_data),
        overwrite,
    )
    if quantize in CALIBRATED and representative_data is None:
        raise ValueError(
            f"quantize={quantize!r} needs representative images to calibrate "
            "activation ranges: pass a dataset name, 'folder:PATH' or an .npz. "
            "Received: representative_data=None"
        )
    # A mixed-precision model is exported, and verified, as its float32 copy.
    model, class_names = metadata_lib.load_labelled(model, labels)
    if min_top1_agreement is not None:  # refused before the conversion
        verification_checks.tflite_limits(
            quantize,
            min_top1_agreement,
            output_kind=model_io.output_kind(model),
        )
    calibration = None
    if representative_data is not None:
        calibration = load_calibration(
            model, representative_data, num_calibration_images, class_names
        )
    data = tflite_bytes(
        model,
        quantize,
        None if calibration is None else calibration.images,
        batch_size,
        io_dtype,
        class_names,
    )
    sources = None
    if verify:
        sources = [verify_data] if verify_data is not None else []
        if calibration is not None:
            sources.append(calibration)
    report, io, file_bytes = _write_verified(
        output,
        data,
        model,
        quantize,
        sources,
        num_verify_images,
        min_top1_agreement,
        meta_path,
        class_names,
    )
    meta = metadata_lib.for_file(
        model, "tflite", quantize, class_names, batch_size, file_bytes, io
    )
    if report is not None:
        meta["verified_on"] = report.data()
    metadata_lib.write(meta_path, meta)
    return ExportResult(output, meta_path, meta, report)


def _write_verified(
    output,
    data,
    model,
    quantize,
    sources,
    num_images,
    min_top1_agreement,
    sidecar,
    class_names=None,
):
    """Writes the flatbuffer `data` (with its TFLite Metadata, as
    `tflite_bytes` returns it) to `output` once `verify_tflite` has
    passed it on `sources` (`None`: unverified; a labelled folder's
    classes matched to `class_names`, the export's); nothing is left at
    `output` if it fails. Returns `(report or None, io_details,
    file_bytes)`.

    An earlier `sidecar` (metadata file) is removed just before the new
    model takes `output`'s place (`metadata.clear_sidecar`), its own
    metadata written after."""
    report = None
    with files.atomic_file(output, suffix=".tflite") as tmp:
        with open(tmp, "wb") as file:
            file.write(data)
        if sources is not None:
            with report_lib.nothing_written(output):
                report = verify_lib.verify_tflite(
                    tmp,
                    model,
                    verbose=0,  # the export prints its report
                    data=sources,
                    num_images=num_images,
                    quantization=quantize,
                    min_top1_agreement=min_top1_agreement,
                    class_names=class_names,
                )
            report.path = output
        io = runtime.io_details(tmp)
        metadata_lib.clear_sidecar(sidecar)
    return report, io, len(data)


def _check_arguments(
    quantize,
    io_dtype,
    batch_size,
    verify,
    verify_data,
    representative_data,
    num_calibration_images,
    num_verify_images,
    min_top1_agreement,
):
    """The checks of `export_tflite`'s arguments that need no file; returns
    `(quantize, io_dtype, batch_size, num_calibration_images,
    num_verify_images)` as checked."""
    quantize = arg_checks.one_of("quantize", quantize, QUANTIZATIONS)
    io_dtype = arg_checks.one_of("io_dtype", io_dtype, IO_DTYPES)
    if io_dtype != "float32" and quantize != "int8":
        raise ValueError(
            "Integer input and output need full-integer quantization "
            f"(quantize='int8'). Received: io_dtype={io_dtype!r} with "
            f"quantize={quantize!r}"
        )
    if batch_size is not None:
        batch_size = arg_checks.positive_int("batch_size", batch_size)
    arg_checks.boolean("verify", verify)
    num_calibration_images = arg_checks.positive_int(
        "num_calibration_images", num_calibration_images
    )
    num_verify_images = arg_checks.positive_int(
        "num_verify_images", num_verify_images
    )
    verification_checks.check_limits(min_top1_agreement)
    if not verify and min_top1_agreement is not None:
        raise ValueError(
            "`min_top1_agreement` is a limit of the verification, which "
            "verify=False skips. Received: "
            f"min_top1_agreement={min_top1_agreement!r}"
        )
    if verify and verify_data is None and representative_data is None:
        raise ValueError(
            "The verification needs images: pass `verify_data` (or "
            "`representative_data`), or verify=False. Received: "
            "verify_data=None"
        )
    return (
        quantize,
        io_dtype,
        batch_size,
        num_calibration_images,
        num_verify_images,
    )


def load_calibration(
    model,
    representative_data,
    num_images=NUM_CALIBRATION_IMAGES,
    class_names=None,
):
    """The representative images, as the model takes them (the train
    split of a dataset; normalised for include_preprocessing=False). They
    are verified on too: their labels are matched to `class_names` (the
    export's) where they can be, else dropped (calibration needs none, so
    a folder is not refused for them)."""
    return representative.load_model_inputs(
        model,
        representative_data,
        limit=num_images,
        split="train",
        name="representative_data",
        class_names=class_names,
        strict=False,
    )
