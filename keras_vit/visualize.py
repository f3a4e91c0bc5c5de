"""Looking inside a ViT: attention maps and the paper's figures.

The paper explains ViT with four figures (Section 4.5, Figure 7, Appendix
D.7-D.8): the principal components of the patch-embedding filters, the
cosine similarity of position embeddings, the mean attention distance per
head against depth, and where the class token looks (attention rollout).
Each is one call here, for any keras_vit model (plain or hybrid, any
resolution, square or not, built here or loaded from a `.keras` file).

The computations on attention weights are pure NumPy functions
(`rollout`, `attention_distance`) so they can be checked on hand-built
attention matrices; the model-level functions feed them the model's own
weights (`ViT.intermediates_model`). Plot helpers return matplotlib figures.
"""

import numbers

import keras
import numpy as np

from keras_vit import arg_checks
from keras_vit import extras
from keras_vit import files
from keras_vit.data.images import load_image_files
from keras_vit.layers.resnet_stem import ResNetStem
from keras_vit.models import model_checks

HEAD_FUSIONS = ("mean", "max", "min")


# === Pure functions on attention weights ===


def rollout(
    attentions, num_prefix_tokens=1, head_fusion="mean", discard_ratio=0.0
):
    """Attention rollout (Abnar & Zuidema, 2020, arXiv 2005.00928).

    For each layer the heads are fused, the identity is added for the
    residual connection and the rows renormalised; the layers' matrices are
    multiplied from the first to the last. The result says how much each
    output token draws on each input token through all layers.

    Args:
        attentions: list over layers of `(B, heads, T, T)` attention weights
            (rows sum to 1).
        num_prefix_tokens: int, tokens before the patches (1 with a class
            token). Defaults to `1`.
        head_fusion: `"mean"`, `"max"` or `"min"` over heads. Defaults to
            `"mean"`.
        discard_ratio: float in [0, 1), the fraction of each row's patch
            columns whose fused weights, the smallest, are set to zero
            before the identity is added: `int(num_patches * ratio)` of
            them. Prefix columns (class, distillation and register tokens)
            are never dropped, nor counted. Defaults to `0.0`.

    Returns:
        `(B, T, T)` rollout matrices.

    Example:

    >>> eye = np.eye(5)[None, None].repeat(2, axis=1)
    >>> keras_vit.visualize.rollout([eye, eye])[0]   # the identity
    """
    head_fusion = arg_checks.one_of("head_fusion", head_fusion, HEAD_FUSIONS)
    discard_ratio = arg_checks.rate("discard_ratio", discard_ratio)
    num_prefix_tokens = arg_checks.non_negative_int(
        "num_prefix_tokens", num_prefix_tokens
    )
    result = None
    for attention in _attention_layers(attentions):
        if num_prefix_tokens >= attention.shape[-1]:
            raise ValueError(
                "`num_prefix_tokens` must leave patch tokens. Received: "
                f"num_prefix_tokens={num_prefix_tokens} for attention over "
                f"{attention.shape[-1]} tokens"
            )
        fused = getattr(attention, head_fusion)(axis=1)  # (B, T, T)
        if discard_ratio:
            fused = _discard_weakest(fused, num_prefix_tokens, discard_ratio)
        eye = np.eye(fused.shape[-1])[None]
        step = fused + eye
        step /= step.sum(axis=-1, keepdims=True)
        result = step if result is None else step @ result
    return result


def _discard_weakest(fused, num_prefix_tokens, discard_ratio):
    """`fused` with the `int(num_patches * discard_ratio)` smallest patch
    weights of each row set to zero; the prefix columns are not candidates
    (counting them among the smallest would drop fewer patches)."""
    patches = fused[..., num_prefix_tokens:]
    count = int(patches.shape[-1] * discard_ratio)
    if not count:
        return fused
    drop = np.argsort(patches, axis=-1)[..., :count] + num_prefix_tokens
    fused = fused.copy()
    np.put_along_axis(fused, drop, 0.0, axis=-1)
    return fused


def _attention_layers(attentions):
    """`attentions` as a non-empty list of float64 `(B, heads, T, T)`
    arrays, or a `ValueError` naming what is not."""
    layers = [np.asarray(a, dtype="float64") for a in attentions]
    if not layers:
        raise ValueError(
            "`attentions` must hold at least one layer. Received: attentions=[]"
        )
    for i, attention in enumerate(layers):
        if attention.ndim != 4 or attention.shape[-1] != attention.shape[-2]:
            raise ValueError(
                "`attentions` must be a list over layers of (batch, heads, "
                f"tokens, tokens) weights. Received: attentions[{i}] of shape "
                f"{attention.shape}"
            )
    return layers


