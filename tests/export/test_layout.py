"""Where the export names live: `keras_vit.export`'s public surface, the
checks as pure functions, and the export/ scripts and their README."""

import ast
import os
import re
import runpy
import sys

import numpy as np
import pytest

from keras_vit import export
from keras_vit.export import graph as graph_lib
from keras_vit.export import runtime
from keras_vit.export import verification
from keras_vit.export import verification_checks

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
SCRIPTS = os.path.join(ROOT, "export")
PACKAGE = os.path.join(ROOT, "keras_vit", "export")

#: The modules of `keras_vit.export`, bottom to top: a module imports only
#: modules of lower layers (readers, data types, LiteRT, the checks ->
#: the verify entry points -> the formats -> the latency tables -> the
#: package's face -> the command line).
LAYERS = {
    "loaded_model": 0,
    "float32_copy": 0,
    "model_io": 0,
    "pixel_inputs": 0,
    "runtime": 0,
    "report": 0,
    # Image sources, made into a model's inputs (`pixel_inputs`).
    "representative": 1,
    "serving_signatures": 1,
    # TFLite Metadata, which the graph reader and the sidecar reader read.
    "tflite_metadata": 1,
    "graph": 2,
    "metadata": 2,
    "verification_checks": 3,
    "verification": 4,
    "tflite": 5,
    "saved_model": 5,
    "onnx": 5,
    "openvino": 5,
    "latency": 6,
    "tf_latency": 6,
    "__init__": 7,
}

#: Files whose long functions another part of issue 23 splits (none left).
LONG_FUNCTIONS_ELSEWHERE = set()

#: What the README documents for users of `keras_vit.export`: the exports,
#: `verify`, what they return and raise, the quantization modes, reading an
#: export's metadata; `inference_model` and `load_images` (image sources) until
#: their own homes are settled.
PUBLIC = {
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
}


def _read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def test_the_public_surface_is_what_the_readme_documents():
    assert set(export.__all__) == PUBLIC
    for name in export.__all__:
        getattr(export, name)
    # Every `keras_vit.export.NAME` the README names exists, as a public
    # name or a module of the package.
    named = re.findall(
        r"keras_vit\.export\.(\w+)", _read(os.path.join(ROOT, "README.md"))
    )
    assert named
    for name in named:
        assert name in PUBLIC or os.path.isfile(
            os.path.join(ROOT, "keras_vit", "export", f"{name}.py")
        ), name


def test_unknown_names_are_attribute_errors_and_modules_still_import():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        export.nothing_here  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        verification.nothing_here  # noqa: B018
    from keras_vit.export import representative

    assert representative.load_images is export.load_images


def _graph(ops, weight_bytes=4000, weight_types=("FLOAT32",), ranges=None):
    return graph_lib.Graph(
        ops=[
            graph_lib.Op(name, custom, inputs, (), outputs)
            for name, custom, inputs, outputs in ops
        ],
        weight_bytes=weight_bytes,
        weight_types={t: weight_bytes for t in weight_types},
        file_bytes=weight_bytes + 1000,
        ranges=ranges or {},
    )


def test_op_checks_name_each_fault():
    float32 = [("FULLY_CONNECTED", False, ("FLOAT32",), ("FLOAT32",))]
    assert verification_checks.op_failures(_graph(float32), "none") == []
    flex = _graph(
        [
            *float32,
            ("FlexExtractImagePatches", True, ("FLOAT32",), ("FLOAT32",)),
            ("VAR_HANDLE", False, (), ("RESOURCE",)),
        ]
    )
    failures = verification_checks.op_failures(flex, "none")
    assert len(failures) == 2
    assert (
        "Flex or custom ops" in failures[0]
        and "FlexExtractImagePatches (x1)" in failures[0]
    )
    assert "VAR_HANDLE x1" in failures[1] and "not frozen" in failures[1]
    # An int8 file with a float op inside, and a constant activation.
    int8 = _graph(
        [
            ("QUANTIZE", False, ("FLOAT32",), ("INT8",)),
            ("FULLY_CONNECTED", False, ("INT8",), ("INT8",)),
            ("NEG", False, ("FLOAT32",), ("FLOAT32",)),
        ],
        weight_types=("INT8",),
        ranges={"head": 2e-6, "block": 0.5},
    )
    failures = verification_checks.op_failures(int8, "int8")
    assert "float ops inside a fully quantized graph: NEG (x1)" in failures
    assert any(
        f.startswith("1 quantized activation(s)") and "head" in f
        for f in failures
    )
    # The file says int8; the caller said float16.
    assert any(
        "say quantization 'int8', not 'float16'" in f
        for f in verification_checks.op_failures(int8, "float16")
    )


