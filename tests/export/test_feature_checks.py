"""A feature extractor's exports (`include_top=False`) are held to the
relative error of their features, not to a top-1 agreement: the argmax
over feature dimensions is no class, and one outlier channel pins it."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.export import report as report_lib
from keras_vit.export import runtime
from keras_vit.export import tflite
from keras_vit.export import verification_checks
from tests.export.helpers import TINY_EXPORT

#: The channel the audit's models share, and its value (ViTs have such).
OUTLIER, VALUE = 3, 20.0


def _features(rng, n=20, dim=32):
    """LayerNorm-like features with one large constant channel."""
    features = rng.normal(size=(n, dim))
    features[:, OUTLIER] = VALUE
    return features


def test_relative_errors_are_per_image_norms():
    expected = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    outputs = np.array([[3.0, 5.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(
        verification_checks.relative_errors(outputs, expected),
        [0.2, 0.0, np.inf, 0.0],
    )


def test_features_are_compared_by_relative_error_not_by_argmax():
    rng = np.random.default_rng(0)
    keras_features = _features(rng)
    unrelated = _features(rng)  # shares only the outlier channel
    labels = np.zeros(len(keras_features), "int64")
    # What the check measured before: the outlier wins every argmax.
    blind = verification_checks.compare(unrelated, keras_features, labels)
    assert blind.top1_agreement == 1.0
    assert (
        verification_checks.limit_failures(
            [blind], verification_checks.LIMITS["int8"]
        )
        == []
    )

    wrong = verification_checks.compare(
        unrelated, keras_features, labels, "s", "xnnpack", "features"
    )
    assert wrong.top1_agreement is None and wrong.accuracy is None
    expected = np.mean(
        np.linalg.norm(unrelated - keras_features, axis=1)
        / np.linalg.norm(keras_features, axis=1)
    )
    assert wrong.relative_error == pytest.approx(expected)
    assert 0.3 < wrong.relative_error < 0.5
    limits = verification_checks.tflite_limits("int8", output_kind="features")
    assert verification_checks.limit_failures([wrong], limits) == [
        f"xnnpack on s: relative error {wrong.relative_error:.3g} > 0.2"
    ]
    # 2% noise on every channel (a sound int8 export is within 0.1).
    noisy = keras_features * (1 + 0.02 * rng.normal(size=keras_features.shape))
    close = verification_checks.compare(
        noisy, keras_features, output_kind="features"
    )
    assert 0.005 < close.relative_error < 0.03
    assert verification_checks.limit_failures([close], limits) == []


def test_feature_limits_per_mode():
    for mode, relative in [
        ("float16", 0.01),
        ("dynamic", 0.05),
        ("int8", 0.2),
        ("int16x8", 0.15),
    ]:
        assert verification_checks.tflite_limits(
            mode, output_kind="features"
        ) == {
            "max_abs": None,
            "top1": None,
            "relative": relative,
        }
    # float32 keeps its absolute limit; classes keep theirs.
    assert verification_checks.tflite_limits(
        "none", output_kind="features"
    ) == {
        "max_abs": 1e-4,
        "top1": None,
        "relative": None,
    }
    assert verification_checks.tflite_limits("int8", output_kind="logits") == {
        "max_abs": None,
        "top1": 0.95,
    }
    limits = verification_checks.tflite_limits(
        "int8", output_kind="features", max_relative_error=0.5
    )
    assert limits["relative"] == 0.5
    with pytest.raises(ValueError, match=r"Received: min_top1_agreement=0.9"):
        verification_checks.tflite_limits("int8", 0.9, output_kind="features")
    with pytest.raises(ValueError, match=r"Received: max_relative_error=nan"):
        verification_checks.check_limits(max_relative_error=float("nan"))


def test_a_limit_on_what_was_not_measured_fails():
    features = verification_checks.compare(
        np.ones((2, 4)), np.ones((2, 4)), None, "s", "x", "features"
    )
    classes = verification_checks.compare(np.eye(2), np.eye(2), None, "s", "x")
    assert verification_checks.limit_failures([features], {"top1": 0.9}) == [
        "x on s: a top-1 floor (0.9) on features"
    ]
    assert verification_checks.limit_failures([classes], {"relative": 0.1}) == [
        "x on s: a relative-error limit (0.1) on classes"
    ]


def _report(comparisons, limits):
    return report_lib.VerificationReport(
        path="f.tflite",
        format="tflite",
        quantization="int8",
        parameters=100,
        comparisons=comparisons,
        limits=limits,
    )


def test_the_report_of_features_has_no_top1_or_accuracy():
    rng = np.random.default_rng(1)
    keras_features = _features(rng, n=4)
    comparison = verification_checks.compare(
        keras_features + 0.01,
        keras_features,
        # A dataset's labels, past the 32 features: not read for features.
        np.full(4, 40),
        "digits",
        "xnnpack",
        "features",
    )
    text = _report(
        [comparison],
        verification_checks.tflite_limits("int8", output_kind="features"),
    ).summary()
    header, row = text.splitlines()[1:3]
    assert header.split() == [
        "source",
        "runtime",
        "images",
        "max|Δ|",
        "mean|Δ|",
        "rel.",
        "error",
    ]
    assert row.split()[-1] == f"{comparison.relative_error:.4f}"
    assert "top-1" not in text and "accuracy" not in text
    assert text.splitlines()[-2:] == [
        "  limits: mean relative error <= 0.2",
        "  passed",
    ]
    # A classifier's report is as it was.
    probabilities = verification_checks.compare(
        np.eye(3), np.eye(3), np.arange(3), "digits", "xnnpack"
    )
    text = _report(
        [probabilities], verification_checks.LIMITS["int8"]
    ).summary()
    assert text.splitlines()[1].split()[-4:] == [
        "top-1",
        "agree",
        "accuracy",
        "(keras)",
    ]
    assert text.splitlines()[2].split()[-3:] == ["1.0000", "1.0000", "(1.0000)"]
    assert "limits: top-1 agreement >= 0.95" in text


def _feature_extractor(seed):
    """The audit's model: a tiny ViT without its head, one 20-valued
    channel in its features (as trained ViTs have), weights from `seed`."""
    keras.utils.set_random_seed(seed)
    config = {k: v for k, v in TINY_EXPORT.items() if k != "num_classes"}
    model = keras_vit.ViT(**config, include_top=False, name=f"feat{seed}")
    norm = model.get_layer("encoder_norm")
    beta = keras.ops.convert_to_numpy(norm.beta)
    beta[OUTLIER] = VALUE
    norm.beta.assign(beta)
    return model


def test_an_int8_feature_export_against_its_model_and_an_unrelated_one(
    tmp_path,
):
    from keras_vit.export import load_images

    model, unrelated = _feature_extractor(0), _feature_extractor(1)
    path = tmp_path / "features.tflite"
    tflite.export_tflite(
        model,
        path,
        quantize="int8",
        representative_data="digits",
        verify=False,
    )
    images = load_images("digits", (32, 32), limit=32, split="test").images
    outputs = runtime.run_tflite(path, images)
    limits = verification_checks.tflite_limits("int8", output_kind="features")
    results = {}
    for name, reference in [("own", model), ("unrelated", unrelated)]:
        expected = keras.ops.convert_to_numpy(reference(images))
        results[name] = verification_checks.compare(
            outputs, expected, None, "digits", name, "features"
        )
        # Blind before: every argmax is the outlier channel.
        assert (
            verification_checks.compare(outputs, expected).top1_agreement == 1.0
        )
    # Measured 0.08 and 0.40 (all three runtimes); the limit is 0.2.
    assert results["own"].relative_error < 0.6 * limits["relative"]
    assert results["unrelated"].relative_error > 1.5 * limits["relative"]
    assert verification_checks.limit_failures(
        list(results.values()), limits
    ) == [
        f"unrelated on digits: relative error "
        f"{results['unrelated'].relative_error:.3g} > 0.2"
    ]


def test_verify_tflite_holds_a_feature_export_to_the_feature_limit(tmp_path):
    # The audit's case end to end: an int8 export of one feature extractor
    # verified against another passed on top-1 agreement 1.0 (the outlier
    # channel's argmax); against its own model it passes.
    from keras_vit.export import verification

    model, unrelated = _feature_extractor(0), _feature_extractor(1)
    path = str(tmp_path / "features.tflite")
    tflite.export_tflite(
        model, path, quantize="int8", representative_data="digits", verify=False
    )
    reports = {
        name: verification.verify_tflite(
            path,
            reference,
            data="digits",
            num_images=32,
            verbose=0,
            raise_on_failure=False,
        )
        for name, reference in [("own", model), ("unrelated", unrelated)]
    }
    assert reports["own"].passed, reports["own"].summary()
    assert not reports["unrelated"].passed
    assert "relative error" in " ".join(reports["unrelated"].failures)
    for report in reports.values():
        assert report.limits == verification_checks.FEATURE_LIMITS["int8"]
        assert {c.top1_agreement for c in report.comparisons} == {None}
    # A top-1 floor on features is refused before anything is converted.
    with pytest.raises(ValueError, match="min_top1_agreement=0.9"):
        tflite.export_tflite(
            model,
            str(tmp_path / "other.tflite"),
            quantize="float16",
            verify_data="digits",
            min_top1_agreement=0.9,
        )
    assert sorted(os.listdir(tmp_path)) == ["features.json", "features.tflite"]
