"""Throughput of keras_vit models on the current machine (prints figures).

Used by `keras-vit benchmark`. Nothing here asserts a speed: it measures.
"""

import time

import keras
import numpy as np


def _time(fn, steps, warmup):
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def benchmark(
    model,
    batch_size=8,
    steps=10,
    warmup=2,
    train=False,
    jit_compile=False,
    seed=0,
):
    """Measures inference (and optionally training) throughput of `model`.

    Inference runs the model's forward pass in a compiled `tf.function`
    (with XLA when `jit_compile`); training runs full AdamW steps of
    `model.train_on_batch` on random labels.

    Args:
        model: a `keras_vit.ViT`.
        batch_size: int, images per step. Defaults to `8`.
        steps: int, timed steps after warm-up. Defaults to `10`.
        warmup: int, untimed steps first (tracing and compilation).
            Defaults to `2`.
        train: bool, whether to also time training steps. Defaults to
            `False`.
        jit_compile: bool, whether to compile with XLA. Defaults to `False`
            (on CPUs, TensorFlow's oneDNN kernels beat XLA's for ViT).
        seed: int, seed of the random inputs. Defaults to `0`.

    Returns:
        A dict with `"inference_images_per_s"`, `"inference_ms_per_batch"`
        and, with `train`, `"train_images_per_s"`.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    shape = (batch_size, *model.input_shape[1:])
    images = tf.constant(rng.uniform(0, 255, shape).astype("float32"))
    forward = tf.function(
        lambda x: model(x, training=False), jit_compile=jit_compile
    )
    seconds = _time(lambda: forward(images).numpy(), steps, warmup)
    result = {
        "inference_images_per_s": batch_size / seconds,
        "inference_ms_per_batch": 1000 * seconds,
    }
    if train:
        num_classes = model.output_shape[-1]
        labels = rng.integers(0, num_classes, (batch_size,))
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            jit_compile=jit_compile,
        )
        seconds = _time(
            lambda: model.train_on_batch(images, labels), steps, warmup
        )
        result["train_images_per_s"] = batch_size / seconds
    return result
