"""`keras-vit export`, `keras-vit verify` and `keras-vit benchmark-export`.

`add_parsers(subparsers)` registers the three sub-commands on the
`keras-vit` parser (see `keras_vit.cli.build_parser`). TensorFlow and
LiteRT are imported only when a command runs.
"""

import os

from keras_vit import model_argument
from keras_vit.cli import _arguments as arguments
from keras_vit.options import EXPORT_FORMATS
from keras_vit.options import INTERPRETERS
from keras_vit.options import IO_DTYPES
from keras_vit.options import QUANTIZATIONS

RUNTIMES = tuple(INTERPRETERS)


def _add_model_arguments(parser):
    parser.add_argument(
        "model", metavar="MODEL", help=model_argument.MODEL_HELP
    )
    parser.add_argument(
        "--weights", default=None, help="preset or weights file to load"
    )
    parser.add_argument(
        "--image-size",
        type=arguments.positive_int,
        default=None,
        help="builder names only",
    )
    parser.add_argument(
        "--num-classes",
        type=arguments.positive_int,
        default=None,
        help="builder names only",
    )


def _take_run_folder(args):
    """Checks `args.model` with `args.weights` and puts a training run's
    folder's `model.keras` in its place, as `keras-vit predict` takes it
    (`keras_vit.resolver.locate`)."""
    from keras_vit import resolver

    args.model = resolver.locate(args.model, args.weights)


def _load(args, model=None, weights=None, name="model"):
    from keras_vit.export import inference_model

    return inference_model(
        args.model if model is None else model,
        weights=args.weights if weights is None else weights,
        image_size=args.image_size,
        num_classes=args.num_classes,
        name=name,
    )


def _source(args):
    """The model argument as the exporters take it: the .keras path when
    there is nothing to change (so the training run's labels are found),
    else the loaded model (`inference_model` refuses --image-size and
    --num-classes for a .keras file rather than ignoring them)."""
    if (
        args.model.endswith(".keras")
        and args.weights is None
        and args.image_size is None
        and args.num_classes is None
    ):
        return args.model
    return _load(args)


def _inputs(args):
    """The files and folders `keras-vit export` reads: no output may be,
    or hold, one of them."""
    from keras_vit.export import representative

    paths = [args.model, args.weights, args.labels]
    return [p for p in paths if p is not None] + representative.source_paths(
        [args.representative_data, args.verify_data]
    )


def _run_data(given, model):
    """What to verify an export of `model` on: the images `given`, else
    its training run's dataset (`metadata.training_run_dataset`: the
    model's own labelled images), else `None` (the default digits)."""
    from keras_vit.export import metadata

    if given is not None:
        return given
    return metadata.training_run_dataset(model)


def _refuse(flags, reason):
    """Raises for the first of `flags` (`(flag, value, default)`) that was
    given: a flag that would be silently ignored is an error."""
    for flag, value, default in flags:
        if value != default:
            raise ValueError(f"{flag} {reason}. Received: {flag} {value}")


def _export(args):
    _take_run_folder(args)
    if args.verify and args.format in ("tflite", "saved_model"):
        args.verify_data = _run_data(args.verify_data, args.model)
    if not args.verify:
        _refuse(
            (
                ("--verify-data", args.verify_data, None),
                ("--num-images", args.num_images, None),
                ("--min-top1-agreement", args.min_top1_agreement, None),
            ),
            "applies to the verification, which --no-verify skips",
        )
    if (
        args.num_calibration_images is not None
        and args.representative_data is None
    ):
        raise ValueError(
            "--num-calibration-images applies with --representative-data only. "
            f"Received: --num-calibration-images {args.num_calibration_images}"
        )
    result = _EXPORTERS[args.format](args)
    if result.report is not None:
        print(result.report.summary())
    print(f"wrote {result.path} and {result.metadata_path}")


def _verification_flags(args):
    """The verification flags given, by the exporters' argument names (the
    rest are left to their defaults)."""
    return {
        key: value
        for key, value in (
            ("verify_data", args.verify_data),
            ("num_verify_images", args.num_images),
            ("num_calibration_images", args.num_calibration_images),
        )
        if value is not None
    }


def _tflite_only(args):
    """The flags of TFLite's quantization, verification on images and
    agreement, with their defaults, for `_refuse`."""
    return (
        ("--quantize", args.quantize, "none"),
        ("--io-dtype", args.io_dtype, "float32"),
        ("--representative-data", args.representative_data, None),
        ("--min-top1-agreement", args.min_top1_agreement, None),
    )


def _export_saved_model(args):
    from keras_vit import export
    from keras_vit.export import saved_model

    _refuse(
        (
            *_tflite_only(args),
            # (`arguments.batch_size` reads "dynamic" as None: say it as given.)
            (
                "--batch-size",
                "dynamic" if args.batch_size is None else args.batch_size,
                1,
            ),
        ),
        "applies to --format tflite only (a SavedModel is not quantized, "
        "takes a dynamic batch and is held to max |Δ| limits)",
    )
    # Checked before the model is loaded, with every input the command
    # reads (a --weights file too, which the exporter cannot see).
    saved_model.check_output(args.output, _inputs(args), args.overwrite)
    return export.export_saved_model(
        _source(args),
        args.output,
        labels=args.labels,
        verify=args.verify,
        overwrite=args.overwrite,
        **_verification_flags(args),
    )


