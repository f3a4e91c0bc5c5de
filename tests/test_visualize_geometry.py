"""Attention maps in the image's pixels and for every pooling: distances
and overlays at the images' own size and the stem's true stride, the map
of what each pooling reads, discarding, and the figures' captions. Each
checks against an independent NumPy reference (Abnar & Zuidema's rollout,
the paper's mean attention distance, the MAP probe's softmax)."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import visualize
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


# === Independent references ===


def reference_rollout(attentions, num_prefix_tokens=0, discard_ratio=0.0):
    """Abnar & Zuidema (2020): heads averaged, the `discard_ratio` weakest
    patch weights of each row zeroed (prefix columns untouched),
    `0.5 A + 0.5 I` renormalised, multiplied from the first layer up."""
    result = None
    for attention in attentions:
        fused = np.asarray(attention, "float64").mean(axis=1)
        batch, tokens, _ = fused.shape
        patches = tokens - num_prefix_tokens
        count = int(patches * discard_ratio)
        for b in range(batch):
            for row in range(tokens):
                weights = fused[b, row, num_prefix_tokens:]
                weakest = sorted(range(patches), key=lambda k: weights[k])
                for k in weakest[:count]:
                    fused[b, row, num_prefix_tokens + k] = 0.0
        step = fused + np.eye(tokens)
        step = step / step.sum(axis=-1, keepdims=True)
        result = step if result is None else step @ result
    return result


def reference_distance(attentions, grid, pixels, num_prefix_tokens):
    """The paper's mean attention distance by explicit loops; `pixels`:
    `(height, width)` of one token."""
    grid_h, grid_w = grid
    out = []
    for attention in attentions:
        attention = np.asarray(attention, "float64")
        batch, heads = attention.shape[:2]
        per_head = np.zeros(heads)
        for h in range(heads):
            total = 0.0
            for b in range(batch):
                for q in range(grid_h * grid_w):
                    w = attention[b, h, num_prefix_tokens + q]
                    w = w[num_prefix_tokens:] / w[num_prefix_tokens:].sum()
                    for k in range(grid_h * grid_w):
                        dy = (q // grid_w - k // grid_w) * pixels[0]
                        dx = (q % grid_w - k % grid_w) * pixels[1]
                        total += w[k] * np.hypot(dy, dx)
            per_head[h] = total / (batch * grid_h * grid_w)
        out.append(per_head)
    return np.stack(out)


def reference_probe_attention(model, images):
    """The MAP probe's softmax over the final tokens, heads averaged,
    from the pooling layer's weights; zero on the prefix tokens, which it
    leaves out as timm's does (`pool_include_prefix=False`)."""
    pool = model.get_layer("pooling")
    tokens = keras.ops.convert_to_numpy(model.forward_features(images))
    skipped = 0 if model.pool_include_prefix else model.num_prefix_tokens
    tokens = tokens.astype("float64")[:, skipped:]
    dim, heads = tokens.shape[-1], pool.num_heads
    width = dim // heads
    probe = np.asarray(pool.probe, "float64").reshape(1, dim)
    query = probe @ np.asarray(pool.query.kernel) + np.asarray(pool.query.bias)
    kv = tokens @ np.asarray(pool.key_value.kernel)
    keys = (kv + np.asarray(pool.key_value.bias))[..., :dim]
    weights = []
    for h in range(heads):
        part = slice(h * width, (h + 1) * width)
        logits = keys[..., part] @ query[0, part] / np.sqrt(width)  # (B, T)
        logits = np.exp(logits - logits.max(axis=-1, keepdims=True))
        weights.append(logits / logits.sum(axis=-1, keepdims=True))
    return np.pad(np.mean(weights, axis=0), ((0, 0), (skipped, 0)))


def _vit(**kwargs):
    model = keras_vit.ViT(**{**TINY, **kwargs})
    randomize_weights(model, scale=0.5)
    return model


def _assert_points_inside(fig):
    """Every scatter point of the figure lies within its axes' limits."""
    (ax,) = fig.axes
    low_y, high_y = ax.get_ylim()
    low_x, high_x = ax.get_xlim()
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(points)
    assert np.all((points[:, 1] >= low_y) & (points[:, 1] <= high_y)), (
        points[:, 1].max(),
        (low_y, high_y),
    )
    assert np.all((points[:, 0] >= low_x) & (points[:, 0] <= high_x))


