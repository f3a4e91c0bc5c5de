"""Export a model to a SavedModel for serving, verified before it is written.

The same as `keras-vit export MODEL --format saved_model ...`: the script
adds `--format saved_model` (and refuses another) and hands the rest to
`keras_vit.cli`. What the SavedModel holds: the README's export section.

    python export/export_saved_model.py runs/digits/model.keras \\
        --output serving/vit/1

`--help` lists every option.
"""

import sys

from keras_vit.cli import export_as

if __name__ == "__main__":
    sys.exit(export_as("saved_model", sys.argv[1:]))
