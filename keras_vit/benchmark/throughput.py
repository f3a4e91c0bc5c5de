"""Images/s of keras_vit's own models on this machine, and their share of
its measured matmul peak: `keras-vit benchmark`.

`benchmark` times a Keras model's inference and AdamW training steps;
`time_models` prints the table of `keras-vit benchmark`: for each model
(a builder, variant or preset's architecture, with overrides:
`model_arguments`), its GFLOPs per image and, per batch size, images/s,
the share of the machine's peak (`flops.peak_flops`) that makes and the
CPU cores it kept busy. Every figure is the median call by
`keras_vit.timing`'s rule. Peers (timm, keras-hub, ONNX Runtime,
OpenVINO), per-process peak memory, rounds and profiles are the
checkout's `benchmarks/suite.py`, which builds its models here.
"""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from keras_vit import arg_checks
from keras_vit import registry
from keras_vit import timing
from keras_vit.benchmark import flops as flops_lib
from keras_vit.export.model_io import input_spec
from keras_vit.layers import kernels
from keras_vit.models.config import DEFAULTS
from keras_vit.models.vit import ViT
from keras_vit.training import recipe
from keras_vit.training import strategy
from keras_vit.weights import hub
from keras_vit.weights import hub_config

# Each measurement runs for at least this many seconds (and at least
# `steps` calls; see `keras_vit.timing.latencies`).
MIN_SECONDS = 1.0

#: What `jit_compile` takes: `"auto"` (`jit_choices` picks), XLA or not.
JIT_COMPILE = ("auto", True, False)

#: The `ViT` arguments that `keras-vit benchmark`'s flags set for every
#: model, which a model's overrides may not: the flag's value won, and the
#: row was labelled with the override (`Ti/16:dtype="int32"` timed float32).
FLAG_ARGUMENTS = {
    "dtype": "--dtype",
    "image_size": "--image-size",
    "remat": "--remat",
}


def time_models(
    models,
    inference_batches=(1, 8),
    train_batches=(),
    steps=5,
    warmup=2,
    dtype=None,
    jit_compile="auto",
    image_size=None,
    min_seconds=MIN_SECONDS,
    printer=print,
):
    """Times keras_vit's `models` in this process and prints a table.

    First the machine's measured float32 matmul peak (in `dtype`'s compute
    dtype too when it is another), then a line per model, size and batch:
    images/s of inference (`inference_batches`) and AdamW training steps
    (`train_batches`), the share of the peak that is (FLOPs per image,
    three times for a training step, times images/s, over the peak) and
    the cores busy. Every model is built (random weights) before the
    first is timed, so a bad name fails first.

    Returns:
        The rows, dicts with `model`, `mode`, `batch`, `gflops_per_image`,
        `images_per_s`, `fraction_of_peak`, `cores_busy` and `xla`.
    """
    steps, warmup, dtype = checked_timing(steps, warmup, dtype, jit_compile)
    min_seconds = arg_checks.non_negative_float("min_seconds", min_seconds)
    image_size = arg_checks.optional_positive_int("image_size", image_size)
    plan = [
        (mode, arg_checks.positive_int(f"{mode}_batches", batch))
        for mode, batches in (
            ("inference", inference_batches),
            ("train", train_batches),
        )
        for batch in batches
    ]
    built = {m: keras_vit_model(m, dtype, False, image_size) for m in models}
    peak = print_peak(compute_dtype(dtype), printer)
    rows = []
    for name, model in built.items():
        gflops = flops_lib.model_flops(model) / 1e9
        for mode, batch in plan:
            shape = (model.num_tokens, model.hidden_dim)
            choices = jit_choices(jit_compile, mode, dtype, shape=shape)
            if mode == "inference":
                rate, cores, xla = inference_rate(
                    model, batch, steps, warmup, min_seconds, choices
                )
            else:
                (xla,) = choices
                rate, cores = train_rate(
                    model, batch, steps, warmup, min_seconds, xla
                )
            work = 1e9 * gflops * (3.0 if mode == "train" else 1.0)
            row = dict(
                model=name,
                mode=mode,
                batch=batch,
                gflops_per_image=gflops,
                images_per_s=rate,
                fraction_of_peak=work * rate / peak,
                cores_busy=cores,
                xla=xla,
            )
            printer(
                f"{name:>12} {model.image_size[0]:>4} px {mode:>9} batch "
                f"{batch:>3}  {gflops:6.2f} GFLOPs  {rate:8.2f} images/s  "
                f"{100 * row['fraction_of_peak']:5.1f}% of peak  "
                f"{cores:4.2f} cores busy  {'XLA' if xla else 'no XLA'}"
            )
            rows.append(row)
    return rows