def _spy(monkeypatch, name):
    """Replaces `visualize.<name>` by a wrapper recording its calls and
    figures: a list of `(args, kwargs, figure)`."""
    calls = []
    real = getattr(visualize, name)

    def spy(*args, **kwargs):
        fig = real(*args, **kwargs)
        calls.append((args, kwargs, fig))
        return fig

    monkeypatch.setattr(visualize, name, spy)
    return calls


# === 1. The distance plot shows every point ===


def test_the_distance_plot_of_larger_images_shows_every_point(
    tmp_path, monkeypatch
):
    # A dynamic model built at 32 px on 96 px images: distances of ~50 px
    # were drawn on an axis ending at 22.6 (half the build size's
    # diagonal), a blank figure.
    model = _vit(dynamic_image_size=True)
    images = random_images((1, 96, 96, 3))
    calls = _spy(monkeypatch, "plot_attention_distance")
    visualize.inspect(model, images, str(tmp_path))
    (args, _, fig) = calls[0]
    distances = reference_distance(
        visualize.attention_weights(model, images), (12, 12), (8, 8), 1
    )
    np.testing.assert_allclose(args[0], distances, rtol=1e-6)
    _assert_points_inside(fig)
    assert tuple(args[1]) == (96, 96)


def test_heads_looking_at_the_farthest_patch_are_on_the_plot():
    # Half the diagonal was the top of the axis; a head attending to the
    # farthest patch averages about the image's side, above it.
    grid, patch = (4, 4), 8
    tokens = 1 + 16
    attention = np.zeros((1, 2, tokens, tokens))
    attention[0, :, 0, 0] = 1.0
    for q in range(16):
        far = max(
            range(16),
            key=lambda k: np.hypot(q // 4 - k // 4, q % 4 - k % 4),
        )
        attention[0, 0, 1 + q, 1 + far] = 1.0
        attention[0, 1, 1 + q, 1 + q] = 1.0
    distances = visualize.attention_distance([attention], grid, patch)
    np.testing.assert_allclose(
        distances, reference_distance([attention], grid, (patch, patch), 1)
    )
    assert distances.max() > np.hypot(32, 32) / 2  # the case that hid
    fig = visualize.plot_attention_distance(distances, (32, 32))
    _assert_points_inside(fig)
    assert fig.axes[0].get_ylim()[1] >= np.hypot(32, 32) / 2


# === 2. Pixels per token: the stem's stride, per axis ===


def _hybrid(stem, image_size):
    model = keras_vit.ViT(
        **{**TINY, "image_size": image_size, "patch_size": 1}, stem=stem
    )
    randomize_weights(model, scale=0.3)
    return model


def test_hybrid_distances_use_the_stride_of_the_stem():
    # A stride-8 ResNet stem on 36 px images makes a 5x5 grid; distances
    # were measured with 36 / 5 = 7.2 px per token, 10% short.
    model = _hybrid({"block_units": [1, 1], "width": 8, "groups": 4}, 36)
    images = random_images((1, 36, 36, 3))
    assert model.grid_size == (5, 5)
    np.testing.assert_allclose(
        visualize.mean_attention_distance(model, images),
        reference_distance(
            visualize.attention_weights(model, images), (5, 5), (8, 8), 1
        ),
        rtol=1e-6,
    )
    assert visualize.attention_rollout(model, images).pixels_per_token == (
        8,
        8,
    )


@pytest.mark.parametrize(
    "stem, strides",
    [
        # Stride 4 with "valid" padding: 7 tokens on 32 px (32 / 7 = 4.6).
        (lambda: keras.layers.Conv2D(8, 6, strides=4), (4, 4)),
        # Other strides down and across: only the height was used.
        (
            lambda: keras.layers.Conv2D(8, 3, strides=(4, 2), padding="same"),
            (4, 2),
        ),
    ],
)
def test_custom_stems_give_their_stride_per_axis(stem, strides):
    model = _hybrid(stem(), 32)
    images = random_images((1, 32, 32, 3))
    grid = model.grid_size
    np.testing.assert_allclose(
        visualize.mean_attention_distance(model, images),
        reference_distance(
            visualize.attention_weights(model, images), grid, strides, 1
        ),
        rtol=1e-6,
    )
    assert visualize.attention_rollout(model, images).pixels_per_token == (
        strides
    )


def test_a_stem_whose_stride_cannot_be_told_is_refused_by_name():
    # Its map is 4x4 whatever the image: no pixel size per token.
    stem = keras.Sequential(
        [
            keras.layers.Conv2D(8, 3, strides=2, padding="same"),
            keras.layers.Resizing(4, 4),
        ]
    )
    model = _hybrid(stem, 32)
    images = random_images((1, 32, 32, 3))
    with pytest.raises(ValueError, match=r"Cannot tell how many input pixels"):
        visualize.mean_attention_distance(model, images)
    # The maps do not need it.
    result = visualize.attention_rollout(model, images)
    assert result.maps.shape == (1, 4, 4) and result.pixels_per_token is None


# === 3. Overlays: each token on its own pixels ===


def test_a_padded_grid_is_cut_to_the_image_not_squeezed_onto_it():
    # A 36 px image in a padded dynamic model: 5x5 tokens of 8 px cover
    # 40 px. Token row 3 covers pixels 24-31 (centre 28); squeezed onto
    # 36 px its peak fell at row 24-25.
    model = _vit(dynamic_image_size=True, dynamic_image_padding=True)
    image = random_images((1, 36, 36, 3))
    result = visualize.attention_rollout(model, image)
    assert result.grid == (5, 5) and result.pixels_per_token == (8, 8)
    one_hot = np.zeros((5, 5))
    one_hot[3, 2] = 1.0
    fig = visualize.plot_rollout(
        image[0], one_hot, pixels_per_token=result.pixels_per_token
    )
    overlay = np.asarray(fig.axes[2].images[1].get_array())
    assert overlay.shape == (36, 36)
    rows, cols = np.nonzero(overlay == overlay.max())
    assert set(rows) <= {27, 28} and set(cols) <= {19, 20}


def test_pixels_no_token_covers_are_left_blank():
    # A "valid" stride-4 stem: 7 tokens cover 28 of 32 pixels.
    heat = visualize.map_to_image(np.ones((1, 7, 7)), (32, 32), (4, 4))
    assert heat.shape == (1, 32, 32)
    assert np.isnan(heat[0, 28:]).all() and np.isnan(heat[0, :, 28:]).all()
    np.testing.assert_allclose(heat[0, :28, :28], 1.0)


def reference_overlay(token_map, pixels, image_size):
    """The map resized bilinearly (half-pixel centres, edges clamped) to
    the pixels its tokens cover, cut to the image, scaled to max 1."""
    axes = []
    for cells, size, out in zip(token_map.shape, pixels, image_size):
        source = (np.arange(out) + 0.5) / size - 0.5
        source = np.clip(source, 0, cells - 1)
        low = np.floor(source).astype(int)
        high = np.minimum(low + 1, cells - 1)
        axes.append((low, high, source - low))
    (r0, r1, fr), (c0, c1, fc) = axes
    top = token_map[r0][:, c0] * (1 - fc) + token_map[r0][:, c1] * fc
    bottom = token_map[r1][:, c0] * (1 - fc) + token_map[r1][:, c1] * fc
    heat = top * (1 - fr[:, None]) + bottom * fr[:, None]
    return heat / heat.max()


def test_inspect_lays_the_maps_on_the_pixels_they_cover(tmp_path, monkeypatch):
    # The 5x5 map of a padded 36 px image (40 px of tokens) was squeezed
    # onto 36 px: every token drawn up to 4 px off its pixels.
    model = _vit(dynamic_image_size=True, dynamic_image_padding=True)
    images = random_images((2, 36, 36, 3))
    maps = visualize.attention_rollout(model, images).maps
    calls = _spy(monkeypatch, "plot_rollout")
    visualize.inspect(model, images, str(tmp_path))
    assert len(calls) == 2
    for (_, _, fig), token_map in zip(calls, maps):
        overlay = np.asarray(fig.axes[2].images[1].get_array())
        np.testing.assert_allclose(
            overlay, reference_overlay(token_map, (8, 8), (36, 36)), atol=1e-5
        )


# === 4. The map of what the pooling reads ===


@pytest.mark.parametrize("class_token", [False, True])
def test_map_models_map_the_probe_through_the_rollout(class_token):
    # The map was the mean over patch queries, the probe ignored: a new
    # probe changed the outputs by 0.88 and the map by 0.
    model = _vit(pooling="map", class_token=class_token)
    images = random_images((3, 32, 32, 3))
    prefix = model.num_prefix_tokens
    result = visualize.attention_rollout(model, images)
    probe = reference_probe_attention(model, images)
    matrix = reference_rollout(visualize.attention_weights(model, images))
    expected = np.einsum("bt,btk->bk", probe, matrix)[:, prefix:]
    expected = expected / expected.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(result.maps.reshape(3, -1), expected, atol=1e-6)
    assert result.query == "probe"
    pool = model.get_layer("pooling")
    pool.probe.assign(rng.normal(0, 3, pool.probe.shape).astype("float32"))
    changed = visualize.attention_rollout(model, images).maps
    assert np.abs(changed - result.maps).max() > 1e-3


def test_gap_models_with_a_class_token_map_the_patches_they_average():
    # The class token's row was mapped, though GAP's feature is the mean
    # of the patch tokens.
    model = _vit(pooling="gap", class_token=True)
    images = random_images((2, 32, 32, 3))
    attentions = visualize.attention_weights(model, images)
    expected = reference_rollout(attentions)[:, 1:, 1:].mean(axis=1)
    expected = expected / expected.sum(axis=-1, keepdims=True)
    result = visualize.attention_rollout(model, images)
    np.testing.assert_allclose(result.maps.reshape(2, -1), expected, atol=1e-6)
    assert result.query == "patches"
    last = np.asarray(attentions[-1], "float64")[:, :, 1:, 1:].mean(axis=2)
    np.testing.assert_allclose(
        result.class_attention[-1].reshape(2, 2, -1), last, atol=1e-6
    )


def test_distilled_models_map_the_class_and_distillation_tokens():
    # A DeiT's output is the mean of its class and distillation heads; the
    # map followed the class token alone.
    model = _vit(distillation=True)
    images = random_images((2, 32, 32, 3))
    attentions = visualize.attention_weights(model, images)
    expected = reference_rollout(attentions)[:, :2, 2:].mean(axis=1)
    expected = expected / expected.sum(axis=-1, keepdims=True)
    result = visualize.attention_rollout(model, images)
    np.testing.assert_allclose(result.maps.reshape(2, -1), expected, atol=1e-6)
    assert result.query == "class_and_distillation"
    last = np.asarray(attentions[-1], "float64")[:, :, :2, 2:].mean(axis=2)
    np.testing.assert_allclose(
        result.class_attention[-1].reshape(2, 2, -1), last, atol=1e-6
    )
    class_only = reference_rollout(attentions)[:, 0, 2:]
    class_only = class_only / class_only.sum(axis=-1, keepdims=True)
    assert np.abs(class_only - expected).max() > 1e-4  # the check can fail


@pytest.mark.parametrize(
    "kwargs, caption",
    [
        ({}, "Attention of the class token per layer (rows)"),
        (
            {"distillation": True},
            "Attention of the class and distillation tokens (their mean) "
            "per layer (rows)",
        ),
        (
            {"pooling": "gap"},
            "Attention of the patch tokens (their mean) per layer (rows)",
        ),
        # The probe attends after the last layer: per layer, the patches'.
        (
            {"pooling": "map"},
            "Attention of the patch tokens (their mean) per layer (rows) and "
            "head (columns), image0; the pooling probe attends after the "
            "last layer",
        ),
    ],
)
def test_inspect_captions_say_whose_attention_is_drawn(
    tmp_path, kwargs, caption
):
    model = _vit(num_layers=1, **kwargs)
    visualize.inspect(model, random_images((1, 32, 32, 3)), str(tmp_path))
    page = (tmp_path / "index.html").read_text()
    assert caption in page
    if kwargs:
        assert "class token" not in page


# === 5. Grid sizes and discarding ===


def test_a_similarity_grid_that_does_not_hold_the_embeddings_is_refused():
    with pytest.raises(
        ValueError,
        match=r"Received: posemb of shape \(10, 4\) for grid=\(3, 3\)",
    ):
        visualize.cosine_similarity_grid(np.ones((10, 4)), (3, 3))


@pytest.mark.parametrize("prefix, ratio", [(1, 0.5), (3, 0.5), (1, 0.34)])
def test_discarding_counts_and_drops_patch_columns_only(prefix, ratio):
    # The count was taken over all columns and prefix columns among the
    # weakest were kept back, so fewer patches were dropped than asked.
    tokens = prefix + 6
    layers = []
    for _ in range(2):
        attention = rng.dirichlet(np.ones(tokens), size=(2, 3, tokens))
        attention[..., :prefix] *= 0.01  # the prefix among the weakest
        layers.append(attention / attention.sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(
        visualize.rollout(layers, prefix, discard_ratio=ratio),
        reference_rollout(layers, prefix, ratio),
        atol=1e-12,
    )
