r"""The timm peer of `benchmarks/suite.py`: one measurement of a timm ViT.

    python benchmarks/peers/timm_peer.py \
        NAME MODE BATCH STEPS WARMUP MIN_SECONDS DTYPE_POLICY IMAGE_SIZE

NAME is timm's model name, built for IMAGE_SIZE px images (`img_size`),
MODE `inference` or `train` (AdamW steps on random labels), DTYPE_POLICY
the suite's Keras dtype policy name, taken PyTorch's way: `float32`;
`mixed_bfloat16` or `mixed_float16`, float32 weights with matmuls and
convolutions under `torch.autocast` (softmax and norms in float32), as
Keras's mixed precision; `bfloat16` or `float16`, the model's weights and
images in that dtype (`model.to`), as a Keras model whose variables are
in that dtype.
Prints one line, `RESULT {json}`:
images/s, peak memory (MB), CPU cores busy and the
versions of torch and timm. Bad arguments are a `ValueError` whose last
line on stderr the suite reports in the peer's row.

`timm_runner` runs this file by its path, in the interpreter that has timm
(perhaps without TensorFlow): it imports torch, timm, the standard library
and, of keras_vit, only the timing rule every peer follows,
`keras_vit/timing.py`, loaded by its path (`import keras_vit.timing` would
run keras_vit's `__init__`, which imports TensorFlow). torch and timm are
imported where the model is made, not at the top, so that the arguments
and the result line are checked where torch is not installed (the tests
load this file by its path).
"""

import importlib.util
import os
import sys

#: keras_vit/timing.py, from the checkout this file is in.
TIMING = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    os.pardir,
    os.pardir,
    "keras_vit",
    "timing.py",
)
ARGUMENTS = (
    "name",
    "mode",
    "batch",
    "steps",
    "warmup",
    "min_seconds",
    "dtype_policy",
    "image_size",
)
MODES = ("inference", "train")
DTYPE_POLICIES = (
    "float32",
    "mixed_bfloat16",
    "mixed_float16",
    "bfloat16",
    "float16",
)


def load_timing():
    """`keras_vit/timing.py` as a module of its own, without keras_vit."""
    spec = importlib.util.spec_from_file_location("keras_vit_timing", TIMING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _number(name, text, kind, low):
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not value >= low:  # `not >=`: NaN is refused too
        raise ValueError(
            f"`{name}` must be a number >= {low}. Received: {name}={text!r}"
        )
    return value


def parse_args(argv):
    """The program's arguments (strings, as on the command line) as a dict
    of `ARGUMENTS`, with the numbers as numbers; a `ValueError` naming the
    argument otherwise."""
    if len(argv) != len(ARGUMENTS):
        raise ValueError(
            f"expected {len(ARGUMENTS)} arguments, "
            f"{' '.join(a.upper() for a in ARGUMENTS)}. Received: argv={argv!r}"
        )
    args = dict(zip(ARGUMENTS, argv))
    for name, choices in (("mode", MODES), ("dtype_policy", DTYPE_POLICIES)):
        if args[name] not in choices:
            raise ValueError(
                f"`{name}` must be one of {list(choices)}. "
                f"Received: {name}={args[name]!r}"
            )
    args["batch"] = _number("batch", args["batch"], int, 1)
    args["steps"] = _number("steps", args["steps"], int, 1)
    args["warmup"] = _number("warmup", args["warmup"], int, 0)
    args["image_size"] = _number("image_size", args["image_size"], int, 1)
    args["min_seconds"] = _number(
        "min_seconds", args["min_seconds"], float, 0.0
    )
    return args


def result(batch, seconds, cores, peak_memory_mb, versions):
    """The measurement as the suite reads it back
    (`keras_vit.timing.read_result`)."""
    return {
        "images_per_s": batch / seconds,
        "peak_memory_mb": peak_memory_mb,
        "cores_busy": cores,
        "version": ", ".join(f"{name} {version}" for name, version in versions),
    }


def make_step(name, mode, batch, policy, image_size=224):
    """One call of timm's model `name` built for `image_size` px images, in
    the dtype policy `policy` (the module docstring): a forward pass or a
    training step."""
    import timm
    import torch

    model = timm.create_model(
        name, pretrained=False, num_classes=1000, img_size=image_size
    )
    x = torch.rand(batch, 3, image_size, image_size)
    mixed = policy.startswith("mixed_")
    compute = getattr(torch, policy.removeprefix("mixed_"))
    if not mixed and policy != "float32":
        model = model.to(compute)
        x = x.to(compute)

    def precision():
        return torch.autocast("cpu", dtype=compute, enabled=mixed)

    if mode == "inference":
        model.eval()

        def step():
            with torch.inference_mode(), precision():
                model(x)

        return step
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    y = torch.randint(0, 1000, (batch,))

    def step():
        optimizer.zero_grad()
        with precision():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step


def main(argv):
    """Times `make_step(...)` as the suite times every peer; prints it."""
    args = parse_args(argv)
    import timm
    import torch

    timing = load_timing()
    torch.set_num_threads(os.cpu_count())
    step = make_step(
        args["name"],
        args["mode"],
        args["batch"],
        args["dtype_policy"],
        args["image_size"],
    )
    seconds, cores = timing.seconds_and_cores(
        step, args["steps"], args["warmup"], args["min_seconds"]
    )
    timing.print_result(
        result(
            args["batch"],
            seconds,
            cores,
            timing.peak_rss_mb(),
            (("torch", torch.__version__), ("timm", timm.__version__)),
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
