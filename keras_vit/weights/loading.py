"""Checking a `Checkpoint` against a model and assigning it, all or nothing."""

import dataclasses
import os
import warnings

import numpy as np

from keras_vit import arg_checks
from keras_vit import patch_grid
from keras_vit import registry
from keras_vit.layers import rotary
from keras_vit.models import model_checks
from keras_vit.models.config import activation_kind
from keras_vit.weights import download
from keras_vit.weights import keras_files
from keras_vit.weights import reader
from keras_vit.weights.checkpoint import POSEMB

HEAD = ("head/kernel", "head/bias")
#: DeiT's distillation head, dropped and renewed with the class head.
HEAD_DIST = ("head_dist/kernel", "head_dist/bias")
PRE_LOGITS = ("pre_logits/kernel", "pre_logits/bias")
#: The column and row embeddings of `position_embedding="learned2d"`.
POSEMB_2D = {
    "patch_encoder/position_embedding_x": 1,  # (grid_w, D/2): grid axis 1
    "patch_encoder/position_embedding_y": 0,  # (grid_h, D/2): grid axis 0
}

#: The end of the path of each block's relative position embeddings
#: (`position_embedding="relative"`).
RELATIVE = "attention/relative_position_embedding"

#: The default resampling of position embeddings when a checkpoint is loaded
#: at another resolution: the original code's (`scipy.ndimage.zoom`, linear).
DEFAULT_INTERPOLATION = patch_grid.LOADING_INTERPOLATION
#: Whether that resampling is antialiased (low-pass filtered onto a smaller
#: grid) by default: not, as the original code's is not. timm's
#: `resample_abs_pos_embed` and DINOv2 with registers need
#: `interpolation="bicubic_pytorch", antialias=True`.
DEFAULT_ANTIALIAS = patch_grid.LOADING_ANTIALIAS


def _variant_of(model):
    return registry.find_variant(
        patch_size=model.patch_size,
        hidden_dim=model.hidden_dim,
        num_layers=model.num_layers,
        num_heads=model.num_heads,
        mlp_dim=model.mlp_dim,
        stem=model.stem,
    )


def prepare(
    model,
    checkpoint,
    interpolation=DEFAULT_INTERPOLATION,
    antialias=DEFAULT_ANTIALIAS,
    keep=True,
):
    """Maps a checkpoint onto `model`'s variables, without assigning.

    Applies the fine-tuning rules (head dropped when the class count
    differs, position embeddings resampled to the model's grid with
    `interpolation` and `antialias`, see `load_weights`) and checks every
    name, shape and dtype.

    With `keep=False` only checks: `values` is empty, and a checkpoint
    whose tensors are read when used (`keras_files.opened_keras_weights`) is
    read one tensor at a time.

    Returns:
        `(values, zeros, notes)`: path → array to assign, paths to set to
        zero (a new head), and messages for the user.

    Raises:
        ValueError: listing every missing, unexpected, mis-shaped,
            non-numeric and non-finite (NaN, inf) tensor, and everything
            else that keeps the checkpoint from loading.
    """
    resize = checked_resampling(interpolation, antialias)
    checkpoint = checkpoint.read_as(_perception_encoder(model))
    variables = {v.path: v for v in model.weights}
    tensors = dict(checkpoint.tensors)
    # Every tensor the file holds, the head dropped for fine-tuning too: a
    # NaN or inf is a broken checkpoint (a diverged run, a damaged file),
    # never a weight to train from.
    non_finite = sorted(
        line
        for path, value in tensors.items()
        if (line := _non_finite(path, value)) is not None
    )
    if checkpoint.adjacent_rope_pairs:
        _rotate_halves(tensors, model.num_heads)
    zeros, notes, allowed_missing = _apply_head_rules(
        model, checkpoint, tensors
    )
    notes += _layout_notes(model, checkpoint)
    problems = []
    notes += _resample_grids(
        model, checkpoint, tensors, variables, resize, problems
    )
    problems += _relative_problems(model, tensors, variables)
    problems += _rope_problems(model, checkpoint)
    sections = _mismatches(
        checkpoint, tensors, variables, allowed_missing, model.num_heads
    )
    sections.append(("not finite (NaN or inf)", non_finite))
    if problems or any(items for _, items in sections):
        _refuse(model, checkpoint, problems, sections)
    values = _in_model_dtypes(model, checkpoint, tensors, variables, keep)
    return values, zeros, notes


