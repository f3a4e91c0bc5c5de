"""SavedModel export: reloads without keras_vit, outputs equal Keras's."""

import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import export
from keras_vit.data.images import load_image_files
from keras_vit.export import verification_checks


def test_saved_model_reloads_without_keras_vit(random_model, tmp_path):
    result = export.export_saved_model(
        random_model,
        tmp_path / "sm",
        labels=[f"c{i}" for i in range(10)],
        num_verify_images=8,
    )
    print(result.report.summary())
    assert result.report.passed
    assert {c.runtime for c in result.report.comparisons} == {
        "serving_default",
        "serving_uint8",
        "serving_bytes",
    }
    for c in result.report.comparisons:
        assert c.max_abs <= 1e-4
    # Every weight once: 4 bytes per parameter (Keras's own
    # `model.export(format="tf_saved_model")` writes them twice).
    assert 3.9 <= result.report.bytes_per_parameter <= 4.5
    with open(os.path.join(tmp_path, "sm", "keras_vit.json")) as file:
        meta = json.load(file)
    assert meta["class_names"][0] == "c0"
    assert meta["input"]["shape"] == [None, 32, 32, 3]
    assert meta["signatures"] == {
        "serving_default": {"input": "images", "dtype": "float32"},
        "serving_uint8": {"input": "images", "dtype": "uint8"},
        "serving_bytes": {"input": "image_bytes", "dtype": "string"},
    }

    # The verification above ran every signature in a fresh interpreter
    # that never imported keras_vit (it fails if one did); here they serve
    # random pixels and a JPEG file, loaded as a server loads them.
    images = (
        np.random.default_rng(1)
        .integers(0, 256, (4, 32, 32, 3))
        .astype("float32")
    )
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    assert sorted(loaded.signatures) == [
        "serving_bytes",
        "serving_default",
        "serving_uint8",
    ]

    def served(name, **inputs):
        outputs = loaded.signatures[name](**inputs)
        return outputs["probabilities"].numpy()

    with open(keras_vit.sample_image_path(), "rb") as file:
        jpeg = file.read()
    expected = random_model.predict(images, verbose=0)
    batch3 = served("serving_default", images=tf.constant(images[:3]))
    batch1 = served("serving_default", images=tf.constant(images[3:4]))
    uint8 = served("serving_uint8", images=tf.constant(images.astype("uint8")))
    np.testing.assert_allclose(batch3, expected[:3], atol=1e-5)
    np.testing.assert_allclose(batch1, expected[3:4], atol=1e-5)
    np.testing.assert_allclose(uint8, expected, atol=1e-5)
    # A JPEG file read as `keras-vit predict` reads it (the model's
    # image_resize, here the default squash).
    files = load_image_files([keras_vit.sample_image_path()] * 2, (32, 32))
    np.testing.assert_allclose(
        served("serving_bytes", image_bytes=tf.constant([jpeg, jpeg])),
        random_model.predict(files, verbose=0),
        atol=1e-5,
    )


def test_saved_model_replaces_an_earlier_export_whole(random_model, tmp_path):
    target = tmp_path / "sm"
    export.export_saved_model(random_model, target, verify=False)
    (target / "variables" / "stale.txt").write_text(
        "old"
    )  # inside what we wrote
    export.export_saved_model(random_model, target, verify=False)
    assert not (target / "variables" / "stale.txt").exists()
    assert (target / "saved_model.pb").exists()
    assert sorted(os.listdir(tmp_path)) == ["sm"]
    # The usual permissions, not a temporary folder's private ones.
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(target).st_mode & 0o777 == 0o777 & ~umask


def test_a_folder_that_is_not_an_export_is_replaced_only_with_overwrite(
    random_model, tmp_path
):
    target = tmp_path / "sm"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(
        ValueError,
        match="not a SavedModel exported by keras_vit.*overwrite=True",
    ):
        export.export_saved_model(random_model, target, verify=False)
    assert os.listdir(target) == ["notes.txt"]
    export.export_saved_model(
        random_model, target, verify=False, overwrite=True
    )
    assert not (target / "notes.txt").exists()
    assert (target / "saved_model.pb").exists()
    assert sorted(os.listdir(tmp_path)) == ["sm"]


def test_a_keras_quantized_model_serves_and_is_refused_by_tflite(
    random_model, tmp_path
):
    # `model.quantize("int8")` keeps int8 kernels (one byte a weight):
    # SavedModel serves them (verified against Keras, the size check
    # counting bytes as the model holds them); LiteRT's converter cannot take
    # them, and the TFLite export says what to do instead, writing nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers without weights to quantize
        random_model.quantize("int8")
    result = export.export_saved_model(
        random_model, tmp_path / "sm", num_verify_images=4
    )
    assert result.report.passed, result.report.summary()
    assert result.report.bytes_per_parameter < 3
    with pytest.raises(
        ValueError, match="quantized in Keras.*projection.*quantize='dynamic'"
    ):
        export.export_tflite(random_model, tmp_path / "int8.tflite")
    assert sorted(os.listdir(tmp_path)) == ["sm"]