def test_weight_checks_compare_bytes_with_parameters():
    assert verification_checks.weight_failures(4000, 1000, "none") == []
    assert verification_checks.weight_failures(1000, 1000, "dynamic") == []
    (failure,) = verification_checks.weight_failures(100, 1000, "none")
    assert "0.10 bytes/parameter; expected 3.8-4.4 for 'none'" in failure
    assert failure.endswith("the weights are missing")
    (failure,) = verification_checks.weight_failures(
        3000, 1000, "float16"
    )  # too many, not missing
    assert "3.00 bytes/parameter" in failure and "missing" not in failure
    assert (
        verification_checks.saved_model_weight_failures(4000, 1000, 4000) == []
    )
    (failure,) = verification_checks.saved_model_weight_failures(
        100, 1000, 4000
    )
    assert (
        "100 bytes of variables for 1,000 parameters (4,000 bytes in Keras)"
        in failure
    )


def test_limits_and_comparisons():
    assert verification_checks.tflite_limits("int8") == {
        "max_abs": None,
        "top1": 0.95,
    }
    assert verification_checks.tflite_limits("none", 0.5, 1e-3) == {
        "max_abs": 1e-3,
        "top1": 0.5,
    }
    assert verification_checks.saved_model_limits([])["max_abs"] == 1e-4
    assert (
        verification_checks.saved_model_limits(["bfloat16"])["max_abs"] == 5e-2
    )
    assert (
        verification_checks.saved_model_limits(["bfloat16"], max_abs=0.1)[
            "max_abs"
        ]
        == 0.1
    )
    expected = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    close = verification_checks.compare(
        expected + 1e-5,
        expected,
        labels=np.array([0, 1, 1]),
        source="s",
        runtime="xnnpack",
    )
    assert close.num_images == 3 and close.top1_agreement == 1.0
    assert close.max_abs == pytest.approx(
        1e-5
    ) and close.accuracy == pytest.approx(2 / 3)
    flipped = verification_checks.compare(
        expected[:, ::-1], expected, source="s", runtime="builtin"
    )
    broken = verification_checks.compare(
        np.full_like(expected, np.nan),
        expected,
        source="s",
        runtime="reference",
    )
    assert (
        verification_checks.limit_failures(
            [close], verification_checks.LIMITS["none"]
        )
        == []
    )
    assert verification_checks.limit_failures(
        [flipped, broken], {"max_abs": 1e-4, "top1": 0.5}
    ) == [
        "builtin on s: max |Δ| 0.8 > 0.0001",
        "builtin on s: top-1 agreement 0.0000 < 0.5",
        "reference on s: NaN or infinite outputs",
    ]


def test_runtime_names_its_interpreters():
    with pytest.raises(ValueError, match=r"Received: runtime='gpu'"):
        runtime.load_interpreter("any.tflite", "gpu")


def _scripts_in_readme():
    """`{script: sub-command}` from export/README.md's table."""
    rows = re.findall(
        r"^\| `(\w+\.py)[^`]*` \| `keras-vit ([\w-]+)[^`]*` \|",
        _read(os.path.join(SCRIPTS, "README.md")),
        flags=re.M,
    )
    return dict(rows)


def test_every_export_script_is_in_its_readme():
    scripts = sorted(f for f in os.listdir(SCRIPTS) if f.endswith(".py"))
    assert scripts and sorted(_scripts_in_readme()) == scripts