def _perception_encoder(model):
    """Whether `model` reads a file that fits both Perception Encoder
    core and a timm `VisionTransformer` (`Checkpoint.perception_encoder`)
    as the first: RoPE `"cat"` with the learned table."""
    return (
        model.position_embedding == "rope"
        and model.rope_type == "cat"
        and model.rope_with_learned
    )


def _rotate_halves(tensors, num_heads):
    """Reorders in `tensors` each block's query and key columns of a file
    whose RoPE rotates adjacent pairs, head by head, for keras_vit's
    rotation of halves (`adjacent_to_halves`; QK-norm's scales with
    them). `num_heads`: the model's (the fused projection records none)."""
    for path in [p for p in tensors if p.endswith("/attention/qkv/kernel")]:
        block = path[: -len("/qkv/kernel")]
        width = np.shape(tensors[path])[-1] // 3
        if width % num_heads:  # the kernel's shape is reported
            continue
        head_dim = width // num_heads
        order = np.asarray(rotary.adjacent_to_halves(head_dim))
        heads = (np.arange(num_heads)[:, None] * head_dim + order).ravel()
        columns = np.concatenate(
            [heads, width + heads, np.arange(2 * width, 3 * width)]
        )
        for name in ("kernel", "bias"):
            value = tensors.get(f"{block}/qkv/{name}")
            if value is not None:
                tensors[f"{block}/qkv/{name}"] = value[..., columns]
        for norm in (
            "q_norm/gamma",
            "q_norm/beta",
            "k_norm/gamma",
            "k_norm/beta",
        ):
            value = tensors.get(f"{block}/{norm}")
            if value is not None and np.shape(value)[-1] == head_dim:
                tensors[f"{block}/{norm}"] = value[..., order]


def _in_model_dtypes(model, checkpoint, tensors, variables, keep):
    """`{path: tensor in its variable's dtype}` (`{}` unless `keep`: then
    one tensor is in memory at a time where the checkpoint reads them
    when used). Refuses tensors finite in the file and infinite in a
    narrower dtype (above 65504 in a float16 model): as broken a weight
    as one stored inf."""
    values, overflow = {}, []
    for path, value in tensors.items():
        value = np.asarray(value)
        with np.errstate(over="ignore"):  # an overflow is reported below
            cast = np.asarray(value, dtype=variables[path].dtype)
        if (line := _overflow(path, value, cast)) is not None:
            overflow.append(line)
        if keep:
            values[path] = cast
    if overflow:
        title = "not finite in the model's dtype (out of its range)"
        _refuse(model, checkpoint, [], [(title, sorted(overflow))])
    return values


def checked_resampling(interpolation, antialias):
    """The resampling of position embeddings as
    `resample_position_embeddings` takes it, `{"interpolation": ...,
    "antialias": ...}`, checked before any file is read or downloaded:
    `ValueError` for an unknown interpolation, an `antialias` that is not
    a bool, or `antialias=True` with an interpolation that has no filter
    (`patch_grid.NO_ANTIALIAS`: the default's)."""
    interpolation = arg_checks.one_of(
        "interpolation", interpolation, patch_grid.INTERPOLATIONS
    )
    antialias = patch_grid._checked_antialias(antialias, interpolation)
    return {"interpolation": interpolation, "antialias": antialias}


#: keras_vit's resampling for weights that bring none of their own.
DEFAULT_RESAMPLING = {
    "interpolation": DEFAULT_INTERPOLATION,
    "antialias": DEFAULT_ANTIALIAS,
}


def given_resampling(interpolation=None, antialias=None):
    """Checks the resampling arguments a caller was given (`None`: not
    given) before any file is read: an `interpolation` with its
    `antialias` (`resampling`), or an `antialias` alone, which is checked
    against the weights' own interpolation once that is known."""
    if interpolation is not None:
        resampling(interpolation, antialias)
    elif antialias is not None:
        arg_checks.boolean("antialias", antialias)


def resampling(interpolation=None, antialias=None, own=None):
    """The checked resampling (`checked_resampling`) from the arguments a
    caller was given (`None`: not given) and the weights' `own` (a Hub
    repo's publisher's; `None`: keras_vit's, `DEFAULT_RESAMPLING`). An
    `interpolation` given comes with the `antialias` given, else
    keras_vit's default; none given takes `own`'s, with an `antialias`
    given in place of its own."""
    if interpolation is not None or own is None:
        own = DEFAULT_RESAMPLING
    return checked_resampling(
        own["interpolation"] if interpolation is None else interpolation,
        own["antialias"] if antialias is None else antialias,
    )


