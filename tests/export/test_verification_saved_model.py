"""`verify_saved_model`'s findings when the fresh process fails or its
outputs are off, without a SavedModel export: the process is faked."""

import json
import subprocess

import numpy as np
import pytest

from keras_vit.export import verification


@pytest.fixture
def folder(tmp_path):
    """A folder `verify_saved_model` takes for a SavedModel."""
    (tmp_path / "saved_model.pb").write_bytes(b"")
    (tmp_path / "variables").mkdir()
    return str(tmp_path)


def _verify(folder, model, run, monkeypatch):
    monkeypatch.setattr(verification.subprocess, "run", run)
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (3, 32, 32, 3))
        .astype("float32")
    )
    return verification.verify_saved_model(
        folder, model, data=images, raise_on_failure=False
    )


def test_a_failed_fresh_process_is_a_failure_with_its_error(
    folder, random_model, monkeypatch
):
    def run(command, **kwargs):
        return subprocess.CompletedProcess(
            command, 1, "", "Op type not registered 'Foo'"
        )

    report = _verify(folder, random_model, run, monkeypatch)
    assert (
        "tf.saved_model.load in a fresh process failed:\nOp type not "
        "registered 'Foo'" in (report.failures)
    )
    assert report.comparisons == []
    with pytest.raises(
        verification.VerificationError, match="fresh process failed"
    ):
        verification.verify_saved_model(
            folder, random_model, data=np.zeros((1, 32, 32, 3))
        )


def test_outputs_off_and_keras_vit_imported_are_failures(
    folder, random_model, monkeypatch
):
    def run(command, **kwargs):
        # The program's last two arguments: the images in, the outputs out.
        images_path, out_path = command[-2:]
        images = np.load(images_path)
        right = verification._reference_outputs(random_model, images)
        rounded = verification._reference_outputs(
            random_model, np.round(images)
        )
        np.savez(
            out_path,
            serving_default=right,
            serving_default_single=right[:1] + 0.5,
            serving_uint8=rounded + 0.5,
            serving_uint8_single=rounded[:1],
        )
        info = {
            "signatures": ["serving_default", "serving_uint8"],
            "output_key": "output_0",
            "keras_vit_imported": True,
        }
        return subprocess.CompletedProcess(
            command, 0, json.dumps(info) + "\n", ""
        )

    report = _verify(folder, random_model, run, monkeypatch)
    assert [c.runtime for c in report.comparisons] == [
        "serving_default",
        "serving_uint8",
    ]
    assert report.comparisons[0].max_abs < 1e-6
    assert report.comparisons[1].max_abs == pytest.approx(0.5, abs=1e-6)
    failures = report.failures
    assert "loading the SavedModel imported keras_vit" in failures
    assert "serving_default on a batch of one: max |Δ| 0.5" in failures
    assert any(
        f.startswith("serving_uint8 on array: max |Δ| 0.5 >") for f in failures
    )
    assert not any(
        f.startswith("serving_uint8 on a batch of one") for f in failures
    )


def _faked(signatures, model):
    """A fake of the fresh process: Keras's own outputs for each of
    `signatures` (a list of names), which it says the SavedModel has."""

    def run(command, **kwargs):
        images_path, out_path = command[-2:]
        images = np.load(images_path)
        arrays = {}
        for name in signatures:
            x = images if name == "serving_default" else np.round(images)
            out = verification._reference_outputs(model, x)
            arrays.update({name: out, name + "_single": out[:1]})
        np.savez(out_path, **arrays)
        info = {
            "signatures": sorted(signatures),
            "output_key": "probabilities",
            "keras_vit_imported": False,
        }
        return subprocess.CompletedProcess(
            command, 0, json.dumps(info) + "\n", ""
        )

    return run


def test_the_signatures_are_those_an_export_of_the_model_has(
    folder, random_model, monkeypatch
):
    # A model that takes RGB pixels has serving_uint8 and serving_bytes
    # too: missing, they fail.
    report = _verify(
        folder,
        random_model,
        _faked(["serving_default"], random_model),
        monkeypatch,
    )
    # (The fake folder's empty variables fail the weight check too.)
    found = [f for f in report.failures if "signature" in f]
    assert found == [
        "the SavedModel has no serving_uint8 signature",
        "the SavedModel has no serving_bytes signature",
    ]
    assert [c.runtime for c in report.comparisons] == ["serving_default"]
    # A model built with include_preprocessing=False has no serving_uint8
    # (uint8 cannot hold its normalised inputs): one there is a failure,
    # and it is not run on the rounded (wrapped) inputs.
    import keras_vit
    from tests.export.helpers import TINY_EXPORT

    raw = keras_vit.ViT(**TINY_EXPORT, include_preprocessing=False)
    monkeypatch.setattr(
        verification.subprocess,
        "run",
        _faked(["serving_default", "serving_uint8"], raw),
    )
    inputs = np.linspace(-1, 1, 3 * 32 * 32 * 3, dtype="float32")
    report = verification.verify_saved_model(
        folder, raw, data=inputs.reshape(3, 32, 32, 3), raise_on_failure=False
    )
    assert [c.runtime for c in report.comparisons] == ["serving_default"]
    (found,) = [f for f in report.failures if "signature" in f]
    assert found.startswith(
        "the SavedModel has a serving_uint8 signature, which an export of "
        "this model does not have"
    )
