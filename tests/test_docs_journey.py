"""Statements of the guides, README and examples that the audit of 4
December found untrue or incomplete, checked against the code."""

import glob
import importlib
import os
import re

import pytest

from keras_vit.data import datasets

# The module (`keras_vit.training.train` the attribute is the function).
train_module = importlib.import_module("keras_vit.training.train")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
README = os.path.join(ROOT, "README.md")
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")))


def _read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def _docstring(path):
    return _read(path).split('"""')[1]


def _paragraphs(text):
    """Blank-line separated paragraphs, each list item on its own, with
    their lines joined."""
    parts = re.split(r"\n\s*\n|\n(?=\s*- )", text)
    return [" ".join(p.split()) for p in parts if p.strip()]


def _texts():
    """`(path, text)` of every page a user reads: README, guides, and the
    examples' docstrings."""
    return (
        [(README, _read(README))]
        + [(p, _read(p)) for p in DOCS]
        + [(p, _docstring(p)) for p in EXAMPLES]
    )


def test_no_example_offers_a_url_as_output():
    # examples/train_multi_worker.py said --output could be "shared storage
    # or gs://", a URL train has refused since 3ae9a59.
    for path in EXAMPLES:
        # The prose, without the indented commands.
        prose = "\n".join(
            line
            for line in _docstring(path).splitlines()
            if not line.startswith("    ")
        )
        for sentence in re.split(r"\.\s", " ".join(prose.split())):
            if "--output" in sentence and "gs://" in sentence:
                assert "refused" in sentence, (path, sentence)


def test_a_gs_data_dir_is_said_to_be_for_tensorflow_datasets_names():
    # The README asked for "--data-dir gs://..." under a command of
    # --dataset folder:..., which takes no data_dir at all.
    with pytest.raises(ValueError, match="data_dir"):
        datasets.check_data_dir("folder:flower_photos", "gs://bucket/tfds")
    for path, text in _texts():
        for paragraph in _paragraphs(text):
            if "--data-dir gs://" in paragraph:
                assert "tensorflow_datasets" in paragraph, (path, paragraph)


def test_loading_a_keras_file_says_to_import_keras_vit():
    for path, text in _texts():
        for paragraph in _paragraphs(text):
            if "keras.saving.load_model" in paragraph:
                assert "import keras_vit" in paragraph, (path, paragraph)


def test_the_outputs_section_names_everything_a_run_writes():
    text = _read(os.path.join(ROOT, "docs", "training-at-scale.md"))
    section = text.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w.]+)/?`", section))
    assert set(train_module.RUN_ENTRIES) <= named, (
        set(train_module.RUN_ENTRIES) - named
    )
