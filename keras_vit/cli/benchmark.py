"""`keras-vit benchmark`: images/s and memory, next to peers."""

from keras_vit.cli import _arguments as arguments
from keras_vit.options import PEERS

#: What `keras-vit benchmark` times without `--model` or `--compare`.
DEFAULT_MODELS = ("Ti/16", "S/16", "B/16")
#: The batch sizes it times without `--batch-size` / `--train-batch-size`
#: (`--profile` times one, `profile`'s default).
DEFAULT_BATCH_SIZES = (1, 8)
DEFAULT_TRAIN_BATCH_SIZES = (8, 32)
#: The flags `--profile` does not take (it times float32 forward passes
#: and steps of keras_vit alone, both with and without XLA, once), as
#: their destinations.
NOT_PROFILED = (
    "compare",
    "train",
    "train_batch_size",
    "peers",
    "timm_python",
    "rounds",
    "jit_compile",
    "dtype",
    "remat",
)


def add_parser(sub):
    bench = sub.add_parser(
        "benchmark",
        help="images/s, peak memory and %% of the machine's peak, next to "
        "peers",
    )
    _add_model_arguments(bench)
    _add_timing_arguments(bench)
    _add_compute_arguments(bench)
    bench.set_defaults(
        run=run,
        not_profiled={dest: bench.get_default(dest) for dest in NOT_PROFILED},
    )


def _add_model_arguments(bench):
    """What is timed: models, batch sizes, training, peers."""
    bench.add_argument(
        "--model",
        nargs="+",
        default=None,
        help="builders, variants or presets' architectures (random "
        "weights, no download), each NAME[:ARG=VALUE,...] to override "
        "ViT arguments, e.g. vit_b16_siglip_webli:pooling=gap (default: "
        "Ti/16 S/16 B/16, or the --compare models)",
    )
    bench.add_argument(
        "--compare",
        nargs=2,
        action="append",
        default=[],
        metavar=("MODEL", "BASELINE"),
        help="say what MODEL's architecture costs against BASELINE's "
        "(seconds per image, peak memory, FLOPs); both are timed; "
        "repeatable",
    )
    bench.add_argument(
        "--batch-size",
        type=arguments.positive_int,
        nargs="+",
        default=None,
        help="inference batch sizes (default: "
        + " ".join(map(str, DEFAULT_BATCH_SIZES))
        + "; --profile: one, default 8)",
    )
    bench.add_argument(
        "--train", action="store_true", help="also time AdamW training steps"
    )
    bench.add_argument(
        "--train-batch-size",
        type=arguments.positive_int,
        nargs="+",
        default=None,
        help="training batch sizes, with --train (default: "
        + " ".join(map(str, DEFAULT_TRAIN_BATCH_SIZES))
        + ")",
    )
    bench.add_argument(
        "--peers",
        nargs="*",
        default=[],
        choices=[p for p in PEERS if p != "keras_vit"],
        help="also time these, where installed (onnxruntime and "
        "openvino run keras_vit's model exported, inference only)",
    )
    bench.add_argument(
        "--timm-python",
        default=None,
        metavar="PYTHON",
        help="time timm (--peers timm) with this interpreter (an "
        "environment with torch and timm; default: this one)",
    )
    bench.add_argument(
        "--image-size",
        type=arguments.positive_int,
        nargs="+",
        default=None,
        help="image sizes, e.g. 224 384 512: keras_vit and every peer are "
        "timed at each, and a summary says how the cost grows with the "
        "tokens (default: 224; --profile: the last)",
    )


def _add_timing_arguments(bench):
    """How long each measurement runs."""
    bench.add_argument(
        "--steps",
        type=arguments.positive_int,
        default=5,
        help="timed calls per measurement, at least (default: 5)",
    )
    bench.add_argument(
        "--warmup",
        type=arguments.non_negative_int,
        default=2,
        help="untimed calls first (default: 2)",
    )
    bench.add_argument(
        "--min-seconds",
        type=float,
        default=None,
        help="time each measurement past --steps until its calls "
        "add up to this many seconds (default: 1; a stable "
        "median for fast calls such as batch 1)",
    )
    bench.add_argument(
        "--rounds",
        type=arguments.positive_int,
        default=1,
        help="repeat every measurement this many times, rounds "
        "interleaved, and report medians (for noisy machines)",
    )


