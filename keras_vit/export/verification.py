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
never imports keras_vit and compares its outputs with Keras's. `verify`
picks one of the two by what it is given.

This module holds the entry points. The checks and the limits they apply
(`LIMITS`) are in `keras_vit.export.verification_checks`, running a
`.tflite` file with LiteRT in `keras_vit.export.runtime`, and what a
verification returns or raises (`VerificationReport`, `VerificationError`)
in `keras_vit.export.report`.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from keras_vit import arg_checks
from keras_vit.export import float32_copy
from keras_vit.export import graph as graph_lib
from keras_vit.export import metadata as metadata_lib
from keras_vit.export import model_io
from keras_vit.export import representative
from keras_vit.export import runtime
from keras_vit.export import serving_signatures
from keras_vit.export import verification_checks
from keras_vit.export.loaded_model import inference_model
from keras_vit.export.report import VerificationError
from keras_vit.export.report import VerificationReport
from keras_vit.export.verification_checks import check_limits
from keras_vit.export.verification_checks import compare

#: Images per source the reference kernels check when the limit is on max
#: |Δ| only (float32, float16): they are unoptimized loops, several times
#: slower than the builtin kernels and XNNPACK, and on 100 images they would
#: take most of a big model's verification (ViT-B/16's timings:
#: `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`). A
#: top-1 floor (quantized files) needs every image, so it gets them.
REFERENCE_KERNEL_IMAGES = 8