def token_map(matrix, grid, num_prefix_tokens=1, class_token=None):
    """The patch map of a `(B, T, T)` attention-like matrix.

    With a class token: its row over the patch tokens. Without (GAP
    models): the mean over the patch queries. Other prefix tokens
    (registers) are left out of the map.

    Args:
        matrix: `(B, T, T)`, `T = num_prefix_tokens + grid_h * grid_w`.
        grid: `(grid_h, grid_w)`.
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.
        class_token: bool, whether token 0 is a class token. Defaults to
            `None`: whether there are prefix tokens.

    Returns:
        `(B, grid_h, grid_w)`.
    """
    matrix = np.asarray(matrix)
    grid, num_prefix_tokens = _token_layout(
        matrix.shape[-1], grid, num_prefix_tokens
    )
    if class_token is None:
        class_token = num_prefix_tokens > 0
    query = "patches"
    if arg_checks.boolean("class_token", class_token):
        if num_prefix_tokens == 0:
            # Token 0 would be the first patch: its row, mapped as the
            # class token's.
            raise ValueError(
                "`class_token=True` needs a prefix token (the class token "
                "is token 0). Received: class_token=True, "
                "num_prefix_tokens=0"
            )
        query = "class_token"
    row = _query_rows(matrix, query, num_prefix_tokens)[:, num_prefix_tokens:]
    return row.reshape(row.shape[0], *grid)


#: Whose attention a model's maps follow (`Rollout.query`), by what its
#: output is made of: the class token's output (`pooling="token"`, and
#: `pooling=None` with a class token), with DeiT's distillation token the
#: mean of the two (its output is the mean of their heads), the patch
#: tokens (`"gap"` averages them; a model with neither class token nor
#: pooling gives them all), or the pooling probe's output (`"map"`: the
#: probe attends over the final tokens).
MAP_QUERIES = {
    "class_token": "the class token",
    "class_and_distillation": "the class and distillation tokens (their mean)",
    "patches": "the patch tokens (their mean)",
    "probe": "the attention-pooling probe",
}


def _query_rows(matrix, query, num_prefix_tokens, probe=None):
    """The `(B, T)` row of the `(B, T, T)` `matrix` for `query` (a key of
    `MAP_QUERIES`): row 0, the mean of rows 0 and 1, the mean of the patch
    rows, or the `(B, T)`
    `probe` weights times `matrix` (the probe attends over the final
    tokens; each draws on the inputs by its row)."""
    if query == "probe":
        return np.einsum("bt,btk->bk", probe, matrix)
    if query == "class_token":
        return matrix[:, 0]
    if query == "class_and_distillation":  # tokens 0 and 1
        return matrix[:, :2].mean(axis=1)
    return matrix[:, num_prefix_tokens:].mean(axis=1)


def attention_distance(attentions, grid, pixels_per_token, num_prefix_tokens=1):
    """Mean attention distance in pixels, per layer and head (Figure 7).

    For each query patch the distances (in pixels, between patch centres) to
    all key patches are averaged with the query's attention weights, then
    averaged over queries and images. Prefix tokens (the class token) have
    no position and are left out; each query's weights over the patches are
    renormalised to sum to 1.

    Args:
        attentions: list over layers of `(B, heads, T, T)` weights.
        grid: `(grid_h, grid_w)` of the patch tokens.
        pixels_per_token: the side of one token in input pixels (the patch
            size; times the stem's stride for hybrids), or its `(height,
            width)` (a stem with other strides down and across).
        num_prefix_tokens: int. Defaults to `1`.

    Returns:
        `(num_layers, num_heads)` distances in pixels.
    """
    pixels_per_token = _pixel_pair("pixels_per_token", pixels_per_token)
    attentions = _attention_layers(attentions)
    for attention in attentions:
        grid, num_prefix_tokens = _token_layout(
            attention.shape[-1], grid, num_prefix_tokens
        )
    grid_h, grid_w = grid
    rows, cols = np.meshgrid(
        np.arange(grid_h), np.arange(grid_w), indexing="ij"
    )
    centres = np.stack([rows.ravel(), cols.ravel()], axis=1).astype("float64")
    centres *= pixels_per_token  # in pixels, per axis
    distance = np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))
    out = []
    for attention in attentions:
        patches = attention[:, :, num_prefix_tokens:, num_prefix_tokens:]
        patches = patches / np.maximum(patches.sum(-1, keepdims=True), 1e-12)
        per_query = (patches * distance).sum(-1)  # (B, heads, N)
        out.append(per_query.mean(axis=(0, 2)))
    return np.stack(out)


def _pixel_pair(name, value):
    """`value`, one positive number or a `(height, width)` pair of them, as
    a `(height, width)` pair of floats."""
    pair = value if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(
            f"`{name}` must be a number or a (height, width) pair. "
            f"Received: {name}={value!r}"
        )
    return tuple(arg_checks.finite_positive_float(name, v) for v in pair)


