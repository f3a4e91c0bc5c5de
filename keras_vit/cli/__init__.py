"""The `keras-vit` command line."""

import argparse
import contextlib
import os
import re
import signal
import sys
import threading

from keras_vit.data.datasets import NOT_AN_IMAGE
from keras_vit.data.datasets import NOT_DECODABLE
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
    from keras_vit import benchmark

    timing = {} if args.min_seconds is None else {"min_seconds": args.min_seconds}
    if args.profile:
        for model in args.model:
            benchmark.profile(model, batch_size=args.batch_size[-1], steps=args.steps,
                              warmup=args.warmup, image_size=args.image_size, **timing)
        return

    print(
        f"keras-vit benchmark: {', '.join(args.model)}; inference batches "
        f"{args.batch_size}" + (f", training batches {args.train_batch_size}" if args.train else "")
        + f"; dtype policy {args.dtype or 'float32'}; XLA {args.jit_compile}"
        + ("; remat on" if args.remat else "")
        + (f"; {args.rounds} interleaved rounds" if args.rounds > 1 else "")
    )
    benchmark.run_suite(
        variants=args.model,
        inference_batches=args.batch_size,
        train_batches=args.train_batch_size if args.train else (),
        peers=["keras_vit", *args.peers],
        timm_python=args.timm_python,
        steps=args.steps,
        warmup=args.warmup,
        dtype=args.dtype,
        jit_compile={"on": True, "off": False}.get(args.jit_compile, "auto"),
        remat=args.remat,
        image_size=args.image_size,
        rounds=args.rounds,
        **timing,
    )


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

    model = convert(
        args.input, args.output, model=args.model, num_heads=args.num_heads,
        source_grid=args.source_grid, overwrite=args.overwrite,
    )
    print(
        f"{args.input} -> {args.output}: {model.name}, "
        f"{model.count_params():,} parameters, image_size {model.image_size}, "
        f"{model.num_classes if model.include_top else 'no'} classes"
    )


def _given(**options):
    """The options whose flags were given (not `None`)."""
    return {k: v for k, v in options.items() if v is not None}


def _train(args):
    from keras_vit.training import TrainConfig
    from keras_vit.training import train

    def flag(value):
        return {"on": True, "off": False}.get(value, value)

    config = TrainConfig(
        model=args.model,
        dataset=args.dataset,
        output=args.output,
        epochs=args.epochs,
        batch_size=args.batch_size,
        image_size=args.image_size,
        patch_size=args.patch_size,
        model_kwargs=_given(
            hidden_dim=args.hidden_dim,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            mlp_dim=args.mlp_dim,
            dropout_rate=args.dropout,
            drop_path_rate=args.drop_path,
            pooling=args.pooling,
            position_embedding=args.position_embedding,
        ),
        weights=args.weights,
        data_dir=args.data_dir,
        validation_split=args.validation_split,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        decay=args.decay,
        label_smoothing=args.label_smoothing,
        clipnorm=args.clipnorm,
        random_resized_crop=args.random_resized_crop == "on",
        crop_area=(args.crop_min_area, 1.0),
        flip=args.flip == "on",
        rand_augment=args.rand_augment,
        mixup=args.mixup,
        cutmix=args.cutmix,
        shuffle=args.shuffle == "on",
        seed=args.seed,
        deterministic=args.deterministic,
        strategy=args.strategy,
        tpu=args.tpu,
        mixed_precision=args.mixed_precision,
        steps_per_execution=args.steps_per_execution,
        jit_compile=flag(args.jit_compile),
        verbose=args.verbose,
        objective=args.objective.replace("-", "_"),
        masked_patches=_given(
            corrupt_rate=args.corrupt_rate,
            mask_rate=args.mask_rate,
            replace_rate=args.replace_rate,
            bits=args.color_bits,
        ),
    )
    result = train(config)
    for key, value in result.test_metrics.items():
        print(f"test {key}: {value:.4f}")
    print(f"outputs in {result.output}")


