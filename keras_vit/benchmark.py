"""Throughput, memory and efficiency of ViTs on the current machine.

Used by `keras-vit benchmark`. Everything here measures and prints; nothing
asserts a speed. The suite times, per variant: inference images/s at the
given batch sizes, AdamW training steps, the process's peak memory for
each, and the fraction of the machine's float32 peak that reaches
(`FLOPs per image × images/s / peak`), with the peak measured in the same
run by a matrix-multiply probe. Peers (keras-hub's `ViTBackbone`, timm,
ONNX Runtime) are timed the same way when they are installed.

Each measurement runs in its own Python process, so that peak memory is
that measurement's own and one run's caches do not help the next.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

from keras_vit.options import PEERS
from keras_vit.options import RUNTIMES

ONNX_FLOAT32_ONLY = ("ONNX Runtime is timed in float32 only (export_onnx exports "
                     "a float32 copy; ONNX Runtime has no bfloat16 kernels)")
# The suite times each measurement for at least this many seconds (and at
# least `steps` calls; see `latencies`).
MIN_SECONDS = 1.0


def latencies(fn, steps, warmup, min_seconds=0.0):
    """Seconds of each timed call of `fn`, after `warmup` untimed calls.

    Calls are timed until there are at least `steps` of them and together
    they took at least `min_seconds`: a fast call (ViT-Ti/16 at batch 1,
    ~25 ms here) is then sampled often enough for a stable median, while a
    slow one (a B/16 training step) still runs `steps` times. Shared with
    `keras_vit.export.benchmark`; timm's script (`_TIMM_SCRIPT`) follows the
    same rule.
    """
    for _ in range(warmup):
        fn()
    times = []
    while len(times) < steps or sum(times) < min_seconds:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _time(fn, steps, warmup, min_seconds=0.0):
    """Median seconds per call of `fn` (see `latencies` for which calls).

    The median, not the mean: on shared machines (this project's VM varies
    by ±20% between runs) one stalled step otherwise moves the figure.
    Every peer, timm included, is timed by this rule.
    """
    return _time_and_cores(fn, steps, warmup, min_seconds)[0]


def _time_and_cores(fn, steps, warmup, min_seconds=0.0):
    """`_time`'s median, and the CPU cores the process kept busy meanwhile.

    Cores busy is the process's CPU time over the wall time of the timed
    calls: 2.0 on two cores means both were running throughout, whether
    computing or spinning while they wait for work (PyTorch's OpenMP
    threads spin between ops; TensorFlow's pool sleeps, and waking it
    costs time on a VM). timm's script reports the same figure.
    """
    for _ in range(warmup):
        fn()
    cpu, wall = time.process_time(), time.perf_counter()
    times = latencies(fn, steps, 0, min_seconds)
    cores = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
    return float(np.median(times)), cores


def peak_flops(seconds=2.0, size=2048, dtype="float32"):
    """The machine's measured matrix-multiply rate in FLOP/s.

    A `size x size` matmul in `dtype` (TensorFlow, all cores) repeated for
    about `seconds`; the best of several rounds.
    """
    import tensorflow as tf

    a = tf.random.normal((size, size), dtype=dtype)
    b = tf.random.normal((size, size), dtype=dtype)
    matmul = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)))
    matmul(a, b).numpy()
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        seconds_per = _time(lambda: matmul(a, b).numpy(), 3, 0)
        best = max(best, 2.0 * size**3 / seconds_per)
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
    Returns `None` for stems it cannot count (any other Keras CNN).
    """
    grid = model.grid_size
    n = grid[0] * grid[1]
    t = n + model.num_prefix_tokens
    d, m = model.hidden_dim, model.mlp_dim
    patch_dim = model.patch_size**2
    stem_flops = 0.0
    if model.stem is not None:
        from keras_vit.layers.resnet_stem import ResNetStem

        stem = next((l for l in model.layers if isinstance(l, ResNetStem)), None)
        if stem is None:
            return None
        stem_flops = _stem_flops(stem, model.image_size, model.num_channels)
        patch_dim *= stem.output_channels
    else:
        patch_dim *= model.num_channels
    per_block = 2.0 * t * d * (3 * d) + 2 * 2.0 * t * t * d + 2.0 * t * d * d + 2 * 2.0 * t * d * m
    total = stem_flops + 2.0 * n * patch_dim * d + model.num_layers * per_block
    if model.include_top:
        width = d
        if model.representation_size:
            total += 2.0 * d * model.representation_size
            width = model.representation_size
        total += 2.0 * width * model.num_classes
    return total


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
            add up to this long (see `latencies`). Defaults to `0`.

    Returns:
        A dict with `"inference_images_per_s"`, `"inference_ms_per_batch"`,
        `"inference_cores_busy"` (see `_time_and_cores`) and, with `train`,
        `"train_images_per_s"` and `"train_cores_busy"`.
    """
    import keras
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    shape = (batch_size, *model.input_shape[1:])
    images = tf.constant(rng.uniform(0, 255, shape).astype("float32"))
    forward = tf.function(
        lambda x: model(x, training=False), jit_compile=jit_compile
    )
    seconds, cores = _time_and_cores(lambda: forward(images).numpy(), steps, warmup,
                                     min_seconds)
    result = {
        "inference_images_per_s": batch_size / seconds,
        "inference_ms_per_batch": 1000 * seconds,
        "inference_cores_busy": cores,
    }
    if train:
        num_classes = model.output_shape[-1]
        labels = rng.integers(0, num_classes, (batch_size,))
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            jit_compile=jit_compile,
        )
        seconds, cores = _time_and_cores(
            lambda: model.train_on_batch(images, labels), steps, warmup, min_seconds
        )
        result["train_images_per_s"] = batch_size / seconds
        result["train_cores_busy"] = cores
    return result


# === One measurement, in its own process ===


def _peak_rss_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _variant_name(model):
    from keras_vit import builders

    return builders.BUILDERS.get(model, model)


def _keras_vit_model(variant, dtype, remat, image_size=None):
    from keras_vit.model import ViT

    kwargs = {"dtype": dtype, "remat": remat}
    if image_size:
        kwargs["image_size"] = image_size
    return ViT.from_variant(_variant_name(variant), **kwargs)


def _compute_dtype(dtype):
    """The compute dtype of a dtype policy name (`None`: float32)."""
    import keras

    return keras.DTypePolicy(dtype or "float32").compute_dtype


def _keras_hub_model(variant, dtype=None):
    import keras
    import keras_hub

    from keras_vit import variants

    v = variants.get_variant(variant)
    if "stem" in v:
        raise ValueError("keras-hub has no hybrid ViT")
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(224, 224, 3),
        patch_size=v["patch_size"],
        num_layers=v["num_layers"],
        num_heads=v["num_heads"],
        hidden_dim=v["hidden_dim"],
        mlp_dim=v["mlp_dim"],
        dtype=dtype,
    )
    inputs = keras.Input((224, 224, 3))
    tokens = backbone(inputs)
    outputs = keras.layers.Dense(1000, dtype=dtype)(tokens[:, 0])
    return keras.Model(inputs, outputs)


_TIMM_NAMES = {
    "Ti/16": "vit_tiny_patch16_224", "S/16": "vit_small_patch16_224",
    "S/32": "vit_small_patch32_224", "B/8": "vit_base_patch8_224",
    "B/16": "vit_base_patch16_224", "B/32": "vit_base_patch32_224",
    "L/16": "vit_large_patch16_224", "L/32": "vit_large_patch32_224",
    "H/14": "vit_huge_patch14_224", "R50+B/16": "vit_base_r50_s16_224",
    "R26+S/32": "vit_small_r26_s32_224",
}


# timm runs in its own interpreter (`timm_python`, e.g. a PyTorch
# virtual environment without TensorFlow), so this script needs torch and
# timm only.
_TIMM_SCRIPT = r"""
import json, os, resource, statistics, sys, time
import timm, torch
name, mode, batch, steps, warmup, min_seconds, compute = sys.argv[1:8]
batch, steps, warmup, min_seconds = int(batch), int(steps), int(warmup), float(min_seconds)
torch.set_num_threads(os.cpu_count())
model = timm.create_model(name, pretrained=False, num_classes=1000)
x = torch.rand(batch, 3, 224, 224)
# Keras's mixed precision, PyTorch's way: float32 weights, matmuls and
# convolutions in `compute` (autocast), softmax and norms in float32.
def precision():
    return torch.autocast("cpu", dtype=getattr(torch, compute),
                          enabled=compute != "float32")