def _resampled(resize):
    """How the embeddings were resampled, for a note: `"bicubic"`,
    `"bicubic, antialiased"`."""
    return resize["interpolation"] + (
        ", antialiased" if resize["antialias"] else ""
    )


#: The arguments a file's layout implies but its tensors do not record
#: (`Checkpoint.layout_defaults`); a Hub repo's config records them.
LAYOUT_IMPLIED = (
    "activation",
    "layer_norm_epsilon",
    "rope_theta",
    "rope_grid_offset",
    "rope_reference_grid",
)


def _layout_notes(model, checkpoint):
    """A note where `model` differs from what the file's layout implies
    but its tensors do not record (`Checkpoint.layout_defaults`: the
    activation and LayerNorm epsilon of a Hugging Face DINOv2, CLIP or
    SigLIP file, a DINOv3 file's `rope_theta`, the activation of a
    big_vision two-tower file): the weights fit, the outputs would not be
    the checkpoint's unless the difference is meant."""
    differ = {
        name: (value, getattr(model, name))
        for name, value in checkpoint.layout_defaults.items()
        if name in LAYOUT_IMPLIED and getattr(model, name) != value
    }
    notes = _projection_notes(model, checkpoint)
    if not differ:
        return notes
    theirs = ", ".join(f"{k}={v[0]!r}" for k, v in differ.items())
    ours = ", ".join(f"{k}={v[1]!r}" for k, v in differ.items())
    return notes + [
        f"{checkpoint.path} is in a layout whose models have {theirs} "
        "(its layout's default: transformers' config, big_vision's MLP; the "
        "file does not record it) and "
        f"the model has {ours}: its outputs are not the checkpoint's unless "
        "that is meant (e.g. LAION's CLIP, activation='gelu'). "
        "keras_vit.weights.convert.model_for_checkpoint builds the model "
        "the file implies."
    ]


def _projection_notes(model, checkpoint):
    """A note where the file's head is an embedding projection (CLIP's
    `visual_projection`, a big_vision two-tower file's `head`:
    `classifier_activation=None` in its `layout_defaults`), the model
    loads it, and its classifier activation would change the embeddings
    (a softmax over them)."""
    layout = checkpoint.layout_defaults
    if (
        "classifier_activation" not in layout
        or not model.include_top
        or checkpoint.head_classes != model.num_classes
        or activation_kind(model.classifier_activation)
        == activation_kind(layout["classifier_activation"])
    ):
        return []
    return [
        f"The head in {checkpoint.path} is an image projection (CLIP's "
        "visual_projection, SigLIP's head), whose outputs are embeddings, "
        "and the model "
        f"has classifier_activation={model.classifier_activation!r}: its "
        "outputs are not the embeddings unless that is meant (pass "
        f"classifier_activation={layout['classifier_activation']!r})."
    ]


def _apply_head_rules(model, checkpoint, tensors):
    """Drops from `tensors` the head `model` does not take; returns
    `(zeros, notes, allowed_missing)`: the head paths to zero, messages for
    the user, and the paths the checkpoint may lack."""
    zeros, notes, allowed_missing = [], [], set()
    heads = HEAD + HEAD_DIST
    # The model's heads to zero (a distilled model has two).
    new = [v.path for v in model.weights if v.path in heads]
    has_head = "head/kernel" in tensors or "head/bias" in tensors
    head_classes = checkpoint.head_classes
    if not model.include_top:
        for key in heads + PRE_LOGITS:
            tensors.pop(key, None)
    elif not has_head:
        zeros += new
        allowed_missing |= set(heads + PRE_LOGITS)
        dropped = ""
        # A pre-logits layer without a head (transformers' ViTModel pooler)
        # is the pre-training head's: dropped as when the class count
        # differs, unless the model is built to take it.
        pre_logits = any(key in tensors for key in PRE_LOGITS)
        if model.representation_size is None and pre_logits:
            for key in PRE_LOGITS:
                tensors.pop(key, None)
            dropped = (
                ", and its pre-logits layer was not loaded (as for "
                "fine-tuning in the paper)"
            )
        notes.append(
            f"The checkpoint {checkpoint.path} has no classification head: "
            f"the model's {model.num_classes}-class head is zero-initialised"
            f"{dropped}."
        )
    elif head_classes is not None and head_classes != model.num_classes:
        # Fine-tuning: a well-formed head for another class count. A head
        # whose kernel and bias disagree is a broken checkpoint: it is
        # checked (and reported) as every other tensor is.
        for key in heads + PRE_LOGITS:
            tensors.pop(key, None)
        zeros += new
        allowed_missing |= set(heads + PRE_LOGITS)
        dropped = (
            "head and pre-logits layer were"
            if checkpoint.representation_size
            else "head was"
        )
        notes.append(
            f"The checkpoint's head has {head_classes} classes and "
            f"the model's {model.num_classes}: the checkpoint's {dropped} "
            "not loaded, and the new head is zero-initialised (as for "
            "fine-tuning in the paper)."
        )
    return zeros, notes, allowed_missing


