"""Throughput and FLOPs of keras_vit's own models on the current machine.

Used by `keras-vit benchmark`. Everything here measures and prints; nothing
asserts a speed.

- `flops`: `model_flops` (counted) and `peak_flops` (measured);
- `throughput`: `benchmark`, a Keras model's images/s, and `time_models`,
  the command's table: images/s and the share of the measured peak.

Peers (keras-hub, timm, ONNX Runtime, OpenVINO Runtime), each measurement
in a process of its own with its peak memory, interleaved rounds and
profiles are the checkout's `benchmarks/suite.py` (`benchmarks/README.md`).
Every figure follows `keras_vit.timing`'s rule.
"""

from keras_vit.benchmark.flops import model_flops
from keras_vit.benchmark.flops import peak_flops
from keras_vit.benchmark.throughput import benchmark
from keras_vit.benchmark.throughput import time_models

__all__ = [
    "benchmark",
    "model_flops",
    "peak_flops",
    "time_models",
]
