"""The MODEL argument of the commands that load a model (`predict`,
`export`, `verify --reference`, `benchmark-export`, `inspect`, `few-shot`):
its help and the file of a training run's folder that it means
(`keras_vit.resolver` resolves it).

A leaf (it imports nothing of the package): `keras_vit.cli` reads it while
the parser is built, before Keras is imported, and the training run writes
the `RUN_MODEL_FILE` it names.
"""

#: The file in a training run's folder that is the run's model (the final
#: one; `keras_vit.training.train` writes it), what MODEL means by a folder.
RUN_MODEL_FILE = "model.keras"

#: The help of a MODEL argument.
MODEL_HELP = (
    "a builder name (ViT_B16), variant (B/16) or preset's unique name "
    "(see `keras-vit presets`), a .keras or checkpoint file, or a training "
    "run's folder"
)
