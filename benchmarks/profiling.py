"""Where the time goes: `python benchmarks/suite.py --profile`.

`profile` times the pieces of a forward pass and the alternatives to each,
by `keras_vit.timing`'s rule, and prints milliseconds per batch.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_vit import arg_checks
from keras_vit import data
from keras_vit import layers as vit_layers
from keras_vit import timing
from keras_vit.benchmark.throughput import MIN_SECONDS
from keras_vit.benchmark.throughput import checked_timing
from keras_vit.benchmark.throughput import keras_vit_model
from keras_vit.training import recipe


def profile(
    variant="B/16",
    batch_size=8,
    steps=5,
    warmup=2,
    image_size=None,
    printer=print,
    min_seconds=MIN_SECONDS,
):
    """Times the pieces of a forward pass and the alternatives to each.

    Prints milliseconds per batch for: the whole model with and without XLA,
    one training step with and without XLA, patch embedding as `Patches` +
    `Dense` (keras_vit's) versus one strided convolution, one Transformer
    block, its attention as keras_vit's fused-QKV layer versus
    `keras.ops.dot_product_attention` and `keras.layers.MultiHeadAttention`,
    and the `tf.data` training pipeline alone (images/s, scikit-learn's
    digits augmented and resized to the model's resolution). Each is the
    median call by the suite's rule (`keras_vit.timing.latencies`).
    `variant` is any of the suite's models, built as the suite
    builds them (`throughput.keras_vit_model`): a builder, variant or
    preset's architecture, with overrides (`"S/16:hidden_dim=96"`).

    Returns:
        A dict of the timings.
    """
    min_seconds = arg_checks.non_negative_float("min_seconds", min_seconds)
    batch_size = arg_checks.positive_int("batch_size", batch_size)
    steps, warmup, _ = checked_timing(steps, warmup)
    image_size = arg_checks.optional_positive_int("image_size", image_size)
    # Built as the suite builds it: a builder, variant or preset's
    # architecture, with overrides ("B/16:pooling=gap"), logits.
    model = keras_vit_model(variant, image_size=image_size)
    h, w = model.image_size
    tokens = model.num_tokens
    rng = np.random.default_rng(0)
    images = tf.constant(
        rng.uniform(0, 255, (batch_size, h, w, 3)).astype("float32")
    )
    x = tf.constant(
        rng.normal(size=(batch_size, tokens, model.hidden_dim)).astype(
            "float32"
        )
    )
    out = {}

    def report(name, fn, note=""):
        out[name] = 1000.0 * timing.median_seconds(
            fn, steps, warmup, min_seconds
        )
        printer(f"  {name:<46} {out[name]:9.1f} ms{note}")

    printer(
        f"{variant} at {h}x{w}, batch {batch_size}, {os.cpu_count()} CPU cores"
    )
    _time_model(
        model, images, rng.integers(0, model.num_classes, (batch_size,)), report
    )
    _time_patch_embedding(model, images, report)
    _time_block_and_attention(model, x, report)
    rate = _pipeline_rate((h, w), batch_size)
    out["pipeline_images_per_s"] = rate
    printer(
        f"  {'tf.data pipeline alone (crop, flip, to ' + str(h) + ' px)':<46} "
        f"{rate:9.0f} images/s"
    )
    return out


def _time_model(model, images, labels, report):
    """The forward pass and an AdamW training step, without and with XLA."""
    for jit in (False, True):
        f = tf.function(lambda v: model(v, training=False), jit_compile=jit)
        # `report` calls the lambda at once, while `f` is this pass's.
        report(
            f"forward, XLA {'on' if jit else 'off'}",
            lambda: f(images).numpy(),  # noqa: B023
        )
    for jit in (False, True):
        model.compile(
            recipe.AdamW(1e-4),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit,
        )
        report(
            f"training step (AdamW), XLA {'on' if jit else 'off'}",
            lambda: model.train_on_batch(images, labels),
        )


def _time_patch_embedding(model, images, report):
    """keras_vit's `Patches` + `Dense` against one strided convolution."""
    p, d = model.patch_size, model.hidden_dim
    patches, dense = vit_layers.Patches(p), keras.layers.Dense(d)
    conv = keras.layers.Conv2D(d, p, strides=p)
    f = tf.function(lambda v: dense(patches(v)))
    report("patch embedding: Patches + Dense", lambda: f(images).numpy())
    g = tf.function(lambda v: conv(v))
    report("patch embedding: strided Conv2D", lambda: g(images).numpy())


def _time_block_and_attention(model, x, report):
    """One Transformer block, and its attention three ways: keras_vit's
    fused QKV, `keras.ops.dot_product_attention`, Keras's MHA layer."""
    batch_size, tokens, d = x.shape
    heads = model.num_heads
    block = vit_layers.TransformerBlock(heads, model.mlp_dim)
    f = tf.function(lambda v: block(v))
    report(
        "one TransformerBlock",
        lambda: f(x).numpy(),
        f"  (x{model.num_layers} blocks)",
    )
    ours = vit_layers.MultiHeadSelfAttention(heads)
    f_ours = tf.function(lambda v: ours(v))
    report(
        "attention: keras_vit fused QKV + matmuls", lambda: f_ours(x).numpy()
    )
    qkv, proj = keras.layers.Dense(3 * d), keras.layers.Dense(d)

    def dpa(v):
        split = tf.reshape(qkv(v), (batch_size, tokens, 3, heads, d // heads))
        q, k, val = tf.split(split, 3, axis=2)
        o = keras.ops.dot_product_attention(
            q[:, :, 0], k[:, :, 0], val[:, :, 0]
        )
        return proj(tf.reshape(o, (batch_size, tokens, d)))

    f_dpa = tf.function(dpa)
    report(
        "attention: keras.ops.dot_product_attention", lambda: f_dpa(x).numpy()
    )
    mha = keras.layers.MultiHeadAttention(heads, d // heads)
    f_mha = tf.function(lambda v: mha(v, v))
    report(
        "attention: keras.layers.MultiHeadAttention", lambda: f_mha(x).numpy()
    )


def _pipeline_rate(size, batch_size):
    """Images/s of the `tf.data` training pipeline alone (digits, augmented
    and resized to `size`)."""
    digits = data.load("digits")
    pipe = data.train_pipeline(
        digits.train,
        10,
        size,
        batch_size,
        repeat=True,
        num_examples=digits.num_train,
    )
    it = iter(pipe)
    return batch_size / timing.median_seconds(lambda: next(it), 20, 3)