def _token_layout(tokens, grid, num_prefix_tokens):
    """`(grid, num_prefix_tokens)` checked against a matrix over `tokens`
    tokens: prefix tokens, then a `grid_h x grid_w` grid of patches (a
    mismatch would cut the wrong tokens, or none, whose mean is NaN)."""
    grid = arg_checks.size_2d("grid", grid)
    num_prefix_tokens = arg_checks.non_negative_int(
        "num_prefix_tokens", num_prefix_tokens
    )
    if tokens != num_prefix_tokens + grid[0] * grid[1]:
        raise ValueError(
            f"The attention is over {tokens} tokens, not num_prefix_tokens + "
            f"grid_h * grid_w = {num_prefix_tokens + grid[0] * grid[1]}. "
            f"Received: num_prefix_tokens={num_prefix_tokens}, grid={grid}"
        )
    return grid, num_prefix_tokens


def cosine_similarity_grid(posemb, grid):
    """`(N, D)` embeddings → `(grid_h, grid_w, grid_h, grid_w)` cosines,
    `N = grid_h * grid_w` (row-major over the grid)."""
    grid = arg_checks.size_2d("grid", grid)
    posemb = np.asarray(posemb, dtype="float64")
    if posemb.ndim != 2 or posemb.shape[0] != grid[0] * grid[1]:
        raise ValueError(
            "`posemb` must hold one embedding per patch of `grid`, (grid_h "
            f"* grid_w, D) = ({grid[0] * grid[1]}, D). Received: posemb of "
            f"shape {posemb.shape} for grid={grid}"
        )
    norms = np.maximum(np.linalg.norm(posemb, axis=-1, keepdims=True), 1e-12)
    unit = posemb / norms
    return (unit @ unit.T).reshape(*grid, *grid)


# === Model-level functions ===


#: Two image sides for telling a custom stem's stride from its output
#: shapes: the stride is their difference over that of the maps' sides.
#: The difference, 2880 = 2^6 * 3^2 * 5, is a multiple of every usual
#: stride, so "same" (ceil) and "valid" (floor) padding give it exactly.
_STRIDE_PROBE_SIDES = (2880, 5760)


def _pixels_per_token(model):
    """The `(height, width)` in input pixels of one token: the patch size,
    times the stem's stride for hybrids (not image size over grid size:
    a stride that does not divide the image makes the grid cover more, or
    less, than the image)."""
    stem = model.stem_layer
    strides = (1, 1) if stem is None else _stem_strides(stem, model)
    return tuple(s * model.patch_size for s in strides)


