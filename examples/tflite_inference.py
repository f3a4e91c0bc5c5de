"""Classify one image with an exported ViT, using LiteRT only.

What a phone app does, in Python: no TensorFlow, no Keras, no keras_vit —
only the LiteRT runtime (`pip install ai-edge-litert`), NumPy and Pillow
(to decode the image). The class names, the input size and what the model
takes come from the JSON that `keras-vit export` writes next to the model
(`vit.tflite` -> `vit.json`).

    keras-vit export runs/digits/model.keras --format tflite --output vit.tflite
    python examples/tflite_inference.py vit.tflite photo.jpg \\
        [--top 5] [--threads 2]

prints the top-5 classes with their probabilities. The image is resized as the
model was evaluated, as the metadata's `input.image_resize` says: the whole
image squashed (`crop_pct` null), or timm's centre crop (resized, aspect ratio
kept, to cover `floor(size / crop_pct)`, then the centre cut out). What the
model takes is the metadata's `input`: RGB pixel values in [0, 255] when its
`pixel_range` is [0, 255] (the default export: the model normalises them
itself); for a model built with `include_preprocessing=False` (`pixel_range`
null), the pixels normalised as its `normalization` says (null:
`pixels / 127.5 - 1`; else `(pixels / 255 - mean) / std` per channel). A
full-integer model (`--io-dtype uint8` or `int8`) takes those values quantized
with the input's scale and zero point. A feature extractor
(`include_top=False`, output kind "features") has no classes and is refused.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter
from PIL import Image
from PIL import UnidentifiedImageError


def read_metadata(model_path):
    """The sidecar JSON of `model_path`: what the model takes and returns.

    Raises:
        ValueError: if there is none (without it, what to feed the model
            would be a guess).
    """
    path = os.path.splitext(model_path)[0] + ".json"
    if not os.path.isfile(path):
        raise ValueError(
            f"No metadata beside the model ({path}): export it with "
            f"`keras-vit export`. Received: model={model_path!r}"
        )
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def check_file(name, path):
    """Raises unless `path` is a file: a missing model would be reported
    as missing metadata, a missing image as Pillow's traceback."""
    if os.path.isdir(path):
        raise ValueError(
            f"This is a folder, not a file. Received: {name}={path!r}"
        )
    if not os.path.isfile(path):
        raise ValueError(f"The file does not exist. Received: {name}={path!r}")


#: The metadata's `image_resize` interpolations as Pillow's filters.
FILTERS = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}


def load_image(path, height, width, image_resize=None):
    """An RGB image as the model's `(height, width)` input, resized as the
    metadata's `input.image_resize` says: float32 pixels in [0, 255].

    With `crop_pct` null the whole image is squashed to the size (also for
    `None`: metadata of an older keras_vit, whose exports were always fed
    squashed images); else, as timm and torchvision evaluate, it is
    resized keeping its aspect ratio (`cover_size`) and the centre cut out.
    Pillow's `resize` antialiases; with `antialias` false (TensorFlow's
    resize without it, as Google's own evaluation) the image is sampled at
    the output's pixel centres instead (`resized`).

    Raises:
        ValueError: for a file that Pillow cannot read as an image.
    """
    setting = image_resize or {}
    crop_pct = setting.get("crop_pct")
    resample = FILTERS[setting.get("interpolation", "bilinear")]
    antialias = setting.get("antialias", True)
    try:
        image = Image.open(path)
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(
            f"Could not read the image ({error}). Received: image={path!r}"
        ) from None
    with image:
        image = image.convert("RGB")
        if crop_pct is None:
            image = resized(image, (width, height), resample, antialias)
        else:
            columns, rows = cover_size(image.size, height, width, crop_pct)
            image = resized(image, (columns, rows), resample, antialias)
            left = round((columns - width) / 2)  # torchvision's CenterCrop
            top = round((rows - height) / 2)
            image = image.crop((left, top, left + width, top + height))
        return np.asarray(image, dtype=np.float32)


def resized(image, size, resample, antialias):
    """`image` resized to Pillow's `size` `(columns, rows)`: `resize`
    (which low-pass filters when it shrinks, as TensorFlow's antialiased
    resize), or without antialiasing an affine scaling, which samples the
    image at the output pixels' centres as `tf.image.resize` does."""
    if antialias:
        return image.resize(size, resample)
    columns, rows = size
    scale = (image.width / columns, 0, 0, 0, image.height / rows, 0)
    return image.transform(size, Image.AFFINE, scale, resample=resample)


