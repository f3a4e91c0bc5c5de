"""`keras-vit benchmark-export` and `export` refuse a flag they would
ignore, before any model is loaded."""

import pytest

from keras_vit import cli
from keras_vit import export


@pytest.fixture
def calls(monkeypatch):
    """The `benchmark_export` calls of the command, which loads and times
    nothing."""
    found = []
    monkeypatch.setattr(export, "inference_model", lambda *a, **k: "model")
    monkeypatch.setattr(
        export, "benchmark_export", lambda *a, **k: found.append(k)
    )
    return found


def test_representative_data_without_a_calibrated_variant_is_refused(
    calls, capsys
):
    # It defaulted to "digits", so a source given could not be told from
    # the default, and was dropped without a word when no int8 / int16x8
    # variant was timed.
    code = cli.main(
        [
            "benchmark-export",
            "ViT_Ti16",
            "--quantize",
            "none",
            "dynamic",
            "--representative-data",
            "calibration.npz",
        ]
    )
    error = capsys.readouterr().err
    assert code == 2 and calls == []
    assert "calibrates int8 and int16x8" in error
    assert "Received: --representative-data calibration.npz" in error


def test_representative_data_reaches_the_calibrated_variants(calls):
    for quantize in (["int8"], ["none", "int16x8"]):
        argv = ["benchmark-export", "ViT_Ti16", "--quantize", *quantize]
        assert cli.main([*argv, "--representative-data", "c.npz"]) == 0
        assert calls.pop()["representative_data"] == "c.npz"
        # Not given: benchmark_export's own default (digits).
        assert cli.main(argv) == 0
        assert "representative_data" not in calls.pop()
