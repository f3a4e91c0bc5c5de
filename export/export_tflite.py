"""Export a model to a TFLite (LiteRT) file, verified before it is written.

The same as `keras-vit export MODEL --format tflite ...`: the script adds
`--format tflite` (and refuses another) and hands the rest to
`keras_vit.cli`. Quantization modes and the checks: the README's export
section.

    python export/export_tflite.py runs/digits/model.keras \\
        --output vit_int8.tflite \\
        --quantize int8 --representative-data digits

`--help` lists every option.
"""

import sys

from keras_vit.cli import export_as

if __name__ == "__main__":
    sys.exit(export_as("tflite", sys.argv[1:]))
