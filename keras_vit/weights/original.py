"""The original `.npz` checkpoints: google-research/vision_transformer.

Layout (flax parameter paths joined with "/"), as released in
`gs://vit_models/{imagenet21k,imagenet21k+imagenet2012,augreg,sam}/`:

    embedding/kernel (P, P, C, D), embedding/bias
    cls (1, 1, D)
    Transformer/posembed_input/pos_embedding (1, T, D)
    Transformer/encoderblock_{i}/LayerNorm_0/{scale,bias}
    Transformer/encoderblock_{i}/MultiHeadDotProductAttention_1/
        {query,key,value}/kernel (D, heads, D / heads),
        {query,key,value}/bias (heads, D / heads)
        out/kernel (heads, D / heads, D), out/bias (D,)
    Transformer/encoderblock_{i}/LayerNorm_2/{scale,bias}
    Transformer/encoderblock_{i}/MlpBlock_3/Dense_{0,1}/{kernel,bias}
    Transformer/encoder_norm/{scale,bias}
    pre_logits/{kernel,bias}   (ImageNet-21k pre-training checkpoints)
    head/{kernel,bias}

big_vision's `.npz` files hold the same model under other module names
(`MultiHeadDotProductAttention_0`, `LayerNorm_0/1`, `MlpBlock_0`, a
`pos_embedding` at the top level); `read_big_vision` reads those.

Neither layout records the patch grid of `pos_embedding`: every release is
square, and the original code's `load_pretrained` (like timm's loader of
these files) takes the grid to be the square of the token count. So does
keras_vit; a checkpoint of a non-square grid needs
`load_weights(..., source_grid=(rows, cols))`, and `save_npz` refuses to
write one (its readers would take it for a square).
"""

import re

import numpy as np

from keras_vit import files
from keras_vit.models import checks as model_checks
from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import concatenate
from keras_vit.weights.checkpoint import conv_to_projection


def _layer_norm(src, prefix, out, name):
    out[f"{name}/gamma"] = src.take(f"{prefix}/scale", 1)
    out[f"{name}/beta"] = src.take(f"{prefix}/bias", 1)


def _dense(src, prefix, out, name):
    out[f"{name}/kernel"] = src.take(f"{prefix}/kernel", 2)
    out[f"{name}/bias"] = src.take(f"{prefix}/bias", 1)


def _attention(src, prefix, out, name):
    """Separate (D, heads, d) q/k/v kernels → one fused (D, 3D) kernel.

    Returns the number of heads (`None` if the kernels are missing)."""
    kernels, biases, num_heads = [], [], None
    for part in ("query", "key", "value"):
        kernel = src.take(f"{prefix}/{part}/kernel", 3)
        bias = src.take(f"{prefix}/{part}/bias", 2)
        if kernel is not None:
            num_heads = kernel.shape[1]
            kernel = kernel.reshape(kernel.shape[0], -1)
        kernels.append(kernel)
        biases.append(None if bias is None else bias.reshape(-1))
    out[f"{name}/qkv/kernel"] = concatenate(kernels, axis=1)
    out[f"{name}/qkv/bias"] = concatenate(biases)
    proj = src.take(f"{prefix}/out/kernel", 3)
    out[f"{name}/proj/kernel"] = (
        None if proj is None else proj.reshape(-1, proj.shape[-1])
    )
    out[f"{name}/proj/bias"] = src.take(f"{prefix}/out/bias", 1)
    return num_heads


def _block_indices(keys, block_prefix):
    indices = set()
    for key in keys:
        if key.startswith(block_prefix):
            head = key[len(block_prefix) :].split("/", 1)[0]
            if head.isdigit():
                indices.add(int(head))
    return sorted(indices)


_UNIT = re.compile(r"^block(\d+)/unit(\d+)/")


def _hybrid_stem(src, out):
    """The ResNet of a hybrid checkpoint (`conv_root`, `block1/unit1`, ...)."""
    if "conv_root/kernel" not in src:
        return
    stem = "resnet_stem"
    out[f"{stem}/root_conv/kernel"] = src.take("conv_root/kernel", 4)
    out[f"{stem}/root_norm/gamma"] = src.take("gn_root/scale", 1)
    out[f"{stem}/root_norm/beta"] = src.take("gn_root/bias", 1)
    units = sorted(
        {
            (int(m.group(1)), int(m.group(2)))
            for k in src.keys()
            if (m := _UNIT.match(k))
        }
    )
    for block, unit in units:
        prefix, name = (
            f"block{block}/unit{unit}",
            f"{stem}/block{block}_unit{unit}",
        )
        for i in (1, 2, 3):
            out[f"{name}/conv{i}/kernel"] = src.take(
                f"{prefix}/conv{i}/kernel", 4
            )
            out[f"{name}/norm{i}/gamma"] = src.take(f"{prefix}/gn{i}/scale", 1)
            out[f"{name}/norm{i}/beta"] = src.take(f"{prefix}/gn{i}/bias", 1)
        if f"{prefix}/conv_proj/kernel" in src:
            out[f"{name}/proj_conv/kernel"] = src.take(
                f"{prefix}/conv_proj/kernel", 4
            )
            out[f"{name}/proj_norm/gamma"] = src.take(
                f"{prefix}/gn_proj/scale", 1
            )
            out[f"{name}/proj_norm/beta"] = src.take(
                f"{prefix}/gn_proj/bias", 1
            )


