"""`keras-vit benchmark`'s table: every (peer, variant, mode, batch), each
measured in a process of its own.

`run_suite` measures the machine's matmul peak, then every row of the plan
in a fresh Python process (`measure_in_subprocess`), so that peak memory is
that measurement's own and one run's caches do not help the next. keras_vit,
keras-hub, ONNX Runtime and OpenVINO Runtime run `keras_vit.benchmark.worker`
(one `measure`, in `keras_vit.benchmark.throughput`); timm runs its own
program in its own interpreter (`keras_vit.benchmark.peers.timm_runner`).
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np

from keras_vit import arg_checks
from keras_vit import timing
from keras_vit.benchmark import flops as flops_lib
from keras_vit.benchmark.peers import timm_runner
from keras_vit.benchmark.throughput import MIN_SECONDS
from keras_vit.benchmark.throughput import ONNX_FLOAT32_ONLY
from keras_vit.benchmark.throughput import RUNTIMES
from keras_vit.benchmark.throughput import compute_dtype
from keras_vit.benchmark.throughput import variant_name
from keras_vit.models import ViT


def measure_in_subprocess(timm_python=None, **kwargs):
    """`measure(**kwargs)` in a fresh Python process; `None` if the peer is
    not installed or fails (the reason is returned as `"error"`). timm runs
    in `timm_python` (default: this interpreter)."""
    if kwargs.get("peer") == "timm":
        variant = variant_name(kwargs["variant"])
        if kwargs.get("image_size") not in (None, 224):
            return {"error": "peers are timed at 224 px only"}
        return timm_runner.measure(
            variant,
            kwargs["mode"],
            kwargs["batch_size"],
            kwargs.get("steps", 5),
            kwargs.get("warmup", 2),
            timm_python,
            kwargs.get("min_seconds", MIN_SECONDS),
            compute_dtype(kwargs.get("dtype")),
        )
    if (
        kwargs.get("peer") == "onnxruntime"
        and compute_dtype(kwargs.get("dtype")) != "float32"
    ):
        return {"error": ONNX_FLOAT32_ONLY}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_vit.benchmark.worker",
            json.dumps(kwargs),
        ],
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
):
    """Measures every (peer, variant, mode, batch) and prints a table.

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
    peak = _print_peak(compute_dtype(dtype), printer)
    plan = _plan(variants, peers, inference_batches, train_batches, image_size)
    samples = {key: [] for key in plan}
    for index in range(rounds):
        for key in plan:
            variant, _, peer, mode, batch = key
            result = measure_in_subprocess(
                peer=peer,
                variant=variant,
                mode=mode,
                batch_size=batch,
                steps=steps,
                warmup=warmup,
                dtype=dtype,
                jit_compile=jit_compile,
                remat=remat,
                image_size=image_size,
                timm_python=timm_python,
                min_seconds=min_seconds,
            )
            samples[key].append(result)
            prefix = f"round {index + 1}/{rounds} " if rounds > 1 else ""
            printer(prefix + _format_row(_row(key, [result], peak)))
    rows = [_row(key, samples[key], peak) for key in plan]
    if rounds > 1:
        printer(f"median of {rounds} interleaved rounds:")
        for row in rows:
            printer(_format_row(row))
    return rows


def _print_peak(compute, printer):
    """Measures and prints the machine's matmul peak; returns the one the
    rows' share of the peak is of (the compute dtype's own)."""
    peak = flops_lib.peak_flops()
    line = (
        f"machine: {os.cpu_count()} CPU cores, measured float32 matmul peak "
        f"{peak / 1e9:.0f} GFLOP/s"
    )
    if compute != "float32":
        peak = flops_lib.peak_flops(dtype=compute)
        line += (
            f", {compute} {peak / 1e9:.0f} GFLOP/s (the share of peak below)"
        )
    printer(line)
    return peak


def _plan(variants, peers, inference_batches, train_batches, image_size):
    """The suite's measurements, as `(variant, flops, peer, mode, batch)`;
    the runtimes (`RUNTIMES`) are timed for inference only."""
    plan = []
    kwargs = {"image_size": image_size} if image_size else {}
    for variant in variants:
        with keras.StatelessScope(initialize_variables=False):
            flops = flops_lib.model_flops(
                ViT.from_variant(variant_name(variant), **kwargs)
            )
        for peer in peers:
            modes = [("inference", b) for b in inference_batches]
            if peer not in RUNTIMES:
                modes += [("train", b) for b in train_batches]
            plan += [
                (variant, flops, peer, mode, batch) for mode, batch in modes
            ]
    return plan


def _row(key, results, peak):
    """One table row from a measurement's results over the rounds."""
    variant, flops, peer, mode, batch = key
    row = {
        "variant": variant,
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


def _format_row(row):
    head = (
        f"{row['variant']:>8} {row['peer']:>12} {row['mode']:>9} "
        f"batch {row['batch']:>3}"
    )
    if "error" in row:
        return f"{head}  n/a ({row['error']})"
    xla = {True: "  XLA", False: "  no XLA"}.get(row.get("xla"), "")
    if "images_per_s_range" in row:
        low, high = row["images_per_s_range"]
        xla = f"  (rounds {low:.2f}-{high:.2f})" + xla
    cores = row.get("cores_busy")
    cores = "" if cores is None else f"  {cores:4.2f} cores busy"
    return (
        f"{head}  {row['images_per_s']:8.2f} images/s  "
        f"{row['peak_memory_mb']:8.0f} MB peak  "
        f"{100 * row['fraction_of_peak']:5.1f}% of peak{cores}{xla}"
    )
