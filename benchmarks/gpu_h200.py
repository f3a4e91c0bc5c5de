r"""keras_vit against timm on one NVIDIA GPU (an H200 class card), in < 8 min.

For a machine where JAX with CUDA, PyTorch and timm are installed but
TensorFlow and Keras are not: keras_vit runs on Keras's JAX backend, Keras
and its pure-Python dependencies installed from the wheels `--wheels DIR`
holds (`pip install --no-index --no-deps --target`). From the checkout's
root:

    python benchmarks/gpu_h200.py --wheels .whl --out benchmarks/results

Writes `DATE-gpu-MACHINE.json` and `.md` to `--out`:

- parity: keras_vit's logits on the GPU against the CPU's, on a fixed
  tiny model with random weights, float32 (highest matmul precision) and
  mixed bfloat16;
- the GPU's bfloat16 matmul rate, measured, next to the datasheet's;
- ViT-B/16 training (AdamW, mixed bfloat16) images/s at batch 64 and 128
  and inference at batch 256, keras_vit (one `jax.jit` step; its attention
  `keras.ops.dot_product_attention`, cuDNN's flash attention) and timm
  (torch, bfloat16 autocast, timm's fused scaled_dot_product_attention),
  with each one's share of the bfloat16 peak and its peak GPU memory (JAX:
  the device's `peak_bytes_in_use`; torch: `torch.cuda.max_memory_allocated`).

Each measurement runs in a process of its own (its peak memory its own),
killed at its share of the time budget (`--budget-s`, default 450 s); what
the budget leaves out is reported as skipped. `--tiny` runs the same steps
on a tiny model (the tests run it on a CPU).
"""

import argparse
import datetime
import glob
import importlib.util
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_PREFIX = "RESULT "

#: H200 SXM, BFLOAT16 Tensor Core: 1,979 TFLOPS with sparsity, so 989.5
#: dense (NVIDIA's H200 product page and datasheet, nvidia.com/h200; the
#: H200 NVL's is 1,671 sparse, 835.5 dense).
H200_BF16_DENSE_FLOPS = 989.5e12
PEAK_SOURCE = (
    "NVIDIA H200 SXM datasheet: bfloat16 Tensor Core 1,979 TFLOPS with "
    "sparsity, 989.5 TFLOPS dense"
)

