"""Verify an exported model (.tflite file or SavedModel folder) against Keras.

    python export/verify.py vit.tflite --reference runs/digits/model.keras [--data digits]

Same as `keras-vit verify ...` (see export/README.md).
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
