"""The Android and iOS snippets of docs/export-and-mobile.md, checked as far
as this machine can: every type they use is imported, the Swift one uses
only TensorFlowLiteSwift API that exists and dequantizes integer outputs,
and, where `kotlinc` is installed, the Kotlin one compiles against stubs
of the Android, org.json and LiteRT classes (tests/mobile_stubs/); the
MediaPipe Tasks snippets call MediaPipe's classes as their public API
declares (tests/clients/mediapipe_snippets.py).
"""

import math
import os
import re
import shutil
import subprocess

import pytest

from tests.clients import mediapipe_snippets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "export-and-mobile.md")
STUBS = os.path.join(ROOT, "tests", "mobile_stubs")


def _block(language, containing, path=PAGE):
    with open(path, encoding="utf-8") as file:
        text = file.read()
    blocks = re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"{len(found)} {language} blocks with {containing}"
    return found[0]


def _code(source):
    """`source` without comments and string literals."""
    source = re.sub(r'"(\\.|[^"\\])*"', '""', source)
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def _types(code):
    """Capitalised names used as a start of an expression (not `.Member`)."""
    return set(re.findall(r"(?<![\w.])([A-Z]\w*)", code))


KOTLIN_BUILTINS = {
    "Array",
    "Boolean",
    "Byte",
    "Double",
    "Float",
    "FloatArray",
    "Int",
    "IntArray",
    "List",
    "Long",
    "Pair",
    "String",
    "Unit",
}


def _unimported_kotlin_types(source):
    imported = set(re.findall(r"^import [\w.]+\.(\w+)$", source, flags=re.M))
    body = re.sub(r"^import [^\n]*\n", "", source, flags=re.M)
    declared = set(re.findall(r"\bclass (\w+)", body))
    return sorted(_types(_code(body)) - imported - declared - KOTLIN_BUILTINS)


def test_kotlin_snippet_imports_every_type_it_uses():
    assert (
        _unimported_kotlin_types(_block("kotlin", "class VitClassifier")) == []
    )


def test_kotlin_import_check_finds_a_missing_import():
    # The snippet as it was: no Context or Bitmap import.
    old = "import org.json.JSONObject\nclass A(context: Context) {\n"
    old += '    fun f(b: Bitmap) = JSONObject("")  // Uri in a comment\n}\n'
    assert _unimported_kotlin_types(old) == ["Bitmap", "Context"]


def test_kotlin_snippet_dequantizes_with_the_output_parameters():
    code = _block("kotlin", "class VitClassifier")
    assert 'getString("dtype")' in code and "output_quantization" in code
    assert "(raw - zeroPoint) * scale" in code


