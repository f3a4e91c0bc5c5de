"""One measurement in this process: images/s of a peer, variant, mode and
batch, with its peak memory and the CPU cores it kept busy.

`measure` is what `keras-vit benchmark` runs in a fresh process for every
row of its table (`keras_vit.benchmark.worker`); `benchmark` times a Keras
model's inference and AdamW training steps. Every figure is the median call
by `keras_vit.timing`'s rule.
"""

import collections
import json

import keras
import numpy as np
import tensorflow as tf

from keras_vit import arg_checks
from keras_vit import builders
from keras_vit import registry
from keras_vit import timing
from keras_vit.benchmark.peers import keras_hub_peer
from keras_vit.benchmark.peers import runtime_peers
from keras_vit.benchmark.peers import timm_runner
from keras_vit.export.models import input_spec
from keras_vit.layers import kernels
from keras_vit.models.config import DEFAULT_IMAGE_SIZE
from keras_vit.models.vit import ViT
from keras_vit.options import PEERS
from keras_vit.options import RUNTIMES
from keras_vit.training import recipe
from keras_vit.training import strategy

ONNX_FLOAT32_ONLY = (
    "ONNX Runtime is timed in float32 only (export_onnx exports "
    "a float32 copy; ONNX Runtime has no bfloat16 kernels)"
)
# The suite times each measurement for at least this many seconds (and at
# least `steps` calls; see `keras_vit.timing.latencies`).
MIN_SECONDS = 1.0


#: What a measurement times.
MODES = ("inference", "train")
#: What `jit_compile` takes: `"auto"` (`jit_choices` picks), XLA or not.
JIT_COMPILE = ("auto", True, False)


#: The `ViT` arguments that `keras-vit benchmark`'s flags (`run_suite`'s
#: arguments of the same name) set for every model, which a model's
#: overrides may not: the flag's value won, and the row was labelled with
#: the override (`Ti/16:dtype="int32"` timed float32).
FLAG_ARGUMENTS = {
    "dtype": "--dtype",
    "image_size": "--image-size",
    "remat": "--remat",
}


#: One measurement's settings, as `checked_measurement` returns them.
Settings = collections.namedtuple(
    "Settings",
    "mode batch_size steps warmup dtype jit_compile image_size",
)


def checked_measurement(
    mode, batch_size, steps, warmup, dtype, jit_compile, image_size
):
    """One measurement's `Settings`, checked before anything is built or
    timed; a `ValueError` naming the argument otherwise. `dtype` comes
    back as a policy name (it travels to the worker processes as JSON)."""
    steps, warmup, dtype = checked_timing(steps, warmup, dtype, jit_compile)
    return Settings(
        mode=arg_checks.one_of("mode", mode, MODES),
        batch_size=arg_checks.positive_int("batch_size", batch_size),
        steps=steps,
        warmup=warmup,
        dtype=dtype,
        jit_compile=jit_compile,
        image_size=arg_checks.optional_positive_int("image_size", image_size),
    )


def checked_timing(steps, warmup, dtype=None, jit_compile="auto"):
    """`(steps, warmup, dtype)` checked as every measurement of a suite
    takes them (`dtype` a policy name, or `None`), or a `ValueError`
    naming the argument."""
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
            `False` (the suite, `run_suite`, compiles by default).
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
    on; a `dynamic_image_size` model's at its `image_size`, which the suite
    builds it at (`--image-size`), as its exports are
    (`keras_vit.export.models.input_spec`)."""
    return (batch_size, *input_spec(model))


def _predicts(model, images, jit_compile):
    """The model's forward pass as its `predict` step runs it: said to be
    compiled with XLA or not (`layers.kernels.compiled_step`), as
    keras_vit's trainer says it."""
    with kernels.compiled_step(model, xla=jit_compile):
        return model(images, training=False)