def _check_limits(report, limits):
    """Adds to `report` what its comparisons break of `limits`."""
    report.failures.extend(
        verification_checks.limit_failures(report.comparisons, limits)
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


def _image_sets(data, model, num_images, class_names=None):
    """Each source of `data` as `model` takes it (a dataset's test split;
    normalised for include_preprocessing=False, as the calibration is),
    its labels those of the outputs named `class_names`
    (`representative.model_labels`)."""
    return [
        representative.load_model_inputs(
            model,
            source,
            limit=num_images,
            split="test",
            name="data",
            class_names=class_names,
        )
        for source in _sources(data)
    ]


def _class_names(path, reference, class_names=None):
    """The names of an export's outputs, which a labelled folder's classes
    are matched to: `class_names`, else its metadata's (an export's
    sidecar, a SavedModel's keras_vit.json), else the training run's of a
    `.keras` `reference`, else `None`."""
    if class_names is not None:
        return list(class_names)
    try:
        recorded = (metadata_lib.read_metadata(path) or {}).get("class_names")
    except ValueError:  # not keras_vit's JSON: no names from it
        recorded = None
    if recorded:
        return list(recorded)
    return metadata_lib.training_run_class_names(reference)


def _reference_outputs(model, images):
    """Keras's outputs, called eagerly in chunks of 32 (no retracing)."""
    import keras

    return np.concatenate(
        [
            np.asarray(
                keras.ops.convert_to_numpy(
                    model(images[i : i + 32], training=False)
                ),
                "float32",
            )
            for i in range(0, len(images), 32)
        ]
    )


def _check_runtimes(runtimes):
    """`runtimes` as a tuple of keys of `runtime.INTERPRETERS`, or raises."""
    runtimes = (
        tuple(runtimes) if isinstance(runtimes, (list, tuple)) else (runtimes,)
    )
    if not runtimes or any(r not in runtime.INTERPRETERS for r in runtimes):
        raise ValueError(
            "`runtimes` must hold one or more of "
            f"{list(runtime.INTERPRETERS)}. "
            f"Received: runtimes={runtimes!r}"
        )
    return runtimes


def _tflite_report(path, graph, quantization, model, limits):
    """The report of a `.tflite` file's sizes and ops, holding what the
    checks that need no runtime found (steps 1 and 2: ops, weight bytes)."""
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
    report.failures.extend(verification_checks.op_failures(graph, quantization))
    report.failures.extend(
        verification_checks.weight_failures(
            graph.weight_bytes, parameters - _folded(model), quantization
        )
    )
    return report


def _folded(model):
    """The parameters the converter folds away: a MAP head's probe and
    query projection depend on no input, so the `hidden_dim` probe and
    the projection become one query vector of `hidden_dim` values (the
    projection's count is what goes; for a tiny SigLIP, 4% of its
    parameters). The LayerNorms fold into the next matmuls too, which the
    weight check's range allows for."""
    names = {layer.name for layer in getattr(model, "layers", [])}
    pooling = model.get_layer("pooling") if "pooling" in names else None
    if pooling is None or not hasattr(pooling, "probe"):
        return 0
    return pooling.query.count_params()


def _compare_tflite(
    report,
    path,
    model,
    image_sets,
    runtimes,
    num_threads,
    skip_reference=False,
    verbose=0,
):
    """Step 3: the file's outputs with each LiteRT runtime against Keras's
    on each of `image_sets`, added to `report` (a runtime that cannot run
    the file is a failure). `skip_reference` leaves out the reference
    kernels, which abort the process on a degenerate quantized range.
    `verbose`: a Keras progress bar of the runs (a runtime on an image
    set)."""
    import keras

    report.xnnpack_partitions = runtime.xnnpack_partitions(path)
    if skip_reference:
        runtimes = [name for name in runtimes if name != "reference"]
    progress = keras.utils.Progbar(
        len(image_sets) * len(runtimes), verbose=verbose, unit_name="run"
    )
    for images in image_sets:
        expected = _reference_outputs(model, images.images)
        labels = images.labels
        for name in runtimes:
            progress.add(1)
            n = len(expected)
            if name == "reference" and report.limits.get("top1") is None:
                n = min(n, REFERENCE_KERNEL_IMAGES)
            try:
                outputs = runtime.run_tflite(
                    path, images.images[:n], name, num_threads
                )
            except (
                RuntimeError
            ) as error:  # e.g. an op without a kernel for its type
                report.failures.append(f"{name} cannot run the file: {error}")
                continue
            report.comparisons.append(
                compare(
                    outputs,
                    expected[:n],
                    None if labels is None else labels[:n],
                    images.source,
                    name,
                    output_kind=model_io.output_kind(model),
                )
            )


def verify_tflite(
    path,
    reference,
    data="digits",
    num_images=100,
    quantization=None,
    runtimes=tuple(runtime.INTERPRETERS),
    min_top1_agreement=None,
    max_abs=None,
    num_threads=None,
    raise_on_failure=True,
    verbose="auto",
    reference_name=None,
    class_names=None,
):
    """Verifies a `.tflite` file against the Keras model it came from.

    Args:
        path: the `.tflite` file.
        reference: the Keras model (or a `.keras` file or builder name, see
            `inference_model`).
        data: images to compare on: a source of `load_images` or a list of
            them, the model's own, labelled, for an accuracy. Defaults to
            `"digits"` (its test split, resized): an agreement with the
            Keras model for any other model (`VerificationReport.data`).
        num_images: int, the most images per source. Defaults to `100`.
        quantization: the mode the file was made with (see
            `keras_vit.export.verification_checks.LIMITS`).
            Defaults to `None`: read from the file's tensor types.
        runtimes: the LiteRT interpreters to run (keys of
            `keras_vit.export.runtime.INTERPRETERS`).
            Defaults to all three. The reference kernels see only the first
            `REFERENCE_KERNEL_IMAGES` (8) images of each source unless a
            top-1 floor applies (they are unoptimized loops, the slowest).
        min_top1_agreement: float in [0, 1], overrides the mode's floor.
            Defaults to `None`.
        max_abs: float >= 0, overrides the mode's max |Δ|. Defaults to
            `None`.
        num_threads: int, interpreter threads. Defaults to `None`: every
            CPU core (XNNPACK shares its work out over them, with bitwise
            the same outputs; the builtin kernels gain nothing from them,
            and the reference kernels run on one thread: figures in
            `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`).
        raise_on_failure: bool, whether a failure raises. Defaults to
            `True`.
        verbose: a Keras progress bar of the runs (each runtime on each
            image set): `0` (none), `1` (a bar), `2` (a line when done) or
            `"auto"` (`1`). Defaults to `"auto"`.
        reference_name: str, what the error for a reference of other
            shapes calls `reference`: a caller that loads the model itself
            (`keras-vit verify`, for its --weights, --image-size and
            --num-classes) passes what its user named, not the loaded
            model's name. Defaults to `None`: `reference` itself when it
            is a path or name, else the model's name.
        class_names: the names of the file's outputs, which a labelled
            image folder's sub-folders are matched to for the accuracy
            (`representative.model_labels`). Defaults to `None`: the
            export's metadata's, else the training run's of a `.keras`
            `reference`.

    Returns:
        A `VerificationReport`.

    Raises:
        VerificationError: if a check fails and `raise_on_failure`.

    Example:

    >>> report = verify_tflite("vit.tflite", "runs/digits/model.keras")
    >>> print(report.summary())
    """
    # Long: its docstring documents twelve arguments; the body is the steps:
    # check, read the graph, load the reference, compare, judge.
    num_images, num_threads, runtimes = _check_tflite_arguments(
        data,
        num_images,
        quantization,
        runtimes,
        min_top1_agreement,
        max_abs,
        num_threads,
        raise_on_failure,
    )
    verbose = arg_checks.verbosity("verbose", verbose)
    graph = graph_lib.read_graph(path)
    if quantization is None:
        quantization = graph_lib.detect_quantization(graph)
    # A mixed-precision reference is compared as the float32 model its
    # export converted (see `export_tflite`).
    model = float32_copy.float32_model(inference_model(reference))
    if not graph.unsupported_ops():  # LiteRT cannot load such a file
        io = runtime.io_details(path)
        check_reference(
            io["input_shape"],
            io["output_shape"],
            model,
            reference if reference_name is None else reference_name,
        )
    limits = verification_checks.tflite_limits(
        quantization,
        min_top1_agreement,
        max_abs,
        output_kind=model_io.output_kind(model),
    )
    report = _tflite_report(path, graph, quantization, model, limits)
    if not graph.unsupported_ops():  # LiteRT cannot load such a file
        threads = (os.cpu_count() or 1) if num_threads is None else num_threads
        _compare_tflite(
            report,
            path,
            model,
            _image_sets(
                data,
                model,
                num_images,
                _class_names(path, reference, class_names),
            ),
            runtimes,
            threads,
            skip_reference=bool(graph.degenerate_ranges()),
            verbose=verbose,
        )
    _check_limits(report, limits)
    if report.failures and raise_on_failure:
        raise VerificationError("Verification failed.\n" + report.summary())
    return report


def _check_tflite_arguments(
    data,
    num_images,
    quantization,
    runtimes,
    min_top1_agreement,
    max_abs,
    num_threads,
    raise_on_failure,
):
    """`verify_tflite`'s arguments checked: the normalised `(num_images,
    num_threads, runtimes)`."""
    num_images = arg_checks.positive_int("num_images", num_images)
    check_limits(min_top1_agreement, max_abs)
    arg_checks.boolean("raise_on_failure", raise_on_failure)
    num_threads = arg_checks.optional_positive_int("num_threads", num_threads)
    runtimes = _check_runtimes(runtimes)
    _sources(data)
    if (
        quantization is not None
        and quantization not in verification_checks.BYTES_PER_PARAMETER
    ):
        raise ValueError(
            "`quantization` must be one of "
            f"{list(verification_checks.BYTES_PER_PARAMETER)}. "
            f"Received: quantization={quantization!r}"
        )
    return num_images, num_threads, runtimes


# Run by `verify_saved_model` by its path, in a fresh interpreter: TensorFlow
# only.
_SAVED_MODEL_CHECK = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "standalone",
    "saved_model_check.py",
)


