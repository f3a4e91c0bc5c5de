"""The Android and iOS snippets of docs/export-and-mobile.md, checked as far
as this machine can: every type they use is imported, the Swift one uses
only TensorFlowLiteSwift API that exists and dequantizes integer outputs,
and, where `kotlinc` is installed, the Kotlin one compiles against stubs
of the Android, org.json and LiteRT classes (tests/mobile_stubs/).
"""

import os
import re
import shutil
import subprocess

import pytest

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
    "Float",
    "Float32",
    "Int",
    "JSONSerialization",
    "String",
    "UInt8",
    "Any",
    "Array",
    "Bool",
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