def _stem_strides(stem, model):
    """The `(stride_h, stride_w)` of `model`'s `stem` layer, input pixels
    per step on its feature map: a `ResNetStem` states its `stride`;
    another layer's is read from its output shapes at two image sizes, or
    refused when they do not tell it."""
    if isinstance(stem, ResNetStem):
        return stem.stride, stem.stride
    channels = model.num_channels
    small, large = _STRIDE_PROBE_SIDES
    try:
        sides = [
            stem.compute_output_shape((1, side, side, channels))[1:3]
            for side in _STRIDE_PROBE_SIDES
        ]
        steps = [b - a for a, b in zip(*sides)]
    except Exception as error:  # any layer's own refusal, or None sides
        steps = [error]
    if not all(
        isinstance(step, numbers.Integral)
        and step > 0
        and (large - small) % step == 0
        for step in steps
    ):
        raise ValueError(
            "Cannot tell how many input pixels one token of this stem's "
            "feature map spans (needed for distances in pixels and for "
            "overlays): its feature map must grow in proportion to the "
            f"image (its sides at {small} and {large} px differ by "
            f"{steps}). A stem built for one image size (a fixed "
            "`keras.Input` shape) cannot be read: build it for any size. "
            f"Received: stem={stem!r}"
        )
    return tuple((large - small) // step for step in steps)


def attention_weights(model, images):
    """Every block's attention weights for `images`.

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them.

    Returns:
        List over layers of float32 `(B, heads, T, T)` NumPy arrays.
    """
    model_checks.require_vit(model, "Attention maps")
    outputs = model.intermediates_model()(np.asarray(images), training=False)
    return [keras.ops.convert_to_numpy(a) for a in outputs["attention_weights"]]


class Rollout:
    """The result of `attention_rollout`.

    Attributes:
        maps: `(B, grid_h, grid_w)` rollout maps, each summing to 1: the
            rollout row of `query` over the patch tokens.
        query: whose attention the maps follow, a key of `MAP_QUERIES`:
            `"class_token"` (the class token's row, for models that classify
            from it), `"class_and_distillation"` (the mean of rows 0 and 1, a
            distilled DeiT's), `"patches"` (the mean of the patch tokens' rows:
            `pooling="gap"`, whose feature is their mean), or `"probe"`
            (`pooling="map"`: the pooling probe's attention over the final
            tokens, averaged over its heads, times the rollout matrix).
        class_attention: `(num_layers, B, heads, grid_h, grid_w)` the raw
            attention to the patches in each layer and head: the class
            token's (with the distillation token's, their mean), or, when
            `query` is `"patches"` or `"probe"`, the mean
            over the patch queries (the probe attends only after the last
            block).
        grid: `(grid_h, grid_w)`.
        pixels_per_token: the `(height, width)` of one token in input
            pixels (the patch size, times a hybrid stem's stride): the grid
            covers `grid_h * height` by `grid_w * width` pixels from the
            top left, more than the image when it was padded
            (`dynamic_image_padding`, a stem's "same" padding).
            `plot_rollout` and `map_to_image` take it. `None` for a custom
            stem whose stride its output shapes do not tell (one built for
            a fixed input size).
        register_rollout: with `attention_rollout(..., registers=True)`, the
            `(B, num_register_tokens)` rollout of `query` to each register
            token, the same row as the maps' before they are normalised
            (a row sums to 1 over all tokens); else `None`.
    """

    def __init__(
        self,
        maps,
        class_attention,
        grid,
        register_rollout=None,
        query="class_token",
        pixels_per_token=None,
    ):
        self.maps = maps
        self.class_attention = class_attention
        self.grid = grid
        self.register_rollout = register_rollout
        self.query = query
        self.pixels_per_token = pixels_per_token


def attention_rollout(
    model, images, head_fusion="mean", discard_ratio=0.0, registers=False
):
    """Where the model looks: attention rollout for each image.

    The map follows what the model's output is made of (`Rollout.query`):
    for a model that classifies from its class token, that token's rollout row
    (a distilled DeiT's: the mean of its class and distillation tokens' rows, as
    its output is the mean of their heads); for GAP models (`pooling="gap"`, or
    no class token), the mean of the patch tokens' rows, as their features are
    averaged; for MAP models (`pooling="map"`), the pooling probe's attention
    over the final tokens (averaged over its heads) times the rollout matrix,
    since the probe attends once more after the last block. The maps are over
    the patches: prefix tokens are left out (`registers=True` gives the
    registers' share apart).

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them.
        head_fusion: `"mean"`, `"max"` or `"min"` over the blocks' heads
            (the probe's are averaged). Defaults to `"mean"`.
        discard_ratio: float in [0, 1), see `rollout`. Defaults to `0.0`.
        registers: bool, whether to also give the rollout to each register
            token (`Rollout.register_rollout`). Defaults to `False`.

    Returns:
        A `Rollout`: per-image maps on the token grid (for the image's
        pixels, `map_to_image`), and the raw per-layer, per-head attention.

    Example:

    >>> result = keras_vit.visualize.attention_rollout(model, images)
    >>> fig = keras_vit.visualize.plot_rollout(
    ...     images[0], result.maps[0], pixels_per_token=result.pixels_per_token
    ... )
    """
    registers = arg_checks.boolean("registers", registers)
    attentions = _attentions_and_probe(model, images)
    return _rollout_of(
        model,
        images,
        attentions,
        registers,
        head_fusion=head_fusion,
        discard_ratio=discard_ratio,
    )


def _rollout_of(model, images, attentions, registers=False, **fusion):
    """`attention_rollout`'s `Rollout` from `attentions`, the blocks' and
    the probe's (`_attentions_and_probe`) on `images`; `fusion`: `rollout`'s
    `head_fusion` and `discard_ratio` (its defaults where not given)."""
    attentions, probe = attentions
    prefix = model.num_prefix_tokens
    matrix = rollout(attentions, prefix, **fusion)
    query = _map_query(model)
    grid = model.input_grid(np.shape(images))  # a dynamic model: the input's
    rows = _query_rows(matrix, query, prefix, probe)
    maps = rows[:, prefix:].reshape(len(rows), *grid)
    maps = maps / maps.sum(axis=(1, 2), keepdims=True)
    layer_query = _layer_query(query)
    per_layer = [
        np.stack(
            [
                _query_rows(attention[:, h], layer_query, prefix)[
                    :, prefix:
                ].reshape(len(attention), *grid)
                for h in range(attention.shape[1])
            ],
            axis=1,
        )
        for attention in attentions
    ]
    register_rollout = None
    if registers:  # [class, registers..., patches]
        register_rollout = rows[:, prefix - model.num_register_tokens : prefix]
    try:
        pixels_per_token = _pixels_per_token(model)
    except ValueError:  # a stem that does not tell its stride: maps still
        pixels_per_token = None
    return Rollout(
        maps,
        np.stack(per_layer),
        tuple(grid),
        register_rollout,
        query=query,
        pixels_per_token=pixels_per_token,
    )


def _layer_query(query):
    """The `MAP_QUERIES` key of the tokens whose own attention each layer's
    maps show for `query`: itself, but for the probe, which attends after
    the last layer: there, the patch tokens'."""
    return "patches" if query == "probe" else query


def _map_query(model):
    """The `MAP_QUERIES` key of what `model`'s output is made of."""
    if model.pooling == "map":
        return "probe"
    if model.pooling == "gap" or not model.class_token:
        return "patches"
    return "class_and_distillation" if model.distillation else "class_token"


def _attentions_and_probe(model, images):
    """Every block's attention weights (as `attention_weights` gives them)
    and, for a MAP-pooled model, its probe's `(B, T)` attention over the
    final tokens averaged over heads, zero on those it leaves out (else
    `None`), from one pass."""
    model_checks.require_vit(model, "Attention maps")
    if _map_query(model) != "probe":
        return attention_weights(model, images), None
    out = model.forward_features(
        np.asarray(images), training=False, return_attention=True
    )
    _, probe = model.get_layer("pooling")(
        out["features"], return_attention_scores=True
    )
    attentions = [
        keras.ops.convert_to_numpy(a) for a in out["attention_weights"]
    ]
    probe = keras.ops.convert_to_numpy(probe).astype("float64").mean(axis=1)
    # Zero for the prefix tokens the probe leaves out (`pool_include_prefix`).
    skipped = attentions[-1].shape[-1] - probe.shape[-1]
    return attentions, np.pad(probe, ((0, 0), (skipped, 0)))


def mean_attention_distance(model, images):
    """The paper's Figure 7 (right): attention distance per head and depth.

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them.

    Returns:
        `(num_layers, num_heads)` mean distances in pixels.
    """
    return _distance_of(model, images, attention_weights(model, images))


def _distance_of(model, images, attentions):
    """`mean_attention_distance` from the blocks' `attentions` on
    `images`."""
    return attention_distance(
        attentions,
        model.input_grid(np.shape(images)),
        _pixels_per_token(model),
        model.num_prefix_tokens,
    )


def position_embedding_similarity(model):
    """The paper's Figure 7 (centre): cosine similarity of the position
    embeddings of every pair of patches.

    Args:
        model: a `keras_vit.ViT` with position embeddings (learned,
            learned2d or sincos2d).

    Returns:
        `(grid_h, grid_w, grid_h, grid_w)`: `[i, j]` is the similarity map
        of patch `(i, j)` to every patch.
    """
    model_checks.require_vit(model, "position_embedding_similarity")
    posemb = model.get_layer("patch_encoder").position_embeddings()
    if posemb is None:
        raise ValueError(
            "The model adds no position embeddings to its tokens (relative "
            "positions live in the attention, one per offset, not per "
            "patch). Received a model with "
            f"position_embedding={model.position_embedding!r}"
        )
    posemb = keras.ops.convert_to_numpy(posemb)[0, model.num_prefix_tokens :]
    return cosine_similarity_grid(posemb, model.grid_size)


def embedding_filters(model, n=28):
    """The paper's Figure 7 (left): principal components of the patch
    embedding filters, as images.

    The projection's `D` filters (each a `P x P x C` image) are centred and
    their top `n` principal components returned, each scaled to [0, 1] for
    display.

    Args:
        model: a plain (non-hybrid) `keras_vit.ViT`.
        n: int, how many components. Defaults to `28`.

    Returns:
        `(k, P, P, C)` float array in [0, 1], most significant first, with
        `k = min(n, D, P * P * C)` (there are no more components).
    """
    n = arg_checks.positive_int("n", n)
    model_checks.require_vit(model, "embedding_filters")
    if model.stem is not None:
        raise ValueError(
            "Embedding filters are pixel patches only for plain ViTs; this "
            "model's patches are cut from a CNN feature map (stem="
            f"{model.stem!r})."
        )
    kernel = keras.ops.convert_to_numpy(
        model.get_layer("patch_encoder").projection.kernel
    )
    filters = kernel.T.astype("float64")  # (D, P*P*C)
    filters = filters - filters.mean(axis=0, keepdims=True)
    _, _, components = np.linalg.svd(filters, full_matrices=False)
    n = min(n, components.shape[0])
    components = components[:n].reshape(
        n, model.patch_size, model.patch_size, -1
    )
    low = components.min(axis=(1, 2, 3), keepdims=True)
    high = components.max(axis=(1, 2, 3), keepdims=True)
    return (components - low) / np.maximum(high - low, 1e-12)


def upsample(maps, size):
    """Bilinearly resizes `(B, h, w)` maps to `size` = `(H, W)` (stretched
    to it: `map_to_image` puts each token on the pixels it covers)."""
    import tensorflow as tf

    maps = np.asarray(maps, dtype="float32")[..., None]
    return tf.image.resize(maps, size, method="bilinear").numpy()[..., 0]


def map_to_image(maps, image_size, pixels_per_token):
    """`(B, grid_h, grid_w)` token maps as `(B, H, W)` maps on the image's
    pixels, for overlays.

    Token `(i, j)` covers the `pixels_per_token` block at row `i * h`,
    column `j * w` from the top left, so the maps are bilinearly resized to
    the `(grid_h * h, grid_w * w)` pixels the grid covers and cut to the
    image: a grid padded beyond the image (`dynamic_image_padding`, a
    stem's "same" padding) loses its extra rows and columns at the bottom
    and right instead of being squeezed onto the image, and pixels no token
    reaches are NaN (drawn transparent).

    Args:
        maps: `(B, grid_h, grid_w)` maps.
        image_size: the image's `(H, W)`.
        pixels_per_token: the `(height, width)` of one token in pixels
            (`Rollout.pixels_per_token`), or one number for both.

    Returns:
        `(B, H, W)` float32 maps.
    """
    height, width = arg_checks.size_2d("image_size", image_size)
    token_h, token_w = _pixel_pair("pixels_per_token", pixels_per_token)
    maps = np.asarray(maps, dtype="float32")
    grid_h, grid_w = maps.shape[-2:]
    covered = upsample(
        maps, (round(grid_h * token_h), round(grid_w * token_w))
    )[:, :height, :width]
    out = np.full((len(maps), height, width), np.nan, dtype="float32")
    out[:, : covered.shape[1], : covered.shape[2]] = covered
    return out


# === Figures ===


def _figure(rows, cols, size=2.2):
    plt = extras.pyplot("Drawing attention figures")

    fig, axes = plt.subplots(
        rows, cols, figsize=(size * cols, size * rows), squeeze=False
    )
    for ax in axes.ravel():
        ax.axis("off")
    return fig, axes


def _display(image):
    image = np.asarray(image, dtype="float32")
    if image.shape[-1] == 1:
        image = np.repeat(image, 3, axis=-1)
    high = 255.0 if image.max() > 1.0 else 1.0
    return np.clip(image / high, 0, 1)


def plot_rollout(image, rollout_map, title=None, pixels_per_token=None):
    """The image, the rollout map, and the map overlaid on the image.

    Args:
        image: `(H, W, C)` pixels.
        rollout_map: `(grid_h, grid_w)`, one of `Rollout.maps`.
        title: the figure's title. Defaults to `None`.
        pixels_per_token: `Rollout.pixels_per_token`, to lay each token on
            the pixels it covers (`map_to_image`). Defaults to `None`: the
            map is stretched over the image, right only where the grid
            covers exactly the image.
    """
    image = _display(image)
    if pixels_per_token is None:
        heat = upsample(rollout_map[None], image.shape[:2])[0]
    else:
        heat = map_to_image(
            rollout_map[None], image.shape[:2], pixels_per_token
        )[0]
    heat = heat / max(float(np.nanmax(heat)), 1e-12)
    fig, axes = _figure(1, 3, 3.0)
    axes[0, 0].imshow(image)
    axes[0, 0].set_title("image")
    axes[0, 1].imshow(rollout_map, cmap="inferno")
    axes[0, 1].set_title("attention rollout")
    axes[0, 2].imshow(image)
    axes[0, 2].imshow(heat, cmap="inferno", alpha=0.55)
    axes[0, 2].set_title("overlay")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_layer_attention(class_attention, index=0):
    """A grid of `Rollout.class_attention` (the class token's attention, or
    the patch tokens' mean for GAP and MAP models): one row per layer, one
    column per head, for image `index`."""
    layers, _, heads = class_attention.shape[:3]
    fig, axes = _figure(layers, heads, 1.4)
    for layer in range(layers):
        for head in range(heads):
            axes[layer, head].imshow(
                class_attention[layer, index, head], cmap="viridis"
            )
            if layer == 0:
                axes[layer, head].set_title(f"head {head}", fontsize=7)
        axes[layer, 0].text(
            -0.5,
            0.5,
            f"layer {layer}",
            fontsize=7,
            transform=axes[layer, 0].transAxes,
            ha="right",
            va="center",
        )
    fig.tight_layout()
    return fig


def plot_attention_distance(distances, image_size=None):
    """Mean attention distance of every head against depth (Figure 7 right).

    Args:
        distances: `(num_layers, num_heads)` pixels
            (`mean_attention_distance`).
        image_size: the `(H, W)` of the images they were measured on: the
            axis then reaches at least half the image's diagonal, so that
            figures of one image size compare. Defaults to `None`.
    """
    plt = extras.pyplot("plot_attention_distance")

    distances = np.asarray(distances)
    layers, heads = distances.shape
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for head in range(heads):
        ax.scatter(
            np.arange(layers), distances[:, head], s=14, label=f"head {head}"
        )
    ax.set_xlabel("network depth (layer)")
    ax.set_ylabel("mean attention distance (pixels)")
    # Every point shows: a head looking at the farthest patches averages
    # about the image's side, more than half its diagonal.
    top = 1.05 * float(distances.max(initial=0.0))
    if image_size is not None:
        top = max(top, float(np.hypot(*image_size)) / 2)
    if top > 0:
        ax.set_ylim(0, top)
    ax.grid(alpha=0.3)
    if heads <= 16:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def plot_position_similarity(similarity):
    """The similarity map of each patch to all patches (Figure 7 centre)."""
    grid_h, grid_w = similarity.shape[:2]
    fig, axes = _figure(grid_h, grid_w, 0.9)
    for i in range(grid_h):
        for j in range(grid_w):
            axes[i, j].imshow(similarity[i, j], cmap="viridis", vmin=-1, vmax=1)
    fig.suptitle("position embedding similarity", fontsize=9)
    fig.tight_layout()
    return fig


def plot_embedding_filters(filters, columns=7):
    """The principal components of the embedding filters (Figure 7 left)."""
    n = len(filters)
    rows = -(-n // columns)
    fig, axes = _figure(rows, columns, 1.0)
    for k, component in enumerate(filters):
        axes[k // columns, k % columns].imshow(_display(component))
    fig.suptitle("embedding filters (principal components)", fontsize=9)
    fig.tight_layout()
    return fig


#: The longest name part of a figure's file: 255 bytes (most file
#: systems' limit) less "class_attention_" and ".png", and the ~40 that an
#: atomic write's temporary name adds (`files.atomic_file`).
MAX_NAME_PART_BYTES = 180
#: How `inspect`'s `index.html` begins (how its folder is told from others).
_PAGE_START = (
    "<!doctype html><html><head><meta charset='utf-8'><title>keras_vit: "
)


def _figure_names(model, names):
    """The files `inspect` writes for `model` and images named `names`."""
    has_positions = (
        model.get_layer("patch_encoder").position_embedding != "none"
    )
    return (
        [f"rollout_{name}.png" for name in names]
        # Prefixes no fixed name starts with: an image named "distance"
        # would otherwise have its figure and the distance plot share a file.
        + [f"class_attention_{names[0]}.png", "attention_distance.png"]
        + (["position_similarity.png"] if has_positions else [])
        + (["embedding_filters.png"] if model.stem is None else [])
        + ["index.html"]
    )


def _check_figures_folder(output, planned, inputs):
    """Raises unless writing the `planned` files into `output` replaces
    only an earlier `inspect`'s figures: `output` is not a file, no figure
    would be one of `inputs`, and a folder whose `index.html` is not
    keras_vit's (a site's) keeps its files of those names."""
    import os

    if os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(
            "`output` names an existing file, but the figures go into a "
            f"folder. Received: output={output!r}"
        )
    if not os.path.isdir(output):
        return
    for name in planned:
        path = os.path.join(output, name)
        for source in inputs:
            if (
                isinstance(source, (str, os.PathLike))
                and os.path.exists(path)
                and os.path.exists(source)
                and os.path.samefile(path, source)
            ):
                raise ValueError(
                    f"The figure {name!r} would replace an input of this "
                    f"command ({os.fspath(source)!r}). Choose another "
                    f"`output`. Received: output={output!r}"
                )
    try:
        with open(os.path.join(output, "index.html"), encoding="utf-8") as file:
            if file.read(len(_PAGE_START)) == _PAGE_START:
                return  # an earlier inspect's: its figures are replaced
    except (OSError, UnicodeDecodeError):
        pass
    taken = sorted(set(planned) & set(os.listdir(output)))
    if taken:
        raise ValueError(
            "`output` is not a folder of keras_vit's figures (its index.html "
            "is not one inspect wrote, or it has none) and holds files of "
            f"the names inspect writes: {', '.join(taken)}. Writing would "
            "replace them. Choose another folder, or move them first. "
            f"Received: output={output!r}"
        )


def inspect(model, images, output, names=None, inputs=(), pixels=None):
    """Writes the paper's figures for `model` and `images` into `output`.

    Files: `rollout_<name>.png` per image, `class_attention_<name>.png` (the
    attention per layer and head of the tokens the map follows: the class
    token's, or the patch tokens' mean for GAP and MAP models; see
    `attention_rollout`) for the first image,
    `attention_distance.png`, `position_similarity.png` (models with
    position embeddings), `embedding_filters.png` (plain ViTs), and an
    `index.html` showing them together.

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them (pixels in
            [0, 255] by default), at its resolution or, for a
            `dynamic_image_size` model, any size it takes.
        output: a folder (created if needed). Files of the names above
            in a folder that an earlier `inspect` did not write (no
            keras_vit `index.html`) are refused, not replaced.
        names: a name per image for the file names. Defaults to
            `image0`, `image1`, ...
        inputs: paths the figures must never replace (the image files and
            the model they come from): a figure that would be one of them is
            refused before anything is written. Defaults to `()`.
        pixels: the images as [0, 255] pixels, to draw under the maps
            where `images` are not pixels (a model built with
            `include_preprocessing=False`). Defaults to `images`.

    Returns:
        The list of files written.
    """
    import os

    plt = extras.pyplot("inspect")

    model_checks.require_vit(model, "inspect")
    images = np.asarray(images, dtype="float32")
    names = _file_name_parts(names, images)
    shown = images if pixels is None else np.asarray(pixels, "float32")
    if shown.shape != images.shape:
        raise ValueError(
            "`pixels` must be `images` as pixels, of the same shape. "
            f"Received: pixels of shape {shown.shape} for images of shape "
            f"{images.shape}"
        )
    planned = _figure_names(model, names)
    _check_figures_folder(output, planned, inputs)
    os.makedirs(output, exist_ok=True)
    # The page first, with no figures yet: a run stopped among the figures
    # leaves a folder that says it is inspect's, which the next run may
    # write into (it would refuse the figures' names otherwise).
    _write_index(model, output, [])
    written = _write_figures(
        plt, model, (images, shown), names, planned, output
    )
    _write_index(model, output, written)
    return [os.path.join(output, name) for name, _ in written] + [
        os.path.join(output, "index.html")
    ]


def _file_name_parts(names, images):
    """`names` (or `image0`, `image1`, ...) as one distinct file-name part
    per image."""
    import os

    if names is None:
        names = [f"image{i}" for i in range(len(images))]
    names = [str(name) for name in names]
    if (
        len(names) != len(images)
        or len(set(names)) != len(names)
        or any(
            not name or os.sep in name or name in (".", "..") for name in names
        )
    ):
        raise ValueError(
            "`names` must hold one distinct file-name part per image (no "
            f"path separators). Received: names={names!r} for {len(images)} "
            "images"
        )
    long = [n for n in names if len(n.encode()) > MAX_NAME_PART_BYTES]
    if long:
        raise ValueError(
            f"`names` must be at most {MAX_NAME_PART_BYTES} bytes each: the "
            "figures' file names (with their prefix and the temporary "
            "name's suffix) must fit the file system's 255. Received: "
            f"names={long!r}"
        )
    return names


def _layer_caption(query, name):
    """The caption of `inspect`'s per-layer figure of image `name` for
    `Rollout.query`."""
    caption = (
        f"Attention of {MAP_QUERIES[_layer_query(query)]} per layer (rows) "
        f"and head (columns), {name}"
    )
    if query == "probe":
        caption += "; the pooling probe attends after the last layer"
    return caption


def _write_figures(plt, model, images, names, planned, output):
    """Writes `inspect`'s figures into `output`; returns their `(file name,
    caption)` pairs, in order. `images`: the model's inputs and the same
    images as pixels to draw."""
    import os

    images, shown = images

    written = []

    def save(fig, name, caption):
        path = os.path.join(output, name)
        files.atomic_write(
            path, lambda p: fig.savefig(p, format="png", dpi=100)
        )
        plt.close(fig)
        written.append((name, caption))

    # One forward pass for the maps and the distances.
    attentions = _attentions_and_probe(model, images)
    result = _rollout_of(model, images, attentions)
    for i, name in enumerate(names):
        save(
            plot_rollout(
                shown[i],
                result.maps[i],
                title=name,
                pixels_per_token=result.pixels_per_token,
            ),
            f"rollout_{name}.png",
            f"Attention rollout of {MAP_QUERIES[result.query]}, {name}",
        )
    save(
        plot_layer_attention(result.class_attention, 0),
        f"class_attention_{names[0]}.png",
        _layer_caption(result.query, names[0]),
    )
    save(
        # The images' own size: a dynamic model's need not be its build's.
        plot_attention_distance(
            _distance_of(model, images, attentions[0]), images.shape[1:3]
        ),
        "attention_distance.png",
        "Mean attention distance per head against depth",
    )
    # Only embeddings added to the tokens have a per-patch figure
    # (`"relative"` leaves the patch encoder's at "none").
    if "position_similarity.png" in planned:
        save(
            plot_position_similarity(position_embedding_similarity(model)),
            "position_similarity.png",
            "Position embedding cosine similarity",
        )
    if "embedding_filters.png" in planned:
        save(
            plot_embedding_filters(embedding_filters(model)),
            "embedding_filters.png",
            "Principal components of the patch-embedding filters",
        )
    return written


def _write_index(model, output, written):
    """Writes `output`'s `index.html`, the figures `written` together."""
    import html
    import os

    body = "\n".join(
        f'<figure><img src="{html.escape(name)}"><figcaption>'
        f"{html.escape(caption)}"
        "</figcaption></figure>"
        for name, caption in written
    )
    page = (
        f"{_PAGE_START}{html.escape(model.name)}</title>"
        "<style>figure{display:inline-block;"
        "margin:8px;vertical-align:top}img{max-width:720px}</style>"
        "</head><body>"
        f"<h1>{html.escape(model.name)}</h1>{body}</body></html>"
    )

    def write_page(path):
        with open(path, "w") as file:
            file.write(page)

    files.atomic_write(os.path.join(output, "index.html"), write_page)


def load_images(paths, image_size, num_channels=3, image_resize=None):
    """Reads image files as `(B, H, W, num_channels)` float32 pixels in
    [0, 255], resized to `image_size` `(H, W)` as `image_resize` says
    (pass a model's, `keras_vit.data.resize.of_model(model)`, to see what
    the model sees when evaluated; `None` squashes): see
    `keras_vit.data.images.load_image_files`, the reader it calls."""
    return load_image_files(paths, image_size, num_channels, image_resize)
