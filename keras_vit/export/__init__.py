"""Export for serving and for phones: SavedModel, TFLite (LiteRT), ONNX and
OpenVINO IR, each checked against Keras and described by its metadata.

- `export_saved_model(model, "serving/vit")`: a SavedModel with a
  `serving_default` signature (float32 pixels), `serving_uint8` and
  `serving_bytes` (image files, resized inside as the model's
  `image_resize` says; neither for a model built with
  `include_preprocessing=False`), dynamic batch, preprocessing inside; it
  runs with TensorFlow alone.
- `export_tflite(model, "vit.tflite", quantize="int8",
  representative_data="digits")`: LiteRT builtin ops only, float32,
  float16, dynamic-range int8, full int8 or int16x8; the file carries
  standard TFLite Metadata (`tflite_metadata`: normalisation, image size,
  labels) that MediaPipe Tasks' `ImageClassifier` / `ImageEmbedder` read.
- Every export writes its labels and input spec as JSON (`metadata`): a
  sidecar beside a `.tflite`, `.onnx` or OpenVINO `.xml` file
  (`vit.onnx` -> `vit.json`), `keras_vit.json` inside a SavedModel; it
  gives `keras-vit predict` the class names, the input size and how to
  resize images. A SavedModel or TFLite file is verified before it is
  moved into place (`verify`): op list, weight bytes, outputs against
  Keras with LiteRT's XNNPACK, builtin and reference kernels.
- `benchmark_export(model)` prints latency at batch 1 for Keras, the
  SavedModel, ONNX Runtime (when installed) and each TFLite variant.
- `export_onnx(model, "vit.onnx")`: ONNX through Keras and tf2onnx (optional
  dependencies), checked against Keras, with its metadata; run by ONNX
  Runtime (`keras-vit predict`, and timed).
- `export_openvino(model, "vit.xml")`: OpenVINO IR through Keras (optional
  dependency `openvino`), checked against Keras, with its metadata; run by
  OpenVINO Runtime (`keras-vit predict`, and timed).

The command line is `keras-vit export`, `keras-vit verify` and
`keras-vit benchmark-export`.

`__all__` is what the API reference (docs/api/export.md) documents. The
parts have their own modules:
`tflite` (`tflite_bytes`: a model as TFLite bytes), `saved_model`, `onnx`,
`openvino`, `verification` (`verify_tflite`, `verify_saved_model`),
`verification_checks` (`LIMITS`), `runtime` (`run_tflite`,
`INTERPRETERS`), `report`, `graph` (`read_graph`, `op_histogram`),
`metadata`, `tflite_metadata` (`attach`, `read`), `representative`, and
the model's parts: `loaded_model`, `float32_copy`, `model_io`,
`pixel_inputs`, `serving_signatures`.
"""

from keras_vit.export.latency import benchmark_export
from keras_vit.export.loaded_model import inference_model
from keras_vit.export.metadata import read_metadata
from keras_vit.export.onnx import export_onnx
from keras_vit.export.openvino import export_openvino
from keras_vit.export.report import ExportResult
from keras_vit.export.report import VerificationError
from keras_vit.export.report import VerificationReport
from keras_vit.export.representative import ImageSet
from keras_vit.export.representative import load_images
from keras_vit.export.saved_model import export_saved_model
from keras_vit.export.tflite import IO_DTYPES
from keras_vit.export.tflite import QUANTIZATIONS
from keras_vit.export.tflite import export_tflite
from keras_vit.export.verification import verify

__all__ = [
    "ExportResult",
    "IO_DTYPES",
    "ImageSet",
    "QUANTIZATIONS",
    "VerificationError",
    "VerificationReport",
    "benchmark_export",
    "export_onnx",
    "export_openvino",
    "export_saved_model",
    "export_tflite",
    "load_images",
    "inference_model",
    "read_metadata",
    "verify",
]