def _resample_grids(model, checkpoint, tensors, variables, resize, problems):
    """Resamples in `tensors` the position embeddings of another patch grid
    to `model`'s as `resize` says (`checked_resampling`); returns the notes
    for the user (and appends to `problems` when the checkpoint's grid is
    not known, or its entries are for other tokens than the model's)."""
    notes = []
    posemb = tensors.get(POSEMB)
    source = None
    if POSEMB in variables and np.ndim(posemb) == 3:
        try:
            source = checkpoint.position_grid
        except ValueError as error:
            # Unknown grid, so unknown entries: the grid is the problem.
            problems.append(str(error) + _same_size_hint(checkpoint, model))
    # Of other tokens' entries, resampling would take a prefix entry for
    # a patch's.
    if source is not None and _same_position_prefix(
        model, checkpoint, problems
    ):
        target = tuple(model.grid_size)
        if source != target:
            tensors[POSEMB] = np.asarray(
                patch_grid.resample_position_embeddings(
                    posemb,
                    target,
                    source_grid=source,
                    num_prefix_tokens=checkpoint.position_prefix_tokens,
                    **resize,
                )
            )
            notes.append(
                f"Position embeddings resampled from a {source[0]}x{source[1]} "
                f"to a {target[0]}x{target[1]} patch grid "
                f"({_resampled(resize)})."
            )

    for key, axis in POSEMB_2D.items():
        value = tensors.get(key)
        if value is None or key not in variables or np.ndim(value) != 2:
            continue
        source, target = value.shape[0], model.grid_size[axis]
        if source != target and value.shape[1] == variables[key].shape[1]:
            tensors[key] = np.asarray(
                patch_grid.resample_1d_embeddings(value, target, **resize)
            )
            notes.append(
                f"{'Column' if axis else 'Row'} position embeddings resampled "
                f"from {source} to {target} ({_resampled(resize)})."
            )
    return notes


def _position_tokens(prefix_tokens, entries, told=None):
    """`position_embedding_tokens` as 1D position embeddings with
    `entries` before the patches' for `prefix_tokens` tokens show it."""
    return told or ("patches" if prefix_tokens and not entries else "all")


def _same_position_prefix(model, checkpoint, problems):
    """Whether the 1D position embeddings have as many entries before the
    patches' as the model's. Where they differ by
    `position_embedding_tokens` (and not by the prefix tokens, whose
    tensors are reported), appends the problem to `problems`: equal
    shapes do not make them fit (a patches-only DeiT III file's 4x4 = 16
    entries and a model's 1 + 3x5: the class token's embedding and the
    first patch's would trade places)."""
    encoder = model.get_layer("patch_encoder")
    theirs = checkpoint.position_prefix_tokens
    ours = encoder.position_prefix_tokens
    if theirs == ours:
        return True
    tokens = _position_tokens(
        checkpoint.num_prefix_tokens,
        theirs,
        checkpoint.position_embedding_tokens,
    )
    own = _position_tokens(encoder.num_prefix_tokens, ours)
    if tokens != own:
        problems.append(
            f"The checkpoint's position embeddings have entries for {theirs} "
            f"prefix tokens (position_embedding_tokens={tokens!r}) and the "
            f"model's for {ours} (position_embedding_tokens={own!r}), so "
            "they are not loaded: build the model with "
            f"position_embedding_tokens={tokens!r} (or, if the file is read "
            "wrongly, pass load_weights the file's "
            "position_embedding_tokens=)."
        )
    return False


