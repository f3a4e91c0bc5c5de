"""The `keras-vit` command line."""

import argparse
import os
import sys

from keras_vit.version import __version__


def _models(args):
    import keras

    from keras_vit import builders
    from keras_vit import variants

    header = ("builder", "variant", "width", "depth", "heads", "mlp", "params")
    rows = []
    for builder, variant in builders.BUILDERS.items():
        # Count parameters from the variables' shapes without allocating
        # them (ViT-H/14 alone would take 2.5 GB).
        with keras.StatelessScope(initialize_variables=False):
            params = builders.get_builder(builder)().count_params()
        v = variants.get_variant(variant)
        rows.append(
            (
                builder,
                variant,
                v["hidden_dim"],
                v["num_layers"],
                v["num_heads"],
                v["mlp_dim"],
                f"{params:,}",
            )
        )
    _print_table(header, rows)
    print("Parameter counts: 224 x 224 input, 1000-class head.")


def _benchmark(args):
    import keras

    from keras_vit import benchmark
    from keras_vit import builders

    if args.dtype:
        keras.config.set_dtype_policy(args.dtype)
    kwargs = {}
    if args.image_size:
        kwargs["image_size"] = args.image_size
    model = builders.get_builder(args.model)(**kwargs)
    print(
        f"{args.model}: {model.count_params():,} parameters, input "
        f"{model.input_shape[1:]}, batch {args.batch_size}, "
        f"dtype policy {keras.config.dtype_policy().name}, "
        f"XLA {'on' if args.jit_compile else 'off'}, "
        f"{os.cpu_count()} CPU cores"
    )
    result = benchmark.benchmark(
        model,
        batch_size=args.batch_size,
        steps=args.steps,
        warmup=args.warmup,
        train=args.train,
        jit_compile=args.jit_compile,
    )
    print(
        f"inference: {result['inference_images_per_s']:.2f} images/s "
        f"({result['inference_ms_per_batch']:.1f} ms per batch)"
    )
    if args.train:
        print(f"training:  {result['train_images_per_s']:.2f} images/s")


def _presets(args):
    from keras_vit.weights import list_presets

    header = ("builder", "preset", "res", "classes", "pre-logits", "source")
    rows = [
        (
            p["builder"],
            p["name"],
            p["image_size"],
            p["num_classes"],
            p["representation_size"] or "-",
            p["source"],
        )
        for p in list_presets(args.model)
    ]
    _print_table(header, rows)
    print("Use: keras_vit.ViT_B16(weights='<preset>'); downloads are cached.")


def _convert(args):
    from keras_vit.weights.convert import convert

    model = convert(args.input, args.output, model=args.model)
    print(
        f"{args.input} -> {args.output}: {model.name}, "
        f"{model.count_params():,} parameters, image_size {model.image_size}, "
        f"{model.num_classes if model.include_top else 'no'} classes"
    )


def _print_table(header, rows):
    widths = [
        max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))
    ]
    for row in (header, *rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-vit",
        description="Vision Transformers (arXiv 2010.11929) for Keras 3.",
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-vit {__version__}"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    models = sub.add_parser("models", help="list the model builders")
    models.set_defaults(run=_models)

    presets = sub.add_parser("presets", help="list the pretrained weights")
    presets.add_argument("--model", default=None, help="builder or variant")
    presets.set_defaults(run=_presets)

    convert = sub.add_parser(
        "convert",
        help="convert a .npz / .safetensors checkpoint to keras_vit's format",
    )
    convert.add_argument("input", help="a .npz or .safetensors checkpoint")
    convert.add_argument(
        "--output", required=True, help="a .weights.h5 or .keras path"
    )
    convert.add_argument(
        "--model",
        default=None,
        help="builder name, e.g. ViT_B16 (default: from the checkpoint)",
    )
    convert.set_defaults(run=_convert)

    bench = sub.add_parser(
        "benchmark", help="measure inference / training images per second"
    )
    bench.add_argument("--model", default="ViT_B16", help="builder name")
    bench.add_argument("--batch-size", type=int, default=8)
    bench.add_argument("--image-size", type=int, default=None)
    bench.add_argument("--steps", type=int, default=10)
    bench.add_argument("--warmup", type=int, default=2)
    bench.add_argument(
        "--train", action="store_true", help="also time AdamW train steps"
    )
    bench.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile with XLA (slower than oneDNN on most CPUs)",
    )
    bench.add_argument(
        "--dtype",
        default=None,
        help="dtype policy, e.g. mixed_bfloat16 (default: float32)",
    )
    bench.set_defaults(run=_benchmark)
    return parser


def main(argv=None):
    # TensorFlow's C++ start-up chatter is noise for a command line; a user
    # who wants it sets TF_CPP_MIN_LOG_LEVEL themselves.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 0
    try:
        args.run(args)
    except ValueError as error:
        print(f"keras-vit: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
