"""The distribution: its name, metadata and extras, and a wheel that works
on its own in a fresh environment with only the core dependencies."""

import email
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import keras_vit
from keras_vit import extras
from keras_vit.data import datasets

# Python 3.11 and later read TOML themselves.
tomllib = pytest.importorskip("tomllib")
ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
CORE = {"keras", "tensorflow", "numpy", "safetensors"}


def _name(requirement):
    """The distribution name of a requirement string, normalised."""
    name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


def _extra_names(extra):
    """Distributions an extra installs, with extras of the package itself
    (`keras-vision-transformer[a,b]`) expanded."""
    names = set()
    for requirement in PROJECT["optional-dependencies"][extra]:
        if _name(requirement) == extras.DISTRIBUTION:
            inner = re.search(r"\[(.*)\]", requirement).group(1)
            for other in inner.split(","):
                names |= _extra_names(other.strip())
        else:
            names.add(_name(requirement))
    return names


def test_the_distribution_has_its_own_name():
    # PyPI's keras-vit is another package that also imports as keras_vit.
    assert PROJECT["name"] == extras.DISTRIBUTION == "keras-vision-transformer"
    assert PROJECT["scripts"]["keras-vit"] == "keras_vit_cli:main"


def test_every_package_of_the_tree_is_packaged():
    # The list is written out (`find` cannot name the launcher, installed
    # from keras_vit/_launcher/ as the top-level keras_vit_cli).
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"keras_vit_cli": "keras_vit/_launcher"}
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "keras_vit").rglob("__init__.py")
    }
    found = {
        "keras_vit_cli" if p == "keras_vit._launcher" else p for p in found
    }
    assert sorted(setuptools["packages"]) == sorted(found)


def test_the_core_is_what_running_a_model_needs():
    assert {_name(r) for r in PROJECT["dependencies"]} == CORE


def test_each_optional_module_comes_from_the_extra_named_for_it():
    providers = importlib.metadata.packages_distributions()
    for module, extra in extras.EXTRAS.items():
        assert extra in PROJECT["optional-dependencies"], (module, extra)
        dists = {_name(d) for d in providers[module]}
        assert dists & _extra_names(extra), (module, extra, dists)


def test_all_holds_every_extra_and_dev_holds_all():
    named = set(PROJECT["optional-dependencies"]) - {"all", "dev"}
    every = set().union(*(_extra_names(e) for e in named))
    assert _extra_names("all") == every
    assert every <= _extra_names("dev")


def test_a_missing_extra_is_named_with_its_install_command(monkeypatch):
    # `None` in sys.modules makes an import raise ImportError.
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(extras.MissingExtraError) as caught:
        datasets.digits_arrays()
    message = str(caught.value)
    assert "The 'digits' dataset needs `sklearn`" in message
    assert 'pip install "keras-vision-transformer[train]"' in message
    # The command line reports ValueErrors as `keras-vit: error: ...`.
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ImportError)


def test_pyplot_names_the_extra_when_matplotlib_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(extras.MissingExtraError, match=r"\[train\]"):
        extras.pyplot("plot_attention_distance")


def test_require_refuses_a_module_of_no_extra():
    with pytest.raises(ValueError, match=r"Received: module='scipy'"):
        extras.require("scipy", "x")


def test_licence_and_citation_files_exist():
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0" in licence
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    citation = (ROOT / "CITATION.cff").read_text()
    assert "2010.11929" in citation and "cff-version" in citation
    # The SPDX string form of `license` needs setuptools 77 (PEP 639).
    assert PYPROJECT["build-system"]["requires"] == ["setuptools>=77"]


