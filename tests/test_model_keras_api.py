"""`ViT` under Keras's own model API: per-layer freezing through a `.keras`
round trip, `model.load_weights` all or nothing, and copying a model (the
audit of 4 December: each lost something a plain functional model keeps,
or silently loaded part of a file)."""

import json
import os
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models import vit as vit_module
from keras_vit.weights import from_preset
from keras_vit.weights import loading
from tests import model_runs_on_jax
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights

#: The layers the tests freeze, as Keras's transfer-learning guide freezes
#: the bottom of a model for partial fine-tuning.
FROZEN = ("patch_encoder", "block_0")


def _tiny(**kwargs):
    return keras_vit.ViT(**{**TINY, **kwargs})


def _frozen_and_fitted():
    """A tiny ViT with `FROZEN` frozen, compiled with Adam and fitted one
    step (so that its optimizer holds moments), and its data."""
    images, labels = random_images((4, 32, 32, 3)), np.arange(4) % 5
    model = _tiny()
    randomize_weights(model, scale=0.1)
    for name in FROZEN:
        model.get_layer(name).trainable = False
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    return model, images, labels


def _load_quietly(path):
    with warnings.catch_warnings():
        # e.g. "Skipping variable loading for optimizer 'adam', because it
        # has 66 variables whereas the saved optimizer has 34 variables"
        warnings.simplefilter("error")
        return keras.saving.load_model(path)