def verify_saved_model(
    path,
    reference,
    data="digits",
    num_images=32,
    max_abs=None,
    raise_on_failure=True,
    reference_name=None,
    class_names=None,
):
    """Verifies a SavedModel in a fresh process that never imports keras_vit.

    The subprocess loads it with `tf.saved_model.load` and runs its
    signatures (`serving_default` on float inputs; those only a model that
    takes [0, 255] RGB pixels has: `serving_uint8` on the same images
    rounded to uint8, `serving_bytes` on those as PNG files, which Keras
    is given resized as the model's `image_resize` says) in batches of 16
    and on one image alone; the outputs are compared with Keras's. A
    signature missing, or one an export of the model would not have, is a
    failure.

    Args:
        path: the SavedModel folder.
        reference: the Keras model (or a `.keras` file or builder name).
        data: images to compare on (see `load_images`). Defaults to
            `"digits"`.
        num_images: int. Defaults to `32`.
        max_abs: float >= 0, the largest |Δ| allowed. Defaults to `None`: 1e-4,
            or `verification_checks.SAVED_MODEL_REDUCED_PRECISION`'s limit
            for a model that computes in bfloat16 or float16.
        raise_on_failure: bool. Defaults to `True`.
        reference_name: str, what the error for a reference of other
            shapes calls `reference` (see `verify_tflite`). Defaults to
            `None`.
        class_names: the names of its outputs (see `verify_tflite`).
            Defaults to `None`: its keras_vit.json's, else the training
            run's of a `.keras` `reference`.

    Returns:
        A `VerificationReport`.

    Raises:
        VerificationError: if a check fails and `raise_on_failure`.
    """
    num_images = arg_checks.positive_int("num_images", num_images)
    check_limits(max_abs=max_abs)
    arg_checks.boolean("raise_on_failure", raise_on_failure)
    _sources(data)
    if not os.path.isfile(os.path.join(os.fspath(path), "saved_model.pb")):
        raise ValueError(
            "Not a SavedModel folder (it holds no saved_model.pb). "
            f"Received: {os.fspath(path)!r}"
        )
    model = inference_model(reference)
    shapes = _signature_shapes(path)
    if shapes is not None:  # else its signature failures say why
        check_reference(
            *shapes,
            model,
            reference if reference_name is None else reference_name,
        )
    limits = verification_checks.saved_model_limits(
        float32_copy.non_float32_dtypes(model), max_abs
    )
    report = _saved_model_report(path, model, limits)
    names = _class_names(path, reference, class_names)
    _compare_saved_model(
        report, path, model, _image_sets(data, model, num_images, names)
    )
    _check_limits(report, limits)
    if report.failures and raise_on_failure:
        raise VerificationError("Verification failed.\n" + report.summary())
    return report


