"""Weights for a model about to be built: what they decide, and loading.

`prepare(weights, arguments)` is how `ViT.from_preset`, `ViT.from_variant`
(and so every builder's `weights=`) get their weights: it resolves a preset
name or a file, reads what must be known before the model is built (the
resolution, a pre-logits layer), and returns the loading to do once the
model exists. The model's constructor reads no file.
"""

from keras_vit import registry
from keras_vit.data.imagenet import imagenet_class_names
from keras_vit.models.config import DEFAULTS
from keras_vit.weights import hub
from keras_vit.weights import hub_config
from keras_vit.weights import loading
from keras_vit.weights import reader


def prepare(weights, arguments, interpolation=None, antialias=None):
    """Resolves `weights` for a `ViT` of `arguments`.

    Args:
        weights: a preset name of the arguments' variant, a preset's unique
            name (which alone gives the variant's numbers), a weights
            file, or a Hub id or snapshot folder (`hub.arguments`).
        arguments: the `ViT`'s architecture arguments, a dict (those not
            given take `ViT`'s defaults).
        interpolation: how `load` resamples the position embeddings onto
            the model's patch grid, as for `keras_vit.load_weights`.
            Defaults to `None`: the Hub repo's library's, else
            `loading.DEFAULT_INTERPOLATION`.
        antialias: bool, whether that resampling low-pass filters onto a
            smaller grid, as for `keras_vit.load_weights`. Defaults to
            `None`: as `interpolation`.

    Returns:
        `(arguments, load)`: the arguments with what the weights decide
        filled in: the variant's numbers (for a preset's unique name), the
        preset's `num_classes` (where not given), the preset's
        `vit_arguments`, `normalization`, `image_resize` and unique name,
        `weights_preset` (those not given, so that
        `include_preprocessing=True` applies the preset's own
        normalisation to [0, 255] pixels, images are resized as its
        evaluation resized them, and exports carry its licence),
        `class_names` (when not
        given, for a model that keeps a preset's 1000-class head:
        ImageNet-1k's, `keras_vit.imagenet_class_names`), `image_size`
        (when not given: the preset's or the checkpoint's resolution),
        `representation_size` (when the head is the checkpoint's: its
        pre-logits layer) and `position_embedding_tokens` (`"patches"`,
        when not given, for a checkpoint whose position embeddings have
        entries for the patches only); and `load(model)`, which loads the
        weights into the model built from them, all or nothing.

    Raises:
        ValueError: for an `interpolation` or `antialias` that
            `keras_vit.load_weights` refuses, before any file is read.
    """
    loading.given_resampling(interpolation, antialias)  # before any read
    user = dict(arguments)
    given, weights, own = _from_hub(weights, user)
    resize = loading.resampling(interpolation, antialias, own["resampling"])
    named = registry.named_preset(weights) if isinstance(weights, str) else None
    if named is not None:  # a unique name says its variant
        given = {**registry.get_variant(named["variant"]), **given}
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
        given = _from_preset(preset, given)
        arguments = {**DEFAULTS, **given}
    checkpoint = None
    if not reader.is_native(path):  # keras_vit's own files need the model
        checkpoint = _read(path, given, user, own)
    if own["source"] is not None:  # a Hub repo (safetensors: read above)
        hub.refuse_misfit(given, user, checkpoint)
        hub.fill_head(given, checkpoint, user)
        arguments = {**DEFAULTS, **given}
    _fill_from_checkpoint(given, arguments, preset, checkpoint)

    def load(model):
        loaded = checkpoint
        if loaded is None:  # keras_vit's own file: read for this model
            loaded = reader.read_checkpoint(path, model=model)
        loading.load_checkpoint(model, loaded, **resize)

    return given, load


def _read(path, given, user, own):
    """The checkpoint of the file `path` for `prepare`: of the layout a
    Hub config's architecture says (`given`'s `position_embedding`: PE
    core's is `"rope"`) or, for a bare file that fits two, the caller's
    (`user`'s; `Checkpoint.decided_by`), with what the config records
    (`own`)."""
    checkpoint = reader.read_checkpoint(path)
    checkpoint = (
        checkpoint.read_as(given.get("position_embedding") == "rope")
        if own["source"] is not None
        else checkpoint.decided_by(user.get("position_embedding"))
    )
    # The repo's config records what the file's layout leaves to its
    # defaults (LAION's CLIP: GELU where the layout's is quick GELU).
    checkpoint.layout_defaults.update(own["recorded"])
    return checkpoint


#: What weights that are no Hub repo bring: no resampling of their own
#: (keras_vit's), no publisher, no configuration.
_OWN = {"resampling": None, "source": None, "recorded": {}}


def _from_hub(weights, given):
    """`(given, weights, own)`: for a Hub id, snapshot folder or weights
    file with a `config.json` beside it (`hub.configured`), `given`
    over its configuration, its weights file, and its publisher's
    resampling, `source` and what its config records that the file
    does not (`loading.LAYOUT_IMPLIED`); for anything else, as they are, with
    keras_vit's default resampling."""
    folder, path = hub.configured(weights)
    if folder is None:
        return dict(given), weights, _OWN
    config = hub_config.read(folder)
    own = {
        "resampling": config.resampling,
        "source": config.source,
        "recorded": {
            name: config.arguments[name]
            for name in loading.LAYOUT_IMPLIED
            if name in config.arguments
        },
    }
    return hub.arguments(config, given), path, own


def _from_preset(preset, given):
    """`given` with what `preset` decides where `given` does not say: its
    `vit_arguments`, its head, its `normalization` and `image_resize`, its
    unique name (`weights_preset`: the licence travels to exports), and
    the class names of a head it keeps: every preset with 1000 classes is
    an ImageNet-1k classifier, in ILSVRC-2012's order."""
    given = {
        **preset["vit_arguments"],
        **registry.presets.head_arguments(preset),
        "normalization": preset["normalization"],
        "image_resize": preset["image_resize"],
        "weights_preset": preset["unique_name"],
        **given,
    }
    arguments = {**DEFAULTS, **given}
    if (
        "class_names" not in given
        and preset["num_classes"] == 1000
        and arguments["include_top"]
        and arguments["num_classes"] == 1000
    ):
        given["class_names"] = imagenet_class_names()
    return given


def _fill_from_checkpoint(given, arguments, preset, checkpoint):
    """Fills in `given` what the preset or checkpoint decides and the
    caller did not give: the resolution, the pre-logits layer, and which
    tokens have position embeddings."""
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
    if (
        given.get("position_embedding_tokens") is None
        and checkpoint is not None
        and checkpoint.num_prefix_tokens
        and not checkpoint.position_prefix_tokens
    ):
        # Position embeddings for the patches only (DeiT III, timm's
        # no_embed_class): the model's must be too, or none would fit.
        given["position_embedding_tokens"] = "patches"