def _rope_problems(model, checkpoint):
    """The problem (a list of one, or none) of a file in a RoPE layout
    (`position_embedding="rope"` in its `layout_defaults`: DINOv3's,
    Perception Encoder's, Naver's; its tensors hold no rotary table, so
    they fit a model without one too) and a model that does not rotate
    its queries and keys as the file's models do (`rope_type`)."""
    layout = checkpoint.layout_defaults
    if layout.get("position_embedding") != "rope":
        return []
    theirs = layout.get("rope_type", "dinov3")
    if model.position_embedding == "rope" and model.rope_type == theirs:
        return []
    return [
        "They are in a layout whose models rotate the patch tokens' "
        f"queries and keys (position_embedding='rope', rope_type={theirs!r},"
        " with no rotary table in the file), and the model has "
        f"position_embedding={model.position_embedding!r}, "
        f"rope_type={model.rope_type!r}: its outputs would not be the "
        "checkpoint's. Build it with those (keras_vit.weights.convert."
        "model_for_checkpoint builds the model the file implies)."
    ]


def _relative_problems(model, tensors, variables):
    """The problem (a list of one, or none) of relative position embeddings
    for another sequence length, which are never resampled."""
    relative = sorted(
        path
        for path, value in tensors.items()
        if path.endswith(RELATIVE)
        and path in variables
        and np.shape(value) != tuple(variables[path].shape)
    )
    if not relative or np.ndim(tensors[relative[0]]) < 1:
        return []
    source = (np.shape(tensors[relative[0]])[0] + 1) // 2
    target = (variables[relative[0]].shape[0] + 1) // 2
    return [
        f"They hold relative position embeddings for sequences of "
        f"{source} tokens and the model {model.name!r} takes {target} "
        f"(patch grid {model.grid_size[0]}x{model.grid_size[1]}, "
        f"class_token={model.class_token}). position_embedding="
        "'relative' counts offsets along the token sequence, whose "
        "meaning another grid changes, so they are not resampled: load "
        "them into a model of the checkpoint's resolution."
    ]


def _mismatches(checkpoint, tensors, variables, allowed_missing, num_heads):
    """The `(title, items)` sections of what does not fit: missing,
    unexpected, mis-shaped and mistyped tensors."""
    # The fused QKV kernel has the same shape for any number of heads: only
    # formats that record it (the original .npz) can tell a mismatch.
    heads = []
    if checkpoint.num_heads is not None and checkpoint.num_heads != num_heads:
        heads = [
            f"num_heads: checkpoint {checkpoint.num_heads}, model {num_heads}"
        ]

    missing = sorted(set(variables) - set(tensors) - allowed_missing)
    unexpected = sorted(set(tensors) - set(variables))
    unexpected += [f"{name} (source name)" for name in checkpoint.unexpected]
    missing += [f"{name} (source name)" for name in checkpoint.missing]
    common = set(tensors) & set(variables)
    misshaped = (
        heads
        + list(checkpoint.misshaped)
        + sorted(
            f"{path}: checkpoint {tuple(np.shape(tensors[path]))}, model "
            f"{tuple(variables[path].shape)}"
            for path in common
            if tuple(np.shape(tensors[path])) != tuple(variables[path].shape)
        )
    )
    mistyped = sorted(
        f"{path}: checkpoint {np.asarray(tensors[path]).dtype}, model "
        f"{variables[path].dtype}"
        for path in common
        if not _castable(tensors[path], variables[path].dtype)
    )
    return [
        ("missing from the checkpoint", missing),
        ("unexpected in the checkpoint", unexpected),
        ("shape mismatches", misshaped),
        ("not numbers of the model's kind", mistyped),
    ]


def _refuse(model, checkpoint, problems, sections):
    """Raises the `ValueError` that lists everything that keeps the
    checkpoint from loading into `model`."""
    lines = [
        f"The weights in {checkpoint.path} ({checkpoint.source} format) "
        f"do not fit the model {model.name!r}; nothing was loaded.",
        f"  checkpoint: {checkpoint.describe()}",
        f"  model:      hidden_dim={model.hidden_dim}, "
        f"num_layers={model.num_layers}, mlp_dim={model.mlp_dim}, "
        f"use_gated_mlp={model.use_gated_mlp}, num_heads={model.num_heads}, "
        f"patch_size={model.patch_size}, class_token={model.class_token}, "
        f"num_register_tokens={model.num_register_tokens}, "
        f"num_classes={model.num_classes}, "
        f"representation_size={model.representation_size}, "
        f"position_embedding={model.position_embedding!r}, "
        f"position_embedding_tokens={model.position_embedding_tokens!r}",
    ]
    lines += [f"  {problem}" for problem in problems]
    for title, items in sections:
        if items:
            lines.append(f"  {title} ({len(items)}):")
            lines += [f"    {item}" for item in items]
    raise ValueError("\n".join(lines))