def _add_compute_arguments(bench):
    """How the model computes (XLA, dtype, rematerialisation), or a profile."""
    bench.add_argument(
        "--jit-compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="XLA (auto: training as `keras-vit train` compiles it, "
        "on but on a CPU for bfloat16, over 512 tokens and over 384 "
        "features; inference is "
        "timed with and without, the faster timed again in a fresh "
        "process and reported)",
    )
    bench.add_argument(
        "--dtype",
        default=None,
        help="dtype policy, e.g. mixed_bfloat16 (default: float32); "
        "peers compute in it too (timm: float32 weights under autocast "
        "for mixed_*, its weights in the dtype otherwise)",
    )
    bench.add_argument(
        "--remat",
        action="store_true",
        help="rematerialise each block in training, with --train (less memory)",
    )
    bench.add_argument(
        "--profile",
        action="store_true",
        help="instead: time the parts of the model and their alternatives",
    )


def _refuse_unprofiled(args):
    """Raises for the first flag given that `--profile` would ignore."""
    for dest, default in args.not_profiled.items():
        if getattr(args, dest) != default:
            flag = "--" + dest.replace("_", "-")
            raise ValueError(
                f"{flag} does not apply to --profile, which times float32 "
                "keras_vit alone, with and without XLA. Received: "
                f"{flag} {getattr(args, dest)}"
            )


def _refuse_ignored(args):
    """Raises for a flag given that the suite would ignore: one that
    applies to training steps without `--train`, `--timm-python` without
    timm among the peers (the header still said "remat on")."""
    for flag, value, applies, reason in (
        (
            "--train-batch-size",
            args.train_batch_size,
            args.train,
            "applies to the training steps, which only --train times",
        ),
        (
            "--remat",
            args.remat or None,
            args.train,
            "applies to the training steps, which only --train times",
        ),
        (
            "--timm-python",
            args.timm_python,
            "timm" in args.peers,
            "runs timm, which only --peers timm times",
        ),
    ):
        if value is not None and not applies:
            raise ValueError(f"{flag} {reason}. Received: {flag} {value}")


def _profile_batch_size(args):
    """`profile`'s batch size: the one `--batch-size` (several are
    refused), or `{}` for its default."""
    if args.batch_size is None:
        return {}
    if len(args.batch_size) > 1:
        raise ValueError(
            "--profile times one batch size. Received: --batch-size "
            + " ".join(map(str, args.batch_size))
        )
    return {"batch_size": args.batch_size[0]}


def _models(args):
    """The models to time: `--model` (default: Ti/16 S/16 B/16 unless
    `--compare` names models), then the `--compare` models not in it."""
    models = list(args.model or ([] if args.compare else DEFAULT_MODELS))
    for pair in args.compare:
        models += [m for m in pair if m not in models]
    return models


def run(args):
    from keras_vit import benchmark
    from keras_vit.benchmark import throughput

    models = _models(args)
    timing = (
        {} if args.min_seconds is None else {"min_seconds": args.min_seconds}
    )
    if args.profile:
        _refuse_unprofiled(args)
        batch_size = _profile_batch_size(args)
        image_size = args.image_size and args.image_size[-1]
        for model in models:  # all built (no weights) before one is timed
            throughput.sequence_shape(model, image_size)
        for model in models:
            benchmark.profile(
                model,
                steps=args.steps,
                warmup=args.warmup,
                image_size=image_size,
                **batch_size,
                **timing,
            )
        return
    _refuse_ignored(args)
    inference_batches = args.batch_size or list(DEFAULT_BATCH_SIZES)
    train_batches = (
        (args.train_batch_size or list(DEFAULT_TRAIN_BATCH_SIZES))
        if args.train
        else []
    )

    print(
        f"keras-vit benchmark: {', '.join(models)}; inference batches "
        f"{inference_batches}"
        + (f", training batches {train_batches}" if args.train else "")
        + (f"; image sizes {args.image_size}" if args.image_size else "")
        + f"; dtype policy {args.dtype or 'float32'}; XLA {args.jit_compile}"
        + ("; remat on" if args.remat else "")
        + (f"; {args.rounds} interleaved rounds" if args.rounds > 1 else "")
    )
    benchmark.run_suite(
        variants=models,
        compare=args.compare,
        inference_batches=inference_batches,
        train_batches=train_batches,
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
