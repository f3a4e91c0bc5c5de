import inspect
import math
import os
import re
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from tests import reference
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights


def _tiny(**kwargs):
    return keras_vit.ViT(**{**TINY, **kwargs})


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"pooling": "gap"},
        {"representation_size": 12, "classifier_activation": None},
        {"image_size": (16, 40), "layer_norm_epsilon": 1e-5},
        {"include_top": False},
        {"include_top": False, "pooling": None},
        {"include_preprocessing": False, "position_embedding": "none"},
        {"position_embedding": "relative"},
        {
            "position_embedding": "relative",
            "pooling": "gap",
            "image_size": (16, 24),
        },
    ],
)
def test_matches_numpy_reference(kwargs):
    model = _tiny(**kwargs)
    randomize_weights(model)
    images = random_images((2, *model.image_size, 3))
    if not model.include_preprocessing:
        images = images / 127.5 - 1.0
    out = model.predict(images, verbose=0)
    expected = reference.vit(images, model)
    np.testing.assert_allclose(out, expected, atol=1e-4)


def _float64_model(**kwargs):
    """A tiny float64 ViT with random weights, and float64 images."""
    model = _tiny(dtype="float64", representation_size=12, **kwargs)
    randomize_weights(model)
    images = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3))
    return model, images


@pytest.mark.parametrize("activation", ["gelu", "quick_gelu"])
@pytest.mark.parametrize(
    "training",
    [False, True],  # True: the training steps' fused functions (no dropout)
)
def test_a_float64_model_computes_in_float64(training, activation):
    # The images, the rescaling's numbers, the LayerNorms' statistics, the
    # softmaxes, the GELUs and the predictions were float32: 1e-7 off.
    model, images = _float64_model(activation=activation)
    out = model(images, training=training)
    assert keras.backend.standardize_dtype(out.dtype) == "float64"
    expected = reference.vit(images, model)
    np.testing.assert_allclose(out.numpy(), expected, rtol=0, atol=1e-13)


def test_a_float64_training_step_differentiates_in_float64():
    # The custom gradients (LayerNorm + Dense, attention, GELU + Dense,
    # LayerNorm) against a central difference along a random direction in
    # weight space: 2e-11 apart in float64; float32 statistics gave 1e-6.
    import tensorflow as tf

    model, images = _float64_model()
    weights = model.trainable_weights
    rng = np.random.default_rng(1)
    direction = [rng.normal(size=w.shape) for w in weights]
    start = [w.numpy() for w in weights]
    mix = rng.normal(size=(2, model.num_classes))

    def loss():
        return tf.reduce_sum(mix * model(images, training=True))

    with tf.GradientTape() as tape:
        value = loss()
    grads = tape.gradient(value, weights)
    assert {g.dtype for g in grads} == {tf.float64}
    slope = sum(np.sum(g.numpy() * d) for g, d in zip(grads, direction))
    step, ends = 1e-6, []
    for sign in (1.0, -1.0):
        for w, w0, d in zip(weights, start, direction):
            w.assign(w0 + sign * step * d)
        ends.append(float(loss()))
    np.testing.assert_allclose(
        slope, (ends[0] - ends[1]) / (2 * step), rtol=1e-9
    )


def test_output_shapes_and_dtypes():
    images = random_images((2, 32, 32, 3))
    assert _tiny()(images).shape == (2, 5)
    assert _tiny(include_top=False)(images).shape == (2, 16)
    # 16 patches + the class token, after the final LayerNorm.
    assert _tiny(include_top=False, pooling=None)(images).shape == (2, 17, 16)
    gap = _tiny(include_top=False, pooling=None, class_token=False)
    assert gap(images).shape == (2, 16, 16)


def test_default_is_a_zero_initialised_softmax_head():
    probabilities = _tiny()(random_images((2, 32, 32, 3))).numpy()
    np.testing.assert_allclose(probabilities, 0.2, atol=1e-6)