def print_peak(compute, printer=print):
    """Measures and prints the machine's matmul peak; returns the one the
    rows' share of the peak is of (the compute dtype's own)."""
    peak = flops_lib.peak_flops()
    line = (
        f"machine: {os.cpu_count()} CPU cores, measured float32 matmul peak "
        f"{peak / 1e9:.0f} GFLOP/s"
    )
    if compute != "float32":
        peak = flops_lib.peak_flops(dtype=compute)
        line += (
            f", {compute} {peak / 1e9:.0f} GFLOP/s (the share of peak below)"
        )
    printer(line)
    return peak


def checked_timing(steps, warmup, dtype=None, jit_compile="auto"):
    """`(steps, warmup, dtype)` checked as every measurement takes them
    (`dtype` a policy name, or `None`), or a `ValueError` naming the
    argument."""
    arg_checks.one_of("jit_compile", jit_compile, JIT_COMPILE)
    if dtype is not None:
        dtype = keras.dtype_policies.get(
            arg_checks.float_dtype_policy("dtype", dtype, quantized=False)
        ).name
    return (
        arg_checks.positive_int("steps", steps),
        arg_checks.non_negative_int("warmup", warmup),
        dtype,
    )


def benchmark(
    model,
    batch_size=8,
    steps=10,
    warmup=2,
    train=False,
    jit_compile=False,
    seed=0,
    min_seconds=0.0,
):
    """Measures inference (and optionally training) throughput of `model`.

    Inference runs the forward pass in a compiled `tf.function` (with XLA
    when `jit_compile`); training runs full AdamW steps of
    `model.train_on_batch` on random labels.

    Args:
        model: a `keras_vit.ViT`.
        batch_size: int, images per step. Defaults to `8`.
        steps: int, timed steps after warm-up. Defaults to `10`.
        warmup: int, untimed steps first (tracing and compilation).
            Defaults to `2`.
        train: bool, whether to also time training steps. Defaults to
            `False`.
        jit_compile: bool, whether to compile with XLA. Defaults to
            `False` (`time_models` picks: `jit_choices`).
        seed: int, seed of the random inputs. Defaults to `0`.
        min_seconds: float, keep timing past `steps` until the timed calls
            add up to this long (see `keras_vit.timing.latencies`).
            Defaults to `0`.

    Returns:
        A dict with `"inference_images_per_s"`, `"inference_ms_per_batch"`,
        `"inference_cores_busy"` (see `keras_vit.timing.seconds_and_cores`)
        and, with `train`, `"train_images_per_s"` and `"train_cores_busy"`.
    """
    batch_size = arg_checks.positive_int("batch_size", batch_size)
    steps = arg_checks.positive_int("steps", steps)
    warmup = arg_checks.non_negative_int("warmup", warmup)
    jit_compile = arg_checks.boolean("jit_compile", jit_compile)
    min_seconds = arg_checks.non_negative_float("min_seconds", min_seconds)
    rng = np.random.default_rng(seed)
    shape = pixels_shape(model, batch_size)
    images = tf.constant(rng.uniform(0, 255, shape).astype("float32"))
    forward = tf.function(
        lambda x: _predicts(model, x, jit_compile), jit_compile=jit_compile
    )
    seconds, cores = timing.seconds_and_cores(
        lambda: forward(images).numpy(), steps, warmup, min_seconds
    )
    result = {
        "inference_images_per_s": batch_size / seconds,
        "inference_ms_per_batch": 1000 * seconds,
        "inference_cores_busy": cores,
    }
    if train:
        num_classes = model.output_shape[-1]
        labels = rng.integers(0, num_classes, (batch_size,))
        model.compile(
            optimizer=recipe.AdamW(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            jit_compile=jit_compile,
        )
        seconds, cores = timing.seconds_and_cores(
            lambda: model.train_on_batch(images, labels),
            steps,
            warmup,
            min_seconds,
        )
        result["train_images_per_s"] = batch_size / seconds
        result["train_cores_busy"] = cores
    return result


def pixels_shape(model, batch_size):
    """`(batch_size, height, width, channels)`: the images `model` is timed
    on; a `dynamic_image_size` model's at its `image_size`, which
    `keras_vit_model` builds it at (`--image-size`), as its exports are
    (`keras_vit.export.model_io.input_spec`)."""
    return (batch_size, *input_spec(model))


def _predicts(model, images, jit_compile):
    """The model's forward pass as its `predict` step runs it: said to be
    compiled with XLA or not (`layers.kernels.compiled_step`), as
    keras_vit's trainer says it."""
    with kernels.compiled_step(model, xla=jit_compile):
        return model(images, training=False)


def model_arguments(model):
    """The variant and the `keras_vit.ViT` architecture arguments of one of
    `keras-vit benchmark`'s models, `NAME[:ARG=VALUE[,ARG=VALUE...]]`.

    `NAME` is a builder, a variant or a preset's unique name; a preset
    stands for its architecture (its variant and `vit_arguments`) with
    random weights and a classification head like every row's, so no
    download: `"vit_s14_dinov2_reg4_lvd142m_518"` is DINOv2-S/14 with 4
    registers. Each `ARG=VALUE` overrides an argument, the value read as
    JSON when it parses (`4`, `1e-5`, `true`, `null`), else as a string:
    `"vit_b16_siglip_webli:pooling=gap"` is SigLIP-B/16 with average
    pooling instead of its MAP head.

    `NAME` may also be a Hub repo (`hf://ORG/NAME[@REV]` or a snapshot
    folder): the architecture its `config.json` gives, random weights.

    Returns:
        `(variant, arguments)`.

    Raises:
        ValueError: for an unknown name, an override without `=`, or one
            of an argument a flag sets (`FLAG_ARGUMENTS`).
    """
    text = str(model)
    prefix = hub.PREFIX if text.startswith(hub.PREFIX) else ""
    name, _, overrides = text[len(prefix) :].partition(":")
    if hub.is_source(prefix + name):
        variant, arguments = _hub_arguments(prefix + name)
        preset = None
    else:
        _, variant, preset = registry.resolve(name)
        arguments = {}
    if preset is not None:
        arguments = {
            key: value
            for key, value in preset["vit_arguments"].items()
            if key != "include_top"  # every row has a head
        }
    for item in overrides.split(",") if overrides else ():
        key, equals, value = item.partition("=")
        if not (key and equals):
            raise ValueError(
                "A benchmark model's overrides must be ARG=VALUE, separated "
                "by commas (e.g. 'B/16:pooling=gap'). Received: "
                f"model={model!r}"
            )
        if key in FLAG_ARGUMENTS:
            raise ValueError(
                f"A benchmark model cannot override {key}: "
                f"{FLAG_ARGUMENTS[key]} sets it for every model timed. "
                f"Received: model={model!r}"
            )
        try:
            arguments[key] = json.loads(value)
        except ValueError:
            arguments[key] = value
    return variant, arguments


#: What a Hub repo's config gives that each benchmark row sets itself.
_ROW_ARGUMENTS = ("include_top", "num_classes", "image_size")


def _hub_arguments(source):
    """`model_arguments` of a Hub repo: its architecture, every number
    given (so the variant, one that matches or `"B/16"`, is a name only)."""
    config = hub_config.read(hub.snapshot(source))
    arguments = {
        key: value
        for key, value in config.arguments.items()
        if key in DEFAULTS and key not in _ROW_ARGUMENTS
    }
    numbers = ("patch_size", "hidden_dim", "num_layers", "num_heads")
    variant = registry.find_variant(
        *(arguments[key] for key in numbers), arguments["mlp_dim"]
    )
    return variant or "B/16", arguments


def compute_dtype(dtype):
    """The compute dtype of a dtype policy name (`None`: float32)."""
    return keras.DTypePolicy(dtype or "float32").compute_dtype


def keras_vit_model(model, dtype=None, remat=False, image_size=None):
    """keras_vit's model of one of `keras-vit benchmark`'s models
    (`model_arguments`), random weights, at `image_size` (default: 224).

    Its head gives logits, as the peers' (timm, keras-hub) and as the
    training rows' loss takes them (`from_logits=True`), unless the model
    names a `classifier_activation`."""
    variant, arguments = model_arguments(model)
    arguments.setdefault("classifier_activation", None)
    arguments["dtype"] = dtype
    if image_size:
        arguments["image_size"] = image_size
    vit = ViT.from_variant(variant, **arguments)
    vit.remat = remat
    return vit


def jit_choices(jit_compile, mode, dtype=None, device_kind=None, shape=None):
    """The XLA settings to time; of several, the faster one is timed again
    and that sample reported, free of the faster-of-two bias
    (`inference_rate`).

    `"auto"`: for training steps what `keras-vit train` picks for `shape`,
    `(tokens, features)` or `None` (`recipe.auto_jit_compile`: XLA, but
    not on a CPU for bfloat16, long sequences or wide models); for
    inference both, because on a CPU neither wins everywhere (XLA's
    matmuls against TensorFlow's oneDNN ones: `benchmarks/results/`).
    `device_kind` defaults to where TensorFlow runs (`"gpu"` or `"cpu"`).
    """
    if arg_checks.one_of("jit_compile", jit_compile, JIT_COMPILE) != "auto":
        return (jit_compile,)
    if mode == "inference":
        return (False, True)
    device_kind = device_kind or strategy.device_kind("default")
    dtype = dtype or "float32"
    return (recipe.auto_jit_compile(device_kind, 1, dtype, *(shape or ())),)


def inference_rate(model, batch_size, steps, warmup, min_seconds, choices):
    """`(images/s, cores busy, XLA)` of `model`'s forward pass under the
    fastest of the XLA settings `choices`, from a sample taken after the
    choice (the fastest sample is biased up; see `jit_choices`)."""

    def sample(jit):
        return benchmark(
            model,
            batch_size,
            steps,
            warmup,
            jit_compile=jit,
            min_seconds=min_seconds,
        )

    xla = choices[0]
    if len(choices) > 1:
        rates = [sample(jit)["inference_images_per_s"] for jit in choices]
        xla = choices[int(np.argmax(rates))]
    result = sample(xla)
    return result["inference_images_per_s"], result["inference_cores_busy"], xla


def train_rate(model, batch_size, steps, warmup, min_seconds, xla):
    """Images/s and cores busy of AdamW training steps on random labels."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, pixels_shape(model, batch_size)).astype("float32")
    y = rng.integers(0, 1000, (batch_size,))
    model.compile(
        recipe.AdamW(1e-4),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=xla,
    )
    seconds, cores = timing.seconds_and_cores(
        lambda: model.train_on_batch(x, y), steps, warmup, min_seconds
    )
    return batch_size / seconds, cores
