"""The tree is clean under ruff's linter and formatter (pyproject.toml's
`[tool.ruff]`), so the test command holds the code to them."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ruff(*args):
    if importlib.util.find_spec("ruff") is None:
        pytest.fail(
            "ruff is not installed: it is a dev dependency, "
            'pip install -e ".[dev]"'
        )
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, ROOT],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_ruff_check_passes():
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_passes():
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