def _few_shot(args):
    from keras_vit import evaluation
    from keras_vit.export.models import load_model

    model = load_model(args.model, args.weights, args.image_size)
    result = evaluation.few_shot(
        model, args.dataset, shots=args.shots, seeds=args.seeds, l2_reg=args.l2_reg,
        data_dir=args.data_dir, batch_size=args.batch_size, test_fraction=args.test_fraction,
    )
    print(result.summary())


def _inspect(args):
    import numpy as np

    from keras_vit import visualize
    from keras_vit.export.models import load_model

    model = load_model(args.model, args.weights, args.image_size)
    images = visualize.load_images(args.image, model.image_size)
    if model.num_channels == 1:
        images = images.mean(axis=-1, keepdims=True)
    names = [
        os.path.splitext(os.path.basename(p))[0] or f"image{i}"
        for i, p in enumerate(args.image)
    ]
    if len(set(names)) < len(names):  # a/cat.jpg and b/cat.jpg
        names = [f"{name}_{i}" for i, name in enumerate(names)]
    files = visualize.inspect(
        model, images.astype(np.float32), args.output, names,
        inputs=[args.model, args.weights, *args.image],
    )
    for path in files:
        print(path)


def _print_table(header, rows):
    widths = [
        max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))
    ]
    for row in (header, *rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths)))


