"""What a classifier returns, from its activation in every spelling
`keras_vit.ViT` takes: the SavedModel's output key, the sidecar's
`output.kind`, and whether `keras-vit predict` takes a softmax all follow
it. A `keras.activations.linear` head read as "outputs" had its logits
reported as probabilities (rows summing to -1.35)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import export
from keras_vit.cli import predict
from keras_vit.data.images import load_image_files
from keras_vit.export import model_io
from tests.export.helpers import TINY_EXPORT
from tests.helpers import random_images
from tests.helpers import randomize_weights

SPELLINGS = {
    "probabilities": [
        lambda: "softmax",
        lambda: keras.activations.softmax,
        lambda: keras.layers.Softmax(),
        lambda: keras.layers.Softmax(axis=1),
        lambda: keras.layers.Activation("softmax"),
        lambda: keras.layers.Activation(keras.activations.softmax),
    ],
    "logits": [
        lambda: None,
        lambda: "linear",
        lambda: keras.activations.linear,
        lambda: keras.layers.Activation("linear"),
        lambda: keras.layers.Identity(),
    ],
    "outputs": [
        lambda: "sigmoid",
        lambda: keras.activations.relu,
        lambda: keras.layers.Activation("tanh"),
        lambda: keras.layers.Softmax(axis=0),
    ],
}
CASES = [(kind, i) for kind, spellings in SPELLINGS.items() for i in spellings]


def _model(activation, seed=0):
    model = keras_vit.ViT(**TINY_EXPORT, classifier_activation=activation)
    randomize_weights(model, seed=seed, scale=0.2)
    return model


@pytest.mark.parametrize(
    "kind,spelling",
    CASES,
    ids=[f"{kind}{i}" for kind, s in SPELLINGS.items() for i in range(len(s))],
)
def test_every_spelling_gives_its_kind_before_and_after_a_reload(
    kind, spelling, tmp_path
):
    model = _model(spelling())
    assert model_io.output_kind(model) == kind
    model.save(tmp_path / "m.keras")
    reloaded = keras.saving.load_model(tmp_path / "m.keras")
    assert model_io.output_kind(reloaded) == kind


def test_a_feature_extractor_is_features_whatever_its_activation():
    model = keras_vit.ViT(
        **TINY_EXPORT,
        include_top=False,
        classifier_activation=keras.activations.softmax,
    )
    assert model_io.output_kind(model) == "features"


def _photo(tmp_path):
    pixels = random_images((1, 32, 32, 3), seed=4)[0].astype("uint8")
    path = str(tmp_path / "photo.png")
    tf.io.write_file(path, tf.io.encode_png(pixels))
    return path


def _softmax(x):
    x = np.exp(x - x.max(axis=-1, keepdims=True))
    return x / x.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    "activation,kind",
    [
        (keras.activations.linear, "logits"),
        (keras.activations.softmax, "probabilities"),
    ],
)
def test_saved_model_key_sidecar_and_predict_follow_the_function(
    activation, kind, tmp_path
):
    model = _model(activation)
    photo = _photo(tmp_path)
    result = export.export_saved_model(model, tmp_path / "sm", verify=False)
    assert result.metadata["output"]["kind"] == kind
    assert result.metadata["output_key"] == kind
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    outputs = loaded.signatures["serving_default"].structured_outputs
    assert list(outputs) == [kind]
    probabilities = predict.load_predictor(tmp_path / "sm").predict([photo])
    pixels = load_image_files([photo], (32, 32), 3)
    raw = model.predict(pixels, verbose=0).astype("float64")
    expected = _softmax(raw) if kind == "logits" else raw
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "activation,kind",
    [
        (lambda: keras.layers.Activation("linear"), "logits"),
        (lambda: keras.layers.Softmax(), "probabilities"),
    ],
)
def test_tflite_sidecar_follows_a_layer(activation, kind, tmp_path):
    result = export.export_tflite(
        _model(activation()), tmp_path / "m.tflite", verify=False
    )
    assert result.metadata["output"]["kind"] == kind
    photo = _photo(tmp_path)
    probabilities = predict.load_predictor(tmp_path / "m.tflite").predict(
        [photo]
    )
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)
