"""Export for serving and for phones: SavedModel and TFLite (LiteRT), verified.

- `export_saved_model(model, "serving/vit")`: a SavedModel with a
  `serving_default` signature (float32 pixels) and `serving_uint8`, dynamic
  batch, preprocessing inside; it runs with TensorFlow alone.
- `export_tflite(model, "vit.tflite", quantize="int8",
  representative_data="digits")`: LiteRT builtin ops only, float32,
  float16, dynamic-range int8, full int8 or int16x8.
- Every export writes its labels and input spec as JSON (`metadata`) and is
  verified before it is moved into place (`verify`): op list, weight bytes,
  outputs against Keras with LiteRT's XNNPACK, builtin and reference
  kernels.
- `benchmark_export(model)` prints latency at batch 1 for Keras, the
  SavedModel, ONNX Runtime (when installed) and each TFLite variant.
- `export_onnx(model, "vit.onnx")`: ONNX through Keras and tf2onnx (optional
  dependencies), checked against Keras; used to time ONNX Runtime.
- `export_openvino(model, "vit.xml")`: OpenVINO IR through Keras (optional
  dependency `openvino`), checked against Keras; used to time OpenVINO
  Runtime, the fastest CPU runtime measured here.

The command line is `keras-vit export`, `keras-vit verify` and
`keras-vit benchmark-export`.
"""

from keras_vit.export.latency import benchmark_export
from keras_vit.export.graph import detect_quantization
from keras_vit.export.graph import op_histogram
from keras_vit.export.graph import read_graph
from keras_vit.export.metadata import read_metadata
from keras_vit.export.metadata import sidecar_path
from keras_vit.export.models import load_model
from keras_vit.export.onnx import export_onnx
from keras_vit.export.openvino import export_openvino
from keras_vit.export.representative import ImageSet
from keras_vit.export.representative import load_images
from keras_vit.export.saved_model import export_saved_model
from keras_vit.export.tflite import IO_DTYPES
from keras_vit.export.tflite import QUANTIZATIONS
from keras_vit.export.tflite import ExportResult
from keras_vit.export.tflite import convert
from keras_vit.export.tflite import export_tflite
from keras_vit.export.verification import INTERPRETERS
from keras_vit.export.verification import LIMITS
from keras_vit.export.verification import VerificationError
from keras_vit.export.verification import VerificationReport
from keras_vit.export.verification import run_tflite
from keras_vit.export.verification import verify
from keras_vit.export.verification import verify_saved_model
from keras_vit.export.verification import verify_tflite
from keras_vit.export.verification import xnnpack_partitions

__all__ = [
    "ExportResult",
    "INTERPRETERS",
    "IO_DTYPES",
    "ImageSet",
    "LIMITS",
    "QUANTIZATIONS",
    "VerificationError",
    "VerificationReport",
    "benchmark_export",
    "convert",
    "detect_quantization",
    "export_onnx",
    "export_openvino",
    "export_saved_model",
    "export_tflite",
    "load_images",
    "load_model",
    "op_histogram",
    "read_graph",
    "read_metadata",
    "run_tflite",
    "sidecar_path",
    "verify",
    "verify_saved_model",
    "verify_tflite",
    "xnnpack_partitions",
]
