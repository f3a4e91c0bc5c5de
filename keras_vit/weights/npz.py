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

Hybrids add their ResNet stem (`conv_root/kernel`, `gn_root/{scale,bias}`,
`block{stage}/unit{unit}/{conv1,conv2,conv3,conv_proj}/kernel` and
`.../{gn1,gn2,gn3,gn_proj}/{scale,bias}`) and embed its feature map with
patch size 1: `embedding/kernel` is `(1, 1, C_feat, D)`.

big_vision's `.npz` files hold the same model under other module names
(`MultiHeadDotProductAttention_0`, `LayerNorm_0/1`, `MlpBlock_0`, a
`pos_embedding` at the top level, or under `Transformer/` in files from
before 2022); `read_big_vision` reads those. Its `vit.py` adds the
position embeddings to the patches and then prepends the class token
(`pool_type="tok"`, as its DeiT III files): `pos_embedding` is `(1, N,
D)`, the patches only (keras_vit's `position_embedding_tokens="patches"`).
Files of its old `vit.py`, which prepended the class token first, have
`1 + N` entries, the class token's first (`"all"`, as the original
layout); as big_vision's own `fix_old_checkpoints` does, the count tells
them apart (N a square, or a square plus one; `source_grid=` for a
non-square grid).

With `pool_type="map"` (SigLIP's image tower, no class token, position
embeddings for the patches only) big_vision's ViT pools with a
`MAPHead_0`, read into a `pooling="map"` model's `pooling/` layer:

    MAPHead_0/probe (1, 1, D)
    MAPHead_0/MultiHeadDotProductAttention_0/{query,key,value,out}/...
        (as a block's; key and value fused as keras_vit's `key_value`)
    MAPHead_0/LayerNorm_0/{scale,bias}
    MAPHead_0/MlpBlock_0/Dense_{0,1}/{kernel,bias}

SigLIP's own releases are two-tower files: the image tower under
`params/img/`, which is what is read (`image_tower`), its `head` the
projection into the shared image-text embedding (a model with
`num_classes` its width and `classifier_activation=None`, as the file
implies: `TWO_TOWER_DEFAULTS`). The text tower (`params/txt/`) and the
sigmoid loss's temperature and bias (`params/t`, `params/b`) are no part
of an image model: they are left out, not reported as unexpected.
Single-tower files with a top-level `MAPHead_0` (under `params/` or
unprefixed) read as any big_vision file.

Neither layout records the patch grid of `pos_embedding`: every release is
square, and the original code's `load_pretrained` (like timm's loader of
these files) takes the grid to be the square of the token count. So does
keras_vit; a checkpoint of a non-square grid needs
`load_weights(..., source_grid=(rows, cols))`, and `save_npz` refuses to
write one (its readers would take it for a square). Nor does the layout
hold the modern families' options (LayerScale, registers, ...): `save_npz`
refuses them too, rather than drop their weights.
"""

import re

import numpy as np

from keras_vit import files
from keras_vit import patch_grid
from keras_vit.layers.resnet_stem import ResNetStem
from keras_vit.models import model_checks
from keras_vit.weights.checkpoint import TensorSource
from keras_vit.weights.checkpoint import concatenate
from keras_vit.weights.checkpoint import conv_to_projection
from keras_vit.weights.checkpoint import position_tokens_of


def _layer_norm(src, prefix, out, name):
    out[f"{name}/gamma"] = src.take(f"{prefix}/scale", 1)
    out[f"{name}/beta"] = src.take(f"{prefix}/bias", 1)


def _dense(src, prefix, out, name):
    out[f"{name}/kernel"] = src.take(f"{prefix}/kernel", 2)
    out[f"{name}/bias"] = src.take(f"{prefix}/bias", 1)


def _fused(src, prefix, parts, out, name):
    """Separate (D, heads, d) kernels and (heads, d) biases of `parts`
    (`"query"`, ...) of a flax attention → one fused (D, len(parts)·D)
    kernel and bias, as keras_vit's (and timm's) `qkv` or `kv`.

    Returns the number of heads (`None` if the kernels are missing)."""
    kernels, biases, num_heads = [], [], None
    for part in parts:
        kernel = src.take(f"{prefix}/{part}/kernel", 3)
        bias = src.take(f"{prefix}/{part}/bias", 2)
        if kernel is not None:
            num_heads = kernel.shape[1]
            kernel = kernel.reshape(kernel.shape[0], -1)
        kernels.append(kernel)
        biases.append(None if bias is None else bias.reshape(-1))
    out[f"{name}/kernel"] = concatenate(kernels, axis=1)
    out[f"{name}/bias"] = concatenate(biases)
    return num_heads


def _out_projection(src, prefix, out, name):
    """A flax attention's (heads, d, D) `out` kernel → a (D, D) one."""
    proj = src.take(f"{prefix}/out/kernel", 3)
    out[f"{name}/kernel"] = (
        None if proj is None else proj.reshape(-1, proj.shape[-1])
    )
    out[f"{name}/bias"] = src.take(f"{prefix}/out/bias", 1)