def _same_size_hint(checkpoint, model):
    """For a keras_vit file that records no grid: the way out when it was
    saved by a model of `model`'s very size (the usual case), or ''."""
    if checkpoint.source != "keras" or checkpoint.grid_size is not None:
        return ""
    positions = (
        np.shape(checkpoint.tensors[POSEMB])[1]
        - checkpoint.position_prefix_tokens
    )
    rows, cols = (int(g) for g in model.grid_size)
    if rows * cols != positions:
        return ""
    return (
        f" If the file was saved by a model of this very size (a {rows}x{cols} "
        "patch grid), load it with keras_vit.load_weights(model, "
        f"{checkpoint.path!r}, source_grid=({rows}, {cols})), or with Keras's "
        f"own model.load_weights({checkpoint.path!r}), which copies the "
        "position embeddings as they are."
    )


def _non_finite(path, value):
    """A line naming `path` and counting its NaN and infinite values, or
    `None` if it has none (or holds no floats: those are checked by
    `_castable`)."""
    value = np.asarray(value)
    if value.dtype.kind not in "fc":
        return None
    nan = int(np.count_nonzero(np.isnan(value)))
    inf = int(np.count_nonzero(np.isinf(value)))
    if not nan and not inf:
        return None
    counts = [f"{n} {kind}" for n, kind in ((nan, "NaN"), (inf, "inf")) if n]
    return f"{path}: {', '.join(counts)} of {value.size} values"


def _overflow(path, value, cast):
    """A line naming `path` and counting the values that became infinite
    when `value` (finite: checked before) was `cast` to the model's dtype,
    or `None` if none did."""
    cast = np.asarray(cast)
    if cast.dtype.kind not in "fc" and str(cast.dtype) != "bfloat16":
        return None
    count = int(np.count_nonzero(np.isinf(cast.astype("float32"))))
    if not count:
        return None
    largest = float(np.max(np.abs(np.asarray(value, "float64"))))
    return (
        f"{path}: {count} of {cast.size} values overflow {cast.dtype} "
        f"(largest magnitude {largest:g}, {cast.dtype}'s maximum "
        f"{float(np.finfo(cast.dtype).max):g})"
    )


def _castable(value, dtype):
    """Whether a checkpoint array may be assigned to a variable of `dtype`:
    floats to floats, integers to integers (never strings, booleans or
    objects, which NumPy would cast or fail on with no file named)."""
    # An h5py dataset's dtype, without reading it (`opened_keras_weights`).
    stored = getattr(value, "dtype", None)
    kind = (
        np.asarray(value).dtype if stored is None else np.dtype(stored)
    ).kind
    target = np.dtype(str(dtype).replace("bfloat16", "float32")).kind
    if target == "f":
        return kind == "f"
    return kind in "iu" and target in "iu"


def assign(model, values, zeros):
    """Assigns prepared values (all already checked) to `model`."""
    variables = {v.path: v for v in model.weights}
    for path, value in values.items():
        variables[path].assign(value)
    for path in zeros:
        variables[path].assign(
            np.zeros(variables[path].shape, variables[path].dtype)
        )