@pytest.mark.parametrize(
    "script, command", sorted(_scripts_in_readme().items())
)
def test_export_scripts_are_documented_entry_points(
    script, command, monkeypatch, capsys
):
    path = os.path.join(SCRIPTS, script)
    doc = runpy.run_path(path)["__doc__"]
    assert f"python export/{script} " in doc  # an example command line
    assert f"keras-vit {command}" in doc
    monkeypatch.setattr(sys, "argv", [path, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(path, run_name="__main__")
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: keras-vit {command} ")
    assert "MODEL" in out or "EXPORTED" in out


def test_the_export_readme_points_to_the_main_one_and_copies_nothing():
    page = _read(os.path.join(SCRIPTS, "README.md"))
    main = _read(os.path.join(ROOT, "README.md"))
    copied = [
        line
        for line in page.splitlines()
        if len(line.strip()) > 30 and line.strip() in main
    ]
    assert copied == []
    (anchor,) = re.findall(r"\(\.\./README\.md#([\w-]+)\)", page)
    headings = [
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", main, flags=re.M)
    ]
    assert anchor in headings
    assert anchor.startswith("export")


def _export_imports(path):
    """The `keras_vit.export` modules `path` imports, at any depth (a
    function-level import counts: it is still a dependency)."""
    names = set()
    for node in ast.walk(ast.parse(_read(path))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "keras_vit.export"
        ):
            # A module of the package, or a name of its face.
            names.update(
                a.name
                if os.path.isfile(os.path.join(PACKAGE, f"{a.name}.py"))
                else "__init__"
                for a in node.names
            )
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(_export_module(node.module))
        elif isinstance(node, ast.Import):
            for a in node.names:
                names.update(_export_module(a.name))
    return names


def _export_module(module):
    """`{name}` of the `keras_vit.export` module `module` is, or `set()`."""
    parts = module.split(".")
    if parts[:2] != ["keras_vit", "export"]:
        return set()
    return {parts[2] if len(parts) > 2 else "__init__"}


def test_export_modules_import_only_lower_layers():
    modules = sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py"))
    assert [m for m in modules if m not in LAYERS] == [], "add it to LAYERS"
    upward = [
        f"{module} -> {name}"
        for module in modules
        for name in sorted(
            _export_imports(os.path.join(PACKAGE, f"{module}.py"))
        )
        if name != module and LAYERS[name] >= LAYERS[module]
    ]
    assert upward == []


def _long_functions(path, limit=80):
    """`name (lines)` of the functions in `path` over `limit` lines that
    give no reason in a comment of their own."""
    source = _read(path)
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            body = lines[node.lineno - 1 : node.end_lineno]
            if length > limit and not any(
                line.strip().startswith("#") for line in body
            ):
                found.append(f"{node.name} ({length})")
    return found


def test_export_functions_are_short_or_say_why():
    paths = [
        os.path.join(PACKAGE, f)
        for f in os.listdir(PACKAGE)
        if f.endswith(".py")
    ]
    paths += [
        os.path.join(SCRIPTS, f)
        for f in os.listdir(SCRIPTS)
        if f.endswith(".py")
    ]
    long = {
        os.path.relpath(path, ROOT): _long_functions(path)
        for path in sorted(paths)
        if os.path.relpath(path, ROOT) not in LONG_FUNCTIONS_ELSEWHERE
    }
    assert {path: names for path, names in long.items() if names} == {}


@pytest.mark.parametrize(
    "script", sorted(f for f in os.listdir(SCRIPTS) if f.endswith(".py"))
)
def test_export_scripts_are_thin(script):
    # A docstring, the imports of `keras_vit.cli.main` (or of
    # `export_as`, which sets the export's format), and the call.
    tree = ast.parse(_read(os.path.join(SCRIPTS, script)))
    assert ast.get_docstring(tree)
    kinds = [type(node).__name__ for node in tree.body[1:]]
    assert kinds == ["Import", "ImportFrom", "If"]
    imported = {a.name for node in tree.body[1:3] for a in node.names}
    assert imported in ({"sys", "main"}, {"sys", "export_as"})
    assert tree.body[2].module == "keras_vit.cli"
