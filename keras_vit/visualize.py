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

import keras
import numpy as np

from keras_vit import arg_checks
from keras_vit import extras
from keras_vit import files
from keras_vit.data.images import load_image_files
from keras_vit.models import checks as model_checks

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
        discard_ratio: float in [0, 1), the fraction of the smallest fused
            weights per row set to zero before the identity is added (the
            class token's own column is kept). Defaults to `0.0`.

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
            count = int(fused.shape[-1] * discard_ratio)
            if count:
                order = np.argsort(fused, axis=-1)
                drop = order[..., :count]
                mask = np.ones_like(fused, dtype=bool)
                np.put_along_axis(mask, drop, False, axis=-1)
                mask[..., :num_prefix_tokens] = True  # keep the class token
                fused = np.where(mask, fused, 0.0)
        eye = np.eye(fused.shape[-1])[None]
        step = fused + eye
        step /= step.sum(axis=-1, keepdims=True)
        result = step if result is None else step @ result
    return result


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
    if arg_checks.boolean("class_token", class_token):
        if num_prefix_tokens == 0:
            # Token 0 would be the first patch: its row, mapped as the
            # class token's.
            raise ValueError(
                "`class_token=True` needs a prefix token (the class token "
                "is token 0). Received: class_token=True, "
                "num_prefix_tokens=0"
            )
        row = matrix[:, 0, num_prefix_tokens:]
    else:
        row = matrix[:, num_prefix_tokens:, num_prefix_tokens:].mean(axis=1)
    return row.reshape(row.shape[0], *grid)


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
            size; times the stem's stride for hybrids).
        num_prefix_tokens: int. Defaults to `1`.

    Returns:
        `(num_layers, num_heads)` distances in pixels.
    """
    pixels_per_token = arg_checks.finite_positive_float(
        "pixels_per_token", pixels_per_token
    )
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
    distance = np.sqrt(((centres[:, None] - centres[None]) ** 2).sum(-1))
    distance *= pixels_per_token
    out = []
    for attention in attentions:
        patches = attention[:, :, num_prefix_tokens:, num_prefix_tokens:]
        patches = patches / np.maximum(patches.sum(-1, keepdims=True), 1e-12)
        per_query = (patches * distance).sum(-1)  # (B, heads, N)
        out.append(per_query.mean(axis=(0, 2)))
    return np.stack(out)


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
    """`(N, D)` embeddings → `(grid_h, grid_w, grid_h, grid_w)` cosines."""
    posemb = np.asarray(posemb, dtype="float64")
    norms = np.maximum(np.linalg.norm(posemb, axis=-1, keepdims=True), 1e-12)
    unit = posemb / norms
    return (unit @ unit.T).reshape(*grid, *grid)


# === Model-level functions ===


def _pixels_per_token(model):
    # The patch size, times the stem's stride for hybrids.
    return model.image_size[0] / model.grid_size[0]


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
        maps: `(B, grid_h, grid_w)` rollout maps (class token → patches, or
            the mean over tokens for GAP models), each summing to 1.
        class_attention: `(num_layers, B, heads, grid_h, grid_w)` the raw
            attention of the class token to the patches in each layer and
            head (the mean over query tokens for GAP models).
        grid: `(grid_h, grid_w)`.
        register_rollout: with `attention_rollout(..., registers=True)`, the
            `(B, num_register_tokens)` rollout of the class token to each
            register token (the mean over patch queries without a class
            token), the same row as the maps' before they are normalised
            (a row sums to 1 over all tokens); else `None`.
    """

    def __init__(self, maps, class_attention, grid, register_rollout=None):
        self.maps = maps
        self.class_attention = class_attention
        self.grid = grid
        self.register_rollout = register_rollout


def attention_rollout(
    model, images, head_fusion="mean", discard_ratio=0.0, registers=False
):
    """Where the model looks: attention rollout for each image.

    The maps are over the patches: register tokens are left out of them
    (`registers=True` gives their share apart).

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them.
        head_fusion: `"mean"`, `"max"` or `"min"`. Defaults to `"mean"`.
        discard_ratio: float in [0, 1), see `rollout`. Defaults to `0.0`.
        registers: bool, whether to also give the rollout to each register
            token (`Rollout.register_rollout`). Defaults to `False`.

    Returns:
        A `Rollout`: per-image maps on the token grid (upsample to the image
        with `upsample`), and the raw per-layer, per-head attention.

    Example:

    >>> result = keras_vit.visualize.attention_rollout(model, images)
    >>> fig = keras_vit.visualize.plot_rollout(images[0], result.maps[0])
    """
    registers = arg_checks.boolean("registers", registers)
    attentions = attention_weights(model, images)  # (checks that it is a ViT)
    prefix = model.num_prefix_tokens
    matrix = rollout(attentions, prefix, head_fusion, discard_ratio)
    cls = model.class_token
    grid = model.input_grid(np.shape(images))  # a dynamic model: the input's
    maps = token_map(matrix, grid, prefix, cls)
    maps = maps / maps.sum(axis=(1, 2), keepdims=True)
    per_layer = []
    for attention in attentions:
        heads = []
        for h in range(attention.shape[1]):
            heads.append(token_map(attention[:, h], grid, prefix, cls))
        per_layer.append(np.stack(heads, axis=1))
    register_rollout = None
    if registers:  # [class, registers..., patches]
        rows = matrix[:, 0] if cls else matrix[:, prefix:].mean(axis=1)
        register_rollout = rows[:, prefix - model.num_register_tokens : prefix]
    return Rollout(maps, np.stack(per_layer), tuple(grid), register_rollout)


def mean_attention_distance(model, images):
    """The paper's Figure 7 (right): attention distance per head and depth.

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images as the model takes them.

    Returns:
        `(num_layers, num_heads)` mean distances in pixels.
    """
    return attention_distance(
        attention_weights(model, images),
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
    """Bilinearly resizes `(B, h, w)` maps to `size` = `(H, W)`."""
    import tensorflow as tf

    maps = np.asarray(maps, dtype="float32")[..., None]
    return tf.image.resize(maps, size, method="bilinear").numpy()[..., 0]


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


def plot_rollout(image, rollout_map, title=None):
    """The image, the rollout map, and the map overlaid on the image."""
    image = _display(image)
    heat = upsample(rollout_map[None], image.shape[:2])[0]
    heat = heat / max(heat.max(), 1e-12)
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
    """A grid of the class token's attention: one row per layer, one column
    per head, for image `index` of a `Rollout.class_attention`."""
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
    """Mean attention distance of every head against depth (Figure 7 right)."""
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
    if image_size is not None:
        ax.set_ylim(0, float(np.hypot(*image_size)) / 2)
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

    Files: `rollout_<name>.png` per image, `class_attention_<name>.png` (class
    token attention per layer and head) for the first image,
    `attention_distance.png`, `position_similarity.png` (models with
    position embeddings), `embedding_filters.png` (plain ViTs), and an
    `index.html` showing them together.

    Args:
        model: a `keras_vit.ViT`.
        images: `(B, H, W, C)` images at the model's resolution, as it
            takes them (pixels in [0, 255] by default).
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

    result = attention_rollout(model, images)
    for i, name in enumerate(names):
        save(
            plot_rollout(shown[i], result.maps[i], title=name),
            f"rollout_{name}.png",
            f"Attention rollout, {name}",
        )
    save(
        plot_layer_attention(result.class_attention, 0),
        f"class_attention_{names[0]}.png",
        "Class-token attention per layer (rows) and head (columns), "
        f"{names[0]}",
    )
    save(
        plot_attention_distance(
            mean_attention_distance(model, images), model.image_size
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


def load_images(paths, image_size, num_channels=3):
    """Reads image files as `(B, H, W, num_channels)` float32 pixels in
    [0, 255], resized to `image_size` `(H, W)`: see
    `keras_vit.data.images.load_image_files`, the reader it calls."""
    return load_image_files(paths, image_size, num_channels)