def _run(command, cwd):
    # Without the test run's PYTHONPATH: a source tree on the path would pass
    # for an installed package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, cwd=cwd
    )
    assert done.returncode == 0, (
        command,
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    return done.stdout


@pytest.mark.slow
def test_the_wheel_works_alone_in_a_fresh_environment(tmp_path):
    """Build, check, install without dev extras, import, build a model, run
    the command; the optional dependencies stay out."""
    # Built from a copy: building writes metadata into the source tree.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            "runs",
            ".pytest_cache",
            ".hypothesis",
            ".whl",
        ),
    )
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        tmp_path,
    )
    built = sorted(p.name for p in dist.iterdir())
    wheels = [p for p in dist.iterdir() if p.suffix == ".whl"]
    assert len(wheels) == 1 and any(n.endswith(".tar.gz") for n in built), built
    _run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            *map(str, dist.iterdir()),
        ],
        tmp_path,
    )

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        metadata_name = next(
            n for n in names if n.endswith(".dist-info/METADATA")
        )
        metadata = email.message_from_bytes(wheel.read(metadata_name))
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        # The README's quickstart photo and its licence travel with it.
        assert {
            "keras_vit/data/samples/cat.jpg",
            "keras_vit/data/samples/README.md",
        } <= set(names)
        assert "keras_vit/data/imagenet_class_names.txt" in names
        assert "keras_vit_cli/__init__.py" in names
        assert not [n for n in names if "_launcher" in n]
        # The peers, the suite and the profiler run from a checkout
        # (benchmarks/); the wheel times keras_vit's own models.
        assert sorted(n for n in names if "bench" in n) == [
            "keras_vit/benchmark/__init__.py",
            "keras_vit/benchmark/flops.py",
            "keras_vit/benchmark/throughput.py",
            "keras_vit/cli/benchmark.py",
        ]
    assert metadata["Name"] == "keras-vision-transformer"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert set(metadata.get_all("Provides-Extra")) >= {
        "train",
        "export",
        "onnx",
        "openvino",
        "all",
    }

    # A bare environment, filled by this interpreter's pip (`--python`):
    # seeding it with its own pip took seconds. Without byte-compiling
    # TensorFlow's files on install, about half of the install's time;
    # what the program below imports compiles as it loads.
    env_dir = tmp_path / "env"
    _run(
        [sys.executable, "-m", "venv", "--without-pip", str(env_dir)], tmp_path
    )
    python = env_dir / "bin" / "python"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-compile",
            str(wheels[0]),
        ],
        tmp_path,
    )
    program = """
import importlib.util, sys
import numpy as np
import keras_vit
model = keras_vit.ViT(image_size=16, patch_size=8, hidden_dim=16, num_layers=1,
                      num_heads=2, mlp_dim=32, num_classes=3)
out = model.predict(np.zeros((2, 16, 16, 3), "float32"), verbose=0)
assert out.shape == (2, 3), out.shape
import os
assert os.path.isfile(keras_vit.sample_image_path("cat"))
missing = [m for m in keras_vit.extras.EXTRAS if importlib.util.find_spec(m)]
assert not missing, missing
try:
    keras_vit.data.datasets.digits_arrays()
except keras_vit.extras.MissingExtraError as error:
    assert '[train]' in str(error), error
else:
    raise AssertionError("digits without scikit-learn")
assert keras_vit.imagenet_class_names()[0] == "tench"
print("ok", keras_vit.__version__)
"""
    out = _run([str(python), "-c", program], tmp_path)
    assert out.split()[-2:] == ["ok", keras_vit.__version__]
    out = _run([str(env_dir / "bin" / "keras-vit"), "--version"], tmp_path)
    assert keras_vit.__version__ in out
    # The console script lists without TensorFlow: quiet and quick.
    for argv in (["--help"], ["presets"], ["models"]):
        done = subprocess.run(
            [
                str(env_dir / "bin" / "python"),
                "-X",
                "importtime",
                "-c",
                "import sys, keras_vit_cli; sys.exit(keras_vit_cli.main())",
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, (argv, done.stderr[-3000:])
        imported = {
            line.split("|")[-1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert not imported & {"tensorflow", "keras"}, argv
        assert not [
            n
            for n in done.stderr.splitlines()
            if not n.startswith("import time:")
        ], done.stderr[-3000:]
    out = _run([str(env_dir / "bin" / "keras-vit"), "presets"], tmp_path)
    assert "vit_b16_augreg_in21k_ft_in1k" in out


def test_the_export_extra_installs_what_verification_reads_by_default():
    # `keras-vit export` and `verify` compare on the digits unless told
    # otherwise, which scikit-learn holds; the guides name [export] for
    # them, which did not install it.
    import inspect

    from keras_vit.export import tflite

    default = inspect.signature(tflite.export_tflite).parameters["verify_data"]
    assert default.default == "digits"
    providers = importlib.metadata.packages_distributions()
    sklearn = {_name(d) for d in providers["sklearn"]}
    assert sklearn & _extra_names("export")


def test_the_extras_table_lists_what_each_extra_installs():
    table = (ROOT / "docs" / "index.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", table, flags=re.M))
    for extra, listed in rows.items():
        if extra in ("all", "dev"):
            continue
        names = {_name(n.strip()) for n in listed.split(",")}
        assert names <= _extra_names(extra), (extra, names)
    export = {_name(n.strip()) for n in rows["export"].split(",")}
    assert _extra_names("export") <= export
