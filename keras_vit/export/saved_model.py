"""SavedModel export for serving (TF Serving, Vertex AI, `tf.saved_model.load`).

The SavedModel is written by `keras.export.ExportArchive` and needs neither
Keras nor keras_vit to run: `tf.saved_model.load(path)` is enough.
"""

import os

from keras_vit import arg_checks
from keras_vit import files
from keras_vit.export import metadata as metadata_lib
from keras_vit.export import model_io
from keras_vit.export import report as report_lib
from keras_vit.export import representative
from keras_vit.export import serving_signatures
from keras_vit.export import verification as verify_lib
from keras_vit.export.loaded_model import inference_model
from keras_vit.export.report import ExportResult

#: Signature names: float inputs (the default), uint8 pixels and image
#: files (for a model that takes pixels:
#: `serving_signatures.saved_model_signatures`).
FLOAT_SIGNATURE = serving_signatures.FLOAT_SIGNATURE
UINT8_SIGNATURE = serving_signatures.UINT8_SIGNATURE
BYTES_SIGNATURE = serving_signatures.BYTES_SIGNATURE

#: What `export_saved_model` writes at the top of its folder
#: (`ExportArchive.write_out`'s files, and keras_vit's metadata).
SAVED_MODEL_ENTRIES = frozenset(
    {
        "saved_model.pb",
        "fingerprint.pb",
        "variables",
        "assets",
        metadata_lib.SAVED_MODEL_METADATA,
    }
)


def is_saved_model_export(path):
    """Whether `path` is a SavedModel folder `export_saved_model` wrote: its
    `saved_model.pb` and keras_vit's `keras_vit.json` (format
    `"saved_model"`), and nothing else at the top level that an export would
    delete by replacing it (a TF Serving `assets.extra/` added later, a
    user's files)."""
    if not os.path.isdir(path):
        return False
    entries = set(os.listdir(path))
    return (
        "saved_model.pb" in entries
        and entries <= SAVED_MODEL_ENTRIES
        and metadata_lib.is_metadata(
            metadata_lib.sidecar_path(path), "saved_model"
        )
    )


def check_output(output, inputs=(), overwrite=False):
    """Checks a SavedModel export's folder before any work is done.

    The rule is `keras_vit.files.check_output_path`'s: the folder must not
    be, nor hold, one of `inputs`; an existing folder that is not empty is
    replaced only if it is an earlier export (`is_saved_model_export`), or
    with `overwrite`.

    Returns:
        The folder's path as a string.
    """
    return files.check_output_path(
        output,
        directory=True,
        inputs=inputs,
        replaceable=is_saved_model_export,
        overwrite=overwrite,
        replaces="a SavedModel exported by keras_vit",
    )


def signature_shape(model):
    """`(batch, height, width, channels)` the signatures take: a dynamic
    batch, and any height and width for a `ViT(dynamic_image_size=True)`
    (as the model takes them), else its input size. The metadata's
    `input.shape` records it."""
    height, width, channels = model_io.input_spec(model)
    if getattr(model, "dynamic_image_size", False) is True:
        height = width = None
    return (None, height, width, channels)


def build_archive(model):
    """A `keras.export.ExportArchive` with the serving signatures.

    `serving_default` takes float32 `[batch, H, W, C]` images and, for a
    model that takes [0, 255] RGB pixels, `serving_uint8` uint8 ones (what
    a decoded JPEG is) and `serving_bytes` a `[batch]` string tensor of
    image files (JPEG, PNG, GIF, BMP), decoded as PIL decodes them and
    resized to the model's input as its `image_resize` says, as
    `keras_vit.data.images.load_image_files` reads files (a model built
    with `include_preprocessing=False` has neither:
    `serving_signatures.saved_model_signatures`). All take a dynamic batch (the
    images any `H` and `W` for a `ViT(dynamic_image_size=True)`; files are
    resized to its `image_size`), keep the model's preprocessing inside,
    and return `{"probabilities": [batch, num_classes]}` (`"logits"` or
    `"features"` for such models).

    Args:
        model: a `keras.Model` with one image input.

    Returns:
        A `keras.export.ExportArchive`, ready for `write_out`.
    """
    import keras
    import tensorflow as tf

    shape = signature_shape(model)
    key = model_io.output_kind(model)
    dtype = model.inputs[0].dtype

    def serve(images):
        return {key: model(tf.cast(images, dtype), training=False)}

    def serve_bytes(image_bytes):
        return serve(serving_signatures.decoded_files(model, image_bytes))

    # No `archive.track(model)`: the endpoints' variables are tracked by
    # the archive anyway, and tracking the model as well saves every weight
    # twice (Keras 3.15 writes `variables/...` and `_all_variables/...`: a
    # SavedModel of 8 bytes per parameter; `model.export(...,
    # format="tf_saved_model")` does that). Serving needs only the
    # signatures.
    archive = keras.export.ExportArchive()
    for name, spec_dtype in serving_signatures.saved_model_signatures(
        model
    ).items():
        if name == serving_signatures.BYTES_SIGNATURE:
            spec = tf.TensorSpec(
                [None], tf.string, name=serving_signatures.BYTES_INPUT
            )
            archive.add_endpoint(name, serve_bytes, input_signature=[spec])
            continue
        spec = tf.TensorSpec(shape, tf.as_dtype(spec_dtype), name="images")
        archive.add_endpoint(name, serve, input_signature=[spec])
    return archive


