"""Converting a released checkpoint into keras_vit's own file."""

import warnings

import keras

from keras_vit import arg_checks
from keras_vit import files
from keras_vit import registry
from keras_vit.models.vit import ViT
from keras_vit.weights import hub
from keras_vit.weights import loading
from keras_vit.weights import reader


def model_for_checkpoint(
    checkpoint,
    model=None,
    interpolation=loading.DEFAULT_INTERPOLATION,
    antialias=loading.DEFAULT_ANTIALIAS,
    **kwargs,
):
    """Builds the `keras_vit.ViT` a checkpoint describes, with its weights.

    Args:
        checkpoint: a `keras_vit.weights.Checkpoint`.
        model: a builder name (`"ViT_B16"`), variant (`"B/16"`) or
            preset's unique name (its variant; see
            `keras_vit.registry.resolve`). Defaults
            to `None`: the variant whose numbers the checkpoint has, else
            (a ViT of another size, such as one's own) a `ViT` of the
            checkpoint's own numbers; the original `.npz` records its number
            of heads, the fused-QKV formats need `num_heads=`.
        interpolation: how the position embeddings are resampled when
            `image_size` gives another patch grid than the checkpoint's,
            one of `keras_vit.patch_grid.INTERPOLATIONS`, as for
            `keras_vit.load_weights`. Defaults to its default,
            `"bilinear_align_corners"` (the original code's).
        antialias: bool, whether that resampling low-pass filters onto a
            smaller grid, as for `keras_vit.load_weights`
            (`interpolation="bicubic_pytorch", antialias=True`: timm's
            and DINOv2's). Defaults to `False`.
        **kwargs: other `keras_vit.ViT` arguments: those no file records
            (for timm's CLIP files `activation="quick_gelu"` and
            `layer_norm_epsilon=1e-5`; Hugging Face's DINOv2, CLIP and
            SigLIP layouts imply their family's, see
            `keras_vit.weights.huggingface`; `normalization=` the mean
            and std of the inputs of DeiT, DINOv2 and CLIP, so that the
            model takes [0, 255] pixels), or to override what the
            checkpoint implies (`architecture(checkpoint)`).
            `num_classes` given means a head (`include_top=True`), also
            for a file without one (a new, zero-initialised head).

    Returns:
        The model, with the checkpoint loaded (head and resolution as in
        the checkpoint unless given).

    Raises:
        ValueError: for an `interpolation` or `antialias` that
            `keras_vit.load_weights` refuses (before a model is built), and
            for a checkpoint the model cannot load.
    """
    resize = loading.checked_resampling(interpolation, antialias)
    checkpoint = checkpoint.decided_by(kwargs.get("position_embedding"))
    if checkpoint.misshaped:
        raise ValueError(
            f"{checkpoint.path} holds tensors of the wrong rank for its "
            f"format ({checkpoint.source}); nothing was converted:\n"
            + "\n".join(f"    {line}" for line in checkpoint.misshaped)
        )
    given_heads = kwargs.pop("num_heads", None)
    num_heads = given_heads or checkpoint.num_heads
    if model is None:
        _refuse_unsized(checkpoint)
        variant = _variant_of(checkpoint, num_heads)
    else:
        variant = registry.resolve(model).variant  # raises, listing the choices
    args = _arguments(checkpoint, kwargs)
    if isinstance(variant, dict):
        vit = ViT(**variant, **args)
    else:  # (a recorded head count that differs is refused when loading)
        if given_heads is not None:
            args["num_heads"] = given_heads
        vit = ViT.from_variant(variant, **args)
    loading.load_checkpoint(vit, checkpoint, **resize)
    return vit


def _refuse_unsized(checkpoint):
    """Raises, listing the tensors that do not fit, for a checkpoint whose
    tensors do not give a ViT's size (its width, depth or MLP width): a
    timm SwiGLU file (`mlp.fc1_g`, `mlp.fc1_x`) was refused with
    "`mlp_dim` must be a positive integer", an argument never given."""
    numbers = {
        "hidden_dim": checkpoint.hidden_dim,
        "num_layers": checkpoint.num_layers or None,
        "mlp_dim": checkpoint.mlp_dim,
    }
    unknown = [name for name, value in numbers.items() if value is None]
    if not unknown:
        return
    lines = [
        f"The weights in {checkpoint.path} ({checkpoint.source} format) do "
        f"not fit a ViT: they give no {', '.join(unknown)}; nothing was "
        "loaded.",
        f"  checkpoint: {checkpoint.describe()}",
    ]
    for title, names in (
        ("missing from the checkpoint", checkpoint.missing),
        ("unexpected in the checkpoint", checkpoint.unexpected),
    ):
        if names:
            lines.append(f"  {title} ({len(names)}):")
            lines += [f"    {name} (source name)" for name in names]
    raise ValueError("\n".join(lines))


