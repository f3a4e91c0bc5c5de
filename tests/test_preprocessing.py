"""`Preprocessing`: how to feed a ViT (normalisation, evaluation resize)
and read it (class names), beside its architecture; and `remat`, a
training switch that is neither."""

import dataclasses
import inspect

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.data import resize
from keras_vit.export import metadata
from keras_vit.models.preprocessing import Preprocessing
from keras_vit.registry import presets as registry_presets
from keras_vit.training.train import build_model
from tests.training.test_train import tiny_config
from tests.weights.test_golden_parity import TINY
from tests.weights.test_loading import local_preset  # noqa: F401 (a fixture)

NAMES = ["cat", "dog", "owl", "fox", "elk"]  # TINY has 5 classes

#: A `ViT`'s config as keras_vit wrote it before the preprocessing record:
#: `normalization` and `image_resize` among the architecture, `remat`
#: too, no `class_names`.
OLD_CONFIG = {
    "name": "old_vit",
    "trainable": True,
    "dtype": {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": "float32"},
        "registered_name": None,
    },
    "image_size": [32, 32],
    "patch_size": 8,
    "hidden_dim": 32,
    "num_layers": 2,
    "num_heads": 4,
    "mlp_dim": 64,
    "num_classes": 5,
    "include_top": True,
    "pooling": "token",
    "class_token": True,
    "position_embedding": "learned",
    "representation_size": None,
    "dropout_rate": 0.0,
    "attention_dropout_rate": 0.0,
    "drop_path_rate": 0.0,
    "layer_norm_epsilon": 1e-06,
    "classifier_activation": None,
    "include_preprocessing": True,
    "normalization": {"mean": [0.5, 0.4, 0.3], "std": [0.2, 0.3, 0.25]},
    "image_resize": {
        "crop_pct": 0.9,
        "interpolation": "bicubic",
        "antialias": True,
    },
    "num_channels": 3,
    "stem": None,
    "remat": True,
    "activation": "gelu",
    "layer_scale_init": None,
    "qk_norm": False,
    "patch_bias": True,
    "norm_pre": False,
    "fc_norm": False,
    "position_embedding_tokens": "all",
    "num_register_tokens": 0,
    "distillation": False,
    "pool_include_prefix": False,
    "dynamic_image_size": False,
    "dynamic_image_padding": False,
}


def test_the_record_is_the_constructors_source_and_sits_beside_the_config():
    signature = inspect.signature(keras_vit.ViT.__init__).parameters
    for field in dataclasses.fields(Preprocessing):
        assert signature[field.name].default == field.default
        # Not the architecture's: one record each.
        assert field.name not in keras_vit.models.config.DEFAULTS
    assert "remat" not in signature
    assert "remat" not in keras_vit.models.config.DEFAULTS
    model = keras_vit.ViT(**TINY, class_names=NAMES)
    assert model.preprocessing == Preprocessing(class_names=NAMES)
    assert model.class_names == tuple(NAMES)
    assert model.image_resize == resize.DEFAULT
    assert model.normalization is None


def test_an_old_config_loads_and_means_the_same():
    model = keras_vit.ViT.from_config(OLD_CONFIG)
    assert model.remat is True
    assert all(model.get_layer(f"block_{i}").remat for i in range(2))
    assert model.class_names is None
    assert model.image_resize == OLD_CONFIG["image_resize"]
    assert model.normalization == {
        "mean": (0.5, 0.4, 0.3),
        "std": (0.2, 0.3, 0.25),
    }
    # The rescaling layer applies it: (pixels / 255 - mean) / std.
    pixels = np.full((1, 1, 1, 3), 255.0, "float32")
    out = model.get_layer("rescaling")(pixels).numpy().ravel()
    np.testing.assert_allclose(out, [2.5, 2.0, 2.8], rtol=1e-6)
    config = model.get_config()
    assert "remat" not in config and config["class_names"] is None
    same = set(OLD_CONFIG) - {"remat", "dtype", "image_size", "normalization"}
    assert {k: config[k] for k in same} == {k: OLD_CONFIG[k] for k in same}


def test_class_names_travel_in_the_keras_file_and_name_exports(tmp_path):
    model = keras_vit.ViT(**TINY, class_names=NAMES)
    assert model.get_config()["class_names"] == NAMES
    path = str(tmp_path / "named.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.class_names == tuple(NAMES)
    # Exports read the model's names; `labels` still wins.
    assert metadata.class_names(loaded, model_source=path) == NAMES
    assert metadata.class_names(loaded, labels=list("abcde")) == list("abcde")
    assert metadata.class_names(keras_vit.ViT(**TINY)) == [
        f"class_{i}" for i in range(5)
    ]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"class_names": NAMES[:3]}, r"one name per class \(num_classes=5\)"),
        ({"class_names": "cat"}, "list of strings"),
        ({"class_names": [1, 2, 3, 4, 5]}, "list of strings"),
        ({"class_names": []}, "at least one class"),
        (
            {"class_names": NAMES, "include_top": False},
            "include_top=False has none",
        ),
        (
            {"normalization": {"mean": (0.5,) * 3, "std": (0.5,) * 2}},
            r"normalization\['std'\].*as many as the mean",
        ),
        (
            {"normalization": {"mean": (0.5,) * 2, "std": (0.5,) * 2}},
            r"one number per channel \(3\)",
        ),
    ],
)
def test_bad_preprocessing_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        keras_vit.ViT(**TINY, **kwargs)


def test_a_presets_imagenet_head_names_its_classes(
    local_preset,  # noqa: F811 (the fixture)
    monkeypatch,
):
    preset = {**local_preset, "num_classes": 1000}
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry_presets.PRESETS[:-1], preset]
    )
    imagenet = tuple(keras_vit.imagenet_class_names())
    with pytest.warns(UserWarning, match="head was not loaded"):
        model = keras_vit.ViT.from_preset("vit_tiny8_tiny_test")
    assert model.num_classes == 1000 and model.class_names == imagenet
    # Another head, no head, or names given: not ImageNet's.
    for other in ({"num_classes": 5}, {"include_top": False}):
        model = keras_vit.ViT.from_preset("vit_tiny8_tiny_test", **other)
        assert model.class_names is None
    told = keras_vit.ViT.from_preset("vit_tiny8_tiny_test", class_names=None)
    assert told.class_names is None


def test_training_names_its_model_and_switches_remat(tmp_path):
    config = tiny_config(tmp_path, remat=True)
    assert config.scale.remat is True
    names = [str(d) for d in range(10)]
    model = build_model(config, 10, class_names=names)
    assert model.class_names == tuple(names) and model.remat
    assert build_model(tiny_config(tmp_path), 10).remat is False
    with pytest.raises(ValueError, match="Received: remat='yes'"):
        tiny_config(tmp_path, remat="yes").check()
