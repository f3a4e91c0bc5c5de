"""Export a model to a verified SavedModel for serving.

    python export/export_saved_model.py runs/digits/model.keras --output serving/vit [--labels labels.txt]

Same as `keras-vit export MODEL --format saved_model ...` (see export/README.md).
"""

import sys

from keras_vit.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", "--format", "saved_model", *sys.argv[1:]]))