def _arguments(checkpoint, kwargs):
    """The `ViT` arguments of `model_for_checkpoint`'s model beyond the
    variant's numbers: the checkpoint's (`architecture`), `kwargs` over
    them, and the head `kwargs` imply."""
    args = {**architecture(checkpoint), **kwargs}
    if "num_classes" in kwargs and "include_top" not in kwargs:
        # Classes asked for mean a head, also over a file without one.
        args["include_top"] = True
    if (
        "classifier_activation" not in kwargs
        and args["num_classes"] != checkpoint.num_classes
    ):
        # A new head for other classes is a classifier, not the file's
        # projection (CLIP's): the default activation.
        args.pop("classifier_activation", None)
    return args


#: The LayerScale init value a model for a checkpoint with LayerScale is
#: built with (the files record none; the loaded scales replace it): DINOv2's
#: and CaiT's. DeiT III used 1e-6; pass `layer_scale_init=` to record it.
LAYER_SCALE_INIT = 1e-5


def architecture(checkpoint):
    """The `keras_vit.ViT` arguments (beyond the variant's numbers) that
    `checkpoint`'s tensors imply: head, resolution, pooling, prefix tokens
    and the options of the modern families, and the `layout_defaults` of
    the Hugging Face DINOv2, CLIP and SigLIP layouts and of big_vision's
    two-tower files (their family's activation and LayerNorm epsilon;
    `classifier_activation=None` for a CLIP file's image projection and a
    two-tower file's `head`, whose outputs are embeddings, unless
    `model_for_checkpoint` is given another class count: a new classifier).
    What no file records otherwise (the
    activation and LayerNorm epsilon of a timm file, the number of heads of
    the fused-QKV formats) is not among them. A file that fits two
    layouts (`Checkpoint.perception_encoder`) is refused unless decided
    (`Checkpoint.decided_by`)."""
    checkpoint = checkpoint.decided_by(None)
    args = {
        "image_size": checkpoint.image_size,
        "include_top": checkpoint.num_classes is not None,
        "num_classes": checkpoint.num_classes or 1000,
        # A distilled model has no pre-logits layer (a DeiTModel file's
        # pooler, never trained: dropped when loading without a head).
        "representation_size": None
        if checkpoint.distillation
        else checkpoint.representation_size,
        "class_token": checkpoint.class_token,
        "pooling": checkpoint.pooling,
    }
    if checkpoint.distillation:
        args["distillation"] = True
    if checkpoint.num_register_tokens:
        args["num_register_tokens"] = checkpoint.num_register_tokens
    if "patch_encoder/position_embedding" not in checkpoint.tensors:
        args["position_embedding"] = "none"
    elif checkpoint.num_prefix_tokens and not checkpoint.position_prefix_tokens:
        args["position_embedding_tokens"] = "patches"
    if checkpoint.layer_scale:
        args["layer_scale_init"] = LAYER_SCALE_INIT
    for option in ("qk_norm", "use_gated_mlp", "norm_pre", "fc_norm"):
        if getattr(checkpoint, option):
            args[option] = True
    if not checkpoint.patch_bias:
        args["patch_bias"] = False
    if not checkpoint.qkv_bias:
        args["qkv_bias"] = False
    args.update(checkpoint.layout_defaults)
    return args


def _variant_of(checkpoint, num_heads):
    """The variant name whose numbers `checkpoint` has, else (a ViT of
    another size) a dict of the checkpoint's own numbers."""
    matches = [
        name
        for name, v in registry.VARIANTS.items()
        if v["hidden_dim"] == checkpoint.hidden_dim
        and v["num_layers"] == checkpoint.num_layers
        and v["mlp_dim"] == checkpoint.mlp_dim
        and v["patch_size"] == checkpoint.patch_size
        and num_heads in (None, v["num_heads"])
    ]
    own = (
        not matches
        and num_heads is not None
        and checkpoint.patch_size
        and not checkpoint.stem_units
    )
    if own:  # a ViT of its own size: the checkpoint gives every number
        return dict(
            patch_size=checkpoint.patch_size,
            hidden_dim=checkpoint.hidden_dim,
            num_layers=checkpoint.num_layers,
            num_heads=num_heads,
            mlp_dim=checkpoint.mlp_dim,
        )
    if len(matches) != 1:
        raise ValueError(
            f"Cannot tell which ViT variant {checkpoint.path} is "
            f"({checkpoint.describe()}). Pass the model, e.g. "
            "model='ViT_B16'"
            + (
                ""
                if num_heads or checkpoint.stem_units
                else ", or for a ViT of this size its num_heads (this "
                "format does not record it)"
            )
            + "."
        )
    return matches[0]


