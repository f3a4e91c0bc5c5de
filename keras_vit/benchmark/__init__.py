"""Throughput, memory and efficiency of ViTs on the current machine.

`keras-vit benchmark`. The code is `keras_vit.benchmark.suite` (moved from
`keras_vit/benchmark.py`); its public names are here, as before.
"""

from keras_vit.benchmark.suite import MIN_SECONDS
from keras_vit.benchmark.suite import ONNX_FLOAT32_ONLY
from keras_vit.benchmark.suite import PEERS
from keras_vit.benchmark.suite import RUNTIMES
from keras_vit.benchmark.suite import benchmark
from keras_vit.benchmark.suite import latencies
from keras_vit.benchmark.suite import measure
from keras_vit.benchmark.suite import measure_in_subprocess
from keras_vit.benchmark.suite import model_flops
from keras_vit.benchmark.suite import peak_flops
from keras_vit.benchmark.suite import profile
from keras_vit.benchmark.suite import run_suite
