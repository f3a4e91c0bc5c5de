"""`keras-vit inspect`: attention maps and the paper's figures (not
named `inspect`, which would shadow the standard library's module)."""

import os

from keras_vit import model_argument
from keras_vit.cli import _arguments as arguments


def add_parser(sub):
    parser = sub.add_parser(
        "inspect", help="write attention maps and the paper's figures"
    )
    parser.add_argument("model", help=model_argument.MODEL_HELP)
    parser.add_argument(
        "--image",
        action="append",
        required=True,
        help="an image file (repeatable)",
    )
    parser.add_argument(
        "--output", required=True, help="folder for the PNGs and index.html"
    )
    parser.add_argument(
        "--weights",
        default=None,
        help="preset or checkpoint, with a builder name",
    )
    parser.add_argument(
        "--image-size", type=arguments.positive_int, default=None
    )
    parser.set_defaults(run=run)


def image_names(paths):
    """One file name (no extension) per image path, made unique."""
    names = [
        os.path.splitext(os.path.basename(p))[0] or f"image{i}"
        for i, p in enumerate(paths)
    ]
    if len(set(names)) < len(names):  # a/cat.jpg and b/cat.jpg
        names = [f"{name}_{i}" for i, name in enumerate(names)]
    return names


def run(args):
    from keras_vit import resolver
    from keras_vit import visualize
    from keras_vit.cli.predict import check_image_files
    from keras_vit.data import resize
    from keras_vit.data.images import load_image_files
    from keras_vit.export.loaded_model import inference_model
    from keras_vit.export.pixel_inputs import inputs_from_pixels

    check_image_files(args.image)
    source = resolver.locate(args.model, args.weights)
    model = inference_model(source, args.weights, args.image_size)
    pixels = load_image_files(
        args.image,
        model.image_size,
        model.num_channels,
        image_resize=resize.of_model(model),  # as its evaluation resized
    )
    # As the model takes them: normalised for include_preprocessing=False.
    images = inputs_from_pixels(model)(pixels)
    files = visualize.inspect(
        model,
        images,
        args.output,
        image_names(args.image),
        inputs=[source, args.weights, *args.image],
        pixels=pixels,
    )
    for path in files:
        print(path)
