"""Throughput, memory and efficiency of ViTs on the current machine.

Used by `keras-vit benchmark`. Everything here measures and prints; nothing
asserts a speed. The suite (`run_suite`) times, per variant: inference
images/s at the given batch sizes, AdamW training steps, the process's peak
memory for each, and the fraction of the machine's float32 peak that
reaches (`FLOPs per image × images/s / peak`), with the peak measured in the
same run by a matrix-multiply probe. Peers (keras-hub's `ViTBackbone`,
timm, ONNX Runtime, OpenVINO Runtime) are timed the same way when they are
installed. Each measurement runs in its own Python process, so that peak
memory is that measurement's own and one run's caches do not help the next.

The rooms:

- `suite`: `run_suite` and `measure_in_subprocess`, the table;
- `throughput`: `measure`, one measurement in this process, and
  `benchmark`, a Keras model's images/s;
- `worker`: the program each measurement's process runs;
- `flops`: `model_flops` (counted) and `peak_flops` (measured);
- `profiling`: `profile`, where the time goes (`--profile`);
- `peers/`: keras-hub, ONNX Runtime, OpenVINO Runtime, and timm, whose
  program `peers/timm_peer.py` runs in an interpreter of its own.

Every figure follows `keras_vit.timing`'s rule (`latencies`), which
`keras-vit benchmark-export` (`keras_vit.export.latency`) shares.
"""

from keras_vit.benchmark.flops import model_flops
from keras_vit.benchmark.flops import peak_flops
from keras_vit.benchmark.profiling import profile
from keras_vit.benchmark.suite import measure_in_subprocess
from keras_vit.benchmark.suite import run_suite
from keras_vit.benchmark.throughput import MIN_SECONDS
from keras_vit.benchmark.throughput import ONNX_FLOAT32_ONLY
from keras_vit.benchmark.throughput import PEERS
from keras_vit.benchmark.throughput import RUNTIMES
from keras_vit.benchmark.throughput import benchmark
from keras_vit.benchmark.throughput import measure

__all__ = [
    "MIN_SECONDS",
    "ONNX_FLOAT32_ONLY",
    "PEERS",
    "RUNTIMES",
    "benchmark",
    "measure",
    "measure_in_subprocess",
    "model_flops",
    "peak_flops",
    "profile",
    "run_suite",
]