def build_parser():
    from keras_vit.export import cli as export_cli

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
    convert.add_argument(
        "--num-heads", type=int, default=None,
        help="for a ViT of another size than the released ones, in a format "
             "that does not record it (timm, Hugging Face .safetensors)",
    )
    convert.add_argument(
        "--source-grid", type=int, nargs=2, default=None,
        metavar=("ROWS", "COLS"),
        help="the patch grid of the checkpoint's position embeddings, if "
             "not square (the formats record none; releases are square)",
    )
    convert.add_argument(
        "--overwrite", action="store_true",
        help="replace an existing file at --output (never the input)",
    )
    convert.set_defaults(run=_convert)

    t = sub.add_parser("train", help="train a ViT (any tf.distribute strategy)")
    t.add_argument("--model", default="ViT_Ti16", help="builder (ViT_Ti16) or variant (S/16)")
    t.add_argument("--dataset", required=True, help="fashion_mnist, digits, folder:PATH or a tensorflow_datasets name")
    t.add_argument("--data-dir", default=None, help="tensorflow_datasets folder (gs:// for TPUs)")
    t.add_argument("--output", required=True, help="run folder (rerun to resume)")
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--batch-size", type=int, default=128, help="global batch")
    t.add_argument("--image-size", type=int, default=None)
    t.add_argument("--patch-size", type=int, default=None)
    t.add_argument("--hidden-dim", type=int, default=None)
    t.add_argument("--num-layers", type=int, default=None)
    t.add_argument("--num-heads", type=int, default=None)
    t.add_argument("--mlp-dim", type=int, default=None)
    t.add_argument("--pooling", choices=["token", "gap"], default=None)
    t.add_argument("--position-embedding", default=None,
                   # keras_vit.model.MODEL_POSITION_EMBEDDINGS, spelled out
                   # so that --help does not import Keras (a test checks).
                   choices=["learned", "learned2d", "sincos2d", "none", "relative"],
                   help="default: learned (1D); learned2d, relative and none "
                        "are the paper's ablations")
    t.add_argument("--dropout", type=float, default=None)
    t.add_argument("--drop-path", type=float, default=None)
    t.add_argument("--weights", default=None, help="preset or checkpoint to start from")
    t.add_argument("--validation-split", type=float, default=0.0)
    t.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    t.add_argument("--learning-rate", type=float, default=1e-3)
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--warmup-steps", type=int, default=None, help="default: 5%% of the steps")
    t.add_argument("--decay", choices=["cosine", "linear"], default="cosine")
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--clipnorm", type=float, default=1.0)
    t.add_argument("--random-resized-crop", choices=["on", "off"], default="on")
    t.add_argument("--crop-min-area", type=float, default=0.35, help="smallest crop, as a fraction of the image")
    t.add_argument("--flip", choices=["on", "off"], default="on")
    t.add_argument("--rand-augment", type=int, default=0, help="RandAugment ops per image (0: off)")
    t.add_argument("--mixup", type=float, default=0.0, help="MixUp alpha (0: off)")
    t.add_argument("--cutmix", type=float, default=0.0, help="CutMix alpha (0: off)")
    t.add_argument("--shuffle", choices=["on", "off"], default="on")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--deterministic", action="store_true")
    t.add_argument("--strategy", choices=["auto", "default", "mirrored", "multi_worker", "tpu"], default="auto")
    t.add_argument("--tpu", default=None, help="TPU name or address (default: TPU_NAME)")
    t.add_argument("--mixed-precision", choices=["auto", "off", "bfloat16", "float16"], default="auto")
    t.add_argument("--steps-per-execution", type=int, default=None)
    t.add_argument("--jit-compile", choices=["auto", "on", "off"], default="auto")
    t.add_argument("--verbose", type=int, default=1, choices=[0, 1, 2])
    t.add_argument("--objective", choices=["classification", "masked-patches"],
                   default="classification",
                   help="masked-patches: the paper's self-supervised pre-training "
                        "(no labels; writes backbone.keras to fine-tune from)")
    t.add_argument("--corrupt-rate", type=float, default=None,
                   help="masked-patches: share of patches corrupted (default 0.5)")
    t.add_argument("--mask-rate", type=float, default=None,
                   help="masked-patches: share of those masked (default 0.8)")
    t.add_argument("--replace-rate", type=float, default=None,
                   help="masked-patches: share replaced by another patch (default 0.1)")
    t.add_argument("--color-bits", type=int, default=None,
                   help="masked-patches: bits per channel of the colour target (default 3)")
    t.set_defaults(run=_train)

    export_cli.add_commands(sub)  # export, verify, benchmark-export
    ins = sub.add_parser("inspect", help="write attention maps and the paper's figures")
    ins.add_argument("model", help="a .keras file or a builder name (ViT_B16)")
    ins.add_argument("--image", action="append", required=True, help="an image file (repeatable)")
    ins.add_argument("--output", required=True, help="folder for the PNGs and index.html")
    ins.add_argument("--weights", default=None, help="preset or checkpoint, with a builder name")
    ins.add_argument("--image-size", type=int, default=None)
    ins.set_defaults(run=_inspect)

    few = sub.add_parser(
        "few-shot",
        help="the paper's linear few-shot accuracy of a model's representation",
        description="Linear few-shot evaluation (arXiv 2010.11929, Sec. 4.1): "
                    "regularised least squares from the frozen representation "
                    "of k training images per class to {-1, 1}^K, accuracy on "
                    "the test split; big_vision's settings (see "
                    "keras_vit.evaluation).",
    )
    few.add_argument("model", help="a .keras file or a builder name (ViT_B16)")
    few.add_argument("--dataset", required=True,
                     help="digits, fashion_mnist, folder:PATH or a tensorflow_datasets name")
    few.add_argument("--data-dir", default=None, help="tensorflow_datasets folder")
    few.add_argument("--shots", type=int, nargs="+", default=[1, 5, 10, 25],
                     help="examples per class (default 1 5 10 25)")
    few.add_argument("--seeds", type=int, default=3, help="random draws (default 3)")
    few.add_argument("--l2-reg", type=float, default=1024.0,
                     help="L2 penalty (default 2^10, big_vision's)")
    few.add_argument("--weights", default=None, help="preset or checkpoint, with a builder name")
    few.add_argument("--image-size", type=int, default=None)
    few.add_argument("--batch-size", type=int, default=64)
    few.add_argument("--test-fraction", type=float, default=None,
                     help="for a dataset without a test split (an image folder): "
                          "the share of its images held out to test on")
    few.set_defaults(run=_few_shot)

    bench = sub.add_parser(
        "benchmark",
        help="images/s, peak memory and %% of the machine's peak, next to peers",
    )
    bench.add_argument("--model", nargs="+", default=["Ti/16", "S/16", "B/16"],
                       help="builders or variants (default: Ti/16 S/16 B/16)")
    bench.add_argument("--batch-size", type=int, nargs="+", default=[1, 8],
                       help="inference batch sizes (default: 1 8)")
    bench.add_argument("--train", action="store_true", help="also time AdamW training steps")
    bench.add_argument("--train-batch-size", type=int, nargs="+", default=[8, 32],
                       help="training batch sizes (default: 8 32)")
    bench.add_argument("--peers", nargs="*", default=[],
                       choices=["keras_hub", "timm", "onnxruntime", "openvino"],
                       help="also time these, where installed (onnxruntime and "
                            "openvino run keras_vit's model exported, inference only)")
    bench.add_argument("--timm-python", default=None, metavar="PYTHON",
                       help="time timm with this interpreter (an environment with torch "
                            "and timm; default: this one)")
    bench.add_argument("--image-size", type=int, default=None, help="keras_vit only")
    bench.add_argument("--steps", type=int, default=5,
                       help="timed calls per measurement, at least (default: 5)")
    bench.add_argument("--warmup", type=int, default=2,
                       help="untimed calls first (default: 2)")
    bench.add_argument("--min-seconds", type=float, default=None,
                       help="time each measurement past --steps until its calls "
                            "add up to this many seconds (default: 1; a stable "
                            "median for fast calls such as batch 1)")
    bench.add_argument("--rounds", type=int, default=1,
                       help="repeat every measurement this many times, rounds "
                            "interleaved, and report medians (for noisy machines)")
    bench.add_argument("--jit-compile", choices=["auto", "on", "off"], default="auto",
                       help="XLA (auto: training as `keras-vit train` compiles it, "
                            "on but for bfloat16 on a CPU; inference is timed "
                            "with and without, the faster is reported)")
    bench.add_argument("--dtype", default=None,
                       help="dtype policy, e.g. mixed_bfloat16 (default: float32); "
                            "peers compute in its compute dtype too")
    bench.add_argument("--remat", action="store_true",
                       help="rematerialise each block in training (less memory)")
    bench.add_argument("--profile", action="store_true",
                       help="instead: time the parts of the model and their alternatives")
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
        with _terminate_cleanly():
            args.run(args)
    except ValueError as error:
        print(f"keras-vit: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - only the one below is caught
        found = _not_an_image(error)
        if found is None:
            raise
        print(f"keras-vit: error: {found[0]} {found[1]}", file=sys.stderr)
        return 2
    return 0


def _not_an_image(error):
    """`(message, path)` of the file that `keras_vit.data`'s image reader
    refused (`read_image`, `read_images`) in a TensorFlow error raised from a
    `tf.data` pipeline, or `None`."""
    messages = "|".join(re.escape(m) for m in (NOT_AN_IMAGE, NOT_DECODABLE))
    found = re.search(
        r"assertion failed: \[(" + messages + r")\] \[(.*?)\]\n", str(error) + "\n"
    )
    return None if found is None else (found.group(1), found.group(2))


class _Terminated(SystemExit):
    """Raised in the main thread when SIGTERM arrives during a command."""


def _raise_terminated(signum, frame):
    raise _Terminated(128 + signum)


@contextlib.contextmanager
def _terminate_cleanly():
    """Turns SIGTERM into `SystemExit(143)` while a command runs.

    Python's default SIGTERM ends the process on the spot, so a `timeout`
    or `kill` during an export would leave its hidden temporary file (or
    folder) beside the output. As an exception, the cleanup code of
    `keras_vit.files` runs and nothing half-written is left, as with Ctrl-C.
    Like Ctrl-C, it takes effect when the interpreter next runs Python code
    (a TFLite conversion in progress finishes its C++ step first). Code that
    turns the exception into another one on its way up (an extension
    module's import does) still exits with status 143, without a traceback.
    A handler someone else installed is left alone, and so is a call from a
    thread other than the main one (signals can only be handled there).
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except BaseException as error:
        cause = error
        while cause is not None and not isinstance(cause, _Terminated):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise SystemExit(cause.code) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