def _attention(src, prefix, out, name):
    """A block's attention → fused `qkv` and `proj`.

    Returns the number of heads (`None` if the kernels are missing)."""
    parts = ("query", "key", "value")
    num_heads = _fused(src, prefix, parts, out, f"{name}/qkv")
    _out_projection(src, prefix, out, f"{name}/proj")
    return num_heads


MAP_HEAD = "MAPHead_0"


def _map_head(src, out):
    """big_vision's `MAPHead_0` (`pool_type="map"`: SigLIP's attention
    pooling) as keras_vit's `pooling/` (`AttentionPooling`, where timm's
    `attn_pool` goes too): the probe, the probe's `query`, the tokens'
    `key_value` (`[keys | values]`), `proj`, `norm` and the MLP.

    Returns the number of heads of its attention (`None` if the file has
    no `MAPHead_0`, or its query kernel is missing)."""
    if not any(k.startswith(f"{MAP_HEAD}/") for k in src.keys()):
        return None
    mha = f"{MAP_HEAD}/MultiHeadDotProductAttention_0"
    out["pooling/probe"] = src.take(f"{MAP_HEAD}/probe", 3)
    num_heads = _fused(src, mha, ("query",), out, "pooling/query")
    _fused(src, mha, ("key", "value"), out, "pooling/key_value")
    _out_projection(src, mha, out, "pooling/proj")
    _layer_norm(src, f"{MAP_HEAD}/LayerNorm_0", out, "pooling/norm")
    _dense(src, f"{MAP_HEAD}/MlpBlock_0/Dense_0", out, "pooling/mlp_fc1")
    _dense(src, f"{MAP_HEAD}/MlpBlock_0/Dense_1", out, "pooling/mlp_fc2")
    return num_heads


def _check_map_heads(src, map_heads, num_heads):
    """keras_vit's MAP head has the blocks' number of heads (as
    big_vision's `MAPHead` is built): another count is reported with the
    file's other faults."""
    if map_heads is not None and num_heads is not None:
        if map_heads != num_heads:
            src.misshaped.append(
                f"{MAP_HEAD}/MultiHeadDotProductAttention_0/query/kernel "
                f"(source name): {map_heads} heads, and the blocks have "
                f"{num_heads} (keras_vit's MAP head has the blocks' count)"
            )


def _block_indices(keys, block_prefix):
    indices = set()
    for key in keys:
        if key.startswith(block_prefix):
            head = key[len(block_prefix) :].split("/", 1)[0]
            if head.isdigit():
                indices.add(int(head))
    return sorted(indices)


_UNIT = re.compile(r"^block(\d+)/unit(\d+)/")

#: A hybrid's ResNet stem: keras_vit's name of each weight under the stem
#: → the original's, and its rank. The root's:
STEM_ROOT = {
    "root_conv/kernel": ("conv_root/kernel", 4),
    "root_norm/gamma": ("gn_root/scale", 1),
    "root_norm/beta": ("gn_root/bias", 1),
}
#: Each unit's (`block{stage}_unit{unit}/...` ↔ `block{stage}/unit{unit}/...`):
STEM_UNIT = {
    name: value
    for i in (1, 2, 3)
    for name, value in (
        (f"conv{i}/kernel", (f"conv{i}/kernel", 4)),
        (f"norm{i}/gamma", (f"gn{i}/scale", 1)),
        (f"norm{i}/beta", (f"gn{i}/bias", 1)),
    )
}
#: The projection shortcut of a stage's first unit:
STEM_PROJECTION = {
    "proj_conv/kernel": ("conv_proj/kernel", 4),
    "proj_norm/gamma": ("gn_proj/scale", 1),
    "proj_norm/beta": ("gn_proj/bias", 1),
}
STEM_NAME = "resnet_stem"


