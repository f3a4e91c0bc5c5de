"""keras_vit next to its peers: every (peer, model, image size, mode,
batch), each measured in a process of its own.

    python benchmarks/suite.py --model B/16 --train --rounds 3 \\
        --peers keras_hub timm onnxruntime openvino
    python benchmarks/suite.py --model B/16 --profile

`run_suite` measures the machine's matmul peak, then every row of the plan
in a fresh Python process (`measure_in_subprocess`), so that peak memory is
that measurement's own and one run's caches do not help the next. keras_vit,
keras-hub, ONNX Runtime and OpenVINO Runtime run `worker.py` (one
`measurement.measure`); timm runs its own program in its own interpreter
(`peers/timm_runner.py`). `--profile` times the parts of a model instead
(`profiling.py`). `keras-vit benchmark` is the installed command for
keras_vit's own models, in one process, without peers.

The scripts here import each other by name (`import measurement`): run
them by their path, which puts this folder first on `sys.path`.
"""

import argparse
import json
import numbers
import os
import subprocess
import sys

import keras
import numpy as np
import profiling
from measurement import ONNX_FLOAT32_ONLY
from measurement import PEERS
from measurement import RUNTIMES
from measurement import checked_measurement
from measurement import plain_variant
from measurement import policy_name
from measurement import sequence_shape
from peers import timm_runner

from keras_vit import arg_checks
from keras_vit import timing
from keras_vit.benchmark import flops as flops_lib
from keras_vit.benchmark.throughput import MIN_SECONDS
from keras_vit.benchmark.throughput import checked_timing
from keras_vit.benchmark.throughput import compute_dtype
from keras_vit.benchmark.throughput import jit_choices
from keras_vit.benchmark.throughput import keras_vit_model
from keras_vit.benchmark.throughput import print_peak
from keras_vit.cli.benchmark import DEFAULT_BATCH_SIZES
from keras_vit.cli.benchmark import DEFAULT_MODELS
from keras_vit.cli.benchmark import DEFAULT_TRAIN_BATCH_SIZES
from keras_vit.cli.benchmark import train_batch_sizes
from keras_vit.models.config import DEFAULT_IMAGE_SIZE

#: benchmarks/worker.py, beside this file: the program each row runs.
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")

#: The footnote of a row whose peak memory is not the peer's alone (the
#: runtimes': `"memory_includes_export"`), marked "MB peak*".
MEMORY_NOTE = (
    "* MB peak of a row so marked (ONNX Runtime, OpenVINO) includes "
    "TensorFlow, the Keras model and its export, done in the same process: "
    "not comparable with the other rows'"
)


def measure_in_subprocess(timm_python=None, **kwargs):
    """`measure(**kwargs)` in a fresh Python process, one per XLA setting
    timed (`jit_choices`), the faster timed again in a third (`_faster`);
    `{"error": why}` if the peer is not installed or fails. timm runs in
    `timm_python` (default: this interpreter)."""
    kwargs.update(
        checked_measurement(
            kwargs.get("mode"),
            kwargs.get("batch_size"),
            kwargs.get("steps", 5),
            kwargs.get("warmup", 2),
            kwargs.get("dtype"),
            kwargs.get("jit_compile", "auto"),
            kwargs.get("image_size"),
        )._asdict()
    )
    if kwargs.get("peer") == "timm":
        try:
            variant = plain_variant(kwargs["variant"], "timm")
        except ValueError as error:
            return {"error": str(error)}
        return timm_runner.measure(
            variant,
            kwargs["mode"],
            kwargs["batch_size"],
            kwargs.get("steps", 5),
            kwargs.get("warmup", 2),
            python=timm_python,
            min_seconds=kwargs.get("min_seconds", MIN_SECONDS),
            dtype_policy=policy_name(kwargs.get("dtype")),
            image_size=kwargs.get("image_size") or DEFAULT_IMAGE_SIZE,
        )
    if (
        kwargs.get("peer") == "onnxruntime"
        and compute_dtype(kwargs.get("dtype")) != "float32"
    ):
        return {"error": ONNX_FLOAT32_ONLY}
    if kwargs.get("peer") in RUNTIMES:
        return _in_worker(kwargs)
    # Each XLA setting in a process of its own (inference times both under
    # "auto"): the peak memory reported is the reported setting's alone.
    # Training takes one, which the worker picks from its model's tokens.
    jit = kwargs.get("jit_compile", "auto")
    choices = (jit,)
    if kwargs["mode"] == "inference":
        choices = jit_choices(jit, "inference")
    results = [_in_worker({**kwargs, "jit_compile": jit}) for jit in choices]
    return _faster(kwargs, choices, results)


