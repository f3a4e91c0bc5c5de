"""Where a training step's memory goes: what it keeps for the backward pass.

Two figures for one model, image size, batch and dtype policy:

- the tensors a TensorFlow training step keeps from its forward pass for
  its backward pass, read from the step's graph (every forward tensor that
  a gradient op consumes), summed by op type, shape and dtype: what a
  change to a layer's gradient saves, exactly and without running it;
- the process's resident memory after building the model and the
  optimizer's slots, and its peak over training steps after the first
  (`/proc/self/status` VmHWM, reset with `/proc/self/clear_refs` after the
  first step, so the compilation is left out).

    python benchmarks/training_memory.py --model ViT_B16 --image-size 384 \
        --batch-size 4 --dtype mixed_bfloat16

Linux only (for the process figures); `--graph-only` skips running steps.
"""

import argparse
import collections
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_vit  # noqa: E402


def kept_for_backward(model, images, labels):
    """`{(op type, shape, dtype): bytes}` of the forward tensors that the
    gradient of a training step reads."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(images, labels).graph

    def backward(op):
        return "gradient" in op.name.lower()

    kept = collections.Counter()
    for op in graph.get_operations():
        if backward(op) or op.type == "ReadVariableOp":  # weights: not kept
            continue
        for tensor in op.outputs:
            if not tensor.shape.is_fully_defined():
                continue
            if any(backward(c) for c in tensor.consumers()):
                shape = "x".join(map(str, tensor.shape.as_list()))
                key = (op.type, shape, tensor.dtype.name)
                kept[key] += tensor.shape.num_elements() * tensor.dtype.size
    return kept


def _resident_mb():
    figures = {}
    with open("/proc/self/status") as file:
        for line in file:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                figures[name] = int(value.split()[0]) // 1024
    return figures


def step_memory(model, images, labels, steps=2, jit_compile=False):
    """Resident MB after building, and the peak over `steps` training
    steps after a first one (which compiles)."""
    optimizer = keras.optimizers.AdamW(1e-4)
    model.compile(
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        jit_compile=jit_compile,
    )
    optimizer.build(model.trainable_variables)
    built = _resident_mb()["VmRSS"]
    model.train_on_batch(images, labels)
    with open("/proc/self/clear_refs", "w") as file:
        file.write("5")  # resets VmHWM to the current resident size
    for _ in range(steps):
        model.train_on_batch(images, labels)
    return {"built_mb": built, "step_peak_mb": _resident_mb()["VmHWM"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="ViT_B16")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--graph-only", action="store_true")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--model-kwargs", default="{}", help="JSON")
    args = parser.parse_args(argv)
    keras.mixed_precision.set_global_policy(args.dtype)
    model = keras_vit.builders.build(
        args.model,
        num_classes=10,
        image_size=args.image_size,
        **json.loads(args.model_kwargs),
    )
    size = (args.batch_size, args.image_size, args.image_size, 3)
    images = np.random.default_rng(0).uniform(0, 255, size).astype("float32")
    labels = np.zeros((args.batch_size,), "int32")
    kept = kept_for_backward(model, tf.constant(images), tf.constant(labels))
    total = sum(kept.values()) / 2**20
    print(
        f"{args.model} {args.image_size} px, batch {args.batch_size}, "
        f"{args.dtype}: kept for the backward pass {total:,.0f} MB"
    )
    print("| MB | op | shape | dtype |\n|---:|---|---|---|")
    for (op, shape, dtype), size in kept.most_common(args.top):
        print(f"| {size / 2**20:,.0f} | {op} | {shape} | {dtype} |")
    if not args.graph_only:
        figures = step_memory(
            model, images, labels, jit_compile=args.jit_compile
        )
        print(
            f"resident after building (weights, AdamW slots): "
            f"{figures['built_mb']:,} MB; peak over training steps: "
            f"{figures['step_peak_mb']:,} MB"
        )


if __name__ == "__main__":
    main()