def convert(
    input_path,
    output_path,
    model=None,
    num_heads=None,
    source_grid=None,
    overwrite=False,
    verbose="auto",
    position_embedding_tokens=None,
    interpolation=None,
    antialias=None,
    report=None,
    **vit_arguments,
):
    """Converts `input_path` to keras_vit's format, through a temporary
    file renamed into place (an interruption leaves nothing behind).

    Args:
        input_path: a released checkpoint (`.npz` / `.safetensors`), or a
            Hub repo built from its config (`hub.configured`).
        output_path: a `.weights.h5` (weights only) or `.keras` (whole
            model) path; its folder must exist.
        model: builder name, variant or preset's unique name; defaults to
            the one the checkpoint matches, else a ViT of the checkpoint's
            own numbers.
        num_heads: int, for a checkpoint of its own size in a format that
            does not record it (timm, Hugging Face). Defaults to `None`.
        source_grid: `(rows, cols)`, the patch grid of a checkpoint's 1D
            position embeddings where it is not square (the formats record
            none; their releases are square). Defaults to `None`.
        overwrite: bool, whether to replace an existing file at
            `output_path` (a converted checkpoint cannot be told from a
            trained model, so none is replaced unless asked). The input is
            never replaced. Defaults to `False`.
        verbose: a Keras progress bar of the read, load and write steps:
            `0`, `1`, `2` or `"auto"` (`1`). Defaults to `"auto"`.
        position_embedding_tokens: `"all"` or `"patches"`, for a file whose
            position embeddings' count does not say whether they cover the
            prefix tokens (see `keras_vit.weights.read_checkpoint`).
            Defaults to `None`: from the file.
        interpolation, antialias: how the position embeddings are
            resampled for an `image_size` (in `vit_arguments`) of another
            patch grid than the checkpoint's, as for
            `keras_vit.load_weights`. Defaults to `None`: a Hub repo's
            library's, else keras_vit's (bilinear, align corners).
        report: a function given the message of what the model assumed
            (`assumed`). Defaults to `None`: a `UserWarning`.
        **vit_arguments: `keras_vit.ViT` arguments, those no file records
            among them (`activation`, `layer_norm_epsilon`,
            `normalization`: see `model_for_checkpoint`'s `kwargs`).

    Returns:
        The converted `keras_vit.ViT`.
    """
    output_path = _checked_paths(input_path, output_path, overwrite)
    if num_heads is not None:
        num_heads = arg_checks.positive_int("num_heads", num_heads)
    settled = dict(
        model=model,
        source_grid=source_grid,
        position_embedding_tokens=position_embedding_tokens,
    )
    options = dict(
        num_heads=num_heads, interpolation=interpolation, antialias=antialias
    )
    folder, _ = hub.configured(input_path)  # an `hf://` id fetched once
    if folder is not None:
        vit = _configured(input_path, folder, settled, options, vit_arguments)
        _write(vit, output_path)
        return vit
    progress = keras.utils.Progbar(
        3, verbose=arg_checks.verbosity("verbose", verbose), unit_name="step"
    )
    vit, checkpoint = _converted(input_path, settled, options, vit_arguments)
    progress.update(2)
    _write(vit, output_path)
    progress.update(3, finalize=True)
    given = set(vit_arguments) | ({"num_heads"} if num_heads else set())
    _report_assumed(checkpoint, vit, given, report)
    return vit


def _converted(input_path, settled, options, vit_arguments):
    """`convert`'s model and checkpoint for a file without a config."""
    resize = loading.resampling(options["interpolation"], options["antialias"])
    checkpoint = reader.read_checkpoint(
        input_path,
        source_grid=settled["source_grid"],
        position_embedding_tokens=settled["position_embedding_tokens"],
    ).decided_by(vit_arguments.get("position_embedding"))
    vit = model_for_checkpoint(
        checkpoint,
        settled["model"],
        num_heads=options["num_heads"],
        **resize,
        **vit_arguments,
    )
    return vit, checkpoint


