"""One measurement in this process: images/s of a peer, variant, mode and
batch, with its peak memory and the CPU cores it kept busy.

`measure` is what `benchmarks/suite.py` runs in a fresh process for every
row of its table (`benchmarks/worker.py`). keras_vit's and keras-hub's
models are timed by `keras_vit.benchmark.throughput` (`benchmark`), as
`keras-vit benchmark` times them; the runtimes by `peers/runtime_peers.py`
and timm by `peers/timm_runner.py`. Every figure is the median call by
`keras_vit.timing`'s rule.
"""

import collections

import keras
from peers import keras_hub_peer
from peers import runtime_peers
from peers import timm_runner

from keras_vit import arg_checks
from keras_vit import timing
from keras_vit.benchmark.throughput import MIN_SECONDS
from keras_vit.benchmark.throughput import checked_timing
from keras_vit.benchmark.throughput import compute_dtype
from keras_vit.benchmark.throughput import inference_rate
from keras_vit.benchmark.throughput import jit_choices
from keras_vit.benchmark.throughput import keras_vit_model
from keras_vit.benchmark.throughput import model_arguments
from keras_vit.benchmark.throughput import train_rate
from keras_vit.models.config import DEFAULT_IMAGE_SIZE

#: What the suite times: keras_vit and its peers.
PEERS = ("keras_vit", "keras_hub", "timm", "onnxruntime", "openvino")
#: Peers that run keras_vit's own model exported, for inference only.
RUNTIMES = ("onnxruntime", "openvino")

ONNX_FLOAT32_ONLY = (
    "ONNX Runtime is timed in float32 only (export_onnx exports "
    "a float32 copy; ONNX Runtime has no bfloat16 kernels)"
)

#: What a measurement times.
MODES = ("inference", "train")

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


def policy_name(dtype):
    """The name of a dtype policy (`None`: float32), as the timm peer takes
    it (`peers/timm_peer.py` says how it reads each)."""
    return keras.DTypePolicy(dtype or "float32").name


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
        rate, cores, xla = inference_rate(
            model, batch_size, steps, warmup, min_seconds, choices
        )
    else:
        (xla,) = choices
        rate, cores = train_rate(
            model, batch_size, steps, warmup, min_seconds, xla
        )
    return {
        "images_per_s": rate,
        "peak_memory_mb": timing.peak_rss_mb(),
        "xla": xla,
        "cores_busy": cores,
    }


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
    (`peers/runtime_peers.py`)."""
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
        # it, `suite.MEMORY_NOTE`).
        "memory_includes_export": True,
        "cores_busy": cores,
    }
