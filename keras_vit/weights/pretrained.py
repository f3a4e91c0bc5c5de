"""Weights for a model about to be built: what they decide, and loading.

`prepare(weights, arguments)` is how `ViT.from_preset`, `ViT.from_variant`
(and so every builder's `weights=`) get their weights: it resolves a preset
name or a file, reads what must be known before the model is built (the
resolution, a pre-logits layer), and returns the loading to do once the
model exists. The model's constructor reads no file; importing this module
installs `prepare` as the model's weights loader
(`keras_vit.models.vit.set_weights_loader`).
"""

from keras_vit import registry
from keras_vit.models import vit
from keras_vit.models.config import DEFAULTS
from keras_vit.weights import loading
from keras_vit.weights import reader


def prepare(weights, arguments):
    """Resolves `weights` for a `ViT` of `arguments`.

    Args:
        weights: a preset name of the arguments' variant, a preset's unique
            name (which alone gives the variant's numbers), or a weights
            file (see `keras_vit.ViT.from_preset`).
        arguments: the `ViT`'s architecture arguments, a dict (those not
            given take `ViT`'s defaults).

    Returns:
        `(arguments, load)`: the arguments with what the weights decide
        filled in: the variant's numbers and the preset's `num_classes`
        (for a preset's unique name, where not given), the
        preset's `vit_arguments` (those not given), `image_size` (when not
        given: the preset's or the checkpoint's resolution) and
        `representation_size` (when the head is the checkpoint's: its
        pre-logits layer); and `load(model)`, which loads the
        weights into the model built from them, all or nothing.
    """
    given = dict(arguments)
    named = registry.named_preset(weights) if isinstance(weights, str) else None
    if named is not None:  # a unique name says its variant and its head
        head = named["num_classes"]  # None: features (include_top=False)
        given = {
            **registry.get_variant(named["variant"]),
            **({} if head is None else {"num_classes": head}),
            **given,
        }
    arguments = {**DEFAULTS, **given}
    variant = registry.find_variant(
        arguments["patch_size"],
        arguments["hidden_dim"],
        arguments["num_layers"],
        arguments["num_heads"],
        arguments["mlp_dim"],
        arguments["stem"],
    )
    path, preset = loading.resolve(weights, variant)
    if preset is not None:  # what the checkpoint needs, unless told otherwise
        given = {**preset["vit_arguments"], **given}
        arguments = {**DEFAULTS, **given}
        _check_normalization(preset, arguments["include_preprocessing"])
    checkpoint = None
    if not reader.is_native(path):  # keras_vit's own files need the model
        checkpoint = reader.read_checkpoint(path)
    if given.get("image_size") is None:
        given["image_size"] = (
            preset["image_size"]
            if preset
            else checkpoint.image_size
            if checkpoint
            else None
        )
    if (
        given.get("representation_size") is None
        and arguments["include_top"]
        and checkpoint is not None
        and checkpoint.representation_size is not None
        and checkpoint.num_classes == arguments["num_classes"]
    ):
        # Same head as the checkpoint: keep its pre-logits layer too.
        given["representation_size"] = checkpoint.representation_size

    def load(model):
        loaded = checkpoint
        if loaded is None:  # keras_vit's own file: read for this model
            loaded = reader.read_checkpoint(path, model=model)
        loading.load_checkpoint(model, loaded)

    return given, load


def _check_normalization(preset, include_preprocessing):
    """Refuses to build a preset whose inputs were normalised otherwise
    than the `[-1, 1]` that `include_preprocessing=True` gives (ImageNet's
    or CLIP's mean and std): its outputs would be quietly off."""
    norm = preset["normalization"]
    if norm is None or not include_preprocessing:
        return
    raise ValueError(
        f"The preset {preset['unique_name']!r} was trained on pixels in [0, "
        f"1] normalised with mean={norm['mean']} and std={norm['std']}, and "
        "include_preprocessing=True rescales to [-1, 1] only. Pass "
        "include_preprocessing=False and give the model (pixels / 255 - "
        "mean) / std. Received: include_preprocessing=True"
    )


vit.set_weights_loader(prepare)