def _configured(input_path, folder, refused, options, vit_arguments):
    """`convert`'s model for the Hub repo `input_path`: `ViT.from_preset`
    of its snapshot `folder`, fetched already (or of the file with a
    config beside it), with `vit_arguments` and the `options` given
    (`num_heads`, checked against the config, and the resampling);
    `refused`, the options that its configuration settles, are refused
    by name where given."""
    for name, value in refused.items():
        if value is not None:
            raise ValueError(
                f"`{name}` is for a checkpoint without a config.json; "
                f"{input_path!r} has one. Received: {name}={value!r}"
            )
    given = {k: v for k, v in options.items() if v is not None}
    local = folder if hub.is_source(input_path) else input_path
    return ViT.from_preset(local, **given, **vit_arguments)


def _report_assumed(checkpoint, vit, given, report):
    """Hands `report` (else a `UserWarning`) what `vit` `assumed` without
    `given`, the names of the arguments passed."""
    lines = assumed(checkpoint, vit, given)
    if not lines:
        return
    message = (
        f"{checkpoint.path} does not record these, so they were assumed; "
        "pass them if the model was trained with others:\n"
        + "\n".join(f"  {line}" for line in lines)
    )
    if report is None:
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        report(message)


def _clip_layout(checkpoint, layout):
    """Whether `checkpoint` has CLIP's image tower (`norm_pre`, no patch
    bias) with no family activation that its layout implies."""
    return (
        checkpoint.norm_pre
        and not checkpoint.patch_bias
        and "activation" not in layout
    )


#: The `ViT` arguments that change a converted model's outputs and that
#: no weights file records in its tensors (`num_heads`: the fused-QKV
#: formats, timm's and Hugging Face's; `rope_theta`: of a model with
#: `position_embedding="rope"`; the rest: every format).
UNRECORDED = (
    "num_heads",
    "activation",
    "layer_norm_epsilon",
    "rope_theta",
    "normalization",
)


def assumed(checkpoint, model, given):
    """One line for each of `UNRECORDED` that `model`, converted from
    `checkpoint`, took without `checkpoint` recording it or `given` (the
    names of the arguments passed) saying it: its value and where it came
    from. A wrong head count or CLIP's activation loads without a word
    and computes other outputs, so the caller shows these."""
    layout = checkpoint.layout_defaults
    lines = []
    for name in UNRECORDED:
        if name in given or (name == "num_heads" and checkpoint.num_heads):
            continue
        if name == "rope_theta" and model.position_embedding != "rope":
            continue
        value = getattr(model, name)
        if name == "num_heads":
            origin = "the ViT variant of its width and depth"
        elif name in layout:
            origin = "its layout's family"
        else:
            origin = "keras_vit's default"
        if name == "normalization" and value is None:
            origin += ": inputs scaled to [-1, 1]"
        if name == "activation" and _clip_layout(checkpoint, layout):
            origin += "; OpenAI's CLIP files need 'quick_gelu'"
        lines.append(f"{name}={value!r} ({origin})")
    return lines


def _write(vit, output_path):
    """Saves `vit` to `output_path` (`.keras`: the whole model, else its
    weights) through a temporary file, renamed into place."""
    suffix = ".keras" if output_path.endswith(".keras") else ".weights.h5"
    with files.atomic_file(output_path, suffix=suffix) as temporary:
        if suffix == ".keras":
            vit.save(temporary)
        else:
            vit.save_weights(temporary, overwrite=True)


def _checked_paths(input_path, output_path, overwrite):
    """`output_path` checked (a new `.weights.h5` / `.keras` file, unless
    `overwrite`), and `input_path` a released format, not keras_vit's."""
    output_path = files.check_output_path(
        output_path, "output", inputs=(input_path,), overwrite=overwrite
    )
    if not output_path.endswith((".weights.h5", ".keras")):
        raise ValueError(
            "The output must end in .weights.h5 or .keras. Received: "
            f"output={output_path!r}"
        )
    if reader.is_native(input_path):
        raise ValueError(
            f"{input_path!r} is already a keras_vit file; load it with "
            "keras.saving.load_model or model.load_weights."
        )
    return output_path