#: What is measured, in order of priority (pairs of peers side by side, so
#: that a budget that runs out leaves comparable rows), with each one's
#: most seconds.
PLAN = (
    ({"kind": "parity"}, 90),
    ({"kind": "matmul"}, 30),
    ({"kind": "keras_vit", "mode": "train", "batch": 64}, 100),
    ({"kind": "timm", "mode": "train", "batch": 64}, 60),
    ({"kind": "keras_vit", "mode": "inference", "batch": 256}, 70),
    ({"kind": "timm", "mode": "inference", "batch": 256}, 45),
    ({"kind": "keras_vit", "mode": "train", "batch": 128}, 100),
    ({"kind": "timm", "mode": "train", "batch": 128}, 60),
)
#: `--tiny`'s model (both peers) and batches instead of B/16's.
TINY = {
    "image_size": 32,
    "patch_size": 8,
    "hidden_dim": 32,
    "num_layers": 1,
    "num_heads": 2,
    "mlp_dim": 64,
    "num_classes": 10,
}
TINY_BATCHES = {64: 2, 128: 4, 256: 4}
#: Seconds a measurement's process is given past its own deadline to end.
GRACE_S = 20
#: A measurement is not started with fewer seconds of the budget left.
MIN_START_S = 15


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels",
        default=None,
        help="folder of wheels (Keras and its dependencies) to install "
        "with pip --no-index --no-deps --target before anything runs",
    )
    parser.add_argument(
        "--target",
        default="/tmp/keras_vit_gpu_site",
        help="where --wheels are installed (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        default=os.path.join(ROOT, "benchmarks", "results"),
        help="folder the results are written to (default: %(default)s)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=450.0,
        help="seconds for all the measurements (default: %(default)s)",
    )
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=3.0,
        help="time each measurement's calls for at least this long "
        "(default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny model (a CPU test)"
    )
    parser.add_argument("--skip-timm", action="store_true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("budget_s", "min_seconds", "steps"):
        if not getattr(args, name) > 0:
            parser.error(
                f"`{name}` must be > 0. Received: {name}={getattr(args, name)}"
            )
    if args.warmup < 1:  # the first call compiles: never timed
        parser.error(f"`warmup` must be >= 1. Received: warmup={args.warmup}")
    return args


# ---------------------------------------------------------------- timing


def time_calls(fn, steps, warmup, min_seconds, deadline):
    """Seconds of each timed call of `fn` by `keras_vit.timing.latencies`'
    rule (at least `steps` calls and `min_seconds` of them, after `warmup`
    untimed ones), stopping early at `deadline` (`time.perf_counter()`)
    with at least one timed call. `fn` must wait for its device."""
    for _ in range(warmup):
        fn()
    times = []
    while not times or (
        (len(times) < steps or sum(times) < min_seconds)
        and time.perf_counter() < deadline
    ):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def rate_row(batch, times):
    """images/s of the median call, and how many calls were timed."""
    return {
        "images_per_s": batch / statistics.median(times),
        "timed_calls": len(times),
    }


def add_shares(results, datasheet_peak=H200_BF16_DENSE_FLOPS):
    """Adds to each rate row its share of the datasheet's bfloat16 peak
    (not with `--tiny`) and of the measured matmul rate: FLOPs per image
    (keras_vit's count, which the matmul row carries; timm's model is the
    same architecture) x images/s, a training step 3x the forward pass."""
    probe = next((r for r in results if r["kind"] == "matmul"), {})
    flops = probe.get("flops_per_image")
    peaks = {
        "datasheet_peak": None if probe.get("tiny") else datasheet_peak,
        "measured_peak": probe.get("bf16_matmul_flops"),
    }
    for row in results:
        if "images_per_s" not in row or not flops:
            continue
        work = flops * (3.0 if row["mode"] == "train" else 1.0)
        for name, peak in peaks.items():
            if peak:
                row[f"share_of_{name}"] = work * row["images_per_s"] / peak
    return results


# --------------------------------------------------------------- the plan


def run_plan(plan, budget_s, runner, clock=time.monotonic):
    """Runs each `(spec, cap_s)` of `plan` by `runner(spec, timeout_s)`,
    each given `cap_s` or what is left of `budget_s`, whichever is less;
    those the budget cannot start are `{"error": "skipped: ..."}`."""
    end = clock() + budget_s
    results = []
    for spec, cap in plan:
        left = end - clock()
        if left < MIN_START_S:
            results.append(
                {**spec, "error": f"skipped: time budget spent ({budget_s} s)"}
            )
            continue
        timeout = min(cap, left)
        start = clock()
        result = runner(spec, timeout)
        results.append({**spec, **result, "wall_s": clock() - start})
    return results


def plan_for(args):
    """`PLAN` with `--tiny`'s batches and without timm if skipped."""
    plan = []
    for spec, cap in PLAN:
        if args.skip_timm and spec["kind"] == "timm":
            continue
        spec = dict(spec)
        if args.tiny and "batch" in spec:
            spec["batch"] = TINY_BATCHES[spec["batch"]]
        plan.append((spec, cap))
    return plan


def subprocess_runner(args, env):
    """A `run_plan` runner: this file's `--worker` in a process of its own,
    told its deadline, killed `GRACE_S` after it."""

    def run(spec, timeout):
        job = {
            **spec,
            "deadline_s": max(timeout - GRACE_S, 1.0),
            "tiny": args.tiny,
            "steps": args.steps,
            "warmup": args.warmup,
            "min_seconds": args.min_seconds,
        }
        command = [sys.executable, __file__, "--worker", json.dumps(job)]
        try:
            process = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        return read_result(process.stdout, process.stderr)

    return run


def read_result(stdout, stderr):
    """The worker's `RESULT {json}` line, else the last line of stderr."""
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    return {"error": ((stderr or "").strip().splitlines() or ["no output"])[-1]}


def install_wheels(wheels, target):
    """pip-installs every wheel in `wheels` into `target`, offline, as
    given (no dependency resolution); returns `target`."""
    files = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    if not files:
        raise ValueError(
            f"`wheels` holds no .whl file. Received: wheels={wheels!r}"
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            target,
            *files,
        ],
        check=True,
    )
    return target


