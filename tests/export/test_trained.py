"""Quantized variants of a trained model keep its predictions.

A tiny ViT trained on digits for a few seconds is exported in every mode
and verified by default (which holds each mode to
`keras_vit.export.verification_checks.LIMITS`); the accuracy of every
variant is printed next to float32's.
"""

import json

import numpy as np
import pytest

from keras_vit import export
from keras_vit.export import runtime
from keras_vit.export import verification_checks


@pytest.fixture(scope="module")
def trained_exports(trained_model_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained_exports")
    results = {}
    for q in export.QUANTIZATIONS:
        results[q] = export.export_tflite(
            trained_model_path,
            folder / f"digits_{q}.tflite",
            quantize=q,
            representative_data="digits",
            num_verify_images=200,
        )
    return results


def test_accuracy_of_every_variant(trained_exports):
    rows = []
    for q, result in trained_exports.items():
        for c in result.report.comparisons:
            if c.source.startswith("digits (test)"):
                rows.append(
                    (
                        q,
                        c.runtime,
                        c.top1_agreement,
                        c.accuracy,
                        c.reference_accuracy,
                        c.max_abs,
                    )
                )
    print("\nmode      runtime    top-1 agree  accuracy  (keras)  max|Δ|")
    for q, name, agree, accuracy, reference, max_abs in rows:
        print(
            f"{q:9} {name:10} {agree:11.4f}  {accuracy:8.4f}  "
            f"({reference:.4f})  {max_abs:.2e}"
        )
    for q, name, agree, accuracy, reference, max_abs in rows:
        limits = verification_checks.LIMITS[q]
        if limits["top1"] is not None:
            assert agree >= limits["top1"], (q, name)
        if limits["max_abs"] is not None:
            assert max_abs <= limits["max_abs"], (q, name)
        assert reference > 0.8  # it did learn
        assert accuracy >= reference - 0.05, (q, name)


def test_dynamic_int8_floor_on_a_trained_model(trained_exports):
    report = trained_exports["dynamic"].report
    assert report.limits["top1"] == 0.97
    assert all(c.top1_agreement >= 0.97 for c in report.comparisons)


def test_class_names_come_from_the_training_run(trained_exports):
    with open(trained_exports["none"].metadata_path) as file:
        meta = json.load(file)
    assert meta["class_names"] == [str(d) for d in range(10)]


def test_uint8_input_and_output(trained_model_path, tmp_path):
    # Full integer with uint8 tensors at both ends: a camera frame goes in
    # as is. The pixels' calibrated range maps 0..255 to 0..255.
    result = export.export_tflite(
        trained_model_path,
        tmp_path / "u8.tflite",
        quantize="int8",
        representative_data="digits",
        io_dtype="uint8",
        num_verify_images=100,
    )
    print(result.report.summary())
    meta = result.metadata
    assert (
        meta["input"]["dtype"] == "uint8" and meta["output"]["dtype"] == "uint8"
    )
    q = meta["input"]["quantization"]
    assert q["scale"] == pytest.approx(1.0, rel=0.02) and q["zero_point"] == 0
    details = runtime.io_details(result.path)
    assert details["input_dtype"] == "uint8"
    pixels = np.zeros((1, 32, 32, 3), "float32")
    assert runtime.run_tflite(result.path, pixels).shape == (1, 10)
