"""Classify one image with an exported ViT, using LiteRT only.

What a phone app does, in Python: no TensorFlow, no Keras, no keras_vit —
only the LiteRT runtime (`pip install ai-edge-litert`), NumPy and Pillow
(to decode the image). The class names and input size come from the JSON
that `keras-vit export` writes next to the model (`vit.tflite` ->
`vit.json`).

    keras-vit export runs/digits/model.keras --format tflite --output vit.tflite
    python examples/tflite_inference.py vit.tflite photo.jpg \\
        [--top 5] [--threads 2]

prints the top-5 classes with their probabilities. The model takes RGB
pixel values in [0, 255] (float32, or uint8/int8 with the input's scale and
zero point for a full-integer model); all other preprocessing is inside it.
"""

import argparse
import json
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter
from PIL import Image


def read_metadata(model_path):
    """The sidecar JSON of `model_path`, or `None` if there is none."""
    path = os.path.splitext(model_path)[0] + ".json"
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def load_image(path, height, width):
    """An RGB image resized to `(height, width)`: float32 pixels in [0, 255]."""
    with Image.open(path) as image:
        image = image.convert("RGB").resize((width, height), Image.BILINEAR)
        return np.asarray(image, dtype=np.float32)


def classify(model_path, image_path, top=5, threads=None):
    """Returns `[(class name, probability), ...]`, best first.

    Args:
        model_path: the `.tflite` file.
        image_path: an image file (JPEG, PNG, ...).
        top: int, how many classes to return. Defaults to `5`.
        threads: int or `None` (1 thread). Defaults to `None`.
    """
    # The default op resolver applies the XNNPACK delegate (fast float and
    # int8 kernels on ARM and x86 CPUs).
    interpreter = Interpreter(model_path=model_path, num_threads=threads)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    _, height, width, _ = inp["shape_signature"]
    if inp["shape_signature"][0] != 1:  # a dynamic batch: ask for one image
        interpreter.resize_tensor_input(inp["index"], [1, height, width, 3])
    interpreter.allocate_tensors()

    x = load_image(image_path, height, width)[None]
    if np.dtype(inp["dtype"]).kind in "iu":  # a full-integer model
        scale, zero_point = inp["quantization"]
        info = np.iinfo(inp["dtype"])
        x = np.clip(np.round(x / scale) + zero_point, info.min, info.max)
    interpreter.set_tensor(inp["index"], x.astype(inp["dtype"]))
    interpreter.invoke()
    y = interpreter.get_tensor(out["index"])[0]
    if np.dtype(out["dtype"]).kind in "iu":
        scale, zero_point = out["quantization"]
        y = (y.astype(np.float32) - zero_point) * scale

    metadata = read_metadata(model_path) or {}
    if metadata.get("output", {}).get("kind") == "logits":
        y = np.exp(y - y.max())
        y = y / y.sum()
    names = metadata.get("class_names") or [f"class_{i}" for i in range(len(y))]
    order = np.argsort(-y)[:top]
    return [(names[i], float(y[i])) for i in order]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the .tflite file (its .json next to it)")
    parser.add_argument("image", help="an image file")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    for name, probability in classify(
        args.model, args.image, args.top, args.threads
    ):
        print(f"{probability:.4f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