def export_saved_model(
    model,
    output,
    labels=None,
    verify=True,
    verify_data="digits",
    num_verify_images=32,
    overwrite=False,
):
    """Exports a model as a SavedModel for serving, verified.

    Signatures with a dynamic batch and the preprocessing inside
    (`build_archive`): `serving_default` (float32 inputs), and for a model
    that takes RGB pixels `serving_uint8` and `serving_bytes` (image files,
    resized as its `image_resize` says), each returning `{"probabilities":
    ...}`. The labels and input spec go in `keras_vit.json` inside the
    folder. Unless `verify=False`,
    the SavedModel is reloaded in a fresh Python process that never imports
    keras_vit, and its outputs compared with Keras's (max |Δ| ≤ 1e-4) at
    two batch sizes, before the folder is moved into place.

    Args:
        model: a `keras.Model`, a `.keras` file or a builder name (see
            `inference_model`).
        output: str, the SavedModel folder to write; its parent must exist.
            An earlier export there (see `is_saved_model_export`) is
            replaced once the new one is complete; any other folder that is
            not empty is refused, unless `overwrite`. It must not be, nor
            hold, one of the export's inputs (the `.keras` file's run
            folder, say).
        labels: class names: a list, or a text file with one per line.
            Defaults to `None`: the training run's if known, else
            `"class_0"`, ...
        verify: bool, whether to verify before writing. Defaults to `True`.
        verify_data: images to verify on (see `load_images`). Defaults to
            `"digits"`.
        num_verify_images: int. Defaults to `32`.
        overwrite: bool, whether to replace a folder at `output` that is
            not an earlier export (its files are deleted). Defaults to
            `False`.

    Returns:
        An `ExportResult`.

    Raises:
        ValueError: for a bad argument; `VerificationError` (a
            `ValueError`) if verification fails.

    Example:

    >>> export_saved_model("runs/digits/model.keras", "serving/vit")
    >>> tf.saved_model.load("serving/vit").signatures["serving_default"]
    """
    arg_checks.boolean("verify", verify)
    num_verify_images = arg_checks.positive_int(
        "num_verify_images", num_verify_images
    )
    if verify and verify_data is None:
        raise ValueError(
            "The verification needs images: pass `verify_data`, or "
            "verify=False. Received: verify_data=None"
        )
    inputs = [p for p in (model, labels) if isinstance(p, (str, os.PathLike))]
    output = check_output(
        output, inputs + representative.source_paths(verify_data), overwrite
    )
    source = model
    model = inference_model(model)
    meta = _metadata(model, metadata_lib.class_names(model, labels, source))
    report = None
    with files.atomic_directory(output) as tmp:
        build_archive(model).write_out(tmp, verbose=False)
        metadata_lib.write(metadata_lib.sidecar_path(tmp), meta)
        if verify:
            report = _verified(
                tmp, output, model, meta, verify_data, num_verify_images
            )
    return ExportResult(output, metadata_lib.sidecar_path(output), meta, report)


def _verified(folder, output, model, meta, data, num_images):
    """Verifies the SavedModel in `folder` (bound for `output`) on `data`
    and records in its metadata `meta` what it was checked on; returns
    the report."""
    with report_lib.nothing_written(output):
        report = verify_lib.verify_saved_model(
            folder, model, data=data, num_images=num_images
        )
    report.path = output
    meta["verified_on"] = report.data()
    metadata_lib.write(metadata_lib.sidecar_path(folder), meta)
    return report


def _metadata(model, class_names):
    """The contents of a SavedModel's `keras_vit.json`."""
    return metadata_lib.build(
        model,
        "saved_model",
        "none",
        class_names,
        input_shape=list(signature_shape(model)),
        input_dtype="float32",
        output_shape=[None, *model.output_shape[1:]],
        extra={
            "signatures": {
                name: {
                    "input": serving_signatures.BYTES_INPUT
                    if dtype == "string"
                    else "images",
                    "dtype": dtype,
                }
                for name, dtype in serving_signatures.saved_model_signatures(
                    model
                ).items()
            },
            "output_key": model_io.output_kind(model),
            "parameters": int(model.count_params()),
        },
    )
