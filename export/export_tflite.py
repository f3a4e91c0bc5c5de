"""Export a model to a verified TFLite (LiteRT) file.

    python export/export_tflite.py runs/digits/model.keras --output vit.tflite \
        [--quantize {none,float16,dynamic,int8,int16x8}] [--representative-data digits] \
        [--batch-size 1] [--labels labels.txt]

Same as `keras-vit export MODEL --format tflite ...` (see export/README.md).
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", "--format", "tflite", *sys.argv[1:]]))