@pytest.mark.slow
def test_kotlin_snippet_compiles_against_stubs(tmp_path):
    kotlinc = shutil.which("kotlinc")
    if kotlinc is None:
        pytest.skip("kotlinc is not installed (Debian: apt-get install kotlin)")
    source = tmp_path / "VitClassifier.kt"
    source.write_text(_block("kotlin", "class VitClassifier"), encoding="utf-8")
    done = subprocess.run(
        [kotlinc, str(source), STUBS, "-d", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 0 and not errors, done.stderr
    assert (tmp_path / "out" / "VitClassifier.class").exists()


# TensorFlowLiteSwift's API as its sources declare it
# (tensorflow/lite/swift/Sources: Interpreter.swift, Tensor.swift,
# QuantizationParameters.swift): what the Swift snippet may call.
SWIFT_INTERPRETER = {"allocateTensors", "copy", "input", "invoke", "output"}
SWIFT_OPTIONS = {"threadCount", "isXNNPackEnabled"}
SWIFT_DATA_TYPES = {
    "bool",
    "uInt8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
}
SWIFT_TYPES = {
    "Interpreter",
    "Delegate",
    "CoreMLDelegate",
    "MetalDelegate",
    # Foundation and the standard library
    "Bundle",
    "Data",
    "Error",
    "Double",
    "Float",
    "Float32",
    "Int",
    "JSONSerialization",
    "String",
    "UInt8",
    "Any",
    "Array",
    "Bool",
    # CoreGraphics (Apple's documentation of CGContext, CGImage, CGRect)
    "CGColorSpaceCreateDeviceRGB",
    "CGContext",
    "CGImage",
    "CGImageAlphaInfo",
    "CGRect",
}


def test_swift_snippet_uses_only_the_tensorflowliteswift_api():
    source = _block("swift", "final class VitClassifier")
    assert (
        "import TensorFlowLite\n" in source and "import Foundation\n" in source
    )
    code = _code(source)
    calls = set(re.findall(r"\binterpreter\.(\w+)", code))
    assert calls <= SWIFT_INTERPRETER, calls - SWIFT_INTERPRETER
    options = set(re.findall(r"\boptions\.(\w+)", code))
    assert options <= SWIFT_OPTIONS, options - SWIFT_OPTIONS
    cases = set(re.findall(r"\bcase \.(\w+)", code))
    # There is no .int8: TensorFlowLiteSwift cannot read int8 tensors.
    assert cases <= SWIFT_DATA_TYPES, cases - SWIFT_DATA_TYPES
    body = re.sub(r"^import \w+\n", "", code, flags=re.M)
    declared = set(re.findall(r"\b(?:class|enum|struct) (\w+)", body))
    unknown = _types(body) - declared - SWIFT_TYPES
    assert not unknown, unknown


def test_swift_snippet_dequantizes_integer_outputs():
    code = _code(_block("swift", "final class VitClassifier"))
    output = code[code.index("interpreter.output(at: 0)") :]
    float_read = output.index("bindMemory(to: Float32.self)")
    # Float32 bytes are read only under `case .float32:`, and a uint8
    # output goes through its own scale and zero point.
    assert output.rindex("case .float32:", 0, float_read) > output.rfind(
        "case .uInt8:", 0, float_read
    )
    assert "output.quantizationParameters" in output
    assert "q.scale * Float(Int($0) - q.zeroPoint)" in output
    assert "input.quantizationParameters" in code


# What the model takes and returns, from vit.json: pixels (pixel_range
# [0, 255]) or, for an include_preprocessing=False export, the pixels
# normalised as input.normalization says (null: mean = std = 0.5, the
# paper's v / 127.5 - 1); integer inputs quantize those values; logits go
# through a softmax, features are refused. The snippets fed 0..255 to every
# model and read any output as probabilities.


def test_kotlin_snippet_feeds_what_the_metadata_says():
    code = _block("kotlin", "class VitClassifier")
    assert '!input.isNull("pixel_range")' in code
    assert 'input.optJSONObject("normalization")' in code
    assert "?.getDouble(c) ?: 0.5" in code
    assert '(1 / (255 * stat("std", it)))' in code
    assert '(-stat("mean", it) / stat("std", it))' in code
    loop = code[code.index("for (p in pixels)") : code.index("x.rewind()")]
    assert "* inScale[c] + inOffset[c]" in loop
    # The normalised value, not the pixel, is quantized.
    assert "x.putFloat(v)" in loop and "(v / inQ.getDouble(" in loop
    assert 'require(outKind != "features")' in code
    assert 'if (outKind == "logits")' in code and "exp(" in code


def test_swift_snippet_feeds_what_the_metadata_says():
    code = _block("swift", "final class VitClassifier")
    assert 'input["pixel_range"] is [Any]' in code
    assert 'input["normalization"] as? [String: [Double]]' in code
    assert "?? [0.5, 0.5, 0.5]" in code
    assert "Float(1 / (255 * $0))" in code and "Float(-$0 / $1)" in code
    classify = code[code.index("func classify") :]
    assert "* scale[$0 % 3] + offset[$0 % 3]" in classify
    assert "values.withUnsafeBufferPointer" in classify
    assert "(v / q.scale).rounded()" in classify
    assert 'if kind == "features" { throw' in code
    assert "if logits {" in classify and "exp($0 - largest)" in classify


def _normalised(pixel, pixel_range, normalization):
    """The snippets' formula, in Python: `v * scale + offset`."""
    if pixel_range is not None:
        return float(pixel)
    norm = normalization or {"mean": [0.5] * 3, "std": [0.5] * 3}
    scale = [1 / (255 * s) for s in norm["std"]]
    offset = [-m / s for m, s in zip(norm["mean"], norm["std"])]
    return [pixel * a + b for a, b in zip(scale, offset)]


def test_the_snippets_formula_is_keras_vits():
    import numpy as np

    from keras_vit.export import pixel_inputs

    imagenet = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    for normalization in (None, imagenet):
        for pixel in (0.0, 37.0, 255.0):
            expected = pixel_inputs.normalize_pixels(
                np.full((1, 1, 1, 3), pixel), normalization
            )[0, 0, 0]
            np.testing.assert_allclose(
                _normalised(pixel, None, normalization), expected, atol=1e-6
            )
    assert _normalised(37.0, [0, 255], imagenet) == 37.0


# How a photo becomes the model's height x width, from vit.json's
# input.image_resize: crop_pct null (or no image_resize: an older export,
# always fed squashed images) squashes the whole image; else it is scaled,
# aspect ratio kept, to cover floor(size / crop_pct), and the centre cut
# out. The snippets squashed every photo, whatever crop the model was
# evaluated with.


def test_kotlin_snippet_resizes_as_the_metadata_says():
    source = _block("kotlin", "class VitClassifier")
    assert (
        'input.optJSONObject("image_resize")?.let { if (it.isNull("crop_pct")) '
        'null else it.getDouble("crop_pct") }' in source
    )
    code = _code(source)  # what follows is code, not a comment
    fit = code[code.index("private fun fit(") : code.index("fun classify(")]
    squash = "cropPct ?: return Bitmap.createScaledBitmap(bitmap, width, "
    assert squash + "height, true)" in fit
    for line in (
        "floor(height / crop)",
        "floor(width / crop)",
        "minOf(h / coverH, w / coverW)",
        "if (coverH == coverW) floor(coverH * h / short) else round(h / ratio)",
        "if (coverH == coverW) floor(coverW * w / short) else round(w / ratio)",
        "round((cols - width) / 2)",
        "round((rows - height) / 2)",
        "Bitmap.createBitmap(scaled, left, top, width, height)",
    ):
        assert line in fit, line
    assert "val scaled = fit(bitmap)" in code[code.index("fun classify(") :]


def test_swift_snippet_resizes_as_the_metadata_says():
    source = _block("swift", "final class VitClassifier")
    assert "import CoreGraphics\n" in source
    assert (
        'cropPct = (input["image_resize"] as? [String: Any])?["crop_pct"] '
        "as? Double" in source
    )
    code = _code(source)  # what follows is code, not a comment
    rgb = code[code.index("func rgb(of image: CGImage)") :]
    rgb = rgb[: rgb.index("func classify(")]
    assert rgb.index("CGRect(x: 0, y: 0, width: width, height: height)") < (
        rgb.index("if let crop = cropPct {")
    )
    for line in (
        "(Double(height) / crop).rounded(.down)",
        "(Double(width) / crop).rounded(.down)",
        "min(h / coverH, w / coverW)",
        "coverH == coverW ? (coverH * h / short).rounded(.down) : "
        "(h / ratio).rounded(.toNearestOrEven)",
        "coverH == coverW ? (coverW * w / short).rounded(.down) : "
        "(w / ratio).rounded(.toNearestOrEven)",
        "((cols - Double(width)) / 2).rounded(.toNearestOrEven)",
        "((rows - Double(height)) / 2).rounded(.toNearestOrEven)",
        # y points up in Core Graphics: the crop's top is `top` rows down.
        "CGRect(x: -left, y: top + Double(height) - rows, width: cols, "
        "height: rows)",
        "context.draw(image, in: rect)",
        "filter { $0 % 4 != 3 }",
    ):
        assert line in rgb, line


def _snippets_crop(rows, columns, height, width, crop_pct):
    """The snippets' sizes and offsets, in Python: `(scaled rows, scaled
    columns, top, left)`; `round` is half to even in Kotlin, Swift's
    `.toNearestOrEven` and Python alike."""
    cover_h = math.floor(height / crop_pct)
    cover_w = math.floor(width / crop_pct)
    short = min(rows, columns)
    ratio = min(rows / cover_h, columns / cover_w)
    square = cover_h == cover_w
    scaled_rows = (
        math.floor(cover_h * rows / short) if square else round(rows / ratio)
    )
    scaled_columns = (
        math.floor(cover_w * columns / short)
        if square
        else round(columns / ratio)
    )
    top = round((scaled_rows - height) / 2)
    left = round((scaled_columns - width) / 2)
    return scaled_rows, scaled_columns, top, left


def test_the_snippets_crop_is_keras_vits():
    import tensorflow as tf

    from keras_vit.data import resize

    for rows, columns in ((256, 384), (384, 256), (333, 500), (37, 41)):
        for height, width in ((224, 224), (32, 32), (32, 48), (384, 384)):
            for crop_pct in (0.875, 0.9, 0.95, 1.0):
                setting = resize.check({"crop_pct": crop_pct})
                scaled = resize._cover_size(
                    tf.constant([rows, columns]), height, width, setting
                ).numpy()
                want = (
                    *scaled.tolist(),
                    int(resize._centre_offset(scaled[0], height)),
                    int(resize._centre_offset(scaled[1], width)),
                )
                got = _snippets_crop(rows, columns, height, width, crop_pct)
                assert got == want, (rows, columns, height, width, crop_pct)


# MediaPipe Tasks: the Kotlin and Swift snippets against the public API
# that tests/clients/make_mediapipe_api.py recorded from MediaPipe's
# sources (tests/clients/mediapipe_api.json).
API = mediapipe_snippets.API
#: Platform classes the Android snippet may import.
ANDROID_IMPORTS = {
    "android.content.Context",
    "android.graphics.Bitmap",
    "android.graphics.RectF",
}


def _mediapipe_snippet(language):
    return _block(language, "ImageClassifier")


def test_the_mediapipe_api_record_names_its_commit():
    assert API["repository"] == "google-ai-edge/mediapipe"
    assert re.fullmatch(r"[0-9a-f]{40}", API["commit"])
    kotlin, swift = API["kotlin"]["classes"], API["swift"]["classes"]
    assert {"close"} <= set(kotlin["BaseVisionTaskApi"]["methods"])
    assert kotlin["ImageClassifier"]["extends"] == "BaseVisionTaskApi"
    assert kotlin["BitmapImageBuilder"]["constructors"][0] == ["Bitmap"]
    assert {"labels": ["uiImage"], "params": ["UIImage"]} in swift["MPImage"][
        "initializers"
    ]
    assert swift["ResultCategory"]["properties"]["categoryName"] == "String?"


def test_the_kotlin_mediapipe_snippet_imports_only_what_exists():
    source = _mediapipe_snippet("kotlin")
    imports = set(re.findall(r"^import ([\w.]+)$", source, flags=re.M))
    assert imports - ANDROID_IMPORTS <= set(API["kotlin"]["imports"])
    assert mediapipe_snippets.problems("kotlin", _code(source)) == []


def test_the_swift_mediapipe_snippet_imports_the_pods_module():
    source = _mediapipe_snippet("swift")
    assert f"import {API['swift']['module']}\n" in source
    assert mediapipe_snippets.problems("swift", _code(source)) == []


#: Broken versions of the snippets (`old` replaced by `new`) and what the
#: check must say: the nine a review found passing the name-only check,
#: then names that do not exist at all.
BROKEN = [
    (
        "kotlin",
        "result.classificationResult().classifications()",
        "result.classifications()",
        "ImageClassifierResult has no public member classifications",
    ),
    (
        "kotlin",
        "createFromOptions(context, options)",
        "createFromOptions(options)",
        "createFromOptions(ImageClassifier.ImageClassifierOptions) matches",
    ),
    ("kotlin", "it.score()", "it.getScore()", "no public member getScore"),
    (
        "kotlin",
        "classifier.classify(\n        image, ImageProcessingOptions.builder()"
        ".setRegionOfInterest(roi).build())",
        "classifier.classify(image, roi)",
        "ImageClassifier.classify(MPImage, RectF) matches no overload",
    ),
    (
        "kotlin",
        "BitmapImageBuilder(bitmap).build()",
        "BitmapImageBuilder(bitmap)",
        "ImageClassifier.classify(BitmapImageBuilder) matches no overload",
    ),
    (
        "swift",
        "MPImage(uiImage: photo)",
        "MPImage(image: photo)",
        "MPImage(image: UIImage) matches no overload",
    ),
    (
        "swift",
        "classify(image: image, regionOfInterest: roi)",
        "classify(regionOfInterest: roi, image: image)",
        "classify(regionOfInterest: CGRect, image: MPImage) matches no",
    ),
    (
        "swift",
        "ImageClassifier(options: options)",
        "ImageClassifier(modelPath: options)",
        "ImageClassifier(modelPath: ImageClassifierOptions) matches no",
    ),
    (
        "swift",
        "result.classificationResult.classifications",
        "result.classifications",
        "ImageClassifierResult has no public member classifications",
    ),
    (
        "kotlin",
        "ImageClassifier.createFromOptions(",
        "ImageClassifier.createFromModelUrl(",
        "ImageClassifier has no public member createFromModelUrl",
    ),
    (
        "kotlin",
        "import com.google.mediapipe.tasks.core.BaseOptions\n",
        "",
        "BaseOptions is not declared or imported",
    ),
    (
        "swift",
        "classifier.classify(image: image)",
        "classifier.classifyImage(image)",
        "ImageClassifier has no public member classifyImage",
    ),
    (
        "swift",
        "options.maxResults",
        "options.maxResult",
        "ImageClassifierOptions has no public member maxResult",
    ),
]


@pytest.mark.parametrize("language, old, new, problem", BROKEN)
def test_the_mediapipe_check_catches_a_broken_snippet(
    language, old, new, problem
):
    source = _mediapipe_snippet(language)
    assert old in source
    found = mediapipe_snippets.problems(language, source.replace(old, new))
    assert any(problem in sentence for sentence in found), found