def test_pixel_dtypes_and_preprocessing():
    model = _tiny()
    randomize_weights(model)
    pixels = random_images((2, 32, 32, 3))
    reference_out = model(pixels).numpy()
    for dtype in ("uint8", "int32", "float64"):
        np.testing.assert_allclose(
            model(pixels.astype(dtype)).numpy(), reference_out, atol=1e-5
        )
        np.testing.assert_allclose(
            model.predict(pixels.astype(dtype), verbose=0),
            reference_out,
            atol=1e-5,
        )
    raw = _tiny(include_preprocessing=False)
    raw.set_weights(model.get_weights())
    np.testing.assert_allclose(
        raw(pixels / 127.5 - 1.0).numpy(), reference_out, atol=1e-5
    )


def test_config_is_the_constructor_arguments():
    model = _tiny(pooling="gap", drop_path_rate=0.1, image_size=(32, 48))
    config = model.get_config()
    assert config["image_size"] == (32, 48)
    assert config["class_token"] is False  # resolved from pooling="gap"
    clone = keras_vit.ViT.from_config(config)
    assert clone.get_config() == config
    clone.set_weights(model.get_weights())
    images = random_images((2, 32, 48, 3))
    randomize_weights(model)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(
        clone(images).numpy(), model(images).numpy(), atol=1e-6
    )


def test_keras_file_round_trip_in_safe_mode(tmp_path):
    model = _tiny(representation_size=8, position_embedding="sincos2d")
    randomize_weights(model)
    path = os.path.join(tmp_path, "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, keras_vit.ViT)
    assert loaded.get_config() == model.get_config()
    images = random_images((2, 32, 32, 3))
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())


