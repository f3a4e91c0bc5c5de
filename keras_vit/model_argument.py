"""The MODEL argument of the commands that load a model (`predict`,
`export`, `verify --reference`, `benchmark-export`, `inspect`, `few-shot`):
its help, a training run's folder taken as its model, and a preset in
`--weights` refused where it cannot apply.

One home for all of them, so that every command takes what `predict` takes
and says so in the same words. A leaf (it imports nothing of the package):
`keras_vit.cli` reads it while the parser is built, before Keras is
imported, and the training run writes the `RUN_MODEL_FILE` it names.
"""

import os

#: The file in a training run's folder that is the run's model (the final
#: one; `keras_vit.training.train` writes it), what MODEL means by a folder.
RUN_MODEL_FILE = "model.keras"

#: The help of a MODEL argument.
MODEL_HELP = (
    "a builder name (ViT_B16), variant (B/16) or preset's unique name "
    "(see `keras-vit presets`), a .keras or checkpoint file, or a training "
    "run's folder"
)


def run_model(model, name="model", also=None):
    """`model` as the loaders take it: a training run's folder is its
    `model.keras` (so that the run's class names, beside it, are found);
    anything else is returned as it is.

    Args:
        model: the MODEL argument.
        name: str, the argument's name for the error. Defaults to
            `"model"`.
        also: str, another kind of folder the command takes, checked
            before this call (`"a SavedModel exported by keras_vit (no
            keras_vit.json)"`), for the error. Defaults to `None`.

    Raises:
        ValueError: for a folder that holds no `model.keras`.
    """
    if not isinstance(model, (str, os.PathLike)) or not os.path.isdir(model):
        return model
    found = os.path.join(os.fspath(model), RUN_MODEL_FILE)
    if os.path.isfile(found):
        return found
    kinds = f"neither {also} nor" if also else "not"
    raise ValueError(
        f"The folder is {kinds} a training run's folder (it holds no "
        f"{RUN_MODEL_FILE}). Received: {name}={os.fspath(model)!r}"
    )


def check_weights(model, weights, name="model"):
    """Raises for a preset named in `--weights` with a MODEL that is a
    file or folder: a preset is a builder's weights (`ViT_B16 --weights
    augreg_in21k`), and a model file brings its own architecture, whose
    presets the loader would look up in vain ("a preset of this model's
    variant (not a released variant): []"). A weights file stays allowed.

    A value with no extension and no folder that names no file is taken
    for a preset: every preset's name is one, and a weights file has an
    extension (.npz, .safetensors, .weights.h5, .keras).
    """
    if weights is None or not os.path.exists(model):
        return
    text = os.fspath(weights)
    if os.path.exists(text) or os.path.splitext(text)[1] or os.sep in text:
        return
    raise ValueError(
        "--weights applies to builder names only when it names a preset "
        f"(ViT_B16 --weights {text}, or the preset's unique name as MODEL): "
        "a model file or folder brings its own architecture and takes a "
        f"weights file only. Received: {name}={os.fspath(model)!r}, "
        f"weights={text!r}"
    )
