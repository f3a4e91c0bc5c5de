"""keras_vit's own files: `.weights.h5` (`model.save_weights`) and `.keras`.

Keras stores a layer's own variables as `vars/0, vars/1, ...` under a group
whose `vars` carries the layer's name; nesting follows the layer tree. This
reader turns each entry into keras_vit's variable path
(`block_0/attention/qkv/kernel`) by looking the layer up in the model the
weights are for, so the same checks as for every other format apply
(head and resolution changes included). Nothing is deserialised but arrays:
a `.keras` archive's `config.json` is read as JSON, never executed.

The patch grid of the 1D position embeddings is what the file records:
the `PatchEncoder`'s `GRID_RECORD` entry next to its variables, else (a
`.keras` written before keras_vit recorded it) the grid its `config.json`'s
`image_size` and `patch_size` give. A `.weights.h5` without the record says
nothing of its grid: it is `None` here, and loading it needs
`source_grid=` (see `Checkpoint.position_grid`).

Keras holds a layer's variables by position, not by name, and some
settings change no tensor's shape: the fused QKV kernel is the same for
any number of heads, a distillation token and a lone register token are
both `(1, 1, D)`. A `.keras` archive's `config.json` records them: its
`num_heads` is the `Checkpoint`'s (the loader refuses another), and a
model that differs in `RECORDED_SETTINGS` is refused here. A
`.weights.h5` records no config, but its patch encoder's `TOKENS_RECORD`
entry says its prefix tokens; in a file written before keras_vit recorded
them, where the tokens fit the model's and another layout alike (see
`_check_token_layout`), it is refused rather than guessed.
"""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import struct
import tempfile
import zipfile

import h5py
import numpy as np

from keras_vit import files
from keras_vit.layers.patch_encoder import GRID_RECORD
from keras_vit.layers.patch_encoder import TOKENS_RECORD
from keras_vit.weights.checkpoint import Checkpoint

WEIGHTS_MEMBER = "model.weights.h5"

#: The prefix-token settings: their variables lead the `PatchEncoder`'s own
#: (class, distillation, registers, in that order), held by position.
TOKEN_SETTINGS = ("class_token", "distillation", "num_register_tokens")

#: `ViT` arguments a `.keras` archive's config records and its tensors,
#: held by position, do not tell apart: a model that differs in one would
#: load the weights and compute other outputs, or put one token's weights
#: in another's place. (`num_heads` is the `Checkpoint`'s, checked by the
#: loader with every other mismatch.)
RECORDED_SETTINGS = ("activation", "layer_norm_epsilon") + TOKEN_SETTINGS


def _own_variables(layer):
    # The order Keras's Layer.save_own_variables writes them in.
    return list(layer._trainable_variables) + list(
        layer._non_trainable_variables
    )


def _sublayer(layer, name):
    for child in getattr(layer, "_layers", []):
        if child.name == name:
            return child
    return None


def _entries(file):
    """Every `vars` group of an open Keras weights file: `[(layer names
    from the top, {entry name: h5py.Dataset})]`, read when used (one
    tensor in memory at a time where the caller keeps none). Raises
    whatever h5py raises on a malformed file (the caller names it)."""
    if "layers" not in file or not isinstance(file["layers"], h5py.Group):
        raise ValueError("it has no 'layers' group: not a Keras weights file")
    entries = []

    def visit(group, chain):
        if "vars" in group:
            group_vars = group["vars"]
            if not isinstance(group_vars, h5py.Group):
                raise ValueError(f"{group_vars.name} is not a group")
            arrays = {}
            for key, dataset in group_vars.items():
                if not isinstance(dataset, h5py.Dataset):
                    raise ValueError(f"{dataset.name} is not an array")
                arrays[key] = dataset
            entries.append((chain, arrays))
        for key, child in group.items():
            if key == "vars" or not isinstance(child, h5py.Group):
                continue
            if "vars" not in child:
                # A container, not a layer (a layer's list of sublayers,
                # such as the ResNet stem's `units`): its layers are the
                # sublayers of the layer above.
                visit(child, chain)
                continue
            name = key
            if isinstance(child["vars"], h5py.Group):
                name = child["vars"].attrs.get("name", key)
            if isinstance(name, bytes):
                name = name.decode()
            visit(child, chain + (str(name),))

    visit(file["layers"], ())
    return entries


@contextlib.contextmanager
def _opened(path):
    """`(file, config)` of a `.weights.h5` or `.keras` file, open while the
    `with` lasts: `file` its weights (`h5py.File`), `config` the archive's
    model config (`None` for `.weights.h5`)."""
    if not str(path).endswith(".keras"):
        with h5py.File(path, "r") as file:
            yield file, None
        return
    with zipfile.ZipFile(path) as archive:
        config = None
        if "config.json" in archive.namelist():
            config = json.loads(archive.read("config.json"))
        info = archive.getinfo(WEIGHTS_MEMBER)
        with _member_data(path, archive, info) as data:
            with h5py.File(data, "r") as file:
                yield file, config


