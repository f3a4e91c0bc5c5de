"""`keras-vit benchmark`: images/s of keras_vit's own models, their FLOPs
and their share of the machine's measured matmul peak.

Peers, per-process peak memory, rounds and profiles: the checkout's
`benchmarks/suite.py`."""

from keras_vit.cli import _arguments as arguments

#: What `keras-vit benchmark` times without `--model`.
DEFAULT_MODELS = ("Ti/16", "S/16", "B/16")
#: The batch sizes it times without `--batch-size` / `--train-batch-size`.
DEFAULT_BATCH_SIZES = (1, 8)
DEFAULT_TRAIN_BATCH_SIZES = (8, 32)


def add_parser(sub):
    bench = sub.add_parser(
        "benchmark",
        help="images/s, GFLOPs and %% of the machine's measured peak of "
        "keras_vit's models",
    )
    bench.add_argument(
        "--model",
        nargs="+",
        default=list(DEFAULT_MODELS),
        help="builders, variants or presets' architectures (random "
        "weights, no download), each NAME[:ARG=VALUE,...] to override "
        "ViT arguments, e.g. vit_b16_siglip_webli:pooling=gap (default: "
        + " ".join(DEFAULT_MODELS)
        + ")",
    )
    bench.add_argument(
        "--batch-size",
        type=arguments.positive_int,
        nargs="+",
        default=list(DEFAULT_BATCH_SIZES),
        help="inference batch sizes (default: "
        + " ".join(map(str, DEFAULT_BATCH_SIZES))
        + ")",
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
        "--image-size",
        type=arguments.positive_int,
        default=None,
        help="image size (default: each model's own, 224 for the variants)",
    )
    _add_timing_arguments(bench)
    bench.set_defaults(run=run)


def _add_timing_arguments(bench):
    """How long each measurement runs and how the model computes."""
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
        default=1.0,
        help="time each measurement past --steps until its calls "
        "add up to this many seconds (default: 1; a stable "
        "median for fast calls such as batch 1)",
    )
    bench.add_argument(
        "--jit-compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="XLA (auto: training as `keras-vit train` compiles it; "
        "inference timed with and without, the faster timed again and "
        "reported)",
    )
    bench.add_argument(
        "--dtype",
        default=None,
        help="dtype policy, e.g. mixed_bfloat16 (default: float32)",
    )


def train_batch_sizes(args):
    """The training batch sizes `args` asks for: none without `--train`,
    the defaults where `--train-batch-size` is not given."""
    if not args.train:
        return []
    return args.train_batch_size or list(DEFAULT_TRAIN_BATCH_SIZES)


def run(args):
    from keras_vit.benchmark import throughput

    if args.train_batch_size is not None and not args.train:
        raise ValueError(
            "--train-batch-size applies to the training steps, which only "
            "--train times. Received: --train-batch-size "
            + " ".join(map(str, args.train_batch_size))
        )
    train_batches = train_batch_sizes(args)
    print(
        f"keras-vit benchmark: {', '.join(args.model)}; inference batches "
        f"{args.batch_size}"
        + (f", training batches {train_batches}" if args.train else "")
        + f"; dtype policy {args.dtype or 'float32'}; XLA {args.jit_compile}"
    )
    throughput.time_models(
        args.model,
        inference_batches=args.batch_size,
        train_batches=train_batches,
        steps=args.steps,
        warmup=args.warmup,
        dtype=args.dtype,
        jit_compile={"on": True, "off": False}.get(args.jit_compile, "auto"),
        image_size=args.image_size,
        min_seconds=args.min_seconds,
    )