def cover_size(size, height, width, crop_pct):
    """`(columns, rows)` that an image of Pillow's `size` is resized to
    before the centre crop: scaled, aspect ratio kept, to cover
    `floor(side / crop_pct)` of each side; for a square input
    torchvision's `Resize(int)` (the shorter side to that size, the longer
    truncated), else timm's `ResizeKeepRatio` (rounded)."""
    target = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    columns, rows = size
    if target[0] == target[1]:
        short = min(rows, columns)
        return tuple(
            target[0] if side == short else int(target[0] * side / short)
            for side in (columns, rows)
        )
    ratio = min(rows / target[0], columns / target[1])
    return round(columns / ratio), round(rows / ratio)


def model_inputs(pixels, spec, model_path):
    """What the model takes for [0, 255] RGB `pixels`, as the metadata's
    `input` (`spec`) says: the pixels themselves if its `pixel_range` is
    [0, 255]; else (`include_preprocessing=False`) the pixels normalised by
    its `normalization`: null is the paper's `pixels / 127.5 - 1`,
    `{"mean", "std"}` is `(pixels / 255 - mean) / std` per channel. Both as
    the one float32 multiply-add `pixels * scale + offset` that the model's
    own rescaling layer computes."""
    if spec.get("pixel_range") is not None:
        return pixels  # the model normalises them itself
    if "normalization" not in spec:  # metadata of an older keras_vit
        raise ValueError(
            "The model takes normalised inputs (include_preprocessing="
            "False) and its metadata does not say how they were normalised "
            f"(no input.normalization): export it again. Received: "
            f"model={model_path!r}"
        )
    norm = spec["normalization"]
    if norm is None:
        scale, offset = 1.0 / 127.5, -1.0
    else:
        std = np.asarray(norm["std"], np.float64)
        scale, offset = 1.0 / (255.0 * std), -np.asarray(norm["mean"]) / std
    scale, offset = (np.asarray(v, np.float32) for v in (scale, offset))
    return pixels * scale + offset


def _check_count(name, value):
    # Python's slicing would take --top -1 as "all but the last class" and
    # 0 as none; LiteRT's own error for 0 threads does not name the flag.
    if value is not None and value < 1:
        raise ValueError(
            f"--{name} must be 1 or more. Received: {name}={value!r}"
        )


def classify(model_path, image_path, top=5, threads=None):
    """Returns `[(class name, probability), ...]`, best first.

    Args:
        model_path: the `.tflite` file, its metadata `.json` beside it.
        image_path: an image file (JPEG, PNG, ...).
        top: int >= 1, how many classes to return. Defaults to `5`.
        threads: int >= 1, or `None` (1 thread). Defaults to `None`.

    Raises:
        ValueError: for `top` or `threads` below 1, a model or image file
            that does not exist, an image Pillow cannot read, a model
            without its metadata, or a feature extractor (it returns no
            classes).
    """
    _check_count("top", top)
    _check_count("threads", threads)
    check_file("model", model_path)
    check_file("image", image_path)
    metadata = read_metadata(model_path)
    kind = metadata["output"]["kind"]
    if kind == "features":
        raise ValueError(
            "The model has no classifier head (include_top=False): it "
            "returns features, not classes. Received: model="
            f"{model_path!r} with output kind 'features'"
        )
    # The default op resolver applies the XNNPACK delegate (fast float and
    # int8 kernels on ARM and x86 CPUs).
    interpreter = Interpreter(model_path=model_path, num_threads=threads)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    _, height, width, _ = inp["shape_signature"]
    if inp["shape_signature"][0] != 1:  # a dynamic batch: ask for one image
        interpreter.resize_tensor_input(inp["index"], [1, height, width, 3])
    interpreter.allocate_tensors()

    resize = metadata["input"].get("image_resize")
    pixels = load_image(image_path, height, width, resize)[None]
    x = model_inputs(pixels, metadata["input"], model_path)
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

    if kind == "logits":
        y = np.exp(y - y.max())
        y = y / y.sum()
    names = metadata.get("class_names") or [f"class_{i}" for i in range(len(y))]
    order = np.argsort(-y, kind="stable")[:top]
    return [(names[i], float(y[i])) for i in order]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the .tflite file (its .json next to it)")
    parser.add_argument("image", help="an image file")
    parser.add_argument("--top", type=int, default=5, help="1 or more")
    parser.add_argument("--threads", type=int, default=None, help="1 or more")
    args = parser.parse_args(argv)
    try:
        results = classify(args.model, args.image, args.top, args.threads)
    except ValueError as error:
        parser.error(str(error))
    for name, probability in results:
        print(f"{probability:.4f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
