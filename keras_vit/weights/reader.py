"""Reading a weights file into a `Checkpoint`, chosen by its extension.

| extension | reader |
|---|---|
| `.npz` | NumPy, `allow_pickle=False`; google-research or big_vision layout |
| `.safetensors` | the safetensors library; timm or Hugging Face naming |
| `.weights.h5`, `.keras` | keras_vit's own files (h5py; no config executed) |
| `.pth`, `.pt`, `.bin`, `.ckpt`, `.pkl` | refused: a pickle can run code |

Within a container, the layout is recognised by the names that only it
uses (e.g. timm's `patch_embed.proj.weight`); nothing is guessed from
shapes. Any failure to read names the file. Of a big_vision two-tower
file (SigLIP's releases) the image tower is read
(`keras_vit.weights.npz.image_tower`).

The patch grid of the position embeddings is what the file records
(keras_vit's own files), else the square grid for the formats whose
releases and loaders have it so (`checkpoint.SQUARE_GRID_SOURCES`); an
explicit `source_grid=` gives it for a file that does not record it.
"""

import dataclasses
import json
import os

import numpy as np

from keras_vit import arg_checks
from keras_vit import files
from keras_vit.options import POSITION_EMBEDDING_TOKENS
from keras_vit.weights import huggingface
from keras_vit.weights import keras_files
from keras_vit.weights import npz
from keras_vit.weights import timm
from keras_vit.weights.checkpoint import POSEMB

PICKLE_EXTENSIONS = (".pth", ".pt", ".bin", ".ckpt", ".pkl", ".pickle")
NATIVE_EXTENSIONS = (".weights.h5", ".keras")
#: The index of a sharded `.safetensors` checkpoint (a large model's
#: `save_pretrained`): its `weight_map` names each tensor's shard, a file
#: in the same folder.
SHARD_INDEX = ".safetensors.index.json"
EXTENSIONS = (".npz", ".safetensors", SHARD_INDEX) + NATIVE_EXTENSIONS


def is_native(path):
    return str(path).endswith(NATIVE_EXTENSIONS)


def check_extension(path):
    """Raises a clear error for files keras_vit does not read."""
    path = str(path)
    if path.endswith(PICKLE_EXTENSIONS):
        raise ValueError(
            f"Refusing to load {path!r}: PyTorch/pickle checkpoints can run "
            "arbitrary code when loaded. Convert it to .safetensors first "
            "(in PyTorch: `safetensors.torch.save_file(model.state_dict(), "
            "'model.safetensors')`), or use the model.safetensors file that "
            "timm and Hugging Face publish next to it."
        )
    if not path.endswith(EXTENSIONS):
        raise ValueError(
            f"Unknown weights file type. Expected one of {list(EXTENSIONS)}. "
            f"Received: weights={path!r}"
        )


def _read_npz(path, source_grid=None):
    arrays = files.read_npz(path, "the .npz weights file", name="weights")
    for prefix in ("opt/target/", "params/"):  # flax optimizer / big_vision
        if arrays and all(k.startswith(prefix) for k in arrays):
            arrays = {k[len(prefix) :]: v for k, v in arrays.items()}
    # SigLIP's two-tower files: the image tower only.
    arrays, two_tower = npz.image_tower(arrays, path)
    if "Transformer/posembed_input/pos_embedding" in arrays or any(
        "MultiHeadDotProductAttention_1" in k for k in arrays
    ):
        return npz.read_original(arrays, path)
    if any("MultiHeadDotProductAttention_0" in k for k in arrays):
        return npz.read_big_vision(
            arrays, path, source_grid, two_tower=two_tower
        )
    raise ValueError(
        "The weights file is not a ViT checkpoint in the google-research or "
        "big_vision layout (no 'Transformer/encoderblock_*/"
        "MultiHeadDotProductAttention_*' "
        + ("tensors in its image tower" if two_tower else "tensors")
        + f"). Its first keys: {sorted(arrays)[:5]}. Received: "
        f"weights={path!r}"
    )


def _read_safetensors(path, source_grid=None, position_embedding_tokens=None):
    import safetensors

    tensors = {}
    for shard in _shards(path) if path.endswith(SHARD_INDEX) else [path]:
        try:
            with safetensors.safe_open(shard, framework="numpy") as file:
                tensors.update(
                    {key: file.get_tensor(key) for key in file.keys()}
                )
        except Exception as e:  # safetensors raises its own SafetensorError
            raise ValueError(
                f"Could not read the .safetensors weights file {shard!r} "
                f"(truncated or corrupt?): {e}"
            ) from None
    tensors = {
        k: v.astype("float32")
        if v.dtype.kind == "V" or v.dtype.name == "bfloat16"
        else v
        for k, v in tensors.items()
    }
    if timm.SIGNATURE in tensors:
        return timm.read_timm(
            tensors, path, position_embedding_tokens, source_grid
        )
    if any(s in tensors for s in huggingface.SIGNATURES):
        return huggingface.read_huggingface(tensors, path)
    raise ValueError(
        f"{path!r} has neither timm's ({timm.SIGNATURE!r}) nor Hugging Face "
        f"transformers' ({huggingface.SIGNATURES[0]!r}) ViT naming. Its "
        f"first keys: {sorted(tensors)[:5]}"
    )