def test_a_mixed_precision_model_verifies_within_its_precision(
    random_model, tmp_path
):
    # A SavedModel keeps the model's mixed policy (serving on GPUs / TPUs),
    # and its bfloat16 rounding differs from Keras's by more than float32's
    # 1e-4 (1.5e-2 on the demo's model): every such export used to fail.
    mixed = keras_vit.ViT.from_config(
        {**random_model.get_config(), "dtype": "mixed_bfloat16"}
    )
    mixed.set_weights(random_model.get_weights())
    result = export.export_saved_model(
        mixed, tmp_path / "sm", num_verify_images=8
    )
    assert result.report.passed
    assert result.report.limits["max_abs"] == 5e-2
    # The metadata inside says what it was checked on: the default digits.
    with open(tmp_path / "sm" / "keras_vit.json") as file:
        checked = json.load(file)["verified_on"]
    assert checked == result.metadata["verified_on"] == result.report.data()
    assert [d["source"] for d in checked] == ["digits (test)"]
    # Still the mixed model: served, it differs from the float32 one by
    # more than a float32 export may, as Keras's does.
    images = export.load_images("digits", (32, 32), limit=8).images
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures
    served = serve["serving_default"](images=tf.constant(images))
    difference = served["probabilities"].numpy() - random_model.predict(
        images, verbose=0
    )
    float32_limit = verification_checks.LIMITS["saved_model"]["max_abs"]
    assert np.abs(difference).max() > float32_limit


def test_a_dynamic_image_size_sidecar_records_any_size(tmp_path):
    # The signatures take any height and width; the sidecar said
    # [None, 32, 32, 3]. `height` and `width` stay the size the model was
    # built for, which `keras-vit predict` resizes images to.
    from keras_vit.cli import predict
    from tests.export.helpers import TINY_EXPORT
    from tests.helpers import random_images
    from tests.helpers import randomize_weights

    model = keras_vit.ViT(**TINY_EXPORT, dynamic_image_size=True)
    randomize_weights(model, seed=1)
    result = export.export_saved_model(model, tmp_path / "sm", verify=False)
    with open(tmp_path / "sm" / "keras_vit.json") as file:
        meta = json.load(file)
    assert meta["input"]["shape"] == [None, None, None, 3]
    assert (meta["input"]["height"], meta["input"]["width"]) == (32, 32)
    assert meta == json.loads(json.dumps(result.metadata))
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures[
        "serving_default"
    ]
    spec = serve.structured_input_signature[1]["images"]
    assert spec.shape.as_list() == meta["input"]["shape"]
    images = random_images((2, 48, 40, 3), seed=2)
    np.testing.assert_allclose(
        serve(images=tf.constant(images))["probabilities"].numpy(),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
    photo = str(tmp_path / "photo.png")
    tf.io.write_file(photo, tf.io.encode_png(images[0].astype("uint8")))
    probabilities = predict.load_predictor(tmp_path / "sm").predict([photo])
    assert probabilities.shape == (1, 10)


def test_served_image_files_are_resized_as_the_model_says(tmp_path):
    # serving_bytes decodes and resizes inside the SavedModel as the
    # model's image_resize says (here timm's crop), as keras_vit reads the
    # file; the whole photo squashed gives other outputs.
    from tests.export.helpers import TINY_EXPORT
    from tests.helpers import randomize_weights

    crop = {"crop_pct": 0.9, "interpolation": "bicubic"}
    model = keras_vit.ViT(**TINY_EXPORT, image_resize=crop)
    randomize_weights(model, seed=2)
    result = export.export_saved_model(
        model, tmp_path / "sm", num_verify_images=8
    )
    assert result.report.passed  # its verification ran serving_bytes
    assert "serving_bytes" in {c.runtime for c in result.report.comparisons}
    path = keras_vit.sample_image_path()
    with open(path, "rb") as file:
        jpeg = file.read()
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures
    served = serve["serving_bytes"](image_bytes=tf.constant([jpeg]))
    served = served["probabilities"].numpy()
    size = model.image_size
    cropped = load_image_files([path], size, image_resize=model.image_resize)
    np.testing.assert_allclose(
        served, model.predict(cropped, verbose=0), atol=1e-5
    )
    squashed = model.predict(load_image_files([path], size), verbose=0)
    assert np.abs(served - squashed).max() > 1e-3


@pytest.mark.parametrize(
    "kwargs", [{"include_preprocessing": False}, {"num_channels": 1}]
)
def test_no_image_files_for_a_model_that_takes_no_rgb_pixels(kwargs):
    # Normalised inputs, or one channel: the caller prepares them.
    from keras_vit.export import serving_signatures
    from tests.export.helpers import TINY_EXPORT

    model = keras_vit.ViT(**TINY_EXPORT, **kwargs)
    assert "serving_bytes" not in serving_signatures.saved_model_signatures(
        model
    )
