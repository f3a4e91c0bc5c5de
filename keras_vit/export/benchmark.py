"""Deprecated: moved to `keras_vit.export.latency`.

`benchmark_export` is `keras_vit.export.benchmark_export`, as before; the
other names (`time_tflite`, `time_onnx`, `time_openvino`, `format_table`)
are `keras_vit.export.latency`'s. This module goes in the next release.
"""

import warnings

from keras_vit.export.latency import benchmark_export  # noqa: F401
from keras_vit.export.latency import format_table  # noqa: F401
from keras_vit.export.latency import time_onnx  # noqa: F401
from keras_vit.export.latency import time_openvino  # noqa: F401
from keras_vit.export.latency import time_tflite  # noqa: F401

warnings.warn(
    "`keras_vit.export.benchmark` is deprecated and will be removed in the "
    "next "
    "release: use `keras_vit.export.benchmark_export`, or "
    "`keras_vit.export.latency` for `time_tflite`, `time_onnx`, "
    "`time_openvino` "
    "and `format_table`.",
    DeprecationWarning,
    stacklevel=2,
)