def _convert(src, names, source):
    """Shared by both layouts; `names` holds the layout's module names."""
    out = {}
    _hybrid_stem(src, out)
    kernel, patch_size = conv_to_projection(src.take("embedding/kernel", 4))
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take("embedding/bias", 1)
    cls = src.take_if_present("cls", 3)
    if cls is not None:
        out["patch_encoder/class_token"] = cls
    posemb = src.take_if_present(names["posemb"], 3)
    if posemb is not None:
        out["patch_encoder/position_embedding"] = posemb
    num_heads = None
    block = names["block"]
    for i in _block_indices(src.keys(), block):
        prefix = f"{block}{i}"
        _layer_norm(src, f"{prefix}/{names['ln1']}", out, f"block_{i}/norm1")
        num_heads = (
            _attention(
                src, f"{prefix}/{names['mha']}", out, f"block_{i}/attention"
            )
            or num_heads
        )
        _layer_norm(src, f"{prefix}/{names['ln2']}", out, f"block_{i}/norm2")
        mlp = f"{prefix}/{names['mlp']}"
        _dense(src, f"{mlp}/Dense_0", out, f"block_{i}/mlp_fc1")
        _dense(src, f"{mlp}/Dense_1", out, f"block_{i}/mlp_fc2")
    _layer_norm(src, "Transformer/encoder_norm", out, "encoder_norm")
    for name in ("pre_logits", "head"):
        if f"{name}/kernel" in src or f"{name}/bias" in src:
            _dense(src, name, out, name)  # half a layer: reported missing
    return src.checkpoint(
        out, source, patch_size=patch_size, num_heads=num_heads
    )


ORIGINAL_NAMES = {
    "posemb": "Transformer/posembed_input/pos_embedding",
    "block": "Transformer/encoderblock_",
    "ln1": "LayerNorm_0",
    "mha": "MultiHeadDotProductAttention_1",
    "ln2": "LayerNorm_2",
    "mlp": "MlpBlock_3",
}

BIG_VISION_NAMES = {
    "posemb": "pos_embedding",
    "block": "Transformer/encoderblock_",
    "ln1": "LayerNorm_0",
    "mha": "MultiHeadDotProductAttention_0",
    "ln2": "LayerNorm_1",
    "mlp": "MlpBlock_0",
}


def _source(arrays, path):
    arrays, misshaped = unstack_scanned_blocks(arrays)
    return TensorSource(arrays, path, misshaped=misshaped)


def read_original(arrays, path):
    """Converts google-research/vision_transformer `.npz` arrays.

    The position embeddings are taken to be on a square grid (the format
    records none; see the module's docstring)."""
    return _convert(_source(arrays, path), ORIGINAL_NAMES, "original")


def read_big_vision(arrays, path):
    """Converts big_vision ViT `.npz` arrays (unstacked or scanned).

    The position embeddings are taken to be on a square grid (the format
    records none; see the module's docstring)."""
    return _convert(_source(arrays, path), BIG_VISION_NAMES, "big_vision")


SCANNED = "Transformer/encoderblock/"


def unstack_scanned_blocks(arrays):
    """big_vision trains with `nn.scan` over the blocks: one
    `Transformer/encoderblock/...` tensor per weight, stacked on a leading
    depth axis. Splits them into `encoderblock_{i}` entries.

    Returns:
        `(arrays, misshaped)`: the arrays with the blocks split, and a line
        for each scanned tensor without a depth axis (a 0-d one), which is
        left out.
    """
    if not any(k.startswith(SCANNED) for k in arrays):
        return arrays, []
    out, misshaped = {}, []
    for key, value in arrays.items():
        if not key.startswith(SCANNED):
            out[key] = value
        elif np.ndim(value) == 0:
            misshaped.append(
                f"{key} (source name): shape (), expected a leading depth "
                "axis (a scanned block tensor)"
            )
        else:
            rest = key[len(SCANNED) :]
            for i in range(np.shape(value)[0]):
                out[f"Transformer/encoderblock_{i}/{rest}"] = value[i]
    return out, misshaped