def check_reference(input_shape, output_shape, model, reference):
    """Refuses a `reference` model whose input or output shape differs
    from an export's (`input_shape`, `output_shape`: the file's, batch
    first, `None` or `-1` where it takes any size), before any image is
    loaded or run: a reference of another class count, `include_top` or
    image size ended in NumPy's broadcast error, LiteRT's "Dimension
    mismatch" or a subprocess traceback, even with
    `raise_on_failure=False`. A wrong reference is a wrong argument, not
    a failed verification.

    Raises:
        ValueError: naming both models' shapes.
    """
    export_in, export_out = _dims(input_shape[1:]), _dims(output_shape)
    model_in = tuple(model_io.input_spec(model))
    model_out = _dims(model.output_shape)
    if _fits(export_in, model_in) and _fits(export_out[1:], model_out[1:]):
        return
    name = (
        os.fspath(reference)
        if isinstance(reference, (str, os.PathLike))
        else model.name
    )
    raise ValueError(
        "The reference model's input or output shape differs from the "
        "export's, so their outputs cannot be compared: pass the model "
        f"the file was exported from. Received: reference={name!r} with "
        f"input {model_in} / output {model_out} for an export of "
        f"{export_in} / {export_out}"
    )


def _dims(shape):
    """`shape` as a tuple, with `None` for a size that may vary (`-1`)."""
    return tuple(None if d is None or d < 0 else int(d) for d in shape)


def _fits(export, model):
    """Whether the sizes agree wherever both are known."""
    return len(export) == len(model) and all(
        a is None or b is None or a == b for a, b in zip(export, model)
    )


def _signature_shapes(path):
    """`(input, output)` shapes of a SavedModel's `serving_default`
    signature, read from its `saved_model.pb` (no graph is loaded); `None`
    if the file does not parse or has no such signature of one input and
    one output (the fresh process's load then says what is wrong)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(os.fspath(path), "saved_model.pb"), "rb") as file:
        try:
            saved.ParseFromString(file.read())
        except DecodeError:
            return None
    if not saved.meta_graphs:
        return None
    signature = saved.meta_graphs[0].signature_def.get(
        serving_signatures.FLOAT_SIGNATURE
    )
    if signature is None or len(signature.inputs) != 1:
        return None
    if len(signature.outputs) != 1:
        return None
    shapes = []
    for tensors in (signature.inputs, signature.outputs):
        shape = next(iter(tensors.values())).tensor_shape
        if shape.unknown_rank:
            return None
        shapes.append([d.size for d in shape.dim])
    return tuple(shapes)


def _saved_model_report(path, model, limits):
    """The report of a SavedModel folder's sizes, holding what the check
    of its variables' bytes against the parameter count found."""
    report = VerificationReport(
        path=os.fspath(path),
        format="saved_model",
        quantization="none",
        parameters=int(model.count_params()),
        file_bytes=_folder_bytes(path),
        weight_bytes=_folder_bytes(os.path.join(os.fspath(path), "variables")),
        limits=limits,
    )
    report.failures.extend(
        verification_checks.saved_model_weight_failures(
            report.weight_bytes, report.parameters, model_io.weight_bytes(model)
        )
    )
    return report


def _run_saved_model(path, images, tmp):
    """Runs `_SAVED_MODEL_CHECK` on `images` in a fresh Python process
    (files in the folder `tmp`).

    Returns:
        `(outputs, info)`: `{signature (and signature + "_single"):
        outputs}`, and the program's JSON line (`signatures`: every one
        the SavedModel has; `keras_vit_imported`).

    Raises:
        RuntimeError: if the process failed (its stderr's end).
    """
    images_path = os.path.join(tmp, "images.npy")
    out_path = os.path.join(tmp, "outputs.npz")
    np.save(images_path, images)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.run(
        [
            sys.executable,
            _SAVED_MODEL_CHECK,
            os.path.abspath(path),
            images_path,
            out_path,
        ],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
    )
    if process.returncode != 0:
        raise RuntimeError(process.stderr[-3000:])
    info = json.loads(process.stdout.strip().splitlines()[-1])
    with np.load(out_path) as arrays:
        outputs = {k: arrays[k] for k in arrays.files}
    return outputs, info