def variant_name(model):
    """The variant of a builder name (`"ViT_B16"`: `"B/16"`); a variant
    name as it is."""
    return builders.BUILDERS.get(model, model)


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

    Returns:
        `(variant, arguments)`.

    Raises:
        ValueError: for an unknown name, an override without `=`, or one
            of an argument a flag sets (`FLAG_ARGUMENTS`).
    """
    name, _, overrides = str(model).partition(":")
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


def plain_variant(model, peer):
    """The variant of `model` for a peer that builds its own model (timm,
    keras-hub), which times plain variants only; `ValueError` for a model
    with architecture arguments."""
    variant, arguments = model_arguments(model)
    if arguments:
        raise ValueError(
            f"{peer} is timed on the paper's variants only, not on a model "
            f"with the architecture arguments {arguments}. Received: "
            f"model={model!r}"
        )
    return variant


def compute_dtype(dtype):
    """The compute dtype of a dtype policy name (`None`: float32)."""
    return keras.DTypePolicy(dtype or "float32").compute_dtype


def policy_name(dtype):
    """The name of a dtype policy (`None`: float32), as the timm peer takes
    it (`peers/timm_peer.py` says how it reads each)."""
    return keras.DTypePolicy(dtype or "float32").name


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


def sequence_shape(variant, image_size=None):
    """`(tokens, features)`: the tokens each block of keras_vit's `variant`
    sees at `image_size` px (default: the variant's) and the features of
    each, from a model built without weights."""
    with keras.StatelessScope(initialize_variables=False):
        model = keras_vit_model(variant, image_size=image_size)
    return model.num_tokens, model.hidden_dim


def _sequence_shape(mode, peer, model, variant, image_size):
    """For training, on whose XLA setting it bears, the `sequence_shape` of
    `peer`'s `model` (keras-hub's counted as keras_vit's `variant`'s);
    `None` for inference, which times both settings."""
    if mode != "train":
        return None
    if peer == "keras_vit":
        return model.num_tokens, model.hidden_dim
    return sequence_shape(variant, image_size)


def jit_choices(jit_compile, mode, dtype=None, device_kind=None, shape=None):
    """The XLA settings to time; of several, the faster one is timed again
    and that sample reported, free of the faster-of-two bias (`keras-vit
    benchmark` times each in a process of its own, so that the peak memory
    is the reported setting's).

    `"auto"`: for training steps what `keras-vit train` picks for `shape`,
    a `sequence_shape` or `None` (`recipe.auto_jit_compile`: XLA,
    but not on a CPU for bfloat16, long sequences or wide models); for
    inference both, because on a CPU neither wins
    everywhere: timed in one process at batch 8, XLA is 1.14x faster for
    ViT-Ti/16, 1.15x for S/16 and 1.21x slower for B/16, where
    TensorFlow's oneDNN matmuls beat XLA's. `device_kind` defaults to
    where TensorFlow runs (`"gpu"` or `"cpu"`).
    """
    if arg_checks.one_of("jit_compile", jit_compile, JIT_COMPILE) != "auto":
        return (jit_compile,)
    if mode == "inference":
        return (False, True)
    device_kind = device_kind or strategy.device_kind("default")
    dtype = dtype or "float32"
    return (recipe.auto_jit_compile(device_kind, 1, dtype, *(shape or ())),)


def measure(
    peer,
    variant,
    mode,
    batch_size,
    steps=5,
    warmup=2,
    dtype=None,
    jit_compile="auto",
    remat=False,
    image_size=None,
    min_seconds=MIN_SECONDS,
):
    """One measurement in this process: images/s and peak memory (MB), of
    `peer`'s model built for `image_size` px images (default: 224).

    Each is the median call over at least `steps` calls and `min_seconds`
    of them (`keras_vit.timing.latencies`)."""
    arg_checks.one_of("peer", peer, PEERS)
    min_seconds = arg_checks.non_negative_float("min_seconds", min_seconds)
    mode, batch_size, steps, warmup, dtype, jit_compile, image_size = (
        checked_measurement(
            mode, batch_size, steps, warmup, dtype, jit_compile, image_size
        )
    )
    if peer == "timm":
        return timm_runner.measure(
            plain_variant(variant, peer),
            mode,
            batch_size,
            steps,
            warmup,
            min_seconds=min_seconds,
            dtype_policy=policy_name(dtype),
            image_size=image_size or DEFAULT_IMAGE_SIZE,
        )
    if peer in RUNTIMES:
        return _measure_runtime(
            peer,
            variant,
            mode,
            batch_size,
            steps,
            warmup,
            dtype,
            min_seconds,
            image_size,
        )
    if peer == "keras_hub":
        size = image_size or DEFAULT_IMAGE_SIZE
        model = keras_hub_peer.model(plain_variant(variant, peer), dtype, size)
    else:
        model = keras_vit_model(variant, dtype, remat, image_size)
    shape = _sequence_shape(mode, peer, model, variant, image_size)
    choices = jit_choices(jit_compile, mode, dtype, shape=shape)
    if mode == "inference":
        rate, cores, xla = _inference_rate(
            model, batch_size, steps, warmup, min_seconds, choices
        )
    else:
        (xla,) = choices
        rate, cores = _train_rate(
            model, batch_size, steps, warmup, min_seconds, xla
        )
    return {
        "images_per_s": rate,
        "peak_memory_mb": timing.peak_rss_mb(),
        "xla": xla,
        "cores_busy": cores,
    }


def _inference_rate(model, batch_size, steps, warmup, min_seconds, choices):
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


def _measure_runtime(
    peer,
    variant,
    mode,
    batch_size,
    steps,
    warmup,
    dtype,
    min_seconds,
    image_size=None,
):
    """`measure` for ONNX Runtime and OpenVINO Runtime, which time keras_vit's
    float32 model, built for `image_size` px, exported
    (`keras_vit.benchmark.peers.runtime_peers`)."""
    if mode != "inference":
        raise ValueError(f"{peer} is timed for inference only")
    if peer == "onnxruntime" and compute_dtype(dtype) != "float32":
        raise ValueError(ONNX_FLOAT32_ONLY)
    model = keras_vit_model(variant, None, False, image_size)
    if peer == "onnxruntime":
        seconds, cores = runtime_peers.time_onnxruntime(
            model, batch_size, steps, warmup, min_seconds
        )
    else:
        seconds, cores = runtime_peers.time_openvino(
            model, batch_size, steps, warmup, min_seconds, compute_dtype(dtype)
        )
    return {
        "images_per_s": batch_size / seconds,
        "peak_memory_mb": timing.peak_rss_mb(),
        # This process imported TensorFlow, built the Keras model and
        # exported it: its peak is not the runtime's alone (the table marks
        # it, `keras_vit.benchmark.suite.MEMORY_NOTE`).
        "memory_includes_export": True,
        "cores_busy": cores,
    }


def _train_rate(model, batch_size, steps, warmup, min_seconds, xla):
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
