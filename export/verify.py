"""Verify an exported model (a .tflite file or SavedModel folder) with Keras.

The same as `keras-vit verify ...`: the script hands its arguments to
`keras_vit.cli.main`. What is checked: the README's export section.

    python export/verify.py vit.tflite --reference runs/digits/model.keras \\
        --data digits

`--help` lists every option.
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