def to_original(model):
    """A `keras_vit.ViT`'s weights in the original `.npz` layout.

    The inverse of `read_original`: the arrays `save_npz` writes, named and
    shaped as google-research/vision_transformer's checkpoints.
    """
    from keras_vit import patch_grid

    model_checks.require_vit(model, "The original .npz layout (save_npz)")
    model_checks.refuse_quantized(
        model,
        "the original .npz layout holds float weights",
        "write the float model's .npz (before `quantize()`), or save this "
        "one with model.save()",
    )
    if model.position_embedding not in ("learned", "none"):
        raise ValueError(
            "The original .npz layout holds 1D learned position embeddings "
            "only (save the model with model.save or save_weights instead). "
            "Received a model with "
            f"position_embedding={model.position_embedding!r}."
        )
    grid = tuple(model.grid_size)
    if model.position_embedding == "learned" and grid[0] != grid[1]:
        raise ValueError(
            "The original .npz layout records no patch grid, and its readers "
            "(the original code, timm, keras_vit) take the position "
            "embeddings to be on a square one: a model on a "
            f"{grid[0]}x{grid[1]} grid would load scrambled. Save it with "
            "model.save or save_weights (they record the grid). Received a "
            f"model with image_size={tuple(model.image_size)}."
        )
    w = {v.path: np.asarray(v.numpy(), "float32") for v in model.weights}
    heads, dim = model.num_heads, model.hidden_dim
    out = {
        "embedding/kernel": np.asarray(
            patch_grid.dense_to_conv_kernel(
                w["patch_encoder/projection/kernel"],
                model.patch_size,
                model.num_channels,
            )
        ),
        "embedding/bias": w["patch_encoder/projection/bias"],
    }
    if model.class_token:
        out["cls"] = w["patch_encoder/class_token"]
    if model.position_embedding == "learned":
        out[ORIGINAL_NAMES["posemb"]] = w["patch_encoder/position_embedding"]
    for i in range(model.num_layers):
        src, dst = f"block_{i}", f"Transformer/encoderblock_{i}"
        mha = f"{dst}/MultiHeadDotProductAttention_1"
        for name, norm in (("norm1", "LayerNorm_0"), ("norm2", "LayerNorm_2")):
            out[f"{dst}/{norm}/scale"] = w[f"{src}/{name}/gamma"]
            out[f"{dst}/{norm}/bias"] = w[f"{src}/{name}/beta"]
        kernels = np.split(w[f"{src}/attention/qkv/kernel"], 3, axis=1)
        biases = np.split(w[f"{src}/attention/qkv/bias"], 3)
        for part, kernel, bias in zip(
            ("query", "key", "value"), kernels, biases
        ):
            out[f"{mha}/{part}/kernel"] = kernel.reshape(dim, heads, -1)
            out[f"{mha}/{part}/bias"] = bias.reshape(heads, -1)
        out[f"{mha}/out/kernel"] = w[f"{src}/attention/proj/kernel"].reshape(
            heads, -1, dim
        )
        out[f"{mha}/out/bias"] = w[f"{src}/attention/proj/bias"]
        for name, dense in (("mlp_fc1", "Dense_0"), ("mlp_fc2", "Dense_1")):
            out[f"{dst}/MlpBlock_3/{dense}/kernel"] = w[f"{src}/{name}/kernel"]
            out[f"{dst}/MlpBlock_3/{dense}/bias"] = w[f"{src}/{name}/bias"]
    out["Transformer/encoder_norm/scale"] = w["encoder_norm/gamma"]
    out["Transformer/encoder_norm/bias"] = w["encoder_norm/beta"]
    for name in ("pre_logits", "head"):
        if f"{name}/kernel" in w:
            out[f"{name}/kernel"] = w[f"{name}/kernel"]
            out[f"{name}/bias"] = w[f"{name}/bias"]
    return out


def save_npz(model, path, overwrite=True):
    """Writes a `keras_vit.ViT` as an original-layout `.npz` checkpoint.

    The file loads back into keras_vit (`weights=path`), and into any tool
    that reads google-research/vision_transformer checkpoints (timm's
    `load_pretrained`, the original code). Written to a temporary file and
    renamed into place: an interrupted save leaves nothing behind.

    Args:
        model: a `keras_vit.ViT` with learned or no position embeddings,
            on a square patch grid if learned (the layout records no grid:
            its readers take it to be square).
        path: the `.npz` file to write; its folder must exist.
        overwrite: bool, whether an existing file at `path` may be
            replaced, as in Keras's `save_weights`. Defaults to `True`.
    """
    path = files.check_output_path(path, "path", overwrite=overwrite)
    if not path.endswith(".npz"):
        raise ValueError(f"The path must end in .npz. Received: path={path!r}")
    arrays = to_original(model)
    with files.atomic_file(path, suffix=".npz") as temporary:
        with open(temporary, "wb") as file:
            np.savez(file, **arrays)