if mode == "inference":
    model.eval()
    def step():
        with torch.inference_mode(), precision():
            model(x)
else:
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    y = torch.randint(0, 1000, (batch,))
    def step():
        optimizer.zero_grad()
        with precision():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
for _ in range(warmup):
    step()
# The suite's rule (benchmark.latencies and _time_and_cores): at least
# `steps` calls and `min_seconds` of them, then the median call; cores busy
# is CPU time over wall time while they ran.
times = []
cpu, wall = time.process_time(), time.perf_counter()
while len(times) < steps or sum(times) < min_seconds:
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
cores = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
seconds = statistics.median(times)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print("RESULT " + json.dumps({"images_per_s": batch / seconds, "peak_memory_mb": peak,
                              "cores_busy": cores,
                              "version": "torch %s, timm %s" % (torch.__version__, timm.__version__)}))
"""


def _measure_timm_in_subprocess(variant, mode, batch_size, steps, warmup,
                                python=None, min_seconds=0.0, compute_dtype="float32"):
    if variant not in _TIMM_NAMES:
        return {"error": f"no timm model for {variant}"}
    try:
        proc = subprocess.run(
            [python or sys.executable, "-c", _TIMM_SCRIPT, _TIMM_NAMES[variant], mode,
             str(batch_size), str(steps), str(warmup), str(min_seconds), compute_dtype],
            capture_output=True, text=True,
        )
    except OSError as error:  # e.g. no such interpreter
        return {"error": f"cannot run timm_python={python!r}: {error}"[:200]}
    return _result(proc)


def _result(proc):
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    if proc.returncode is not None and proc.returncode < 0:
        # Killed by a signal: SIGKILL here is almost always the kernel's
        # out-of-memory killer, and stderr's last line is unrelated.
        return {"error": f"killed by signal {-proc.returncode} (out of memory?)"}
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": last[:200]}


def _measure_onnxruntime(variant, batch_size, steps, warmup, min_seconds=0.0):
    import tempfile

    from keras_vit.export import onnx

    model = _keras_vit_model(variant, None, False)
    with tempfile.TemporaryDirectory() as folder:
        path = onnx.export_onnx(model, os.path.join(folder, "model.onnx"),
                                batch_size=batch_size)
        session = onnx.session(path, num_threads=os.cpu_count())
    name = session.get_inputs()[0].name
    x = np.random.default_rng(0).uniform(0, 255, (batch_size, 224, 224, 3)).astype("float32")
    seconds, cores = _time_and_cores(lambda: session.run(None, {name: x}), steps, warmup,
                                     min_seconds)
    return batch_size / seconds, cores


def _measure_openvino(variant, batch_size, steps, warmup, min_seconds=0.0,
                      compute_dtype="float32"):
    import tempfile

    from keras_vit.export import openvino

    model = _keras_vit_model(variant, None, False)
    with tempfile.TemporaryDirectory() as folder:
        path = openvino.export_openvino(model, os.path.join(folder, "model.xml"),
                                        batch_size=batch_size)
        compiled = openvino.compile_openvino(path, compute_dtype, os.cpu_count())
    x = np.random.default_rng(0).uniform(0, 255, (batch_size, 224, 224, 3)).astype("float32")
    return _time_and_cores(lambda: compiled(x), steps, warmup, min_seconds)


def _jit_choices(jit_compile, mode, dtype=None, device_kind=None):
    """The XLA settings to time; the faster one is reported.

    `"auto"`: for training steps what `keras-vit train` picks
    (`recipe.auto_jit_compile`: XLA, but not for bfloat16 on a CPU); for
    inference both, because on a CPU neither wins everywhere: timed in one
    process at batch 8, XLA is 1.14x faster for ViT-Ti/16, 1.15x for S/16
    and 1.21x slower for B/16, where TensorFlow's oneDNN matmuls beat XLA's.
    `device_kind` defaults to where TensorFlow runs (`"gpu"` or `"cpu"`).
    """
    if jit_compile != "auto":
        return (bool(jit_compile),)
    if mode == "inference":
        return (False, True)
    from keras_vit.training import recipe, strategy

    device_kind = device_kind or strategy.device_kind("default")
    return (recipe.auto_jit_compile(device_kind, 1, dtype or "float32"),)


def measure(peer, variant, mode, batch_size, steps=5, warmup=2, dtype=None,
            jit_compile="auto", remat=False, image_size=None, min_seconds=MIN_SECONDS):
    """One measurement in this process: images/s and peak memory (MB).

    Each is the median call over at least `steps` calls and `min_seconds`
    of them (`latencies`)."""
    from keras_vit import validation

    validation.one_of("peer", peer, PEERS)
    min_seconds = validation.non_negative_float("min_seconds", min_seconds)
    variant = _variant_name(variant)
    jit_choices = _jit_choices(jit_compile, mode, dtype)
    if peer != "keras_vit" and image_size not in (None, 224):
        raise ValueError("peers are timed at 224 px only")
    if peer == "timm":
        return _measure_timm_in_subprocess(variant, mode, batch_size, steps, warmup,
                                           min_seconds=min_seconds,
                                           compute_dtype=_compute_dtype(dtype))
    if peer in RUNTIMES and mode != "inference":
        raise ValueError(f"{peer} is timed for inference only")
    if peer == "onnxruntime":
        if _compute_dtype(dtype) != "float32":
            raise ValueError(ONNX_FLOAT32_ONLY)
        rate, cores = _measure_onnxruntime(variant, batch_size, steps, warmup, min_seconds)
    elif peer == "openvino":
        seconds, cores = _measure_openvino(variant, batch_size, steps, warmup, min_seconds,
                                           _compute_dtype(dtype))
        rate = batch_size / seconds
    else:
        import keras

        if peer == "keras_hub":
            model = _keras_hub_model(variant, dtype)
        else:
            model = _keras_vit_model(variant, dtype, remat, image_size)
        size = model.input_shape[1:3]
        if mode == "inference":
            results = [
                (benchmark(model, batch_size, steps, warmup, jit_compile=jit,
                           min_seconds=min_seconds), jit)
                for jit in jit_choices
            ]
            result, xla = max(results, key=lambda r: r[0]["inference_images_per_s"])
            rate = result["inference_images_per_s"]
            cores = result["inference_cores_busy"]
        else:
            (xla,) = jit_choices
            rng = np.random.default_rng(0)
            x = rng.uniform(0, 255, (batch_size, *size, 3)).astype("float32")
            y = rng.integers(0, 1000, (batch_size,))
            model.compile(keras.optimizers.AdamW(1e-4),
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          jit_compile=xla)
            seconds, cores = _time_and_cores(lambda: model.train_on_batch(x, y), steps,
                                             warmup, min_seconds)
            rate = batch_size / seconds
        return {"images_per_s": rate, "peak_memory_mb": _peak_rss_mb(), "xla": xla,
                "cores_busy": cores}
    return {"images_per_s": rate, "peak_memory_mb": _peak_rss_mb(), "cores_busy": cores}


def measure_in_subprocess(timm_python=None, **kwargs):
    """`measure(**kwargs)` in a fresh Python process; `None` if the peer is
    not installed or fails (the reason is returned as `"error"`). timm runs
    in `timm_python` (default: this interpreter)."""
    if kwargs.get("peer") == "timm":
        variant = _variant_name(kwargs["variant"])
        if kwargs.get("image_size") not in (None, 224):
            return {"error": "peers are timed at 224 px only"}
        return _measure_timm_in_subprocess(
            variant, kwargs["mode"], kwargs["batch_size"], kwargs.get("steps", 5),
            kwargs.get("warmup", 2), timm_python,
            kwargs.get("min_seconds", MIN_SECONDS),
            _compute_dtype(kwargs.get("dtype")),
        )
    if kwargs.get("peer") == "onnxruntime" and _compute_dtype(kwargs.get("dtype")) != "float32":
        return {"error": ONNX_FLOAT32_ONLY}
    code = (
        "import json, sys; from keras_vit import benchmark; "
        "print('RESULT ' + json.dumps(benchmark.measure(**json.loads(sys.argv[1]))))"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        capture_output=True, text=True, env=env,
    )
    return _result(proc)


def run_suite(
    variants=("Ti/16", "S/16", "B/16"),
    inference_batches=(1, 8),
    train_batches=(8, 32),
    peers=("keras_vit",),
    steps=5,
    warmup=2,
    dtype=None,
    jit_compile="auto",
    remat=False,
    image_size=None,
    timm_python=None,
    rounds=1,
    printer=print,
    min_seconds=MIN_SECONDS,
):
    """Measures every (peer, variant, mode, batch) and prints a table.

    With `rounds` > 1 every measurement is repeated that many times, the
    rounds interleaved (all of round 1, then all of round 2, ...), and the
    table reports each one's median images/s and largest peak memory. On a
    machine whose speed drifts (this project's VM: ±30% over minutes), that
    is what makes peers comparable: each is sampled across the same spells.

    timm is timed in `timm_python` when given (the interpreter of an
    environment with torch and timm), else in this one. Every measurement
    is the median call over at least `steps` calls and at least
    `min_seconds` of calls (`latencies`), for every peer alike.

    Returns:
        The list of result rows (dicts), one per measurement.
    """
    from keras_vit import validation

    rounds = validation.positive_int("rounds", rounds)
    min_seconds = validation.non_negative_float("min_seconds", min_seconds)
    compute = _compute_dtype(dtype)
    peak = peak_flops()
    line = (f"machine: {os.cpu_count()} CPU cores, measured float32 matmul peak "
            f"{peak / 1e9:.0f} GFLOP/s")
    if compute != "float32":
        # The share of the peak is of the compute dtype's own peak.
        peak = peak_flops(dtype=compute)
        line += f", {compute} {peak / 1e9:.0f} GFLOP/s (the share of peak below)"
    printer(line)
    plan = []
    for variant in variants:
        from keras_vit.model import ViT

        import keras

        kwargs = {"image_size": image_size} if image_size else {}
        with keras.StatelessScope(initialize_variables=False):
            flops = model_flops(ViT.from_variant(_variant_name(variant), **kwargs))
        for peer in peers:
            modes = [("inference", b) for b in inference_batches]
            if peer not in RUNTIMES:
                modes += [("train", b) for b in train_batches]
            plan += [(variant, flops, peer, mode, batch) for mode, batch in modes]
    samples = {key: [] for key in plan}
    for index in range(rounds):
        for key in plan:
            variant, flops, peer, mode, batch = key
            result = measure_in_subprocess(
                peer=peer, variant=variant, mode=mode, batch_size=batch,
                steps=steps, warmup=warmup, dtype=dtype,
                jit_compile=jit_compile, remat=remat, image_size=image_size,
                timm_python=timm_python, min_seconds=min_seconds,
            )
            samples[key].append(result)
            prefix = f"round {index + 1}/{rounds} " if rounds > 1 else ""
            printer(prefix + _format_row(_row(key, [result], peak)))
    rows = [_row(key, samples[key], peak) for key in plan]
    if rounds > 1:
        printer(f"median of {rounds} interleaved rounds:")
        for row in rows:
            printer(_format_row(row))
    return rows


def _row(key, results, peak):
    """One table row from a measurement's results over the rounds."""
    variant, flops, peer, mode, batch = key
    row = {"variant": variant, "peer": peer, "mode": mode, "batch": batch,
           "gflops_per_image": flops / 1e9}
    good = [r for r in results if "images_per_s" in r]
    if not good:
        return {**row, **results[-1]}
    rates = [r["images_per_s"] for r in good]
    median = good[int(np.argsort(rates)[(len(rates) - 1) // 2])]
    row.update(median)
    row["images_per_s"] = float(np.median(rates))
    row["peak_memory_mb"] = max(r["peak_memory_mb"] for r in good)
    if len(good) > 1:
        row["images_per_s_range"] = (min(rates), max(rates))
    work = flops * (3.0 if mode == "train" else 1.0)
    row["fraction_of_peak"] = work * row["images_per_s"] / peak
    return row


def _format_row(row):
    head = f"{row['variant']:>8} {row['peer']:>12} {row['mode']:>9} batch {row['batch']:>3}"
    if "error" in row:
        return f"{head}  n/a ({row['error']})"
    xla = {True: "  XLA", False: "  no XLA"}.get(row.get("xla"), "")
    if "images_per_s_range" in row:
        low, high = row["images_per_s_range"]
        xla = f"  (rounds {low:.2f}-{high:.2f})" + xla
    cores = row.get("cores_busy")
    cores = "" if cores is None else f"  {cores:4.2f} cores busy"
    return (f"{head}  {row['images_per_s']:8.2f} images/s  "
            f"{row['peak_memory_mb']:8.0f} MB peak  "
            f"{100 * row['fraction_of_peak']:5.1f}% of peak{cores}{xla}")


# === Where the time goes ===


def profile(variant="B/16", batch_size=8, steps=5, warmup=2, image_size=None,
            printer=print, min_seconds=MIN_SECONDS):
    """Times the pieces of a forward pass and the alternatives to each.

    Prints milliseconds per batch for: the whole model with and without XLA,
    one training step with and without XLA, patch embedding as `Patches` +
    `Dense` (keras_vit's) versus one strided convolution, one Transformer
    block, its attention as keras_vit's fused-QKV layer versus
    `keras.ops.dot_product_attention` and `keras.layers.MultiHeadAttention`,
    and the `tf.data` training pipeline alone (images/s, scikit-learn's
    digits augmented and resized to the model's resolution). Each is the
    median call by the suite's rule (`latencies`).

    Returns:
        A dict of the timings.
    """
    import keras
    import tensorflow as tf

    from keras_vit import layers as vit_layers
    from keras_vit import validation
    from keras_vit.model import ViT

    min_seconds = validation.non_negative_float("min_seconds", min_seconds)

    kwargs = {"image_size": image_size} if image_size else {}
    model = ViT.from_variant(_variant_name(variant), **kwargs)
    h, w = model.image_size
    d, heads, p = model.hidden_dim, model.num_heads, model.patch_size
    tokens = model.grid_size[0] * model.grid_size[1] + model.num_prefix_tokens
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(0, 255, (batch_size, h, w, 3)).astype("float32"))
    x = tf.constant(rng.normal(size=(batch_size, tokens, d)).astype("float32"))
    out = {}

    def report(name, value, note=""):
        out[name] = value
        printer(f"  {name:<46} {value:9.1f} ms{note}")

    def ms(fn):
        return 1000.0 * _time(fn, steps, warmup, min_seconds)

    printer(f"{variant} at {h}x{w}, batch {batch_size}, {os.cpu_count()} CPU cores")
    for jit in (False, True):
        f = tf.function(lambda v: model(v, training=False), jit_compile=jit)
        report(f"forward, XLA {'on' if jit else 'off'}", ms(lambda: f(images).numpy()))
    labels = rng.integers(0, model.num_classes, (batch_size,))
    for jit in (False, True):
        model.compile(keras.optimizers.AdamW(1e-4),
                      keras.losses.SparseCategoricalCrossentropy(), jit_compile=jit)
        report(f"training step (AdamW), XLA {'on' if jit else 'off'}",
               ms(lambda: model.train_on_batch(images, labels)))

    patches, dense = vit_layers.Patches(p), keras.layers.Dense(d)
    conv = keras.layers.Conv2D(d, p, strides=p)
    f = tf.function(lambda v: dense(patches(v)))
    report("patch embedding: Patches + Dense", ms(lambda: f(images).numpy()))
    f = tf.function(lambda v: conv(v))
    report("patch embedding: strided Conv2D", ms(lambda: f(images).numpy()))

    block = vit_layers.TransformerBlock(heads, model.mlp_dim)
    f = tf.function(lambda v: block(v))
    report("one TransformerBlock", ms(lambda: f(x).numpy()),
           f"  (x{model.num_layers} blocks)")
    ours = vit_layers.MultiHeadSelfAttention(heads)
    f = tf.function(lambda v: ours(v))
    report("attention: keras_vit fused QKV + matmuls", ms(lambda: f(x).numpy()))
    qkv, proj = keras.layers.Dense(3 * d), keras.layers.Dense(d)

    def dpa(v):
        q, k, val = tf.split(tf.reshape(qkv(v), (batch_size, tokens, 3, heads, d // heads)), 3, axis=2)
        o = keras.ops.dot_product_attention(q[:, :, 0], k[:, :, 0], val[:, :, 0])
        return proj(tf.reshape(o, (batch_size, tokens, d)))

    f = tf.function(dpa)
    report("attention: keras.ops.dot_product_attention", ms(lambda: f(x).numpy()))
    mha = keras.layers.MultiHeadAttention(heads, d // heads)
    f = tf.function(lambda v: mha(v, v))
    report("attention: keras.layers.MultiHeadAttention", ms(lambda: f(x).numpy()))

    from keras_vit import data

    digits = data.load("digits")
    pipe = data.train_pipeline(digits.train, 10, (h, w), batch_size, repeat=True,
                               num_examples=digits.num_train)
    it = iter(pipe)
    seconds = _time(lambda: next(it), 20, 3)
    out["pipeline_images_per_s"] = batch_size / seconds
    printer(f"  {'tf.data pipeline alone (crop, flip, to ' + str(h) + ' px)':<46} "
            f"{batch_size / seconds:9.0f} images/s")
    return out