def _export_tflite(args):
    from keras_vit import export
    from keras_vit.export import tflite

    tflite.check_output(args.output, _inputs(args), args.overwrite)
    return export.export_tflite(
        _source(args),
        args.output,
        quantize=args.quantize,
        representative_data=args.representative_data,
        batch_size=args.batch_size,
        io_dtype=args.io_dtype,
        labels=args.labels,
        verify=args.verify,
        min_top1_agreement=args.min_top1_agreement,
        overwrite=args.overwrite,
        **_verification_flags(args),
    )


def _export_runtime_file(args):
    """`--format onnx` or `openvino`: float32, the model's batch
    (`--batch-size`), checked against Keras on random pixels."""
    from keras_vit.export import metadata
    from keras_vit.export import onnx
    from keras_vit.export import openvino

    module = {"onnx": onnx, "openvino": openvino}[args.format]
    name = metadata.SIDECAR_FORMATS[args.format][1]
    _refuse(
        (
            *_tflite_only(args),
            ("--verify-data", args.verify_data, None),
            ("--num-images", args.num_images, None),
        ),
        f"applies to --format tflite only (an {name} export is float32 "
        "and verified against Keras on random pixels)",
    )
    module.check_output(args.output, _inputs(args), args.overwrite)
    export = getattr(module, f"export_{args.format}")
    return export(
        _source(args),
        args.output,
        batch_size=args.batch_size,
        verify=args.verify,
        overwrite=args.overwrite,
        labels=args.labels,
    )


#: How `keras-vit export` writes each of `EXPORT_FORMATS`.
_EXPORTERS = {
    "saved_model": _export_saved_model,
    "tflite": _export_tflite,
    "onnx": _export_runtime_file,
    "openvino": _export_runtime_file,
}


def _verify(args):
    from keras_vit import export
    from keras_vit import resolver
    from keras_vit.export import verification

    # Both before the reference is loaded (a preset's weights downloaded).
    verification.check_exported(args.exported)
    reference = resolver.locate(args.reference, args.weights, "reference")
    data = args.data or [_run_data(None, reference) or "digits"]
    kwargs = {"num_images": args.num_images}
    if os.path.isdir(args.exported):
        _refuse(
            (
                ("--runtimes", args.runtimes, None),
                ("--quantization", args.quantization, None),
                ("--min-top1-agreement", args.min_top1_agreement, None),
            ),
            "applies to a .tflite file only (a SavedModel is run by TensorFlow "
            "and held to max |Δ| limits)",
        )
    else:
        kwargs.update(
            runtimes=tuple(
                RUNTIMES if args.runtimes is None else args.runtimes
            ),
            quantization=args.quantization,
            min_top1_agreement=args.min_top1_agreement,
            verbose=0 if args.quiet else "auto",
        )
    reference = _load(args, model=reference, name="reference")
    # The error for a reference of other shapes names what was passed
    # (the file, run folder or builder name), not the loaded model's name.
    report = export.verify(
        args.exported,
        reference,
        data=data,
        reference_name=args.reference,
        **kwargs,
    )
    print(report.summary())


def _benchmark_export(args):
    from keras_vit import export
    from keras_vit.export import tflite

    _take_run_folder(args)
    # `None`: `benchmark_export`'s default, digits, where a variant needs
    # calibrating; a source given for none was ignored.
    given = {}
    if args.representative_data is not None:
        if not any(q in tflite.CALIBRATED for q in args.quantize):
            _refuse(
                (("--representative-data", args.representative_data, None),),
                "calibrates "
                + " and ".join(tflite.CALIBRATED)
                + ", which --quantize does not include",
            )
        given["representative_data"] = args.representative_data
    export.benchmark_export(
        _load(args),
        quantizations=args.quantize,
        threads=args.threads,
        runs=args.runs,
        warmup=args.warmup,
        output_dir=args.output_dir,
        tensorflow=args.tensorflow,
        onnx={"on": True, "off": False}.get(args.onnx, "auto"),
        openvino={"on": True, "off": False}.get(args.openvino, "auto"),
        **given,
    )


def add_parsers(subparsers):
    """Registers `export`, `verify` and `benchmark-export` on `subparsers`.

    Args:
        subparsers: the object `argparse.ArgumentParser.add_subparsers()`
            returned.
    """
    _add_export(subparsers)
    _add_verify(subparsers)
    _add_benchmark_export(subparsers)