def test_a_layer_as_classifier_activation_saves_and_reloads(tmp_path):
    # As Keras's Dense takes a layer for `activation`; its config held the
    # serialized layer, which from_config read back as the string 'ReLU'
    # and refused ("Unknown `classifier_activation`").
    model = _tiny(classifier_activation=keras.layers.ReLU(max_value=0.05))
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    out = model(images).numpy()
    logits = _tiny(classifier_activation=None)
    logits.set_weights(model.get_weights())
    np.testing.assert_allclose(
        out, np.clip(logits(images).numpy(), 0.0, 0.05), atol=1e-6
    )
    assert out.min() == 0.0 and out.max() == np.float32(0.05)
    clone = keras_vit.ViT.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone(images).numpy(), out)
    path = os.path.join(tmp_path, "relu.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    activation = loaded.classifier_activation
    assert isinstance(activation, keras.layers.ReLU)
    assert activation.max_value == 0.05
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(loaded(images).numpy(), out)


def test_a_frozen_backbone_stays_frozen_when_reloaded(tmp_path):
    # The keras.applications way to fine-tune: freeze the backbone, train a
    # new head; then save, reload and train on.
    images, labels = random_images((4, 32, 32, 3)), np.array([0, 1, 2, 0])
    backbone = _tiny(include_top=False)
    backbone.trainable = False
    inputs = keras.Input((32, 32, 3))
    model = keras.Model(
        inputs, keras.layers.Dense(3, activation="softmax")(backbone(inputs))
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(images, labels, epochs=1, verbose=0)
    path = os.path.join(tmp_path, "tuned.keras")
    model.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # e.g. "Skipping variable loading for optimizer"
        loaded = keras.saving.load_model(path)
    assert len(loaded.trainable_weights) == 2  # the new head's kernel and bias
    frozen = [w.numpy() for w in loaded.layers[1].weights]
    loaded.fit(images, labels, epochs=1, verbose=0)
    for before, after in zip(frozen, loaded.layers[1].weights):
        np.testing.assert_array_equal(before, after.numpy())
    # The same from the constructor argument.
    assert len(_tiny(trainable=False).trainable_weights) == 0
    assert all(not layer.trainable for layer in _tiny(trainable=False).layers)


def test_fit_step_with_xla():
    model = _tiny(dropout_rate=0.1, drop_path_rate=0.1)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=True,
    )
    images = random_images((8, 32, 32, 3))
    labels = np.arange(8) % 5
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(images, labels, batch_size=4, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    # The zero-initialised head starts near log(5), then the model learns.
    assert abs(losses[0] - np.log(5)) < 0.1
    assert losses[-1] < losses[0]
    changed = [
        not np.array_equal(b, w.numpy())
        for b, w in zip(before, model.trainable_weights)
    ]
    assert all(changed)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the other backends' trainers build the optimizer first",
)
def test_the_optimizer_is_built_before_the_first_step_is_traced():
    # Built inside the traced step, its slots would be allocated among the
    # step's activations and the step traced twice (keras_fixes).
    model = _tiny()
    model.compile(optimizer="adamw", loss="sparse_categorical_crossentropy")
    # Trainability changed after compile still counts, as in Keras.
    model.get_layer("head").trainable = False
    built_when_traced = []
    train_step = model.train_step

    def traced_step(data):
        built_when_traced.append(model.optimizer.built)
        return train_step(data)

    model.train_step = traced_step
    images, labels = random_images((4, 32, 32, 3)), np.arange(4) % 5
    model.train_on_batch(images, labels)
    model.train_on_batch(images, labels)
    assert built_when_traced == [True]
    slots = {v.path for v in model.optimizer.variables}
    assert not any("head" in path for path in slots)
    assert sum("encoder" in path for path in slots) > 0


@pytest.mark.parametrize(
    "policy, position_embedding",
    [
        ("mixed_bfloat16", "learned"),
        ("mixed_float16", "learned"),
        ("mixed_float16", "relative"),
        # bfloat16 variables (inference, docs/performance.md).
        ("bfloat16", "learned"),
    ],
)
def test_reduced_precision_forward_gives_finite_float32(
    policy, position_embedding
):
    kwargs = {
        "classifier_activation": None,
        "position_embedding": position_embedding,
    }
    model = _tiny(dtype=policy, **kwargs)
    randomize_weights(model)
    assert model.get_layer("block_0").compute_dtype == policy.removeprefix(
        "mixed_"
    )
    out = model(random_images((2, 32, 32, 3)))
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert np.isfinite(out.numpy()).all()
    # Close to the float32 model with the same weights.
    ref = _tiny(**kwargs)
    ref.set_weights(model.get_weights())
    expected = ref(random_images((2, 32, 32, 3))).numpy()
    np.testing.assert_allclose(
        out.numpy(), expected, atol=0.1 * np.abs(expected).max()
    )


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow's switch"
)
def test_no_training_where_tensorflow_assumes_frozen_weights(monkeypatch):
    # With TF_ONEDNN_ASSUME_FROZEN_WEIGHTS on, TensorFlow's oneDNN Dense ops
    # keep their weights from the first call: a training run would be
    # silently wrong, so the training step refuses; inference runs.
    model = _tiny(classifier_activation=None)
    model.compile(optimizer="adam", loss="mse")
    images, targets = random_images((2, 32, 32, 3)), np.zeros((2, 5))
    for value in ("1", "True"):
        monkeypatch.setenv("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", value)
        with pytest.raises(
            ValueError,
            match=f"Received: TF_ONEDNN_ASSUME_FROZEN_WEIGHTS='{value}'",
        ):
            model.train_on_batch(images, targets)
        assert model.predict(images, verbose=0).shape == (2, 5)
    monkeypatch.setenv("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "0")
    assert np.isfinite(model.train_on_batch(images, targets))


def test_mixed_precision_survives_saving(tmp_path):
    model = _tiny(dtype="mixed_float16", position_embedding="relative")
    randomize_weights(model)
    assert model.get_config()["dtype"]["config"]["name"] == "mixed_float16"
    path = os.path.join(tmp_path, "mixed.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    assert loaded.get_layer("block_0").compute_dtype == "float16"
    images = random_images((2, 32, 32, 3))
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_keras_int8_quantization_saves_and_reloads(tmp_path, dtype):
    # `model.quantize("int8")` (Keras's weight quantization: int8 kernels
    # and per-channel scales for every Dense) survives saving, reloading and
    # saving again.
    model = _tiny(
        dtype=dtype, representation_size=8, classifier_activation=None
    )
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    expected = model(images).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # "Layer LayerNorm does not have a `quantize` method"
        model.quantize("int8")
    quantized = model(images).numpy()
    np.testing.assert_allclose(
        quantized, expected, atol=0.1 * np.abs(expected).max()
    )
    assert not np.array_equal(quantized, expected)
    dense = [
        "patch_encoder/projection",
        "block_0/attention/qkv",
        "block_1/mlp_fc2",
        "pre_logits",
        "head",
    ]
    for round_trip in range(2):
        path = os.path.join(tmp_path, f"int8_{round_trip}.keras")
        model.save(path)
        model = keras.saving.load_model(path)
        np.testing.assert_array_equal(model(images).numpy(), quantized)
        layers = {
            layer.path: layer for layer in model._flatten_layers() if layer.path
        }
        for name in dense:
            assert layers[name].quantization_mode == "int8", name
            assert (
                keras.backend.standardize_dtype(layers[name]._kernel.dtype)
                == "int8"
            )
        assert layers["block_0/norm1"].dtype_policy.name == dtype
        assert (
            model.get_config()["dtype"]["config"]["default_policy"]["config"][
                "name"
            ]
            == dtype
        )


def test_global_mixed_policy():
    # A model built under the global policy computes in bfloat16 with
    # float32 variables, close to its float32 twin (the output layer is
    # float32 whatever the policy, so its dtype alone shows nothing).
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = _tiny(classifier_activation=None)
    randomize_weights(model)
    assert model.get_layer("block_0").compute_dtype == "bfloat16"
    assert {v.dtype for v in model.weights} == {"float32"}
    images = random_images((2, 32, 32, 3))
    out = model(images).numpy()
    keras.config.set_dtype_policy("float32")
    twin = _tiny(classifier_activation=None)
    twin.set_weights(model.get_weights())
    expected = twin(images).numpy()
    assert not np.array_equal(out, expected)  # computed in bfloat16
    np.testing.assert_allclose(out, expected, atol=0.1 * np.abs(expected).max())


def _blocks_in_sequence(model, images):
    """Each block's `(outputs, attention weights)` as the NumPy reference
    computes them, applying block 0, 1, ... in turn to the embedded
    tokens (a check that the model reports block i's for block i)."""
    x = model.get_layer("rescaling")(images)
    x = model.get_layer("patch_encoder")(model.get_layer("patches")(x))
    x, found = x.numpy().astype("float64"), []
    for i in range(model.num_layers):
        block = model.get_layer(f"block_{i}")
        x, weights = reference.block(
            x, reference.block_weights(block), model.num_heads
        )
        found.append((x, weights))
    return found


def _assert_blocks_in_sequence(model, images, out):
    """`out`'s `block_outputs` and `attention_weights` are the blocks'
    own, in order (`_blocks_in_sequence`)."""
    expected = _blocks_in_sequence(model, images)
    assert len(out["block_outputs"]) == len(expected)
    assert len(out["attention_weights"]) == len(expected)
    for i, (tokens, weights) in enumerate(expected):
        np.testing.assert_allclose(
            out["block_outputs"][i].numpy(),
            tokens,
            atol=1e-4,
            err_msg=f"block {i}",
        )
        np.testing.assert_allclose(
            out["attention_weights"][i].numpy(),
            weights,
            atol=1e-5,
            err_msg=f"block {i}",
        )


def test_intermediates_model():
    model = _tiny(num_layers=3)
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    out = model.intermediates_model()(images)
    for tokens, weights in zip(out["block_outputs"], out["attention_weights"]):
        assert tokens.shape == (2, 17, 16)
        assert weights.shape == (2, 2, 17, 17)
        np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)
    # Block i's outputs and weights, not another block's.
    _assert_blocks_in_sequence(model, images, out)
    np.testing.assert_allclose(
        out["output"].numpy(), model(images).numpy(), atol=1e-6
    )
    # The last block's tokens, through the model's tail, give its output.
    tail = out["block_outputs"][-1]
    for name in ("encoder_norm", "pooling", "head", "predictions"):
        tail = model.get_layer(name)(tail)
    np.testing.assert_allclose(tail.numpy(), model(images).numpy(), atol=1e-6)
    # Shared weights: nothing was copied.
    assert len(model.intermediates_model().weights) == len(model.weights)
    assert "attention_weights" not in model.intermediates_model(
        attention=False
    )(images)


def test_from_variant_and_overrides():
    model = keras_vit.ViT.from_variant(
        "Ti/16", image_size=32, num_layers=1, num_classes=3
    )
    assert model.hidden_dim == 192 and model.num_heads == 3
    assert model.get_config()["num_layers"] == 1
    with pytest.raises(ValueError, match="variant='B/15'"):
        keras_vit.ViT.from_variant("B/15")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"image_size": 225, "patch_size": 16}, "225"),
        ({"image_size": (32, 30)}, "30"),
        ({"hidden_dim": 18, "num_heads": 4}, "hidden_dim=18 and num_heads=4"),
        ({"pooling": "max"}, "pooling='max'"),
        ({"pooling": None}, "pooling=None"),
        ({"pooling": "token", "class_token": False}, "class_token=False"),
        ({"position_embedding": "rotary"}, "position_embedding='rotary'"),
        ({"dropout_rate": 1.0}, "dropout_rate=1.0"),
        ({"attention_dropout_rate": -0.5}, "attention_dropout_rate=-0.5"),
        ({"drop_path_rate": 1.5}, "drop_path_rate=1.5"),
        ({"num_layers": 0}, "num_layers=0"),
        ({"num_classes": -3}, "num_classes=-3"),
        ({"mlp_dim": 0}, "mlp_dim=0"),
        ({"patch_size": 0}, "patch_size=0"),
        ({"image_size": -32}, "image_size"),
        ({"representation_size": 0}, "representation_size=0"),
        ({"layer_norm_epsilon": -1.0}, "layer_norm_epsilon=-1.0"),
        ({"classifier_activation": "nope"}, "classifier_activation='nope'"),
        ({"num_channels": 0}, "num_channels=0"),
        (
            {"weights": "augreg_in21k"},
            r"weights -> ViT\.from_preset\(weights, \.\.\.\).*"
            "weights='augreg_in21k'",
        ),
        ({"include_top": "yes"}, "include_top='yes'"),
        (
            {
                "hidden_dim": 18,
                "num_heads": 3,
                "position_embedding": "sincos2d",
            },
            "hidden_dim=18",
        ),
        # keras.applications names, which Keras would drop without a word.
        ({"classes": 10}, "classes -> num_classes.*classes=10"),
        (
            {"input_shape": (64, 64, 3)},
            "input_shape -> image_size.*input_shape=\\(64",
        ),
        ({"num_class": 10}, "Unknown keras_vit.ViT argument.*num_class=10"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _tiny(**kwargs)


def _float_arguments(cls):
    return [
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if isinstance(p.default, float)
    ]


def test_float_arguments_must_be_finite_and_in_range():
    # layer_norm_epsilon=inf gave every image the same (zero) features.
    floats = _float_arguments(keras_vit.ViT)
    assert {"dropout_rate", "drop_path_rate", "layer_norm_epsilon"} <= set(
        floats
    )
    for name in floats:
        for value in (math.inf, -math.inf, math.nan, 1e39):
            with pytest.raises(
                ValueError, match=re.escape(f"Received: {name}={value!r}")
            ):
                _tiny(**{name: value})
    # The hybrid's ResNet stem, from its dict of arguments.
    stem = {"block_units": [1], "width": 4, "groups": 4}
    for name in ("norm_epsilon", "conv_epsilon"):
        with pytest.raises(ValueError, match=f"Received: {name}=inf"):
            _tiny(stem={**stem, name: math.inf}, patch_size=1)


@pytest.mark.parametrize(
    "dtype", ["int32", "uint8", keras.DTypePolicy("int32"), "int8_from_float32"]
)
def test_integer_and_quantized_policies_are_refused(dtype):
    # An integer policy crashed in Keras ("Cannot convert 0.0 to EagerTensor
    # of dtype int32"), a plain quantized one quantized the new layers.
    with pytest.raises(
        ValueError, match=r"`dtype` must be a floating.*Received: dtype="
    ):
        _tiny(dtype=dtype)


def test_builder_rejects_bad_image_size():
    with pytest.raises(ValueError, match="225"):
        keras_vit.ViT_B16(image_size=225)


def test_wrong_number_of_channels():
    model = _tiny()
    for channels in (1, 4):
        with pytest.raises(
            ValueError, match=rf"3\b.*\(1, 32, 32, {channels}\)"
        ):
            model(np.zeros((1, 32, 32, channels), "float32"))
    gray = _tiny(num_channels=1)
    assert gray(np.zeros((1, 32, 32, 1), "float32")).shape == (1, 5)


@pytest.mark.parametrize(
    "rates",
    [
        {},
        {
            "dropout_rate": 0.2,
            "attention_dropout_rate": 0.2,
            "drop_path_rate": 0.3,
        },
    ],
)
def test_remat_trains_exactly_like_without(monkeypatch, rates):
    # With dropout the recomputed pass drew other masks than the forward
    # pass (the seed generators had moved on): same loss, wrong gradients.
    calls = []
    original = keras.remat

    def counting_remat(f):
        calls.append(f)
        return original(f)

    monkeypatch.setattr(keras, "remat", counting_remat)
    losses = {}
    for remat in (False, True):
        keras.utils.set_random_seed(0)
        model = _tiny(classifier_activation=None, **rates)
        model.remat = remat
        randomize_weights(model)
        model.compile(
            keras.optimizers.SGD(0.05),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        images, labels = random_images((4, 32, 32, 3)), np.arange(4) % 5
        losses[remat] = [
            float(model.train_on_batch(images, labels)) for _ in range(3)
        ]
        if not remat:
            assert calls == []
            # Switched on after a step, the next step is traced anew.
            model.remat = True
            model.train_on_batch(images, labels)
            assert len(calls) >= 2
            calls.clear()
    # A training switch, not the architecture: not in the config.
    assert "remat" not in model.get_config()
    assert model.get_layer("block_0").remat
    # Each block was wrapped in keras.remat for the training step (2 blocks),
    # and only in the remat model.
    assert len(calls) >= 2
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)
    assert losses[True][-1] < losses[True][0]


def test_learned2d_trains_saves_and_is_not_weight_decayed(tmp_path):
    from keras_vit import visualize
    from keras_vit.training import make_optimizer

    model = _tiny(position_embedding="learned2d")
    encoder = model.get_layer("patch_encoder")
    before = [encoder.pos_embedding_x.numpy(), encoder.pos_embedding_y.numpy()]
    optimizer = make_optimizer("adamw", 1e-2, 0.5, total_steps=3)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    images, labels = (
        random_images((8, 32, 32, 3)),
        np.arange(8) % TINY["num_classes"],
    )
    model.fit(images, labels, epochs=2, verbose=0)
    after = [encoder.pos_embedding_x.numpy(), encoder.pos_embedding_y.numpy()]
    assert all(
        np.abs(a - b).max() > 0 for a, b in zip(after, before)
    )  # trained
    decayed = {
        v.name
        for v in model.trainable_variables
        if optimizer._use_weight_decay(v)
    }
    assert "kernel" in decayed  # the check itself works
    assert (
        "position_embedding_x" not in decayed
        and "position_embedding_y" not in decayed
    )
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())
    similarity = visualize.position_embedding_similarity(model)
    assert similarity.shape == (*model.grid_size, *model.grid_size)
    np.testing.assert_allclose(
        np.einsum("ijij->ij", similarity), 1.0, atol=1e-6
    )
    with pytest.raises(ValueError, match="hidden_dim=15"):
        _tiny(hidden_dim=15, num_heads=3, position_embedding="learned2d")