def _hybrid_stem(src, out):
    """The ResNet of a hybrid checkpoint (`conv_root`, `block1/unit1`, ...)."""
    if "conv_root/kernel" not in src:
        return
    for ours, (theirs, ndim) in STEM_ROOT.items():
        out[f"{STEM_NAME}/{ours}"] = src.take(theirs, ndim)
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
            f"{STEM_NAME}/block{block}_unit{unit}",
        )
        parts = dict(STEM_UNIT)
        if f"{prefix}/conv_proj/kernel" in src:
            parts.update(STEM_PROJECTION)
        for ours, (theirs, ndim) in parts.items():
            out[f"{name}/{ours}"] = src.take(f"{prefix}/{theirs}", ndim)


def _convert(src, names, source, source_grid=None, layout_defaults=None):
    """Shared by both layouts; `names` holds the layout's module names
    (and whether the class token's position entry is counted);
    `layout_defaults` what the file implies beyond its tensors
    (`Checkpoint.layout_defaults`)."""
    out = {}
    _hybrid_stem(src, out)
    kernel, patch_size = conv_to_projection(src.take("embedding/kernel", 4))
    out["patch_encoder/projection/kernel"] = kernel
    out["patch_encoder/projection/bias"] = src.take("embedding/bias", 1)
    cls = src.take_if_present("cls", 3)
    if cls is not None:
        out["patch_encoder/class_token"] = cls
    posemb = next(
        (src.take(name, 3) for name in names["posemb"] if name in src), None
    )
    tokens = None
    if posemb is not None:
        out["patch_encoder/position_embedding"] = posemb
        if cls is not None and names["counted"]:  # see the module docstring
            tokens = position_tokens_of(
                posemb.shape[1], 1, src.path, source_grid
            )
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
    if names["map_head"]:
        _check_map_heads(src, _map_head(src, out), num_heads)
    for name in ("pre_logits", "head"):
        if f"{name}/kernel" in src or f"{name}/bias" in src:
            _dense(src, name, out, name)  # half a layer: reported missing
    return src.checkpoint(
        out,
        source,
        patch_size=patch_size,
        num_heads=num_heads,
        position_embedding_tokens=tokens,
        layout_defaults=layout_defaults or {},
    )


ORIGINAL_NAMES = {
    "posemb": ("Transformer/posembed_input/pos_embedding",),
    # The class token always has a position embedding.
    "counted": False,
    "block": "Transformer/encoderblock_",
    "ln1": "LayerNorm_0",
    "mha": "MultiHeadDotProductAttention_1",
    "ln2": "LayerNorm_2",
    "mlp": "MlpBlock_3",
    "map_head": False,
}

BIG_VISION_NAMES = {
    "posemb": ("pos_embedding", "Transformer/pos_embedding"),
    # The class token's position embedding: in old files only.
    "counted": True,
    "block": "Transformer/encoderblock_",
    "ln1": "LayerNorm_0",
    "mha": "MultiHeadDotProductAttention_0",
    "ln2": "LayerNorm_1",
    "mlp": "MlpBlock_0",
    # `pool_type="map"` (SigLIP): MAPHead_0.
    "map_head": True,
}


def _source(arrays, path):
    arrays, misshaped = unstack_scanned_blocks(arrays)
    return TensorSource(arrays, path, misshaped=misshaped)


def read_original(arrays, path):
    """Converts google-research/vision_transformer `.npz` arrays.

    The position embeddings are taken to be on a square grid (the format
    records none; see the module's docstring)."""
    return _convert(_source(arrays, path), ORIGINAL_NAMES, "original")


def read_big_vision(arrays, path, source_grid=None, two_tower=False):
    """Converts big_vision ViT `.npz` arrays (unstacked or scanned).

    The position embeddings are taken to be on a square grid, unless
    `source_grid` says otherwise (the format records none), and, with a
    class token, to have an entry for it when their count says so (see
    the module's docstring). `two_tower`: the arrays are the image tower
    of a two-tower file (`image_tower`), whose layout implies
    `TWO_TOWER_DEFAULTS`."""
    return _convert(
        _source(arrays, path),
        BIG_VISION_NAMES,
        "big_vision",
        source_grid,
        layout_defaults=TWO_TOWER_DEFAULTS if two_tower else None,
    )