def _compare_saved_model(report, path, model, image_sets):
    """The signatures' outputs in a fresh process against Keras's on each
    of `image_sets` (`serving_uint8`'s on the images rounded), added to
    `report`, and each on one image alone (the batch is dynamic). The
    signatures compared are those an export of `model` has
    (`serving_signatures.saved_model_signatures`); one missing, or one more (a
    `serving_uint8` for a model that takes normalised inputs, whose
    rounding to uint8 would wrap -1 to 255), is a failure."""
    expected = serving_signatures.saved_model_signatures(model)
    with tempfile.TemporaryDirectory() as tmp:
        for images in image_sets:
            try:
                outputs, info = _run_saved_model(path, images.images, tmp)
            except RuntimeError as error:
                report.failures.append(
                    f"tf.saved_model.load in a fresh process failed:\n{error}"
                )
                return
            if info["keras_vit_imported"]:
                report.failures.append(
                    "loading the SavedModel imported keras_vit"
                )
            present = set(info["signatures"])
            for name, dtype in expected.items():
                if name in present:
                    _compare_signature(
                        report, name, outputs, model, images, dtype
                    )
        report.failures.extend(_signature_failures(expected, present))


def _compare_signature(report, name, outputs, model, images, dtype):
    """One signature's outputs (and on one image alone) against Keras's
    on what it was given (`standalone/saved_model_check.py`): `images`,
    rounded for uint8 pixels, and for image files those read as
    keras_vit reads files (`_read_as_files`), added to `report`."""
    x = images.images if dtype == "float32" else np.round(images.images)
    if dtype == "string":
        x = _read_as_files(model, x)
    keras_out = _reference_outputs(model, x)
    kind = model_io.output_kind(model)
    report.comparisons.append(
        compare(
            outputs[name],
            keras_out,
            images.labels,
            images.source,
            name,
            output_kind=kind,
        )
    )
    single = compare(outputs[name + "_single"], keras_out[:1], output_kind=kind)
    if not single.max_abs <= report.limits["max_abs"]:
        report.failures.append(
            f"{name} on a batch of one: max |Δ| {single.max_abs:.3g}"
        )


def _read_as_files(model, pixels):
    """uint8-valued `pixels` as `model` takes them from image files that
    hold them (PNG, lossless): what the `serving_bytes` signature gives
    the model (`serving_signatures.decoded_files`)."""
    import tensorflow as tf

    files = [tf.io.encode_png(p.astype("uint8")) for p in pixels]
    return np.asarray(serving_signatures.decoded_files(model, tf.stack(files)))


def _signature_failures(expected, present):
    """The serving signatures missing from a SavedModel (`present`: its
    signatures' names), or there that an export of the model would not
    have (`expected`: `serving_signatures.saved_model_signatures`)."""
    known = {
        serving_signatures.FLOAT_SIGNATURE,
        serving_signatures.UINT8_SIGNATURE,
        serving_signatures.BYTES_SIGNATURE,
    }
    failures = [
        f"the SavedModel has no {name} signature"
        for name in expected
        if name not in present
    ]
    failures += [
        f"the SavedModel has a {name} signature, which an export of this "
        "model does not have (pixels or image files; the model takes "
        "normalised inputs, include_preprocessing=False, or one channel)"
        for name in sorted(known & present - set(expected))
    ]
    return failures


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
    path = check_exported(exported)
    if os.path.isdir(path):
        return verify_saved_model(path, reference, data=data, **kwargs)
    return verify_tflite(path, reference, data=data, **kwargs)


def check_exported(exported):
    """Returns `exported` as a string, the path of a file or folder; raises
    for one that does not exist, saying so (the error asked for "a .tflite
    file or a SavedModel folder", as if the path named something else).
    `keras-vit verify` calls it before the reference model is loaded.

    Raises:
        ValueError: if nothing exists at `exported`, or it is neither a
            file nor a folder.
    """
    path = os.fspath(exported)
    if not os.path.exists(path):
        raise ValueError(
            "The exported model does not exist (no file or folder at this "
            f"path). Received: exported={path!r}"
        )
    if not (os.path.isdir(path) or os.path.isfile(path)):
        raise ValueError(
            "`exported` must be a .tflite file or a SavedModel folder. "
            f"Received: exported={path!r}"
        )
    return path