def test_relative_trains_saves_and_is_not_weight_decayed(tmp_path):
    from keras_vit import visualize
    from keras_vit.training import make_optimizer

    model = _tiny(position_embedding="relative")
    # 16 patches and the class token: offsets -16..16 in every block.
    tables = [
        model.get_layer(f"block_{i}").attention.relative_position_embedding
        for i in range(model.num_layers)
    ]
    assert [tuple(t.shape) for t in tables] == [(33, 16)] * model.num_layers
    encoder = model.get_layer("patch_encoder")
    assert encoder.position_embeddings() is None  # nothing added to the tokens
    before = [t.numpy() for t in tables]
    optimizer = make_optimizer("adamw", 1e-2, 0.5, total_steps=3)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    images, labels = (
        random_images((8, 32, 32, 3)),
        np.arange(8) % TINY["num_classes"],
    )
    model.fit(images, labels, epochs=2, verbose=0)
    assert all(np.abs(t.numpy() - b).max() > 0 for t, b in zip(tables, before))
    decayed = {
        v.path
        for v in model.trainable_variables
        if optimizer._use_weight_decay(v)
    }
    assert "block_0/attention/qkv/kernel" in decayed  # the check itself works
    assert not any("relative" in path for path in decayed)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.position_embedding == "relative"
    np.testing.assert_array_equal(loaded(images).numpy(), model(images).numpy())
    with pytest.raises(ValueError, match="position_embedding='relative'"):
        visualize.position_embedding_similarity(model)
    # The inspection page leaves that one figure out.
    written = visualize.inspect(
        model, images[:1], str(tmp_path / "inspect"), ["a"]
    )
    names = {os.path.basename(path) for path in written}
    assert "rollout_a.png" in names and "position_similarity.png" not in names


