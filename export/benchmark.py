"""Latency at batch 1 of Keras, the SavedModel, each TFLite variant, and
ONNX Runtime and OpenVINO when they are installed.

The same as `keras-vit benchmark-export ...`: the script hands its
arguments to `keras_vit.cli.main`. Measured tables: the README's export
section.

    python export/benchmark.py runs/digits/model.keras --threads 1 2 --runs 50

`--help` lists every option.
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["benchmark-export", *sys.argv[1:]]))
