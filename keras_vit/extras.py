"""Optional dependencies: which extra of the distribution brings each one,
and the one way the package imports them.

The core install (keras, tensorflow, numpy, safetensors) builds, loads and
runs models. Training, export verification, ONNX and OpenVINO need more;
`pip install "keras-vision-transformer[EXTRA]"` brings it, and a feature whose
extra is missing says which one by name. This module imports nothing heavy,
so the command line can use it before TensorFlow loads.
"""

import importlib
import importlib.util

#: The distribution's name on a package index (PyPI's `keras-vit` is an
#: unrelated Keras 2 package that also imports as `keras_vit`).
DISTRIBUTION = "keras-vision-transformer"

#: The extra (in pyproject.toml's `[project.optional-dependencies]`) that
#: installs each optional top-level module.
EXTRAS = {
    "tensorflow_datasets": "train",
    "matplotlib": "train",
    "sklearn": "train",
    "tensorboard": "train",
    "ai_edge_litert": "export",
    "tf2onnx": "onnx",
    "onnxruntime": "onnx",
    "onnx": "onnx",
    "openvino": "openvino",
    "huggingface_hub": "hub",
}


class MissingExtraError(ImportError, ValueError):
    """An optional dependency is not installed; the message names the extra
    that installs it.

    An `ImportError` (what a missing module is) and a `ValueError` (what the
    command line reports as `keras-vit: error: ...` and what earlier versions
    raised for a missing scikit-learn or tensorflow-datasets)."""


def install_hint(module):
    """The install command of `module`'s extra: from a checkout (nothing
    is published yet), and by the registry name it will have."""
    extra = EXTRAS[module.split(".")[0]]
    return (
        f'pip install ".[{extra}]" in a checkout (once released: '
        f'pip install "{DISTRIBUTION}[{extra}]")'
    )


def require(module, feature):
    """Imports and returns `module`, or raises `MissingExtraError` saying
    that `feature` needs it and which extra installs it.

    Args:
        module: the module to import, e.g. `"sklearn.datasets"`; its
            top-level package must be one of `EXTRAS`.
        feature: what needs it, for the message, e.g. `"The 'digits'
            dataset"`.
    """
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise ValueError(
            f"Expected a module of an extra ({', '.join(sorted(EXTRAS))}). "
            f"Received: module={module!r}"
        )
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{feature} needs `{top}`, which the `{EXTRAS[top]}` extra "
            f"installs: {install_hint(top)}"
        ) from error


def available(*modules):
    """Whether every one of `modules` (top-level names) is installed."""
    return all(importlib.util.find_spec(m) is not None for m in modules)


def pyplot(feature):
    """matplotlib's `pyplot` on the file-only Agg backend (figures are
    written to files, never shown), or `MissingExtraError` for `feature`."""
    matplotlib = require("matplotlib", feature)
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