def test_relative_logits_depend_on_the_offset_only():
    """Two queries with the same content get the same relative bias towards
    keys at the same offset, wherever they sit in the sequence."""
    layer = keras_vit.layers.MultiHeadSelfAttention(2, relative_positions=5)
    x = np.random.default_rng(1).normal(size=(1, 5, 8)).astype("float32")
    layer(x)
    randomize_weights(layer, scale=0.5)
    query = np.random.default_rng(2).normal(size=(1, 2, 5, 4)).astype("float32")
    query[:, :, 3] = query[:, :, 1]  # tokens 1 and 3: same query content
    bias = layer._relative_logits(keras.ops.convert_to_tensor(query), 1).numpy()
    np.testing.assert_allclose(
        bias[:, :, 1, 0:3], bias[:, :, 3, 2:5], atol=1e-6
    )
    table = layer.relative_position_embedding.numpy()  # offset 0: row T - 1 = 4
    np.testing.assert_allclose(
        bias[0, 1, 2, 2], query[0, 1, 2] @ table[4, 4:8], rtol=1e-5
    )


def test_the_registered_name_saved_files_hold_does_not_move_with_the_code():
    assert keras.saving.get_registered_name(keras_vit.ViT) == "keras_vit>ViT"


def test_forward_features_gives_the_tokens_before_pooling_and_head():
    model = _tiny()
    randomize_weights(model)
    images = random_images((2, 32, 32, 3))
    body = keras_vit.ViT(**{**TINY, "include_top": False, "pooling": None})
    body.set_weights(model.get_weights()[:-2])
    tokens = model.forward_features(images)
    np.testing.assert_allclose(tokens.numpy(), body(images).numpy(), atol=1e-6)
    out = model.forward_features(
        images, return_attention=True, return_block_outputs=True
    )
    inter = model.intermediates_model()(images)
    np.testing.assert_allclose(
        out["features"].numpy(), tokens.numpy(), atol=1e-6
    )
    for key in ("attention_weights", "block_outputs"):
        assert len(out[key]) == model.num_layers
        np.testing.assert_allclose(
            out[key][-1].numpy(), inter[key][-1].numpy(), atol=1e-6
        )
    _assert_blocks_in_sequence(model, images, out)
    assert set(model.forward_features(images, return_attention=True)) == {
        "features",
        "attention_weights",
    }
    # A hook sees the projected patch tokens before the positions are added.
    seen = []
    model.forward_features(
        images, patch_hook=lambda t: seen.append(t.shape) or t
    )
    assert tuple(seen[0]) == (
        2,
        model.grid_size[0] * model.grid_size[1],
        model.hidden_dim,
    )


def test_the_config_is_one_validated_object_that_get_config_comes_from():
    model = _tiny(pooling="gap")
    assert isinstance(model.vit_config, keras_vit.models.config.ViTConfig)
    assert model.class_token is False and model.vit_config.class_token is False
    config = model.get_config()
    assert {
        k: v
        for k, v in config.items()
        if k not in ("name", "trainable", "dtype")
    } == {**model.vit_config.to_dict(), **model.preprocessing.to_dict()}
    # One place for the rules between arguments.
    with pytest.raises(ValueError, match="hidden_dim=18 and num_heads=4"):
        keras_vit.models.config.vit_config(hidden_dim=18, num_heads=4)


def test_the_constructors_defaults_are_the_configs():
    signature = inspect.signature(keras_vit.ViT.__init__).parameters
    defaults = keras_vit.models.config.DEFAULTS
    assert {name: signature[name].default for name in defaults} == defaults