def test_layers_frozen_on_their_own_stay_frozen_when_reloaded(tmp_path):
    model, images, labels = _frozen_and_fitted()
    path = os.path.join(tmp_path, "partly_frozen.keras")
    model.save(path)
    loaded = _load_quietly(path)
    assert [v.path for v in loaded.trainable_weights] == [
        v.path for v in model.trainable_weights
    ]
    assert len(loaded.trainable_weights) < len(loaded.weights)
    assert {layer.name for layer in loaded.layers if not layer.trainable} == (
        set(FROZEN)
    )
    # The optimizer's state came back: its step count and Adam's moments.
    assert int(loaded.optimizer.iterations.numpy()) == 1
    assert len(loaded.optimizer.variables) == len(model.optimizer.variables)
    for got, want in zip(loaded.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # Training on leaves the frozen layers as they were, and trains the rest.
    frozen = {n: loaded.get_layer(n).get_weights() for n in FROZEN}
    head = loaded.get_layer("block_1").get_weights()
    loaded.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    for name, weights in frozen.items():
        for before, after in zip(weights, loaded.get_layer(name).weights):
            np.testing.assert_array_equal(before, after.numpy())
    assert any(
        not np.array_equal(before, after.numpy())
        for before, after in zip(head, loaded.get_layer("block_1").weights)
    )


def test_a_layer_frozen_inside_a_backbone_stays_frozen_when_reloaded(
    tmp_path,
):
    backbone = _tiny(include_top=False)
    backbone.get_layer("block_0").trainable = False
    inputs = keras.Input((32, 32, 3))
    model = keras.Model(inputs, keras.layers.Dense(3)(backbone(inputs)))
    path = os.path.join(tmp_path, "backbone.keras")
    model.save(path)
    loaded = _load_quietly(path)
    assert len(loaded.trainable_weights) == len(model.trainable_weights)
    assert len(loaded.trainable_weights) < len(loaded.weights)
    assert not loaded.layers[1].get_layer("block_0").trainable


def _trainable_state(model):
    """Each variable's path and flag, and the trainable variables."""
    return [(v.path, v.trainable) for v in model.weights], [
        v.path for v in model.trainable_weights
    ]


def _assert_rebuilt_alike(model, flags):
    """`model`'s config records `flags`, and every way back from it builds
    a model whose variables are trainable as `model`'s."""
    config = model.get_config()
    assert config["layer_trainable"] == flags
    for rebuilt in (
        keras_vit.ViT.from_config(config),
        keras_vit.ViT(**config),
        keras_vit.ViT.from_config(json.loads(json.dumps(config))),
    ):
        assert _trainable_state(rebuilt) == _trainable_state(model)
        assert rebuilt.get_config() == config


def test_the_config_records_frozen_layers_by_path_and_only_those():
    # A hybrid's stem frozen but for its last stage: a nested layer
    # unfrozen inside a frozen one comes back so too.
    model = _tiny(stem={"block_units": [1, 1]}, patch_size=1)
    assert "layer_trainable" not in model.get_config()  # configs as before
    model.get_layer("resnet_stem").trainable = False
    model.get_layer("resnet_stem").units[-1].trainable = True
    _assert_rebuilt_alike(
        model, {"resnet_stem": False, "resnet_stem/block2_unit1": True}
    )
    # Then the whole model frozen: Keras leaves the unfrozen stage's flag
    # (and its variables') as it was, and so does the config.
    model.trainable = False
    _assert_rebuilt_alike(model, {"resnet_stem/block2_unit1": True})
    # A model frozen whole records no layer of its own: its flag says it.
    plain = _tiny()
    plain.trainable = False
    assert "layer_trainable" not in plain.get_config()


@pytest.mark.parametrize(
    "value, match",
    [
        (["block_0"], r"must map layer paths .* Received: "),
        ({"block_0": "no"}, r"Received: layer_trainable=\{'block_0': 'no'\}"),
        ({"block_7": False}, r"names 'block_7'.*Received: layer_trainable="),
        # A layer without weights is no place for a flag (its name is
        # generated: another in the next build).
        ({"embedding_dropout": False}, "no layer with weights there"),
    ],
)
def test_layer_trainable_names_the_argument_and_value(value, match):
    with pytest.raises(ValueError, match=match):
        _tiny(layer_trainable=value)


JAX_FREEZE_SCRIPT = r"""
import json, sys, warnings
import numpy as np
import keras
import keras_vit

folder = sys.argv[1]
config = json.load(open(f"{folder}/config.json"))
images = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3))
labels = np.arange(4) % 5
model = keras_vit.ViT(**config)
for name in ("patch_encoder", "block_0"):
    model.get_layer(name).trainable = False
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
model.save(f"{folder}/model.keras")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loaded = keras.saving.load_model(f"{folder}/model.keras")
frozen = [w.numpy().copy() for w in loaded.get_layer("block_0").weights]
loaded.fit(images, labels, batch_size=4, epochs=1, verbose=0)
print(json.dumps({
    "backend": keras.backend.backend(),
    "trainable": [len(model.trainable_weights), len(loaded.trainable_weights)],
    "optimizer_variables": [len(model.optimizer.variables),
                            len(loaded.optimizer.variables)],
    "iterations_after_fit": int(loaded.optimizer.iterations.numpy()),
    "warnings": [str(w.message)[:120] for w in caught],
    "frozen_unchanged": all(np.array_equal(a, b.numpy()) for a, b in
                            zip(frozen, loaded.get_layer("block_0").weights)),
}))
"""


def jax_runs():
    """This module's run in `model_runs_on_jax`'s one JAX process."""
    return {"frozen": (JAX_FREEZE_SCRIPT, _prepare_for_jax)}


def _prepare_for_jax(folder):
    with open(folder / "config.json", "w") as file:
        json.dump(TINY, file)


@pytest.mark.slow  # the first of the shared JAX run's readers makes it all
def test_layers_frozen_on_their_own_stay_frozen_on_jax(tmp_path_factory):
    pytest.importorskip("jax")
    _, result = model_runs_on_jax.ran(tmp_path_factory, "frozen")
    saved, loaded = result["trainable"]
    assert saved == loaded and 0 < saved < len(_tiny().weights)
    assert result["optimizer_variables"][0] == result["optimizer_variables"][1]
    assert result["iterations_after_fit"] == 2  # restored 1, then one more
    assert result["warnings"] == []
    assert result["frozen_unchanged"]


# --- model.load_weights ------------------------------------------------------


def _saved_weights(tmp_path, seed=3, **kwargs):
    """The path of a `.weights.h5` of a tiny ViT of `kwargs`, random."""
    source = _tiny(classifier_activation=None, **kwargs)
    randomize_weights(source, seed=seed, scale=0.1)
    path = os.path.join(tmp_path, f"source_{seed}.weights.h5")
    source.save_weights(path)
    return source, path


def test_load_weights_checks_a_keras_file_before_keras_loads_it(
    tmp_path, monkeypatch
):
    # The check is keras_vit.weights.loading's, which the model imports;
    # here a stand-in that refuses every file.
    _, path = _saved_weights(tmp_path)
    model = _tiny(classifier_activation=None)
    before = model.get_weights()
    seen = []

    def refuse(checked_model, checked_path):
        seen.append((checked_model, checked_path))
        raise ValueError("does not fit")

    monkeypatch.setattr(loading, "check_keras_file", refuse)
    with pytest.raises(ValueError, match="does not fit"):
        model.load_weights(path)
    assert seen == [(model, path)]
    for got, want in zip(model.get_weights(), before):
        np.testing.assert_array_equal(got, want)  # Keras never ran
    # skip_mismatch=True is Keras's partial loading: no check.
    model.load_weights(path, skip_mismatch=True)
    assert len(seen) == 1
    assert not np.array_equal(model.get_weights()[-1], before[-1])


def test_load_weights_reads_through_the_weights_package_it_imports():
    """No loader is installed by importing another module (a partial
    import broke `from_preset`): the model imports its readers."""
    assert vit_module.loading is loading
    assert vit_module.from_preset.prepare is from_preset.prepare


@pytest.mark.parametrize(
    "saved, unexpected",
    [
        ({"num_layers": 3}, "block_2"),
        ({"layer_scale_init": 0.5}, "block_0/ls1"),
        ({"norm_pre": True}, "norm_pre"),
    ],
)
def test_load_weights_refuses_a_file_of_another_architecture(
    tmp_path, saved, unexpected
):
    # Keras loaded these in part, with no warning: the model computed
    # other outputs (0.03-0.12 off outputs of about 0.15).
    _, path = _saved_weights(tmp_path, **saved)
    model = _tiny(classifier_activation=None)
    randomize_weights(model, seed=5)
    before = model.get_weights()
    with pytest.raises(
        ValueError, match=f"(?s)nothing was loaded.*unexpected.*{unexpected}"
    ):
        model.load_weights(path)
    for got, want in zip(model.get_weights(), before):
        np.testing.assert_array_equal(got, want)


def test_load_weights_loads_a_matching_file_exactly(tmp_path):
    source, path = _saved_weights(tmp_path)
    model = _tiny(classifier_activation=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.load_weights(path)
    for got, want in zip(model.weights, source.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    images = random_images((2, 32, 32, 3))
    np.testing.assert_array_equal(model(images).numpy(), source(images).numpy())
    # Another class count: keras_vit.load_weights adapts it, Keras's
    # load_weights would have stopped at the head, the rest loaded.
    other = _tiny(classifier_activation=None, num_classes=3)
    before = other.get_weights()
    with pytest.raises(ValueError, match=r"keras_vit.load_weights\(model, "):
        other.load_weights(path)
    for got, want in zip(other.get_weights(), before):
        np.testing.assert_array_equal(got, want)


def test_a_remote_keras_file_is_left_to_keras(monkeypatch):
    # Keras reads gs://... paths; keras_vit's readers do not, and the check
    # refused them as "not found" before Keras could read them.
    from keras_vit.weights import keras_files
    from keras_vit.weights import loading

    def no_read(*args, **kwargs):
        raise AssertionError("read")

    monkeypatch.setattr(keras_files, "opened_keras_weights", no_read)
    model = _tiny()
    assert loading.check_keras_file(model, "gs://b/vit.weights.h5") is None
    with pytest.raises(AssertionError, match="read"):
        loading.check_keras_file(model, "vit.weights.h5")


# --- copying a model ---------------------------------------------------------


def test_a_copy_from_the_config_is_a_vit_with_its_policy_and_flags():
    # keras.models.clone_model gives a plain Functional (Keras 3.15 has no
    # hook for a functional subclass): docs/models.md says to copy this way.
    model = _tiny(dtype="mixed_float16", distillation=True)
    randomize_weights(model)
    model.get_layer("block_0").trainable = False
    copy = keras_vit.ViT.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    assert isinstance(copy, keras_vit.ViT)
    assert copy.dtype_policy.name == "mixed_float16"
    assert copy.vit_config == model.vit_config
    assert not copy.get_layer("block_0").trainable
    copy.compile("adam", "sparse_categorical_crossentropy")
    assert isinstance(copy.optimizer, keras.optimizers.LossScaleOptimizer)
    images = random_images((2, 32, 32, 3))
    np.testing.assert_array_equal(copy(images).numpy(), model(images).numpy())
    np.testing.assert_array_equal(
        copy.forward_features(images).numpy(),
        model.forward_features(images).numpy(),
    )
    # Not in the config (not saved either): set again on the copy.
    assert copy.distilled_training is False
