"""Latency at batch 1 of Keras, the SavedModel and each TFLite variant.

    python export/benchmark.py runs/digits/model.keras [--threads 1 2] [--runs 50]

Same as `keras-vit benchmark-export ...` (see export/README.md).
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["benchmark-export", *sys.argv[1:]]))