def worker_env(site=None):
    """The measurements' environment: Keras on JAX, this checkout (and the
    installed wheels) first on the path."""
    path = [p for p in (site, ROOT, os.environ.get("PYTHONPATH")) if p]
    return {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "PYTHONPATH": os.pathsep.join(path),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


# ---------------------------------------------------------------- results


def machine_of(results):
    """The device and versions the measurements reported."""
    machine = {}
    for row in results:
        machine.update(row.get("machine", {}))
    return machine


def file_stem(date, machine):
    """`DATE-gpu-DEVICE`, the device in lowercase letters, digits, '-'."""
    device = machine.get("device", "unknown")
    return f"{date}-gpu-" + re.sub(r"[^a-z0-9]+", "-", device.lower()).strip(
        "-"
    )


def markdown(report):
    """The report as a Markdown page."""
    rows = report["results"]
    machine = report["machine"]
    lines = [
        f"# keras_vit and timm on {machine.get('device', 'a GPU')}, "
        f"{report['date']}",
        "",
        f"`{report['command']}`; arguments: "
        + ", ".join(f"{k} {v}" for k, v in report["arguments"].items())
        + "; versions: "
        + ", ".join(f"{k} {v}" for k, v in sorted(machine.items())),
        "",
        f"Peak: {PEAK_SOURCE}; measured bfloat16 matmul "
        + _tflops(_find(rows, "matmul").get("bf16_matmul_flops"))
        + ". Wall time "
        + f"{report['wall_s']:.0f} s of a {report['budget_s']:.0f} s budget.",
        "",
    ]
    parity = _find(rows, "parity")
    lines += [
        "Parity, GPU against CPU, max abs diff of the logits (largest "
        "logit): "
        + (
            ", ".join(
                f"{k} {v:.2e} ({parity['max_abs_output'][k]:.2e})"
                for k, v in parity.get("max_abs_diff", {}).items()
            )
            or f"n/a ({parity.get('error')})"
        ),
        "",
        "| measurement | keras_vit | timm | keras_vit / timm |",
        "| --- | ---: | ---: | ---: |",
    ]
    for mode, batch in sorted(
        {(r["mode"], r["batch"]) for r in rows if "mode" in r},
        key=lambda k: (k[0] != "train", k[1]),
    ):
        ours, theirs = (
            _find(rows, k, mode, batch) for k in ("keras_vit", "timm")
        )
        for label, key, fmt in (
            ("images/s", "images_per_s", "{:.0f}"),
            (
                "share of the datasheet bf16 peak",
                "share_of_datasheet_peak",
                "{:.1%}",
            ),
            (
                "share of the measured bf16 matmul",
                "share_of_measured_peak",
                "{:.1%}",
            ),
            ("peak GPU memory, MB", "peak_memory_mb", "{:.0f}"),
            ("fused attention", "fused_attention", "{}"),
        ):
            a, b = ours.get(key), theirs.get(key)
            numbers = a and b and not isinstance(a, bool)
            ratio = f"{a / b:.2f}" if numbers else ""
            lines.append(
                f"| {mode}, batch {batch}: {label} | {_cell(ours, key, fmt)} "
                f"| {_cell(theirs, key, fmt)} | {ratio} |"
            )
    return "\n".join(lines) + "\n"


def _find(rows, kind, mode=None, batch=None):
    for row in rows:
        if row["kind"] == kind and row.get("mode") == mode:
            if row.get("batch") == batch:
                return row
    return {}


def _cell(row, key, fmt):
    if key in row and row[key] is not None:
        return fmt.format(row[key])
    return f"n/a ({row['error']})" if "error" in row else "n/a"


def _tflops(flops):
    return "n/a" if not flops else f"{flops / 1e12:.0f} TFLOP/s"


def load_by_path(relative):
    """A module of this checkout loaded by its path, without running
    `keras_vit/__init__.py` (which imports Keras, and on its default
    backend TensorFlow)."""
    path = os.path.join(ROOT, *relative.split("/"))
    name = "gpu_h200_" + re.sub(r"\W", "_", relative)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_report(report, folder):
    """`report` as JSON and Markdown in `folder`, each written whole or
    not at all; returns the two paths."""
    files = load_by_path("keras_vit/files.py")  # stdlib only
    os.makedirs(folder, exist_ok=True)
    stem = file_stem(report["date"], report["machine"])
    paths = []
    for suffix, text in (
        (".json", json.dumps(report, indent=1) + "\n"),
        (".md", markdown(report)),
    ):
        path = os.path.join(folder, stem + suffix)
        files.write_text(path, text)
        paths.append(path)
    return paths


def new_report(args, argv, results, wall_s):
    """The report of a run: its command line as given (`argv`, default
    `sys.argv[1:]`) and every argument parsed, defaults included, so that
    the figures can be reproduced; the machine, the peak and the rows."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return {
        "date": datetime.date.today().isoformat(),
        "command": shlex.join(["python", "benchmarks/gpu_h200.py", *argv]),
        "arguments": {k: v for k, v in vars(args).items() if k != "worker"},
        "tiny": args.tiny,
        "budget_s": args.budget_s,
        "wall_s": wall_s,
        "machine": machine_of(results),
        "datasheet_bf16_peak_flops": H200_BF16_DENSE_FLOPS,
        "peak_source": PEAK_SOURCE,
        "results": results,
    }


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(json.loads(args.worker))
    start = time.monotonic()
    site = install_wheels(args.wheels, args.target) if args.wheels else None
    results = run_plan(
        plan_for(args), args.budget_s, subprocess_runner(args, worker_env(site))
    )
    add_shares(results)
    report = new_report(args, argv, results, time.monotonic() - start)
    for path in write_report(report, args.out):
        print(path)
    return 0


# ------------------------------------------------- the measurements' side


def worker(job):
    """One measurement, in its own process: prints `RESULT {json}`."""
    deadline = time.perf_counter() + job["deadline_s"]
    if job["kind"] == "timm":
        result = _timm_worker(job, deadline)
    else:
        result = _jax_worker(job, deadline)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def _jax_worker(job, deadline):
    import jax
    import keras

    device = jax.devices()[0]
    result = {
        "machine": {
            "device": device.device_kind,
            "jax": jax.__version__,
            "keras": keras.__version__,
        }
    }
    if job["kind"] == "parity":
        result["max_abs_diff"], result["max_abs_output"] = _parity(job)
    elif job["kind"] == "matmul":
        result["bf16_matmul_flops"] = _matmul_peak(
            deadline, 256 if job["tiny"] else 8192
        )
        with keras.StatelessScope(initialize_variables=False):
            result["flops_per_image"] = _flops(_vit(job["tiny"], None))
        result["tiny"] = job["tiny"]
    else:
        result.update(_keras_vit_rate(job, deadline))
        stats = device.memory_stats() or {}  # None on a CPU
        peak = stats.get("peak_bytes_in_use")
        result["peak_memory_mb"] = peak / 2**20 if peak else None
    return result


def _vit(tiny, dtype, **kwargs):
    import keras

    from keras_vit.models.vit import ViT

    keras.utils.set_random_seed(0)
    if tiny:
        return ViT(**TINY, dtype=dtype, **kwargs)
    return ViT.from_variant("B/16", dtype=dtype, **kwargs)


def _parity(job):
    """Max abs diff of the default device's outputs from the CPU's, same
    weights and images, in float32 (highest precision) and mixed bf16; and
    the largest output, which the diff is against.

    The model's logits, its every weight perturbed: a freshly built ViT's
    head is zeros, whose outputs are equal on any device whatever the
    layers before it compute."""
    import jax
    import numpy as np

    cpu = jax.devices("cpu")[0]
    images = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3))
    diffs, scales = {}, {}
    for dtype in ("float32", "mixed_bfloat16"):
        model = _vit(True, dtype, classifier_activation=None)
        rng = np.random.default_rng(1)
        for variable in model.variables:
            noise = rng.normal(0.0, 0.05, variable.shape)
            variable.assign(np.asarray(variable.value) + noise)
        state = (
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
        )

        def forward(state, x, model=model):
            return model.stateless_call(*state, x, training=False)[0]

        with jax.default_matmul_precision("highest"):
            here = jax.jit(forward)(state, images.astype("float32"))
            there = jax.jit(forward)(
                jax.device_put(state, cpu),
                jax.device_put(images.astype("float32"), cpu),
            )
        diffs[dtype] = float(
            np.max(np.abs(np.asarray(here, "float32") - np.asarray(there)))
        )
        scales[dtype] = float(np.max(np.abs(np.asarray(there, "float32"))))
    return diffs, scales


def _matmul_peak(deadline, size):
    """The default device's bfloat16 matmul rate (FLOP/s), best of rounds."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((size, size), jnp.bfloat16)
    matmul = jax.jit(lambda x: x @ x)
    matmul(a).block_until_ready()
    best, end = 0.0, min(deadline, time.perf_counter() + 10)
    while True:
        start = time.perf_counter()
        for _ in range(10):
            out = matmul(a)
        out.block_until_ready()
        best = max(best, 10 * 2.0 * size**3 / (time.perf_counter() - start))
        if time.perf_counter() > end:
            return best


def _counted_fused_attention():
    """A list that grows by one at each call of
    `keras.ops.dot_product_attention` (made as a step is traced: one per
    block that fuses its attention)."""
    from keras import ops

    calls, fused = [], ops.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    ops.dot_product_attention = counted
    return calls


def _keras_vit_rate(job, deadline):
    """images/s of keras_vit's jitted training step or forward pass, and
    whether its attention was the fused op."""
    import jax
    import numpy as np

    fused_calls = _counted_fused_attention()
    # Logits, as timm's model returns them and the training step's loss
    # takes them (`from_logits=True`): no softmax timm does not run.
    model = _vit(job["tiny"], "mixed_bfloat16", classifier_activation=None)
    batch = job["batch"]
    size = model.input_shape[1]
    rng = np.random.default_rng(0)
    x = jax.device_put(
        rng.uniform(0, 255, (batch, size, size, 3)).astype("float32")
    )
    y = jax.device_put(rng.integers(0, model.output_shape[-1], (batch,)))
    state = [
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
    ]
    if job["mode"] == "train":
        step, state = _train_step(model, state)
    else:
        forward = jax.jit(
            lambda s, x: model.stateless_call(*s, x, training=False)[0]
        )

        def step(state, x, y):
            return state, forward(state, x)

    def call():
        nonlocal state
        state, out = step(state, x, y)
        jax.block_until_ready(out)

    times = time_calls(
        call, job["steps"], job["warmup"], job["min_seconds"], deadline
    )
    return {**rate_row(batch, times), "fused_attention": bool(fused_calls)}


def _train_step(model, state):
    """A jitted AdamW step on `(trainable, non-trainable, optimizer)` state,
    the state donated; returns the step and its first state."""
    import jax
    import keras

    optimizer = keras.optimizers.AdamW(1e-4)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss(trainable, non_trainable, x, y):
        logits, non_trainable = model.stateless_call(
            trainable, non_trainable, x, training=True
        )
        return loss_fn(y, logits), non_trainable

    grad = jax.value_and_grad(loss, has_aux=True)

    def step(state, x, y):
        trainable, non_trainable, slots = state
        (value, non_trainable), grads = grad(trainable, non_trainable, x, y)
        trainable, slots = optimizer.stateless_apply(slots, grads, trainable)
        return [trainable, non_trainable, slots], value

    slots = [v.value for v in optimizer.variables]
    return jax.jit(step, donate_argnums=0), [*state, slots]


def _flops(model):
    """keras_vit's FLOP count (`keras_vit/benchmark/flops.py`, loaded by its
    path: `keras_vit.benchmark.throughput` imports TensorFlow)."""
    return load_by_path("keras_vit/benchmark/flops.py").model_flops(model)


def _timm_worker(job, deadline):
    import timm
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if job["tiny"]:
        model = timm.models.VisionTransformer(
            img_size=TINY["image_size"],
            patch_size=TINY["patch_size"],
            embed_dim=TINY["hidden_dim"],
            depth=TINY["num_layers"],
            num_heads=TINY["num_heads"],
            mlp_ratio=TINY["mlp_dim"] / TINY["hidden_dim"],
            num_classes=TINY["num_classes"],
        )
    else:
        model = timm.create_model("vit_base_patch16_224", pretrained=False)
    model = model.to(device)
    batch, size = job["batch"], model.patch_embed.img_size[0]
    x = torch.rand(batch, 3, size, size, device=device)
    y = torch.randint(0, model.num_classes, (batch,), device=device)
    step = _timm_step(model, job["mode"], x, y, device)

    def call():
        step()
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = time_calls(
        call, job["steps"], job["warmup"], job["min_seconds"], deadline
    )
    result = rate_row(batch, times)
    result["peak_memory_mb"] = (
        torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    )
    result["fused_attention"] = bool(model.blocks[0].attn.fused_attn)
    result["machine"] = {"torch": torch.__version__, "timm": timm.__version__}
    return result


def _timm_step(model, mode, x, y, device):
    import torch

    def precision():
        return torch.autocast(device, dtype=torch.bfloat16)

    if mode == "inference":
        model.eval()

        def step():
            with torch.inference_mode(), precision():
                model(x)

        return step
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with precision():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step


if __name__ == "__main__":
    sys.exit(main())
