"""Runs the timm peer, `timm_peer.py`, in the interpreter that has timm.

timm runs in its own interpreter (`--timm-python`, e.g. a PyTorch virtual
environment without TensorFlow), so the program is run by its path:
it imports keras_vit's timing rule by its path, not keras_vit's
`__init__`, which imports TensorFlow.
"""

import os
import subprocess
import sys

from keras_vit import timing

#: The timm peer's program; it imports torch, timm and `keras_vit/timing.py`.
PROGRAM = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "timm_peer.py"
)

#: timm's name of each keras_vit variant that timm has.
TIMM_NAMES = {
    "Ti/16": "vit_tiny_patch16_224",
    "S/16": "vit_small_patch16_224",
    "S/32": "vit_small_patch32_224",
    "B/8": "vit_base_patch8_224",
    "B/16": "vit_base_patch16_224",
    "B/32": "vit_base_patch32_224",
    "L/16": "vit_large_patch16_224",
    "L/32": "vit_large_patch32_224",
    "H/14": "vit_huge_patch14_224",
    "R50+B/16": "vit_base_r50_s16_224",
    "R26+S/32": "vit_small_r26_s32_224",
}


def measure(
    variant,
    mode,
    batch_size,
    steps,
    warmup,
    python=None,
    min_seconds=0.0,
    dtype_policy="float32",
    image_size=224,
):
    """One measurement of timm's model of `variant`, built for `image_size`
    px images, in the Keras dtype policy `dtype_policy` (a name, which the
    program takes PyTorch's way), in the interpreter `python` (default:
    this one): the program's result, or `{"error": why}`."""
    if variant not in TIMM_NAMES:
        return {"error": f"no timm model for {variant}"}
    try:
        process = subprocess.run(
            [
                python or sys.executable,
                PROGRAM,
                TIMM_NAMES[variant],
                mode,
                str(batch_size),
                str(steps),
                str(warmup),
                str(min_seconds),
                dtype_policy,
                str(image_size),
            ],
            capture_output=True,
            text=True,
        )
    except OSError as error:  # e.g. no such interpreter
        return {"error": f"cannot run timm_python={python!r}: {error}"[:200]}
    return timing.read_result(process)