def resolve(weights, variant=None, cache_dir=None, model=None):
    """Turns a `weights=` argument into a local file path.

    Args:
        weights: a file path, or the name (short or unique) of a preset
            of `variant` (downloaded once into the Keras cache).
        variant: the model's variant name (`"B/16"`), for download.
        cache_dir: where downloads go. Defaults to `None`, Keras's cache
            (`~/.keras/models/keras_vit`).
        model: the built model a preset's weights are for, refused before
            anything is downloaded where its settings are not those the
            preset needs (`load_weights`). Defaults to `None`.

    Returns:
        `(path, preset)`: the local file and the preset record (or `None`).
    """
    if not isinstance(weights, (str, bytes)) and not hasattr(
        weights, "__fspath__"
    ):
        raise ValueError(
            "`weights` must be None, a preset name or a path to a weights "
            f"file. Received: weights={weights!r}"
        )
    name = str(weights) if not isinstance(weights, bytes) else weights.decode()
    preset = registry.find_preset(variant, name) if variant else None
    if preset is not None:
        if model is not None:
            _refuse_other_settings(model, preset)
        return download.download(preset, cache_dir=cache_dir), preset
    if name.endswith(reader.PICKLE_EXTENSIONS):
        reader.check_extension(name)  # raises, saying why
    if not name.endswith(reader.EXTENSIONS):
        available = registry.preset_names(variant) if variant else []
        raise ValueError(
            "Unknown weights. Expected None, a weights file ("
            f"{', '.join(reader.EXTENSIONS)}) or a preset of this model's "
            f"variant {variant or '(not a released variant)'}: {available}. "
            f"Received: weights={name!r}"
        )
    return name, None


#: The `vit_arguments` of a preset that a model may differ in: its head,
#: which loading handles (dropped for another class count, skipped without
#: a top; its activation is no weight).
HEAD_ARGUMENTS = ("include_top", "num_classes", "classifier_activation")


def _refuse_other_settings(model, preset):
    """Refuses `model` where its settings differ from those `preset`'s
    weights need, its `vit_arguments` beyond the head and its
    `normalization`: no tensor says them (an activation, an epsilon, the
    inputs' mean and std), so the weights would load and compute other
    outputs."""
    theirs = {
        name: value
        for name, value in preset["vit_arguments"].items()
        if name not in HEAD_ARGUMENTS
    }
    theirs["normalization"] = preset["normalization"]
    ours = {name: getattr(model, name) for name in theirs}
    # LayerScale's value is only where its weights start, which the
    # checkpoint's replace: whether the model has it is what counts.
    scale = "layer_scale_init"
    if scale in theirs and (ours[scale] is None) == (theirs[scale] is None):
        ours[scale] = theirs[scale]
    differ = [name for name in theirs if theirs[name] != ours[name]]
    if not differ:
        return
    need = ", ".join(f"{name}={theirs[name]!r}" for name in differ)
    received = ", ".join(f"{name}={ours[name]!r}" for name in differ)
    name = preset["unique_name"]
    raise ValueError(
        f"The preset {name!r} needs a model with {need}, and the model "
        f"{model.name!r} has {received}: its weights would load and compute "
        "other outputs; nothing was loaded. Build the model with "
        f"keras_vit.ViT.from_preset({name!r}) (or with those arguments). "
        f"Received: {received}"
    )


def load_weights(
    model,
    weights,
    interpolation=DEFAULT_INTERPOLATION,
    cache_dir=None,
    source_grid=None,
    position_embedding_tokens=None,
    antialias=DEFAULT_ANTIALIAS,
):
    """Loads released or saved weights into a `keras_vit.ViT`, exactly.

    All or nothing: every tensor's name, shape, dtype and values (finite:
    no NaN, no inf) are checked before any is assigned; on a mismatch one
    `ValueError` lists every missing, unexpected, mis-shaped, non-numeric
    and non-finite tensor and the model is left untouched.

    Fine-tuning rules: a well-formed head for another class count (and
    its pre-logits layer) is not loaded and the model's head is
    zero-initialised, as in the paper; a head whose kernel and bias
    disagree is a mismatch; `include_top=False` skips it. On another patch
    grid (in size or shape: 4x4 and 2x8 alike) the position embeddings are
    resampled in 2D (`interpolation`, `antialias`), prefix entries kept.

    The checkpoint's patch grid is the one the file records (keras_vit's
    own files), else `source_grid`, else, for the formats that record none
    (`.npz`, `.safetensors`: their releases are all square), the square
    grid of the token count. An old keras_vit file that records none needs
    `source_grid`: guessing would scramble its 1D position embeddings.

    Args:
        model: a `keras_vit.ViT`.
        weights: a preset name of the model's variant (see
            `keras_vit.list_presets()`), or a file: an original
            google-research / big_vision `.npz`, a timm or Hugging Face
            `.safetensors`, or keras_vit's `.weights.h5` / `.keras`.
        interpolation: how position embeddings are resampled, one of
            `keras_vit.patch_grid.INTERPOLATIONS` (`"bicubic_pytorch"`:
            timm's and transformers', see `weights.huggingface.
            transformers_resampling`). Defaults to `"bilinear_align_corners"`,
            the original code's `scipy.ndimage.zoom(..., order=1)`.
        cache_dir: where preset downloads are cached. Defaults to Keras's
            cache.
        source_grid: `(rows, cols)` or int, the patch grid the file's 1D
            position embeddings were trained on, for a file that does not
            record it. Defaults to `None`.
        position_embedding_tokens: `"all"` or `"patches"`, whether the
            file's position embeddings have entries for the class,
            distillation and register tokens, for a file whose count does
            not say it (see `keras_vit.weights.read_checkpoint`). Defaults
            to `None`: from the file.
        antialias: bool, whether the resampling low-pass filters onto a
            smaller grid: with `"bicubic_pytorch"`, timm's loaders' and
            `Dinov2WithRegistersModel`'s. Defaults to `False`.

    Returns:
        The `Checkpoint` that was loaded.

    Example:

    >>> model = keras_vit.ViT_B16(num_classes=37, image_size=384)
    >>> keras_vit.load_weights(model, "ViT-B_16.npz")
    """
    model_checks.require_vit(model, "load_weights")
    model_checks.refuse_quantized(
        model,
        "checkpoints hold float weights",
        "load them into the float model, then quantize it",
    )
    resize = checked_resampling(interpolation, antialias)
    path, _ = resolve(
        weights, _variant_of(model), cache_dir=cache_dir, model=model
    )
    checkpoint = reader.read_checkpoint(
        path,
        model=model,
        source_grid=source_grid,
        position_embedding_tokens=position_embedding_tokens,
    )
    load_checkpoint(model, checkpoint, **resize)
    return checkpoint


