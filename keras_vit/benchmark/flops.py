"""FLOPs: a ViT's per image, counted; the machine's, measured.

`keras-vit benchmark` and `benchmarks/suite.py` report each row's share of
the machine's peak:
`model_flops(model) × images/s / peak_flops()`.
"""

import time

from keras_vit.layers.resnet_stem import ResNetStem

#: The square matmul sizes `peak_flops` tries: a CPU's best rate comes at
#: one of them and not at the others (a 2-core Xeon: 1024 well above 2048),
#: and the model's own matmuls are of these sizes.
PEAK_SIZES = (512, 1024, 1536, 2048)


def peak_flops(seconds=4.0, sizes=PEAK_SIZES, dtype="float32"):
    """The machine's best measured matrix-multiply rate in FLOP/s.

    A `size x size` matmul in `dtype` (TensorFlow, all cores) of each of
    `sizes`, warmed up, then called again and again for its share of
    about `seconds`: the fastest single call of any size is the peak. One
    size's median rate (what this took before) read below the rate of
    ViT-B/16's own matmuls, "126% of peak" in the suite's table.
    """
    # Here, not at the top: `model_flops` also runs where TensorFlow is not
    # installed (benchmarks/gpu_h200.py, on Keras's JAX backend).
    import tensorflow as tf

    matmul = tf.function(tf.matmul)
    best = 0.0
    for size in sizes:
        a = tf.random.normal((size, size), dtype=dtype)
        b = tf.random.normal((size, size), dtype=dtype)
        for _ in range(2):
            matmul(a, b).numpy()
        deadline = time.perf_counter() + seconds / len(sizes)
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            matmul(a, b).numpy()
            best = max(best, 2.0 * size**3 / (time.perf_counter() - start))
    return best


def _stem_flops(stem, image_size, channels):
    """Convolution FLOPs of a `ResNetStem` (2 · MACs)."""
    total, shape = 0.0, (1, *image_size, channels)

    def conv(layer, shape):
        out = layer.compute_output_shape(shape)
        k = layer.kernel_size[0] * layer.kernel_size[1]
        return 2.0 * out[1] * out[2] * k * shape[-1] * out[-1], out

    flops, shape = conv(stem.root_conv, shape)
    total += flops
    shape = stem.root_pool.compute_output_shape(shape)
    for unit in stem.units:
        inner = shape
        for layer in (unit.conv1, unit.conv2, unit.conv3):
            flops, inner = conv(layer, inner)
            total += flops
        if unit.projection:
            total += conv(unit.proj_conv, shape)[0]
        shape = unit.compute_output_shape(shape)
    return total


def model_flops(model):
    """Forward FLOPs per image (2 · multiply-adds) of a `keras_vit.ViT`.

    Counts the matrix multiplies: patch embedding, QKV, attention logits and
    weighting, output projection, MLP, pre-logits and head, plus the stem's
    convolutions for `ResNetStem` hybrids. ViT-B/16 at 224 px: 35.1 GFLOPs.
    The architecture options count where they multiply matrices: register
    and distillation tokens are tokens of every block
    (`num_prefix_tokens`), the distillation head is a second head, and the
    MAP head (`pooling="map"`) counts its probe's query projection, the
    key / value projection of the tokens it attends to, one query's
    attention logits and weighting, its output projection and its MLP
    (`_map_flops`). A gated MLP (`use_gated_mlp`) multiplies by its gate
    projection too.
    Elementwise work is not counted, as the LayerNorms, GELU and softmax
    are not: `norm_pre`, `fc_norm`, LayerScale, QK-norm, the activation,
    the patch bias and the pooling's mean add nothing.
    Returns `None` for stems it cannot count (any other Keras CNN).
    """
    grid = model.grid_size
    n = grid[0] * grid[1]
    t = n + model.num_prefix_tokens
    d, m = model.hidden_dim, model.mlp_dim
    patch_dim = model.patch_size**2
    stem_flops = 0.0
    if model.stem is not None:
        stem = next(
            (layer for layer in model.layers if isinstance(layer, ResNetStem)),
            None,
        )
        if stem is None:
            return None
        stem_flops = _stem_flops(stem, model.image_size, model.num_channels)
        patch_dim *= stem.output_channels
    else:
        patch_dim *= model.num_channels
    per_block = (
        2.0 * t * d * (3 * d)
        + 2 * 2.0 * t * t * d
        + 2.0 * t * d * d
        # mlp_fc1 (twice as wide when gated: gate and value) and mlp_fc2
        + (3 if model.use_gated_mlp else 2) * 2.0 * t * d * m
    )
    total = stem_flops + 2.0 * n * patch_dim * d + model.num_layers * per_block
    if model.pooling == "map":
        total += _map_flops(t if model.pool_include_prefix else n, d, m)
    if model.include_top:
        width = d
        if model.representation_size:
            total += 2.0 * d * model.representation_size
            width = model.representation_size
        heads = 2 if model.distillation else 1
        total += heads * 2.0 * width * model.num_classes
    return total


def _map_flops(tokens, d, m):
    """Matrix-multiply FLOPs of the MAP head (`AttentionPooling`) over
    `tokens` tokens of width `d`, its MLP `m` wide: the probe's query
    projection, keys and values of every token, one query's logits and
    weighting (over all heads: `d` wide), the output projection, the MLP."""
    return (
        2.0 * d * d
        + 2.0 * tokens * d * (2 * d)
        + 2 * 2.0 * tokens * d
        + 2.0 * d * d
        + 2 * 2.0 * d * m
    )
