"""`keras-vit predict`: the top classes of images, for any model keras_vit
builds, trains or exports.

MODEL is a builder or preset name (`vit_b16_augreg_in21k_ft_in1k`, or
`ViT_B16 --weights NAME`), a `.keras` file, a checkpoint file (`.npz`,
`.safetensors`: its classes are `class_0`, `class_1`, ...), a training
run's folder (its `model.keras`), or an export of keras_vit's with its
metadata JSON, which gives the input size, the class names and how to
resize: a SavedModel folder, a `.tflite` file (run with LiteRT), an
`.onnx` file (ONNX Runtime) or an OpenVINO `.xml` (OpenVINO Runtime).
Images are read with `keras_vit.data.images` and resized as the model was
evaluated: a Keras model's `image_resize`, an export's metadata
`input.image_resize`.
"""

import contextlib
import functools
import json
import os
import sys

from keras_vit import model_argument
from keras_vit.cli import _arguments as arguments
from keras_vit.cli._table import print_table


def add_parser(sub):
    parser = sub.add_parser(
        "predict",
        help="print the top classes of images",
        description="The top classes of each image, with probabilities.",
    )
    parser.add_argument(
        "model",
        help=f"{model_argument.MODEL_HELP}; or a SavedModel folder, "
        ".tflite, .onnx or OpenVINO .xml file exported by keras_vit (with "
        "its metadata .json)",
    )
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument(
        "--top",
        type=arguments.positive_int,
        default=5,
        help="classes per image (default: 5)",
    )
    parser.add_argument(
        "--weights",
        default=None,
        help="preset or checkpoint, with a builder name",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON instead of a table"
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_vit import resolver

    check_image_files(args.images)
    resolver.check_weights(args.model, args.weights)  # before a download
    # With --json, stdout is the JSON alone: what loading prints there (a
    # first download's progress bar) goes to stderr.
    quiet_stdout = (
        contextlib.redirect_stdout(sys.stderr)
        if args.json
        else contextlib.nullcontext()
    )
    with quiet_stdout:
        predictor = load_predictor(args.model, args.weights)
        probabilities = predictor.predict(args.images)
    results = top_classes(
        probabilities, predictor.class_names, args.images, args.top
    )
    if args.json:
        print(json.dumps(results, indent=2))
        return
    rows = [
        (r["image"], rank, c["class"], f"{c['probability']:.4f}")
        for r in results
        for rank, c in enumerate(r["top"], 1)
    ]
    print_table(("image", "rank", "class", "probability"), rows)


def check_image_files(paths):
    """Raises for a path that is no file, before the model is loaded (a
    preset's weights downloaded) and with the path alone, not TensorFlow's
    ReadFile error."""
    for image in paths:
        if os.path.isdir(image):
            raise ValueError(
                "The image is a folder, not an image file: name the images "
                f"in it (e.g. {os.path.join(image, '*.jpg')}). Received: "
                f"image={image!r}"
            )
        if not os.path.isfile(image):
            raise ValueError(
                f"The image file does not exist. Received: image={image!r}"
            )


def top_classes(probabilities, class_names, images, top):
    """`[{"image", "top": [{"class", "index", "probability"}, ...]}, ...]`,
    the `top` most probable classes of each image, most probable first."""
    import numpy as np

    results = []
    for image, row in zip(images, probabilities):
        order = np.argsort(-row, kind="stable")[:top]
        results.append(
            {
                "image": image,
                "top": [
                    {
                        "class": class_names[i],
                        "index": int(i),
                        "probability": float(row[i]),
                    }
                    for i in order
                ],
            }
        )
    return results


class Predictor:
    """A model's class probabilities for image files (`predict(paths)`),
    its input `(height, width, channels)` and `class_names`. The files are
    resized as `image_resize` says (the model's, see
    `keras_vit.data.resize.check`), and `prepare` turns their [0, 255]
    pixels into the model's inputs (normalised for a model built with
    `include_preprocessing=False`)."""

    def __init__(
        self, run, input_spec, class_names, kind, prepare, image_resize
    ):
        _refuse_features(kind)
        self._run = run
        self._prepare = prepare
        self.image_resize = image_resize
        self.input_spec = input_spec
        self.class_names = class_names
        self.kind = kind

    def predict(self, paths):
        import numpy as np

        from keras_vit.data.images import load_image_files

        height, width, channels = self.input_spec
        pixels = load_image_files(
            paths, (height, width), channels, self.image_resize
        )
        outputs = np.asarray(self._run(self._prepare(pixels)), dtype="float64")
        if self.kind == "logits":
            outputs = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
            outputs /= outputs.sum(axis=-1, keepdims=True)
        return outputs


def _refuse_features(kind):
    """Refuses a model whose output `kind` is `"features"`: it has no
    classes to predict."""
    if kind == "features":
        raise ValueError(
            "The model has no classifier head (include_top=False): it "
            "returns features, not classes. Received: a feature extractor"
        )


def load_predictor(model, weights=None):
    """A `Predictor` for `model` (see the module docstring)."""
    from keras_vit import resolver
    from keras_vit.export import metadata

    path = os.fspath(model)
    if os.path.isdir(path):
        if os.path.isfile(metadata.sidecar_path(path)):
            return _exported(path, weights, "saved_model")
        return _keras(
            resolver.locate(
                path,
                also="a SavedModel exported by keras_vit (no keras_vit.json)",
            ),
            weights,
        )
    fmt = metadata.sidecar_format(path)
    if fmt is not None:
        return _exported(path, weights, fmt)
    if path.endswith(".keras"):
        return _keras(path, weights)
    return _named(path, weights)


def _keras(path, weights):
    from keras_vit.data import resize
    from keras_vit.export import metadata
    from keras_vit.export import model_io
    from keras_vit.export import pixel_inputs
    from keras_vit.export.loaded_model import inference_model

    model = inference_model(path, weights)
    return Predictor(
        lambda x: model.predict(x, verbose=0),
        model_io.input_spec(model),
        metadata.class_names(model, model_source=path),
        model_io.output_kind(model),
        pixel_inputs.inputs_from_pixels(model),
        resize.of_model(model),
    )


def _named(name, weights):
    from keras_vit.data import resize
    from keras_vit.export import metadata
    from keras_vit.export import model_io
    from keras_vit.export import pixel_inputs
    from keras_vit.export.loaded_model import inference_model

    model = inference_model(name, weights)
    return Predictor(
        lambda x: model.predict(x, verbose=0),
        model_io.input_spec(model),
        # A preset's 1000-class head is named by its model (ImageNet-1k's).
        metadata.class_names(model),
        model_io.output_kind(model),
        pixel_inputs.inputs_from_pixels(model),
        resize.of_model(model),
    )


def _exported(path, weights, fmt):
    """A `Predictor` for the export at `path` of format `fmt` (its
    metadata's `format`: `"saved_model"` or a key of
    `keras_vit.export.metadata.SIDECAR_FORMATS`), as its metadata
    describes it."""
    found = _metadata(path, weights, fmt)
    # Refused before the export is loaded (a runtime's session, seconds).
    _refuse_features(found["output"]["kind"])
    prepare = _inputs_from_pixels(path, found)
    return Predictor(
        _runner(path, fmt, found),
        _input_spec(found),
        found["class_names"],
        found["output"]["kind"],
        prepare,
        _image_resize(found),
    )


def _metadata(path, weights, fmt):
    """The metadata of an export at `path` of format `fmt`, checked."""
    from keras_vit.export import metadata

    if weights is not None:
        raise ValueError(
            "An exported model holds its weights; --weights applies to a "
            f"builder name or a .keras file. Received: weights={weights!r}"
        )
    if not os.path.exists(path):
        raise ValueError(f"The model does not exist. Received: model={path!r}")
    found = metadata.read_metadata(path)
    if found is None:
        raise ValueError(
            f"Expected an export of keras_vit with its metadata "
            f"({metadata.sidecar_path(path)}), which is missing. Received: "
            f"model={path!r}"
        )
    if found.get("format") != fmt:
        raise ValueError(
            f"The metadata beside the model ({metadata.sidecar_path(path)}) "
            f"is of an export of format {found.get('format')!r}, not of this "
            f"{fmt!r} one. Received: model={path!r}"
        )
    return found


def _runner(path, fmt, found):
    """A function from the model's inputs to its outputs: the export at
    `path` run by its format's runtime (ONNX Runtime and OpenVINO Runtime
    one static batch, the metadata's `batch_size`, at a time)."""
    if fmt == "tflite":
        from keras_vit.export import runtime

        return functools.partial(runtime.run_tflite, path)  # batches itself
    if fmt == "saved_model":
        return _saved_model_runner(path, found["output_key"])
    if fmt == "onnx":
        from keras_vit.export import onnx

        session = onnx.session(path)

        def run(x):
            return session.run(None, {session.get_inputs()[0].name: x})[0]

    else:
        from keras_vit.export import openvino

        compiled = openvino.compile_openvino(path)

        def run(x):
            return compiled(x)[0]

    return functools.partial(_in_batches, run, found["batch_size"])


def _saved_model_runner(path, key):
    """The SavedModel folder at `path`'s float serving signature, as a
    function of the model's inputs to its `key` output; a `ValueError`
    naming the folder if TensorFlow cannot load it."""
    import tensorflow as tf

    from keras_vit.export import saved_model

    try:
        serve = tf.saved_model.load(path).signatures[
            saved_model.FLOAT_SIGNATURE
        ]
    # A damaged SavedModel fails anywhere in TensorFlow's loader (OSError,
    # IndexError, DataLossError, a missing signature's KeyError, ...).
    except Exception as error:  # noqa: BLE001
        raise ValueError(
            "TensorFlow cannot load the SavedModel, damaged or not "
            f"keras_vit's ({type(error).__name__}: "
            f"{' '.join(str(error).split())}). Received: model={path!r}"
        ) from None
    return lambda x: serve(images=tf.constant(x))[key].numpy()


def _in_batches(run, batch_size, x):
    """`run` on `x` `batch_size` rows at a time (all at once if `None`),
    the last batch padded with zeros (their outputs dropped)."""
    import numpy as np

    x = np.asarray(x, "float32")
    if batch_size is None:
        return np.asarray(run(x))
    outputs = []
    for start in range(0, len(x), batch_size):
        batch = x[start : start + batch_size]
        padding = np.zeros((batch_size - len(batch), *x.shape[1:]), x.dtype)
        outputs.append(
            np.asarray(run(np.concatenate([batch, padding])))[: len(batch)]
        )
    return np.concatenate(outputs)


def _input_spec(found):
    spec = found["input"]
    return spec["height"], spec["width"], spec["channels"]


def _image_resize(found):
    """How the model an export's metadata describes takes its images: its
    `input.image_resize`. Metadata written before that field existed
    describes an export that `keras-vit predict` always fed whole images,
    squashed: the default (`None`), which is what it gets."""
    return found["input"].get("image_resize")


def _inputs_from_pixels(path, found):
    """What `keras_vit.export.pixel_inputs.inputs_from_pixels` gives for the
    model an export's metadata describes: pixels as they are if it
    normalises them itself (`pixel_range` [0, 255]), else normalised as
    its `normalization` says (`null`: the paper's [-1, 1]); refused if the
    metadata predates `normalization` (it would be a guess)."""
    from keras_vit.export import pixel_inputs

    spec = found["input"]
    if spec.get("pixel_range") is not None:
        return lambda pixels: pixels  # the model normalises them itself
    if "normalization" not in spec:
        raise ValueError(
            "The export takes already-normalised inputs "
            "(include_preprocessing=False) and its metadata does not say "
            "how they were normalised (it predates `input.normalization`): "
            f"export the model again. Received: model={path!r}"
        )
    return functools.partial(
        pixel_inputs.normalize_pixels, normalization=spec["normalization"]
    )