def _faster(kwargs, choices, results):
    """The faster XLA setting's row, from a fresh sample: the faster of two
    samples is biased up (by 3% at a 5% spread between runs, 11% at 20%),
    which a peer timed once is not, so the setting the first samples chose
    is timed again in a process of its own and that sample reported. One
    setting measured (the other failed): its sample, chosen by no race."""
    measured = [
        (r, jit) for r, jit in zip(results, choices) if "error" not in r
    ]
    if len(measured) < 2:
        return (measured[0] if measured else results)[0]
    _, jit = max(measured, key=lambda pair: pair[0]["images_per_s"])
    return _in_worker({**kwargs, "jit_compile": jit})


def _in_worker(kwargs):
    """`measure(**kwargs)` in `worker.py`, a fresh Python process; its
    result, or `{"error": why}`."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, WORKER, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        env=env,
    )
    return timing.read_result(proc)


def run_suite(
    variants=("Ti/16", "S/16", "B/16"),
    inference_batches=(1, 8),
    train_batches=(8, 32),
    peers=("keras_vit",),
    steps=5,
    warmup=2,
    dtype=None,
    jit_compile="auto",
    remat=False,
    image_size=None,
    timm_python=None,
    rounds=1,
    printer=print,
    min_seconds=MIN_SECONDS,
    compare=(),
):
    """Measures every (peer, variant, image size, mode, batch) and prints a
    table, then a summary (`summary_lines`).

    `variants` are builders, variants or presets' architectures, each with
    overrides (`keras_vit.benchmark.throughput.model_arguments`:
    `"vit_b16_siglip_webli:pooling=gap"`), built with random weights at
    each image size. `compare` is `(model, baseline)` pairs among them:
    the summary says what `model`'s architecture costs against
    `baseline`'s (`options_lines`).

    `image_size` is one size or several (`[224, 384, 512]`: the scaling
    curve); every peer builds its model at each (timm's `img_size`,
    keras-hub's `image_shape`, the runtimes export keras_vit's model at
    it). `None`: the variants' 224 px.

    With `rounds` > 1 every measurement is repeated that many times, the
    rounds interleaved (all of round 1, then all of round 2, ...), and the
    table reports each one's median images/s and largest peak memory. On a
    machine whose speed drifts (this project's VM: ±30% over minutes), that
    is what makes peers comparable: each is sampled across the same spells.

    timm is timed in `timm_python` when given (the interpreter of an
    environment with torch and timm), else in this one. Every measurement
    is the median call over at least `steps` calls and at least
    `min_seconds` of calls (`keras_vit.timing.latencies`), for every peer
    alike.

    Returns:
        The list of result rows (dicts), one per measurement.
    """
    rounds = arg_checks.positive_int("rounds", rounds)
    min_seconds = arg_checks.non_negative_float("min_seconds", min_seconds)
    steps, warmup, dtype = checked_timing(steps, warmup, dtype, jit_compile)
    variants, peers, inference_batches, train_batches = _plan_arguments(
        variants, peers, inference_batches, train_batches
    )
    compare = _pairs(compare, variants)
    sizes = _image_sizes(image_size)
    # The plan first: a model that cannot be built fails before the peak
    # is measured.
    plan = _plan(variants, peers, inference_batches, train_batches, sizes)
    peak = print_peak(compute_dtype(dtype), printer)
    settings = {
        "steps": steps,
        "warmup": warmup,
        "dtype": dtype,
        "jit_compile": jit_compile,
        "remat": remat,
        "timm_python": timm_python,
        "min_seconds": min_seconds,
    }
    width = max(len(str(v)) for v in variants) if variants else 8
    samples = _measure_rounds(plan, rounds, settings, peak, printer, width)
    rows = [_row(key, samples[key], peak) for key in plan]
    if rounds > 1:
        printer(f"median of {rounds} interleaved rounds:")
        for row in rows:
            printer(_format_row(row, width))
    for line in summary_lines(rows) + options_lines(rows, compare):
        printer(line)
    return rows


def _measure_rounds(plan, rounds, settings, peak, printer, width):
    """Every measurement of `plan`, `rounds` times, rounds interleaved,
    each printed as it comes; returns each key's results."""
    samples = {key: [] for key in plan}
    for index in range(rounds):
        prefix = f"round {index + 1}/{rounds} " if rounds > 1 else ""
        for key in plan:
            variant, size, _, _, peer, mode, batch = key
            result = measure_in_subprocess(
                peer=peer,
                variant=variant,
                mode=mode,
                batch_size=batch,
                image_size=size,
                **settings,
            )
            samples[key].append(result)
            printer(prefix + _format_row(_row(key, [result], peak), width))
    return samples


def _pairs(compare, variants):
    """`run_suite`'s `compare` as a tuple of `(model, baseline)` pairs,
    each of `variants`."""
    pairs = tuple(tuple(pair) for pair in compare)
    for pair in pairs:
        if len(pair) != 2 or not all(m in variants for m in pair):
            raise ValueError(
                "Each `compare` pair must be (model, baseline), both among "
                f"the models timed ({list(variants)}). Received: "
                f"compare={compare!r}"
            )
    return pairs


def _plan_arguments(variants, peers, inference_batches, train_batches):
    """`run_suite`'s plan arguments as tuples, checked (`_names`,
    `_batches`, each peer one of `PEERS`)."""
    variants, peers = _names(variants), _names(peers)
    for peer in peers:
        arg_checks.one_of("peers", peer, PEERS)
    return (
        variants,
        peers,
        _batches("inference_batches", inference_batches),
        _batches("train_batches", train_batches),
    )


def _names(value):
    """`run_suite`'s `variants` or `peers`: one name or several, as a
    tuple (a string is one name, not its letters)."""
    return (value,) if isinstance(value, str) else tuple(value)


def _batches(name, value):
    """`run_suite`'s `inference_batches` or `train_batches`: one batch size
    or several, as a tuple of positive ints."""
    if isinstance(value, numbers.Integral):
        value = (value,)
    return tuple(arg_checks.positive_int(name, batch) for batch in value)


def _image_sizes(image_size):
    """`run_suite`'s `image_size` (`None`, one size or several) as a tuple
    of sizes (`(None,)`: the variants' own)."""
    if image_size is None or isinstance(image_size, int):
        image_size = (image_size,)
    sizes = tuple(image_size)
    if not sizes:
        raise ValueError(
            f"`image_size` must name at least one size. "
            f"Received: image_size={image_size!r}"
        )
    return tuple(
        None if size is None else arg_checks.positive_int("image_size", size)
        for size in sizes
    )


def _plan(variants, peers, inference_batches, train_batches, sizes):
    """The suite's measurements, as `(model, image size, tokens, flops,
    peer, mode, batch)`, each model one of `keras_vit_model`'s (a variant,
    builder or preset's architecture, with overrides); the runtimes
    (`RUNTIMES`) are timed for inference only. Each size is keras_vit's
    model's (224 px for `None`)."""
    plan = []
    for variant in variants:
        for size in sizes:
            with keras.StatelessScope(initialize_variables=False):
                model = keras_vit_model(variant, image_size=size)
                flops = flops_lib.model_flops(model)
            # image_size, not the input shape: a dynamic_image_size
            # model's is (None, None, None, 3); it is timed at this size.
            shape = (variant, model.image_size[0], model.num_tokens, flops)
            for peer in peers:
                modes = [("inference", b) for b in inference_batches]
                if peer not in RUNTIMES:
                    modes += [("train", b) for b in train_batches]
                plan += [(*shape, peer, mode, batch) for mode, batch in modes]
    return plan


def _row(key, results, peak):
    """One table row from a measurement's results over the rounds."""
    variant, size, tokens, flops, peer, mode, batch = key
    row = {
        "variant": variant,
        "image_size": size,
        "tokens": tokens,
        "peer": peer,
        "mode": mode,
        "batch": batch,
        "gflops_per_image": flops / 1e9,
    }
    good = [r for r in results if "images_per_s" in r]
    if not good:
        return {**row, **results[-1]}
    rates = [r["images_per_s"] for r in good]
    median = good[int(np.argsort(rates)[(len(rates) - 1) // 2])]
    row.update(median)
    row["images_per_s"] = float(np.median(rates))
    row["peak_memory_mb"] = max(r["peak_memory_mb"] for r in good)
    if len(good) > 1:
        row["images_per_s_range"] = (min(rates), max(rates))
    work = flops * (3.0 if mode == "train" else 1.0)
    row["fraction_of_peak"] = work * row["images_per_s"] / peak
    return row


def summary_lines(rows):
    """The table's summary, as lines: for each peer, keras_vit's images/s
    and peak memory over the peer's at each image size (images/s above 1:
    keras_vit faster; memory below 1: keras_vit smaller); then, for each
    peer and keras_vit timed at several sizes, how the seconds per image
    grow against the tokens, from the smallest size (exponent 1: as the
    tokens, 2: as their square). Rows with an error are left out."""
    good = {
        (r["variant"], r["mode"], r["batch"], r["peer"], r["image_size"]): r
        for r in rows
        if "images_per_s" in r
    }
    groups = {}
    for variant, mode, batch, peer, size in good:
        groups.setdefault((variant, mode, batch, peer), []).append(size)
    lines = []
    if any(r.get("memory_includes_export") for r in good.values()):
        lines.append(MEMORY_NOTE)
    for key, sizes in groups.items():
        variant, mode, batch, peer = key
        pairs = [
            (s, good[(variant, mode, batch, "keras_vit", s)], good[key + (s,)])
            for s in sizes
            if (variant, mode, batch, "keras_vit", s) in good
        ]
        if peer == "keras_vit" or not pairs:
            continue
        speed = ", ".join(
            f"{s} px {a['images_per_s'] / b['images_per_s']:.2f}x"
            for s, a, b in pairs
        )
        memory = ", ".join(
            f"{s} px {a['peak_memory_mb'] / b['peak_memory_mb']:.2f}x"
            if not b.get("memory_includes_export")
            else f"{s} px not comparable (*)"
            for s, a, b in pairs
        )
        lines.append(
            f"keras_vit / {peer}, {variant} {mode} batch {batch}: "
            f"images/s {speed}; peak memory {memory}"
        )
    for (variant, mode, batch, peer), sizes in groups.items():
        if len(sizes) > 1:
            curve = [good[(variant, mode, batch, peer, s)] for s in sizes]
            lines.append(_growth_line(curve))
    return lines


def options_lines(rows, compare):
    """What each `(model, baseline)` pair's architecture options cost, as
    lines: for every peer, mode, batch and image size timed for both,
    `model`'s seconds per image and peak memory over `baseline`'s (above 1:
    the options cost more), next to their FLOPs and tokens. Rows with an
    error are left out."""
    good = {
        (r["variant"], r["peer"], r["mode"], r["batch"], r["image_size"]): r
        for r in rows
        if "images_per_s" in r
    }
    lines = []
    for model, baseline in compare:
        for key, row in good.items():
            base = good.get((baseline, *key[1:]))
            if key[0] != model or base is None:
                continue
            _, peer, mode, batch, size = key
            flops = row["gflops_per_image"] / base["gflops_per_image"]
            lines.append(
                f"options cost, {model} against {baseline}, {peer} {mode} "
                f"batch {batch}, {size} px: seconds per image "
                f"{base['images_per_s'] / row['images_per_s']:.2f}x, peak "
                f"memory {row['peak_memory_mb'] / base['peak_memory_mb']:.2f}x"
                f"; GFLOPs {row['gflops_per_image']:.2f} against "
                f"{base['gflops_per_image']:.2f} ({flops:.2f}x), tokens "
                f"{row['tokens']} against {base['tokens']}"
            )
    return lines


def _growth_line(curve):
    """How one peer's seconds per image grow with the tokens over `curve`,
    its rows at several sizes, against its smallest."""
    curve = sorted(curve, key=lambda r: r["tokens"])
    base = curve[0]
    parts = []
    for row in curve[1:]:
        cost = base["images_per_s"] / row["images_per_s"]
        tokens = row["tokens"] / base["tokens"]
        exponent = np.log(cost) / np.log(tokens) if tokens > 1 else np.nan
        parts.append(
            f"{row['image_size']} px {cost:.2f}x for {tokens:.2f}x tokens "
            f"(exponent {exponent:.2f})"
        )
    return (
        f"cost growth, {base['peer']} {base['variant']} {base['mode']} batch "
        f"{base['batch']}, seconds per image against {base['image_size']} px: "
        + ", ".join(parts)
    )


def _format_row(row, width=8):
    """One table line; the model's name right-aligned in `width`."""
    head = (
        f"{row['variant']:>{width}} {row['image_size']:>4} px "
        f"{row['peer']:>12} {row['mode']:>9} batch {row['batch']:>3}"
    )
    if "gflops_per_image" in row:
        head += (
            f"  {row['tokens']:>4} tokens {row['gflops_per_image']:6.2f} GFLOPs"
        )
    if "error" in row:
        return f"{head}  n/a ({row['error']})"
    xla = {True: "  XLA", False: "  no XLA"}.get(row.get("xla"), "")
    if "images_per_s_range" in row:
        low, high = row["images_per_s_range"]
        xla = f"  (rounds {low:.2f}-{high:.2f})" + xla
    cores = row.get("cores_busy")
    cores = "" if cores is None else f"  {cores:4.2f} cores busy"
    mark = "*" if row.get("memory_includes_export") else " "  # MEMORY_NOTE
    return (
        f"{head}  {row['images_per_s']:8.2f} images/s  "
        f"{row['peak_memory_mb']:8.0f} MB peak{mark} "
        f"{100 * row['fraction_of_peak']:5.1f}% of peak{cores}{xla}"
    )


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


def parser():
    """The suite's command line (`python benchmarks/suite.py --help`)."""
    bench = argparse.ArgumentParser(
        prog="benchmarks/suite.py",
        description="images/s, peak memory and % of the machine's peak of "
        "keras_vit, next to peers; or, with --profile, where the time goes",
    )
    _add_model_arguments(bench)
    _add_timing_arguments(bench)
    _add_compute_arguments(bench)
    bench.set_defaults(
        not_profiled={dest: bench.get_default(dest) for dest in NOT_PROFILED}
    )
    return bench


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
        type=int,
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
        type=int,
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
        type=int,
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
        type=int,
        default=5,
        help="timed calls per measurement, at least (default: 5)",
    )
    bench.add_argument(
        "--warmup", type=int, default=2, help="untimed calls first (default: 2)"
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
        type=int,
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


def main(argv=None):
    """Runs the suite, or `--profile`, with the command line `argv`;
    returns the exit status (2 for a bad argument, named on stderr)."""
    args = parser().parse_args(argv)
    try:
        run(args)
    except ValueError as error:
        print(f"benchmarks/suite.py: error: {error}", file=sys.stderr)
        return 2
    return 0


def run(args):
    """The suite, or `--profile`, for parsed arguments."""
    models = _models(args)
    timing = (
        {} if args.min_seconds is None else {"min_seconds": args.min_seconds}
    )
    if args.profile:
        _refuse_unprofiled(args)
        batch_size = _profile_batch_size(args)
        image_size = args.image_size and args.image_size[-1]
        for model in models:  # all built (no weights) before one is timed
            sequence_shape(model, image_size)
        for model in models:
            profiling.profile(
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
    train_batches = train_batch_sizes(args)

    print(
        f"benchmarks/suite.py: {', '.join(models)}; inference batches "
        f"{inference_batches}"
        + (f", training batches {train_batches}" if args.train else "")
        + (f"; image sizes {args.image_size}" if args.image_size else "")
        + f"; dtype policy {args.dtype or 'float32'}; XLA {args.jit_compile}"
        + ("; remat on" if args.remat else "")
        + (f"; {args.rounds} interleaved rounds" if args.rounds > 1 else "")
    )
    run_suite(
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


if __name__ == "__main__":
    sys.exit(main())