#: The image tower of a big_vision two-tower file (SigLIP, LiT):
#: `params/img/...` (or `img/...` in a tree saved without `params`).
_IMAGE_TOWER = re.compile(r"^(?:params/)?img/")
#: What makes a file a two-tower one: either tower.
_TOWER = re.compile(r"^(?:params/)?(?:img|txt)/")
#: Its other parts: the text tower and the contrastive loss's temperature
#: `t` and bias `b` (SigLIP's). Not the image model's: left out unread.
_OTHER_TOWER = re.compile(r"^(?:params/)?(?:txt/|t$|b$)")
#: What a two-tower file's image tower implies beyond its tensors
#: (`Checkpoint.layout_defaults`): big_vision's MLP is flax's `nn.gelu`,
#: tanh-approximated, and `head` projects into the embedding space the
#: text tower shares: embeddings, not a classifier's logits (no softmax).
TWO_TOWER_DEFAULTS = {
    "activation": "gelu_tanh",
    "classifier_activation": None,
}


def image_tower(arrays, path):
    """The image tower of a big_vision two-tower `.npz` (SigLIP's
    releases): the `params/img/` tensors without that prefix; the text
    tower (`params/txt/`) and `params/t`, `params/b` are left out (not
    reported: they belong to the file, not to an image model). Other
    tensors are kept, so that they are reported as unexpected.

    Returns:
        `(arrays, two_tower)`: the image tower's arrays and `True`; for a
        file that is not a two-tower one, `arrays` as they are and
        `False`.

    Raises:
        ValueError: for a two-tower file without an image tower.
    """
    if not any(_TOWER.match(k) for k in arrays):
        return arrays, False
    image = {
        k[m.end() :]: v
        for k, v in arrays.items()
        if (m := _IMAGE_TOWER.match(k))
    }
    if not image:
        raise ValueError(
            "A big_vision two-tower file without an image tower (no "
            "'params/img/' tensors) cannot be read: keras_vit reads the "
            f"image tower. Its first keys: {sorted(arrays)[:5]}. Received: "
            f"weights={path!r}"
        )
    rest = {
        k: v
        for k, v in arrays.items()
        if not _IMAGE_TOWER.match(k) and not _OTHER_TOWER.match(k)
    }
    return {**image, **rest}, True


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


def _unstorable(model, stem):
    """`(argument, value, why)` for each of `model`'s settings whose
    weights or meaning the original layout has no place for (`stem`: the
    model's `ResNetStem`, or `None`)."""
    learned = model.position_embedding == "learned"
    checks = (
        (
            "position_embedding",
            model.position_embedding not in ("learned", "none"),
            "holds 1D learned position embeddings only",
        ),
        (
            "position_embedding_tokens",
            learned
            and model.class_token
            and model.position_embedding_tokens == "patches",
            "has a position embedding for the class token too",
        ),
        (
            "layer_scale_init",
            model.layer_scale_init is not None,
            "has no LayerScale",
        ),
        ("qk_norm", model.qk_norm, "has no query/key LayerNorms"),
        ("use_gated_mlp", model.use_gated_mlp, "has a plain MLP only"),
        ("norm_pre", model.norm_pre, "has no LayerNorm before the blocks"),
        ("fc_norm", model.fc_norm, "has its final LayerNorm before pooling"),
        (
            "num_register_tokens",
            model.num_register_tokens,
            "has no register tokens",
        ),
        (
            "distillation",
            model.distillation,
            "has no distillation token or head",
        ),
        ("pooling", model.pooling == "map", "has no attention-pooling head"),
        ("patch_bias", not model.patch_bias, "has a patch-embedding bias"),
        ("qkv_bias", not model.qkv_bias, "has query/key/value biases"),
        (
            "stem",
            model.stem is not None and stem is None,
            "holds no stem but the ResNet of its hybrids",
        ),
    )
    return [
        (name, _shown(getattr(model, name)), why)
        for name, unstorable, why in checks
        if unstorable
    ]


def _shown(value):
    """A setting as an error message shows it: a serialized layer (a
    custom stem) by its class name."""
    if isinstance(value, dict) and "class_name" in value:
        return value["class_name"]
    return value


