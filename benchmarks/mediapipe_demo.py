"""The demo's model through MediaPipe Tasks' `ImageClassifier` (Python; the
C++ core of Android and iOS), per TFLite mode, on Fashion-MNIST's test set.

Exports the trained demo model (`make demo` writes runs/demo/model.keras)
as float32, float16, dynamic int8 and full int8 with uint8 input and
output, then for each file reports MediaPipe's accuracy and its top-1
agreement with Keras. For float32 it also compares the stretch (no region
of interest) with the centre crop (`crop_pct` 0.875, bilinear, no
antialias) three ways: Keras on keras_vit's own crop, MediaPipe with
`keras_vit.data.resize.region_of_interest`, and MediaPipe with the kept
part of the image as the region (MediaPipe samples it edge to edge).

    python benchmarks/mediapipe_demo.py --model runs/demo/model.keras
"""

import argparse
import os
import tempfile

import keras
import mediapipe as mp
import numpy as np
from mediapipe.tasks.python.components.containers.rect import RectF

from keras_vit import export
from keras_vit.data import datasets
from keras_vit.data import resize

#: The `quantize` modes, with their names in the table.
MODES = {
    "none": "float32",
    "float16": "float16",
    "dynamic": "dynamic int8",
    "int8": "full int8, uint8 I/O",
}
CROP = {"crop_pct": 0.875, "interpolation": "bilinear", "antialias": False}


def classify(path, images, roi=None):
    """MediaPipe's top-1 class index for each uint8 image."""
    vision = mp.tasks.vision
    options = vision.ImageClassifierOptions(
        base_options=mp.tasks.BaseOptions(model_asset_path=path),
        max_results=1,
    )
    processing = None
    if roi is not None:
        processing = vision.ImageProcessingOptions(
            region_of_interest=RectF(**roi)
        )
    with vision.ImageClassifier.create_from_options(options) as classifier:
        return np.array(
            [
                classifier.classify(
                    mp.Image(image_format=mp.ImageFormat.SRGB, data=image),
                    processing,
                )
                .classifications[0]
                .categories[0]
                .index
                for image in images
            ]
        )


def kept_part(shape, size):
    """The part of the image keras_vit's crop keeps, as fractions (what
    `region_of_interest` returned before it was aligned to MediaPipe's
    sampling)."""
    rows, columns = (int(v) for v in resize._cover_size(shape, *size, CROP))
    top = int(resize._centre_offset(rows, size[0]))
    left = int(resize._centre_offset(columns, size[1]))
    return {
        "left": left / columns,
        "top": top / rows,
        "right": (left + size[1]) / columns,
        "bottom": (top + size[0]) / rows,
    }


def row(name, predicted, labels, keras_top1):
    accuracy = np.mean(predicted == labels)
    agreement = np.mean(predicted == keras_top1)
    return f"| {name} | {accuracy:.4f} | {agreement:.4f} |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="runs/demo/model.keras")
    parser.add_argument(
        "--limit", type=int, default=None, help="the first N test images"
    )
    args = parser.parse_args()
    _, (gray, labels) = datasets.fashion_mnist_arrays()
    images = np.repeat(gray[: args.limit, ..., None], 3, axis=-1)
    labels = labels[: args.limit]
    model = keras.saving.load_model(args.model, compile=False)
    size = model.image_size
    top1 = np.argmax(model.predict(images.astype("float32"), verbose=0), -1)
    cropped = np.stack([resize.resize_image(i, size, CROP) for i in images])
    crop_top1 = np.argmax(model.predict(cropped, verbose=0), -1)
    print(f"{len(images)} test images, {size[0]}x{size[1]}")
    print("| export | MediaPipe accuracy | top-1 agreement with Keras |")
    print("|---|---:|---:|")
    print(row("Keras (float32)", top1, labels, top1))
    with tempfile.TemporaryDirectory() as tmp:
        for mode, name in MODES.items():
            path = os.path.join(tmp, f"{mode}.tflite")
            options = {}
            if mode == "int8":
                options = {
                    "representative_data": "fashion_mnist",
                    "io_dtype": "uint8",
                }
            export.export_tflite(
                args.model, path, quantize=mode, verify=False, **options
            )
            kib = os.path.getsize(path) / 1024
            predicted = classify(path, images)
            print(row(f"{name} ({kib:.0f} KiB)", predicted, labels, top1))
            if mode == "none":
                float32 = path
        roi = resize.region_of_interest(images.shape[1:], size, CROP)
        by_roi = classify(float32, images, roi)
        by_kept = classify(float32, images, kept_part(images.shape[1:3], size))
    print()
    print("| centre crop (float32) | accuracy | agreement with Keras's crop |")
    print("|---|---:|---:|")
    print(row("Keras, keras_vit's crop", crop_top1, labels, crop_top1))
    print(row("MediaPipe, region_of_interest", by_roi, labels, crop_top1))
    print(row("MediaPipe, kept part as region", by_kept, labels, crop_top1))
    print(f"region_of_interest: {roi}")


if __name__ == "__main__":
    main()