def _add_export(subparsers):
    e = subparsers.add_parser(
        "export",
        help="export to a SavedModel, a TFLite (LiteRT), ONNX or OpenVINO "
        "file, verified",
        description="Export a model to a SavedModel (serving), a TFLite "
        "file (phones), an ONNX file or OpenVINO IR, with its labels and "
        "input spec in a JSON next to it, verified against Keras before it "
        "is written.",
    )
    _add_model_arguments(e)
    e.add_argument("--format", choices=EXPORT_FORMATS, required=True)
    e.add_argument(
        "--output",
        required=True,
        help="the SavedModel folder, or the .tflite, .onnx or .xml file",
    )
    e.add_argument("--quantize", choices=QUANTIZATIONS, default="none")
    e.add_argument(
        "--representative-data",
        default=None,
        metavar="SOURCE",
        help="calibration images for int8 / int16x8: a dataset name, "
        "folder:PATH or an .npz",
    )
    e.add_argument(
        "--batch-size",
        type=arguments.batch_size,
        default=1,
        help="static batch of a TFLite, ONNX or OpenVINO file, or "
        "'dynamic' (default: 1)",
    )
    e.add_argument(
        "--io-dtype",
        choices=IO_DTYPES,
        default="float32",
        help="input/output tensor type of an int8 model (default: float32)",
    )
    e.add_argument(
        "--labels",
        default=None,
        metavar="FILE",
        help="class names, one per line",
    )
    e.add_argument(
        "--verify-data",
        default=None,
        metavar="SOURCE",
        help="images to verify on (default: a training run's dataset, "
        "else digits, which checks agreement with Keras, no accuracy)",
    )
    e.add_argument(
        "--num-images",
        type=arguments.positive_int,
        default=None,
        help="images to verify on (default: 100 for TFLite, 32 for a "
        "SavedModel)",
    )
    e.add_argument(
        "--num-calibration-images",
        type=arguments.positive_int,
        default=None,
        help="representative images to calibrate on (default: 100)",
    )
    e.add_argument(
        "--min-top1-agreement", type=arguments.fraction, default=None
    )
    e.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="write without verifying (not recommended)",
    )
    e.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a file or folder at --output that is not an earlier "
        "export (never one the command reads)",
    )
    e.set_defaults(run=_export)


def _add_verify(subparsers):
    v = subparsers.add_parser(
        "verify",
        help="check an exported model against the Keras model",
        description="Check a .tflite file (ops, weight bytes, outputs with "
        "LiteRT's XNNPACK, builtin and reference kernels) or a SavedModel "
        "(reloaded without keras_vit) against the Keras model.",
    )
    v.add_argument(
        "exported",
        metavar="EXPORTED",
        help="a .tflite file or SavedModel folder",
    )
    v.add_argument(
        "--reference",
        required=True,
        metavar="MODEL",
        help=f"the Keras model: {model_argument.MODEL_HELP}",
    )
    v.add_argument("--weights", default=None)
    v.add_argument("--image-size", type=arguments.positive_int, default=None)
    v.add_argument("--num-classes", type=arguments.positive_int, default=None)
    v.add_argument(
        "--data",
        action="append",
        default=None,
        metavar="SOURCE",
        help="images to compare on (repeatable; default: a training run's "
        "dataset, else digits, which checks agreement with Keras)",
    )
    v.add_argument("--num-images", type=arguments.positive_int, default=100)
    v.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="the mode the file was made with (default: read from the file)",
    )
    v.add_argument(
        "--runtimes",
        nargs="+",
        choices=RUNTIMES,
        default=None,
        help=f"LiteRT interpreters to run (default: {' '.join(RUNTIMES)})",
    )
    v.add_argument(
        "--min-top1-agreement", type=arguments.fraction, default=None
    )
    v.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar of a .tflite file's runs",
    )
    v.set_defaults(run=_verify)


def _add_benchmark_export(subparsers):
    b = subparsers.add_parser(
        "benchmark-export",
        help="latency at batch 1: Keras, SavedModel, ONNX Runtime and each "
        "TFLite variant",
    )
    _add_model_arguments(b)
    b.add_argument(
        "--quantize",
        nargs="+",
        choices=QUANTIZATIONS,
        default=list(QUANTIZATIONS),
    )
    b.add_argument(
        "--representative-data",
        default=None,
        metavar="SOURCE",
        help="calibration images for int8 / int16x8: a dataset name, "
        "folder:PATH or an .npz (default: digits)",
    )
    b.add_argument(
        "--threads", nargs="+", type=arguments.positive_int, default=[1, 2]
    )
    b.add_argument("--runs", type=arguments.positive_int, default=50)
    b.add_argument("--warmup", type=arguments.non_negative_int, default=5)
    b.add_argument("--output-dir", default=None, help="keep the exports here")
    b.add_argument(
        "--no-tensorflow",
        dest="tensorflow",
        action="store_false",
        help="time the TFLite files only",
    )
    b.add_argument(
        "--onnx",
        choices=["auto", "on", "off"],
        default="auto",
        type=str,
        help="also time ONNX Runtime (auto: when tf2onnx and onnxruntime are "
        "installed)",
    )
    b.add_argument(
        "--openvino",
        choices=["auto", "on", "off"],
        default="auto",
        type=str,
        help="also time OpenVINO Runtime (auto: when openvino is installed)",
    )
    b.set_defaults(run=_benchmark_export)
