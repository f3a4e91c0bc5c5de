"""Batch-1 latency of DINOv3-S/16 as a phone runs it: keras_vit's TFLite
(float32, dynamic int8; XNNPACK) against the same weights in ONNX Runtime
(timm's own `torch.onnx.export`) and against a learned-position ViT-S/16
TFLite of the same size, at 256 px, in interleaved rounds.

    python benchmarks/dinov3_phone.py --torch-python /path/to/torch/python

`--torch-python` runs `peers/dinov3_onnx.py` (torch, timm, onnx,
onnxscript) to write timm's perturbed DINOv3-S/16 and its ONNX file; this
script reads the same `model.safetensors` into keras_vit, exports and
verifies the TFLite files, checks that every runtime gives timm's
features, then times each file `--calls` times per round (median per
round) for `--rounds` rounds, one runtime after another in each round,
and prints a Markdown table of the rounds' range and median.
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
from keras_vit.export import onnx as onnx_lib
from keras_vit.export.runtime import load_interpreter
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

HERE = Path(__file__).resolve().parent
IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
SIZE = 256


def _tflite_runner(path, threads):
    interpreter = load_interpreter(path, num_threads=threads)
    interpreter.allocate_tensors()
    (inp,), (out,) = (
        interpreter.get_input_details(),
        interpreter.get_output_details(),
    )

    def run(x):
        interpreter.set_tensor(inp["index"], x)
        interpreter.invoke()
        return interpreter.get_tensor(out["index"])

    return run


def _onnx_runner(path, threads):
    """timm's file takes ImageNet-normalised NCHW images."""
    session = onnx_lib.session(str(path), num_threads=threads)
    name = session.get_inputs()[0].name
    mean, std = (np.float32(IMAGENET[k]) for k in ("mean", "std"))

    def run(x):
        x = ((x / 255 - mean) / std).transpose(0, 3, 1, 2)
        return session.run(None, {name: x})[0]

    return run


def _runners(folder, threads):
    """Each row's `(name, size in MB, run)`: `run` takes [0, 255] pixels."""
    dinov3 = convert.model_for_checkpoint(
        read_checkpoint(str(folder / "model.safetensors")),
        num_heads=6,
        normalization=IMAGENET,
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
        rows.append((label, path.stat().st_size, _tflite_runner(path, threads)))
    onnx = folder / "timm.onnx"
    if onnx.exists():
        size = onnx.stat().st_size + (folder / "timm.onnx.data").stat().st_size
        run = _onnx_runner(onnx, threads)
        rows.append(("DINOv3-S/16 timm ONNX, ONNX Runtime", size, run))
    return rows


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
    rows = _runners(folder, args.threads)
    for label, _, run in rows:
        if label.startswith("DINOv3"):
            diff = np.abs(run(images) - np.asarray(timm["features"])).max()
            print(f"{label}: max |features - timm's| = {diff:.2g}")
    print("load before:", os.getloadavg())
    rounds = {label: [] for label, _, _ in rows}
    for _ in range(args.rounds):
        for label, _, run in rows:
            call = lambda run=run: run(images)  # noqa: E731
            seconds = timing.median_seconds(call, args.calls, 2)
            rounds[label].append(seconds * 1000)
    print("load after:", os.getloadavg())
    print(f"| runtime ({args.threads} thread) | file MB | median ms | ", end="")
    print("range ms |")
    print("|---|---:|---:|---:|")
    for label, size, _ in rows:
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
