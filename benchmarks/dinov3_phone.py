"""Batch-1 latency of DINOv3-S/16 as a phone runs it: keras_vit's TFLite
(float32, dynamic int8; XNNPACK) against the same weights in ONNX Runtime
(timm's own `torch.onnx.export`) and against a learned-position ViT-S/16
TFLite of the same size, at 256 px, in interleaved rounds.

    python benchmarks/dinov3_phone.py --torch-python /path/to/torch/python

`--torch-python` runs `peers/dinov3_onnx.py` (torch, timm, onnx,
onnxscript) to write timm's perturbed DINOv3-S/16 and its ONNX file; this
script reads the same `model.safetensors` into keras_vit, exports and
verifies the TFLite files, checks that every runtime gives timm's
features, then times each file with `keras_vit.export.latency`'s
`time_tflite` / `time_onnx` (random inputs made before the timed calls;
the TFLite files normalise pixels in their graph, timm's ONNX file takes
values already normalised, so neither times NumPy preprocessing)
`--calls` times per round (median per round) for `--rounds` rounds, one
runtime after another in each round, and prints a Markdown table of the
rounds' range and median.
"""

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import keras_vit
from keras_vit import timing
from keras_vit.export import export_tflite
from keras_vit.export import latency
from keras_vit.export import onnx as onnx_lib
from keras_vit.export import runtime
from keras_vit.registry.presets import IMAGENET_NORMALIZATION
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

HERE = Path(__file__).resolve().parent
SIZE = 256


def _timm_input(images):
    """timm's file takes ImageNet-normalised NCHW images."""
    mean, std = (np.float32(IMAGENET_NORMALIZATION[k]) for k in ("mean", "std"))
    return ((images / 255 - mean) / std).transpose(0, 3, 1, 2)


def _rows(folder):
    """Each row's `(name, file, size in bytes, latencies, run)`:
    `latencies` is `keras_vit.export.latency`'s timer for the file,
    `run(path, pixels)` its outputs on [0, 255] pixels."""
    dinov3 = convert.model_for_checkpoint(
        read_checkpoint(str(folder / "model.safetensors")),
        num_heads=6,
        normalization=IMAGENET_NORMALIZATION,
        image_size=SIZE,
    )
    learned = keras_vit.ViT_S16(image_size=SIZE, include_top=False)
    rows = []
    for label, model, quantize in (
        ("DINOv3-S/16 TFLite float32", dinov3, "none"),
        ("DINOv3-S/16 TFLite dynamic int8", dinov3, "dynamic"),
        ("ViT-S/16 learned positions, TFLite float32", learned, "none"),
        ("ViT-S/16 learned positions, TFLite dynamic int8", learned, "dynamic"),
    ):
        path = folder / f"{model.name}_{quantize}_{len(rows)}.tflite"
        export_tflite(model, str(path), quantize=quantize, num_verify_images=4)
        size = path.stat().st_size
        rows.append((label, path, size, latency.time_tflite, _run_tflite))
    onnx = folder / "timm.onnx"
    if onnx.exists():
        size = onnx.stat().st_size + (folder / "timm.onnx.data").stat().st_size
        label = "DINOv3-S/16 timm ONNX, ONNX Runtime"
        rows.append((label, onnx, size, latency.time_onnx, _run_timm_onnx))
    return rows


def _run_tflite(path, pixels):
    return runtime.run_tflite(str(path), pixels)


def _run_timm_onnx(path, pixels):
    return onnx_lib.run_onnx(str(path), _timm_input(pixels))


def _median_ms(rows, args):
    """Each row's median latency (ms) in each of `args.rounds` rounds, the
    rows timed one after another within a round. The timers feed random
    inputs of each file's shape, made before the timed calls (the values
    do not change what a call computes)."""
    rounds = {row[0]: [] for row in rows}
    for _ in range(args.rounds):
        for label, path, _, latencies, _ in rows:
            times = latencies(str(path), args.threads, args.calls, warmup=2)
            rounds[label].append(timing.percentile(times, 50))
    return rounds


def main(args):
    folder = Path(args.folder or tempfile.mkdtemp(prefix="dinov3_phone_"))
    subprocess.run(
        [args.torch_python, str(HERE / "peers" / "dinov3_onnx.py"), folder],
        check=True,
        capture_output=True,
    )
    timm = json.loads((folder / "timm.json").read_text())
    if not timm["exported"]:
        print("timm's ONNX export failed:\n" + timm["error"])
    images = np.load(folder / "images.npy")
    rows = _rows(folder)
    for label, path, _, _, run in rows:
        if label.startswith("DINOv3"):
            diff = np.abs(run(path, images) - np.asarray(timm["features"]))
            print(f"{label}: max |features - timm's| = {diff.max():.2g}")
    print("load before:", os.getloadavg())
    rounds = _median_ms(rows, args)
    print("load after:", os.getloadavg())
    print(f"| runtime ({args.threads} thread) | file MB | median ms | ", end="")
    print("range ms |")
    print("|---|---:|---:|---:|")
    for label, _, size, _, _ in rows:
        ms = rounds[label]
        print(
            f"| {label} | {size / 1e6:.1f} | {np.median(ms):.1f} | "
            f"{min(ms):.1f}-{max(ms):.1f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", required=True)
    parser.add_argument("--folder", default=None, help="default: a new one")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    main(parser.parse_args())