@contextlib.contextmanager
def _member_data(path, archive, info):
    """The archive member `info` as a seekable binary file. Keras stores
    it uncompressed: it is read in place (`_StoredMember`), its CRC checked
    first, where `archive.open` seeks by reading from the member's start
    (on Python 3.11 each of h5py's seeks re-reads what comes before it;
    `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`) and
    `archive.read` holds it all in memory. A compressed member is read
    into memory."""
    if info.compress_type != zipfile.ZIP_STORED:
        yield io.BytesIO(archive.read(info))
        return
    with archive.open(info) as member:  # to the end: zipfile checks the CRC
        while member.read(1 << 24):
            pass
    with open(path, "rb", buffering=0) as raw:
        raw.seek(info.header_offset)
        header = raw.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header for {info.filename}")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        start = info.header_offset + 30 + name_length + extra_length
        yield _StoredMember(raw, start, info.file_size)


@contextlib.contextmanager
def weights_for_keras(path):
    """The file Keras's `Model.load_weights` should read for `path`: a
    local `.keras` file's weights member copied to a `.weights.h5` in a
    temporary folder (removed afterwards), any other file as it is.

    Keras reads a `.keras` file's weights member through `zipfile`, whose
    seeks read from the member's start on Python 3.11, each one
    re-reading what comes before it; the copy is written, and then read,
    straight through (`benchmarks/results/2026-12-03-load-keras-copy.md`;
    keras-team/keras#19793 mended `load_model`, which copies the member
    too, not `load_weights`). The two files hold the same weights and
    Keras loads them the same way. The folder goes next to the file, else
    in the system's temporary folder; where neither can hold the copy (no
    space, read-only), or the archive cannot be copied from, Keras reads
    the archive itself and reports its own errors.
    """
    name = os.fspath(path)
    if not (isinstance(name, str) and name.endswith(".keras")) or "://" in name:
        yield path
        return
    with contextlib.ExitStack() as stack:
        copy = None
        for folder in (files.temporary_folder, _system_temporary_folder):
            try:
                copy = _copied_member(name, stack.enter_context(folder(name)))
                break
            except Exception:  # noqa: BLE001 - OSError, zipfile's, zlib's
                stack.close()
        yield path if copy is None else copy


def _system_temporary_folder(name):
    del name  # the system's folder, wherever the file is
    return tempfile.TemporaryDirectory(prefix="keras_vit-")


def _copied_member(path, folder):
    """Copies the weights member of the `.keras` file `path` into `folder`
    (zipfile checks its CRC on the way); returns the copy's path."""
    copy = os.path.join(folder, WEIGHTS_MEMBER)
    with zipfile.ZipFile(path) as archive:
        with archive.open(WEIGHTS_MEMBER) as member, open(copy, "wb") as out:
            shutil.copyfileobj(member, out, 1 << 24)
    return copy


class _StoredMember(io.RawIOBase):
    """Bytes `[start, start + size)` of the open binary file `raw`, read
    and seeked in place: an uncompressed zip member."""

    def __init__(self, raw, start, size):
        super().__init__()
        self._raw, self._start, self._size, self._position = raw, start, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._position

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position}.get(
            whence, self._size
        )
        if base + offset < 0:
            raise OSError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def readinto(self, buffer):
        count = max(0, min(len(buffer), self._size - self._position))
        self._raw.seek(self._start + self._position)
        got = self._raw.readinto(memoryview(buffer).cast("B")[:count])
        self._position += got
        return got


def _recorded_grid(value, path):
    grid = np.asarray(value)
    if grid.shape != (2,) or grid.dtype.kind not in "iu" or (grid < 1).any():
        raise ValueError(
            f"The Keras weights file {path!r} is malformed: its patch "
            f"encoder's {GRID_RECORD!r} entry should be two positive ints. "
            f"Received: {GRID_RECORD}={grid.tolist()}"
        )
    return tuple(int(g) for g in grid)


def _config_args(config):
    """The `ViT` arguments a `.keras` archive's config records, or `None`."""
    if not isinstance(config, dict) or not isinstance(
        config.get("config"), dict
    ):
        return None
    return config["config"]


