"""The runtime peers: keras_vit's own model exported, timed for inference
with ONNX Runtime (`keras_vit.export.onnx`) or OpenVINO Runtime
(`keras_vit.export.openvino`) on all the machine's cores."""

import os
import tempfile

import numpy as np

from keras_vit import timing
from keras_vit.export import onnx as onnx_lib
from keras_vit.export import openvino as openvino_lib
from keras_vit.export.model_io import input_spec


def _pixels(model, batch_size):
    shape = (batch_size, *input_spec(model))
    return np.random.default_rng(0).uniform(0, 255, shape).astype("float32")


def time_onnxruntime(model, batch_size, steps, warmup, min_seconds=0.0):
    """The median seconds per batch and the cores busy of `model` exported
    to ONNX at `batch_size` and run by ONNX Runtime (float32)."""
    with tempfile.TemporaryDirectory() as folder:
        path = onnx_lib.export_onnx(
            model, os.path.join(folder, "model.onnx"), batch_size=batch_size
        ).path
        session = onnx_lib.session(path, num_threads=os.cpu_count())
    name = session.get_inputs()[0].name
    x = _pixels(model, batch_size)
    return timing.seconds_and_cores(
        lambda: session.run(None, {name: x}), steps, warmup, min_seconds
    )


def time_openvino(
    model, batch_size, steps, warmup, min_seconds=0.0, compute_dtype="float32"
):
    """The median seconds per batch and the cores busy of `model` exported
    to OpenVINO IR at `batch_size` and run by OpenVINO Runtime, computing
    in `compute_dtype`."""
    with tempfile.TemporaryDirectory() as folder:
        path = openvino_lib.export_openvino(
            model, os.path.join(folder, "model.xml"), batch_size=batch_size
        ).path
        compiled = openvino_lib.compile_openvino(
            path, compute_dtype, os.cpu_count()
        )
    x = _pixels(model, batch_size)
    return timing.seconds_and_cores(
        lambda: compiled(x), steps, warmup, min_seconds
    )