def shard_names(index):
    """The shard files a sharded checkpoint's `index` (a
    `*.safetensors.index.json`) names, sorted: plain file names, each
    beside it."""
    try:
        with open(index, encoding="utf-8") as file:
            names = sorted(set(json.load(file)["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(
            f"Could not read the shard index {index!r}: it must be JSON with "
            f"a `weight_map` of tensor names to shard files ({e!r})"
        ) from None
    for name in names:
        if not isinstance(name, str) or os.path.basename(name) != name:
            raise ValueError(
                f"The shard index {index!r} must name files beside it. "
                f"Received: {name!r}"
            )
    return names


def _shards(index):
    """The paths of `index`'s shards, each of which must exist."""
    folder = os.path.dirname(index)
    paths = [os.path.join(folder, name) for name in shard_names(index)]
    for path in paths:
        if not os.path.isfile(path):
            raise ValueError(
                f"The shard {path!r} that {index!r} names is missing."
            )
    return paths


def read_checkpoint(
    path, model=None, source_grid=None, position_embedding_tokens=None
):
    """Reads the weights file `path` into a `keras_vit` `Checkpoint`.

    Args:
        path: a `.npz`, `.safetensors`, `.weights.h5` or `.keras` file.
        model: the `keras_vit.ViT` the weights are for; needed (only) for
            keras_vit's own `.weights.h5` / `.keras` files.
        source_grid: `(rows, cols)` or int, the patch grid the file's 1D
            position embeddings are on, for a file that does not record it
            (a non-square `.npz` / `.safetensors` checkpoint, a
            `.weights.h5` written before keras_vit recorded it). Must agree
            with a grid the file records. Defaults to `None`.
        position_embedding_tokens: `"all"` or `"patches"`, whether the
            file's 1D position embeddings have entries for the class,
            distillation and register tokens or for the patches only (see
            `keras_vit.ViT`), for a file where their number does not say it
            (timm's files record no `no_embed_class`, big_vision's no
            class token's entry: their readers take the reading whose
            patches make a square grid, or `source_grid`).
            Defaults to `None`: as the file says.

    Returns:
        A `keras_vit.weights.Checkpoint`.
    """
    path = os.fspath(path)
    if source_grid is not None:
        source_grid = arg_checks.size_2d("source_grid", source_grid)
    if position_embedding_tokens is not None:
        position_embedding_tokens = arg_checks.one_of(
            "position_embedding_tokens",
            position_embedding_tokens,
            POSITION_EMBEDDING_TOKENS,
        )
    checkpoint = _read(path, model, source_grid, position_embedding_tokens)
    if position_embedding_tokens is not None and checkpoint.num_prefix_tokens:
        checkpoint = dataclasses.replace(
            checkpoint, position_embedding_tokens=position_embedding_tokens
        )
    if source_grid is None:
        return checkpoint
    return dataclasses.replace(
        checkpoint, grid_size=_source_grid(checkpoint, source_grid)
    )


def _source_grid(checkpoint, grid):
    """Checks an explicit `source_grid` against the checkpoint."""
    posemb = checkpoint.tensors.get(POSEMB)
    if posemb is None or np.ndim(posemb) != 3:
        raise ValueError(
            "`source_grid` is the patch grid of 1D learned position "
            f"embeddings, and {checkpoint.path} has none. Received: "
            f"source_grid={grid}"
        )
    positions = np.shape(posemb)[1] - checkpoint.position_prefix_tokens
    if grid[0] * grid[1] != positions:
        raise ValueError(
            f"The position embeddings in {checkpoint.path} hold {positions} "
            f"patch positions, and a {grid[0]}x{grid[1]} grid holds "
            f"{grid[0] * grid[1]}. Received: source_grid={grid}"
        )
    recorded = checkpoint.grid_size
    if recorded is not None and tuple(recorded) != grid:
        raise ValueError(
            f"{checkpoint.path} records a {recorded[0]}x{recorded[1]} patch "
            f"grid for its position embeddings. Received: source_grid={grid}"
        )
    return grid


def _read(path, model, source_grid=None, position_embedding_tokens=None):
    check_extension(path)
    if not os.path.isfile(path):
        raise ValueError(f"Weights file not found. Received: weights={path!r}")
    if path.endswith(".npz"):
        return _read_npz(path, source_grid)
    if path.endswith((".safetensors", SHARD_INDEX)):
        return _read_safetensors(path, source_grid, position_embedding_tokens)
    if model is None:
        raise ValueError(
            f"Reading keras_vit's own weights file {path!r} needs the model "
            "the weights are for."
        )
    return keras_files.read_keras_weights(path, model)