def _config_grid(args, model):
    """The patch grid a `.keras` archive's model config gives, or `None`."""
    if args is None:
        return None
    image_size, patch_size = args.get("image_size"), args.get("patch_size")
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    if (
        not isinstance(image_size, (list, tuple))
        or len(image_size) != 2
        or not all(isinstance(s, int) for s in image_size)
        or not isinstance(patch_size, int)
        or patch_size < 1
    ):
        return None
    if args.get("stem") is None:
        return (image_size[0] // patch_size, image_size[1] // patch_size)
    # A stem's feature map depends on the stem: the grid is the model's when
    # the config is the model's (nothing is rebuilt from the config).
    same = (
        tuple(image_size) == tuple(model.image_size)
        and patch_size == model.patch_size
        and args.get("num_channels", 3) == model.num_channels
        and args.get("stem") == json.loads(json.dumps(model.stem))
    )
    return tuple(model.grid_size) if same else None


def _recorded_heads(args):
    """The `num_heads` a `.keras` archive's config records, or `None`."""
    heads = None if args is None else args.get("num_heads")
    if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0:
        return heads
    return None


def _check_recorded_settings(args, model, path):
    """Refuses a model that differs from the one a `.keras` archive's
    config records in one of `RECORDED_SETTINGS`."""
    _refuse_other_settings(
        path,
        model,
        {name: args.get(name) for name in RECORDED_SETTINGS},
        {name: getattr(model, name) for name in RECORDED_SETTINGS},
        "its config records them",
    )


def _refuse_other_settings(path, model, theirs, ours, recorded):
    """Refuses `model` where its settings `ours` differ from `theirs`, a
    file's (`None`: not recorded), as the file records them (`recorded`,
    said in the message)."""
    differ = [
        n for n in theirs if theirs[n] is not None and theirs[n] != ours[n]
    ]
    if not differ:
        return
    file = ", ".join(f"{name}={theirs[name]!r}" for name in differ)
    received = ", ".join(f"{name}={ours[name]!r}" for name in differ)
    raise ValueError(
        f"The Keras file {path!r} holds the weights of a model with "
        f"{file} ({recorded}) and the model {model.name!r} has {received}. "
        "Keras files hold a layer's weights by position, so they would load "
        "and compute other outputs, or put one token's weights in another's "
        "place; nothing was loaded. Build the model with the file's "
        f"settings (or keras.saving.load_model({path!r})). "
        f"Received: {received}"
    )


#: The `(class_token, distillation)` a model may have (a distillation
#: token needs a class token).
_TOKEN_PAIRS = ((False, False), (True, False), (True, True))


def _layouts_with_widths(widths):
    """Every `(class_token, distillation, num_register_tokens)` whose
    prefix-token variables have these widths (their second axis), in
    order: `[1]` is a class token or one register, `[1, 1]` a class token
    and a distillation token or one register."""
    layouts = []
    for class_token, distillation in _TOKEN_PAIRS:
        count = int(class_token) + int(distillation)
        rest = list(widths[count:])
        if list(widths[:count]) == [1] * count and len(rest) <= 1:
            layouts.append((class_token, distillation, sum(rest)))
    return layouts


def _file_distilled(entries):
    """Whether a Keras file's model had a distillation head: `True` if the
    file holds `head_dist`, `False` if it holds a `head` and no
    `head_dist`, `None` if it holds no head (`include_top=False`)."""
    tops = {chain[0] for chain, arrays in entries if chain and arrays}
    if "head_dist" in tops:
        return True
    return False if "head" in tops else None


def _check_token_layout(entries, model, path):
    """For a file that records no config (a `.weights.h5`): refuses when
    its prefix tokens, held by position, have the shapes of the model's and
    of another layout's too, and the file's heads do not say which it is.

    A class-token model takes a lone `(1, 1, D)` token to be a class token
    (the layout of nearly every file): only a model without a class token
    and one register is refused for it."""
    encoder = model.get_layer("patch_encoder")
    ours = tuple(getattr(model, name) for name in TOKEN_SETTINGS)
    saved = next((a for c, a in entries if c == (encoder.name,)), {})
    if TOKENS_RECORD in saved:
        _check_recorded_tokens(saved[TOKENS_RECORD], model, path)
        return
    count = sum(bool(value) for value in ours)  # registers: one variable
    tokens = _own_variables(encoder)[:count]
    shapes = [np.shape(saved.get(str(i))) for i in range(len(tokens))]
    if shapes != [tuple(v.shape) for v in tokens]:
        return  # another layout: the loader's checks list the differences
    distilled = _file_distilled(entries)
    others = [
        layout
        for layout in _layouts_with_widths([s[1] for s in shapes])
        if layout != ours
        and (layout[0] or not model.class_token)
        and distilled in (None, layout[1])
    ]
    if not others:
        return
    differ = [i for i in range(3) if any(o[i] != ours[i] for o in others)]
    alike = " or ".join(
        ", ".join(f"{TOKEN_SETTINGS[i]}={o[i]!r}" for i in differ)
        for o in others
    )
    received = ", ".join(f"{TOKEN_SETTINGS[i]}={ours[i]!r}" for i in differ)
    raise ValueError(
        f"The Keras weights file {path!r} does not record its model's "
        f"prefix tokens (a .weights.h5 holds a layer's weights by position, "
        f"unnamed), and its tokens, shaped {shapes}, are those of the "
        f"model {model.name!r} ({received}) and of a model with {alike}: "
        "one token's weights could land in another's place, so nothing "
        "was loaded. Load a .keras file of the model (its config says "
        "which tokens it has) or, for a file this very model saved, "
        "Keras's own loader, which copies by position unchecked: "
        f"model.load_weights({path!r}, skip_mismatch=True). "
        f"Received: {received}"
    )


def _check_recorded_tokens(value, model, path):
    """Refuses a model whose prefix tokens differ from those a file
    records beside its patch encoder's weights (`TOKENS_RECORD`)."""
    theirs = np.asarray(value).ravel()
    if theirs.shape != (3,) or not np.issubdtype(theirs.dtype, np.integer):
        raise ValueError(
            f"The Keras weights file {path!r} is malformed: its patch "
            f"encoder's {TOKENS_RECORD!r} entry should be three ints. "
            f"Received: {TOKENS_RECORD}={theirs.tolist()}"
        )
    ours = model.get_layer("patch_encoder").token_layout()
    _refuse_other_settings(
        path,
        model,
        dict(zip(TOKEN_SETTINGS, (int(v) for v in theirs))),
        dict(zip(TOKEN_SETTINGS, ours)),
        "recorded beside its patch encoder's weights",
    )


def _checked_args(entries, config, model, path):
    """The `ViT` arguments `config` records (`None` if none), once the
    model is checked against them, or against the file's token layout
    where they do not record it."""
    args = _config_args(config)
    if args is not None:
        _check_recorded_settings(args, model, path)
    if args is None or any(args.get(k) is None for k in TOKEN_SETTINGS):
        _check_token_layout(entries, model, path)
    return args


def read_keras_weights(path, model):
    """Reads a `.weights.h5` or `.keras` file for `model` into memory.

    Raises:
        ValueError: naming the file, if it cannot be read (not HDF5, not a
            zip archive, no weights member, truncated, malformed), if the
            model differs from the one a `.keras` file's config records in
            `RECORDED_SETTINGS`, or if a `.weights.h5`'s prefix tokens fit
            another layout as well as the model's.
    """
    with opened_keras_weights(path, model) as checkpoint:
        tensors = {k: np.asarray(v) for k, v in checkpoint.tensors.items()}
    return dataclasses.replace(checkpoint, tensors=tensors)


@contextlib.contextmanager
def opened_keras_weights(path, model):
    """A `.weights.h5` or `.keras` file for `model`, open while the `with`
    lasts: its `Checkpoint`, whose tensors are read when used (`np.asarray`
    of an `h5py.Dataset`), so a check that keeps none holds one tensor at a
    time (`read_keras_weights` reads them all).

    Raises:
        ValueError: as `read_keras_weights`, and naming the file for a
            tensor that cannot be read inside the `with` (a truncated file).
    """
    with contextlib.ExitStack() as stack:
        try:
            file, config = stack.enter_context(_opened(path))
            entries = _entries(file)
        except Exception as e:  # noqa: BLE001 - h5py, zipfile, zlib, json, ...
            raise _unreadable(path, e) from None
        try:
            yield _checkpoint(entries, config, model, path)
        except OSError as e:  # h5py, reading a tensor
            raise _unreadable(path, e) from None


def _unreadable(path, error):
    return ValueError(
        f"Could not read the Keras weights file {path!r} (truncated or "
        f"corrupt?): {type(error).__name__}: {error}"
    )


def _checkpoint(entries, config, model, path):
    """The `Checkpoint` of a Keras file's `entries` and `config`, once the
    model is checked against what they record."""
    args = _checked_args(entries, config, model, path)
    tensors, unexpected, grid = {}, [], None
    layers = {layer.name: layer for layer in model.layers}
    encoder = layers.get("patch_encoder")
    for chain, arrays in entries:
        layer = layers.get(chain[0]) if chain else None
        for name in chain[1:]:
            layer = None if layer is None else _sublayer(layer, name)
        own = _own_variables(layer) if layer is not None else []
        for key, value in arrays.items():
            if key.isdigit() and int(key) < len(own):
                tensors[own[int(key)].path] = value
            elif key == GRID_RECORD and layer is not None and layer is encoder:
                grid = _recorded_grid(value, path)
            elif (
                key == TOKENS_RECORD and layer is not None and layer is encoder
            ):
                pass  # checked by `_checked_args`
            else:
                unexpected.append("/".join(chain) + f"/vars/{key}")
    if grid is None:
        grid = _config_grid(args, model)
    return Checkpoint(
        tensors=tensors,
        source="keras",
        path=path,
        patch_size=model.patch_size,
        num_heads=_recorded_heads(args),
        grid_size=grid,
        unexpected=sorted(unexpected),
    )