def _check_storable(model, stem):
    """Refuses a model the original layout cannot hold, naming each
    setting it has no place for, before anything is written."""
    unstorable = _unstorable(model, stem)
    if unstorable:
        why = "; ".join(
            f"{name}={value!r} (the original .npz layout {reason})"
            for name, value, reason in unstorable
        )
        received = ", ".join(f"{n}={v!r}" for n, v, _ in unstorable)
        raise ValueError(
            f"save_npz cannot store {why}: it would drop their weights or "
            "have its readers compute another model. Save the model with "
            f"model.save or save_weights instead. Received: {received}"
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


_STEM_UNIT_PATH = re.compile(r"^block(\d+)_unit(\d+)/(.+)$")


def _stem_to_original(stem):
    """A hybrid's `ResNetStem` weights in the original layout (the inverse
    of `_hybrid_stem`)."""
    out, unit_parts = {}, {**STEM_UNIT, **STEM_PROJECTION}
    for variable in stem.weights:
        name = variable.path.split("/", 1)[1]  # under the stem
        unit = _STEM_UNIT_PATH.match(name)
        if name in STEM_ROOT:
            theirs = STEM_ROOT[name][0]
        elif unit and unit.group(3) in unit_parts:
            theirs = (
                f"block{unit.group(1)}/unit{unit.group(2)}/"
                f"{unit_parts[unit.group(3)][0]}"
            )
        else:  # a ResNetStem weight this table does not know
            raise ValueError(
                "save_npz has no original name for the stem weight "
                f"{variable.path!r}. Received: stem={stem!r}"
            )
        out[theirs] = np.asarray(variable.numpy(), "float32")
    return out


def _block_to_original(w, i, heads, dim):
    """Block `i`'s weights (`w`: keras_vit path → array) in the original
    layout."""
    src, dst = f"block_{i}", f"Transformer/encoderblock_{i}"
    mha = f"{dst}/MultiHeadDotProductAttention_1"
    out = {}
    for name, norm in (("norm1", "LayerNorm_0"), ("norm2", "LayerNorm_2")):
        out[f"{dst}/{norm}/scale"] = w[f"{src}/{name}/gamma"]
        out[f"{dst}/{norm}/bias"] = w[f"{src}/{name}/beta"]
    kernels = np.split(w[f"{src}/attention/qkv/kernel"], 3, axis=1)
    biases = np.split(w[f"{src}/attention/qkv/bias"], 3)
    for part, kernel, bias in zip(("query", "key", "value"), kernels, biases):
        out[f"{mha}/{part}/kernel"] = kernel.reshape(dim, heads, -1)
        out[f"{mha}/{part}/bias"] = bias.reshape(heads, -1)
    out[f"{mha}/out/kernel"] = w[f"{src}/attention/proj/kernel"].reshape(
        heads, -1, dim
    )
    out[f"{mha}/out/bias"] = w[f"{src}/attention/proj/bias"]
    for name, dense in (("mlp_fc1", "Dense_0"), ("mlp_fc2", "Dense_1")):
        out[f"{dst}/MlpBlock_3/{dense}/kernel"] = w[f"{src}/{name}/kernel"]
        out[f"{dst}/MlpBlock_3/{dense}/bias"] = w[f"{src}/{name}/bias"]
    return out


def to_original(model):
    """A `keras_vit.ViT`'s weights in the original `.npz` layout.

    The inverse of `read_original`: the arrays `save_npz` writes, named and
    shaped as google-research/vision_transformer's checkpoints (a hybrid's
    ResNet stem included).

    Raises:
        ValueError: naming each setting of `model` the layout has no place
            for (LayerScale, registers, a distillation token, ...).
    """

    model_checks.require_vit(model, "The original .npz layout (save_npz)")
    model_checks.refuse_quantized(
        model,
        "the original .npz layout holds float weights",
        "write the float model's .npz (before `quantize()`), or save this "
        "one with model.save()",
    )
    stem = next((x for x in model.layers if isinstance(x, ResNetStem)), None)
    _check_storable(model, stem)
    w = {v.path: np.asarray(v.numpy(), "float32") for v in model.weights}
    out = {} if stem is None else _stem_to_original(stem)
    out["embedding/kernel"] = np.asarray(
        patch_grid.dense_to_conv_kernel(
            w["patch_encoder/projection/kernel"],
            model.patch_size,
            model.num_channels if stem is None else stem.output_channels,
        )
    )
    out["embedding/bias"] = w["patch_encoder/projection/bias"]
    if model.class_token:
        out["cls"] = w["patch_encoder/class_token"]
    if model.position_embedding == "learned":
        out[ORIGINAL_NAMES["posemb"][0]] = w["patch_encoder/position_embedding"]
    for i in range(model.num_layers):
        out.update(_block_to_original(w, i, model.num_heads, model.hidden_dim))
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
        model: a `keras_vit.ViT` of the paper's layout (plain or hybrid
            with a `ResNetStem`), with learned or no position embeddings,
            on a square patch grid if learned (the layout records no grid:
            its readers take it to be square). The options of the modern
            families (LayerScale, `qk_norm`, `norm_pre`, `fc_norm`,
            registers, distillation, `pooling="map"`, patch-only position
            embeddings, `patch_bias=False`) have no place in the layout:
            such a model is refused (`ValueError` naming each) before any
            file is opened.
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
