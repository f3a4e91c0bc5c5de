"""Where a training step's memory goes: what it keeps for the backward pass.

Two figures for one model, image size, batch and dtype policy:

- the tensors a TensorFlow training step keeps from its forward pass for
  its backward pass, read from the step's graph (every forward tensor that
  a gradient op consumes), summed by op type, shape and dtype: what a
  change to a layer's gradient saves, exactly and without running it;
- the process's resident memory after building the model and the
  optimizer's slots, its peak over building, compiling and the first
  step (part of what `benchmarks/suite.py`'s whole-process peak holds),
  and its peak over training steps after the first
  (`/proc/self/status` VmHWM, reset with `/proc/self/clear_refs` after the
  first step, so the compilation is left out), and the peak of the
  tensors TensorFlow's own allocator holds (`get_memory_info`).

Not every machine gives every figure: some TensorFlow builds keep no
allocator stats for the CPU ("Cannot reset memory stats for device
'CPU:0'"), and a kernel may refuse `/proc/self/clear_refs`. A figure the
machine cannot give is printed as not measured, with the reason.

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

from keras_vit import resolver  # noqa: E402
from keras_vit.training import recipe  # noqa: E402


def kept_for_backward(model, images, labels):
    """`{(op type, shape, dtype): bytes}` of the forward tensors that the
    gradient of a training step reads."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    forward = []

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        # The ops made so far are the forward pass's; the rest, the
        # gradient's (custom gradients' ops carry no "gradient" name).
        forward.append(len(tf.compat.v1.get_default_graph().get_operations()))
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(images, labels).graph
    operations = graph.get_operations()
    backward = {op.name for op in operations[forward[-1] :]}
    kept, seen = collections.Counter(), set()
    for op in operations[: forward[-1]]:
        for tensor in op.outputs:
            if not tensor.shape.is_fully_defined():
                continue
            if any(c.name in backward for c in tensor.consumers()):
                tensor = _buffer(tensor)
                if tensor.op.type == "ReadVariableOp" or tensor.ref() in seen:
                    continue  # weights are not kept; aliases count once
                seen.add(tensor.ref())
                shape = "x".join(map(str, tensor.shape.as_list()))
                key = (tensor.op.type, shape, tensor.dtype.name)
                kept[key] += tensor.shape.num_elements() * tensor.dtype.size
    return kept


def _buffer(tensor):
    """The tensor whose buffer `tensor` is: identities (a custom
    gradient's `IdentityN`) pass their input's through."""
    while tensor.op.type in ("Identity", "IdentityN"):
        tensor = tensor.op.inputs[tensor.value_index]
    return tensor


def _resident_mb():
    figures = {}
    with open("/proc/self/status") as file:
        for line in file:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                figures[name] = int(value.split()[0]) // 1024
    return figures


def allocator_stats_unavailable(device="CPU:0"):
    """Resets the peak of TensorFlow's allocator for `device`; returns why
    it cannot (its error, in words: not every build keeps allocator stats
    for the CPU), else `None`."""
    try:
        tf.config.experimental.reset_memory_stats(device)
        tf.config.experimental.get_memory_info(device)
    except ValueError as error:
        return f"TensorFlow keeps no allocator stats for {device} here: {error}"
    return None


def _reset_resident_peak():
    """Resets VmHWM to the current resident size; returns why it cannot,
    else `None`."""
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError as error:
        return f"/proc/self/clear_refs cannot be written: {error}"
    return None


def step_memory(model, images, labels, steps=2, jit_compile=False):
    """Resident MB after building, the peak over `steps` training steps
    after a first one (which compiles), and TensorFlow's tensors over those
    steps. A figure this machine cannot give is `None`, and
    `"unmeasured"` says why (`{figure: reason}`)."""
    optimizer = recipe.AdamW(1e-4)
    model.compile(
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        jit_compile=jit_compile,
    )
    optimizer.build(model.trainable_variables)
    built = _resident_mb()["VmRSS"]
    model.train_on_batch(images, labels)
    first = _resident_mb()["VmHWM"]  # with the compilation (XLA's too)
    unmeasured = {}
    resident = _reset_resident_peak()
    if resident:
        unmeasured["step_peak_mb"] = resident
    allocator = allocator_stats_unavailable("CPU:0")
    if allocator:
        unmeasured["tensor_mb"] = allocator
    for _ in range(steps):
        model.train_on_batch(images, labels)
    figures = {
        "built_mb": built,
        "first_step_peak_mb": first,
        "step_peak_mb": None if resident else _resident_mb()["VmHWM"],
        "tensor_peak_mb": None,
        "tensor_current_mb": None,
        "unmeasured": unmeasured,
    }
    if not allocator:
        # TensorFlow's own allocator: the tensors alone, without oneDNN's
        # scratch, malloc's free lists and Python.
        tensors = tf.config.experimental.get_memory_info("CPU:0")
        figures["tensor_peak_mb"] = tensors["peak"] // 2**20
        figures["tensor_current_mb"] = tensors["current"] // 2**20
    return figures


def _report(figures):
    """The step figures as printed, each not measured one said so."""
    step_peak, tensors = "not measured", "not measured"
    if figures["step_peak_mb"] is not None:
        step_peak = f"{figures['step_peak_mb']:,} MB"
    if figures["tensor_peak_mb"] is not None:
        tensors = (
            f"{figures['tensor_current_mb']:,} MB between steps, peak "
            f"{figures['tensor_peak_mb']:,} MB"
        )
    lines = [
        f"resident after building (weights, AdamW slots): "
        f"{figures['built_mb']:,} MB; peak over training steps: "
        f"{step_peak}; TensorFlow's tensors: {tensors}",
        f"peak over building, compiling and the first step: "
        f"{figures['first_step_peak_mb']:,} MB",
    ]
    for reason in figures["unmeasured"].values():
        lines.append(f"not measured: {reason}")
    return "\n".join(lines)


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
    if not args.graph_only and not os.path.exists("/proc/self/status"):
        parser.error(
            "the step figures read /proc/self/status, which this system "
            "has not (Linux only): use --graph-only"
        )
    keras.mixed_precision.set_global_policy(args.dtype)
    model = resolver.resolve_model(
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
        print(_report(figures))


if __name__ == "__main__":
    main()