def load_checkpoint(
    model,
    checkpoint,
    interpolation=DEFAULT_INTERPOLATION,
    antialias=DEFAULT_ANTIALIAS,
):
    """`load_weights` for an already read `Checkpoint` (`interpolation`
    and `antialias` as there)."""
    values, zeros, notes = prepare(model, checkpoint, interpolation, antialias)
    assign(model, values, zeros)
    if notes:
        warnings.warn(" ".join(notes), stacklevel=3)


def check_keras_file(model, path):
    """Refuses, with a `ValueError` and nothing loaded, a keras_vit
    `.weights.h5` or `.keras` file that Keras's loader would load into
    `model` only in part or onto other settings; `ViT.load_weights` calls
    it before Keras loads the file (other files are left to Keras).

    Every check of `load_weights` applies, and no fine-tuning rule: Keras
    copies weights as they are, so a head for another class count or
    position embeddings on another grid are refused (`load_weights`
    adapts them). A file that records no patch grid (written before the
    record) is taken to be on the model's, as Keras copies it. A model
    quantized by Keras (its int8 weights are Keras's format only) and a
    remote file (`gs://...`: Keras reads it, keras_vit's readers do not)
    are left to Keras, unchecked. The file is read one tensor at a time
    (`keras_files.opened_keras_weights`): the check adds about one tensor's
    memory to Keras's loading.
    """
    path = os.fspath(path)
    if (
        not reader.is_native(path)
        or "://" in path  # a remote file (gs://...): Keras's own, unchecked
        or model_checks.quantized_layers(model)
    ):
        return
    with keras_files.opened_keras_weights(path, model) as checkpoint:
        checkpoint = _on_the_models_grid(checkpoint, model)
        _, zeros, notes = prepare(model, checkpoint, keep=False)
    if zeros or notes:
        raise ValueError(
            f"The weights in {path} fit the model {model.name!r} only as "
            "keras_vit.load_weights adapts them for fine-tuning: "
            f"{' '.join(notes)} Keras's load_weights copies weights as they "
            "are, so nothing was loaded. Load them adapted with "
            f"keras_vit.load_weights(model, {path!r})."
        )


def _on_the_models_grid(checkpoint, model):
    """`checkpoint`, with the model's patch grid where it records none
    and its 1D position embeddings have as many patch entries."""
    posemb = checkpoint.tensors.get(POSEMB)
    if checkpoint.grid_size is not None or np.ndim(posemb) != 3:
        return checkpoint
    rows, cols = (int(g) for g in model.grid_size)
    positions = np.shape(posemb)[1] - checkpoint.position_prefix_tokens
    if positions != rows * cols:
        return checkpoint
    return dataclasses.replace(checkpoint, grid_size=(rows, cols))
