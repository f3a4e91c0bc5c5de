"""XLA's speed over TensorFlow without it, for training steps on this machine.

For each model and image size, two copies of the same model, one compiled
with XLA and one without, take `train_on_batch` steps in turn in one
process (the order flipped every round, after two untimed steps each), so
that the machine's drift falls on both alike. Printed: the median over the
rounds of (time without XLA) / (time with XLA), its quartiles, and what
`jit_compile="auto"` picks there (`recipe.auto_jit_compile`, whose
`CPU_XLA_MAX_TOKENS` these figures set).

    python benchmarks/xla_speedup.py --model ViT_B16 ViT_Ti16 \
        --image-size 224 320 384 512 --batch-size 4 --rounds 8

A model is named as for `keras-vit benchmark`: `NAME[:ARG=VALUE,...]`.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_vit.benchmark import throughput  # noqa: E402
from keras_vit.training import recipe  # noqa: E402
from keras_vit.training import strategy  # noqa: E402


def speedup(model_name, image_size, batch_size, dtype, rounds):
    """`(median, first quartile, third quartile)` of XLA's speed over no
    XLA's, training steps of `model_name` at `image_size` px alternating
    in this process for `rounds` rounds; and the model's token count."""
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size, image_size, image_size, 3))
    images = images.astype("float32")
    labels = rng.integers(0, 10, (batch_size,))
    models = {}
    for xla in (True, False):
        model = throughput.keras_vit_model(model_name, dtype, False, image_size)
        model.compile(
            recipe.AdamW(1e-4),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=xla,
        )
        for _ in range(2):  # tracing, compiling, the optimizer's slots
            model.train_on_batch(images, labels)
        models[xla] = model
    ratios = []
    for r in range(rounds):
        seconds = {}
        for xla in (True, False) if r % 2 == 0 else (False, True):
            start = time.perf_counter()
            models[xla].train_on_batch(images, labels)
            seconds[xla] = time.perf_counter() - start
        ratios.append(seconds[False] / seconds[True])
    if rounds > 1:
        low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
    else:
        low = high = ratios[0]
    model = models[True]
    return (statistics.median(ratios), low, high), (
        model.num_tokens,
        model.hidden_dim,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", nargs="+", default=["ViT_B16"])
    parser.add_argument("--image-size", nargs="+", type=int, default=[224])
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1. Received: {args.rounds}")
    device = strategy.device_kind("default")
    print(
        f"XLA's speed over no XLA, training steps, batch {args.batch_size}, "
        f"{args.dtype}, {args.rounds} rounds alternating in one process"
    )
    print("| model | image size | tokens | median | quartiles | auto picks |")
    print("|---|---:|---:|---:|---|---|")
    for name in args.model:
        for size in args.image_size:
            (median, low, high), (tokens, width) = speedup(
                name, size, args.batch_size, args.dtype, args.rounds
            )
            auto = recipe.auto_jit_compile(device, 1, args.dtype, tokens, width)
            print(
                f"| {name} | {size} | {tokens} | {median:.3f}x | "
                f"{low:.3f}-{high:.3f} | {'XLA' if auto else 'no XLA'} |"
            )


if __name__ == "__main__":
    main()
