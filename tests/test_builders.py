import ast
import inspect
import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import builders

# The reference implementation's (timm / google-research) parameter counts
# at 224 px with a 1000-class head.
REFERENCE_PARAMS = {
    "ViT_Ti16": 5_717_416,
    "ViT_S16": 22_050_664,
    "ViT_S32": 22_878_952,
    "ViT_B8": 86_576_872,
    "ViT_B16": 86_567_656,
    "ViT_B32": 88_224_232,
    "ViT_L16": 304_326_632,
    "ViT_L32": 306_535_400,
    "ViT_H14": 632_045_800,
}


@pytest.mark.parametrize("name", sorted(REFERENCE_PARAMS))
def test_parameter_counts_match_the_reference(name):
    # Variables are created without values: full sizes are built
    # symbolically, in a fraction of a second and without their memory.
    with keras.StatelessScope(initialize_variables=False):
        model = getattr(keras_vit, name)()
    assert model.count_params() == REFERENCE_PARAMS[name]
    assert model.output_shape == (None, 1000)


def test_every_builder_is_exported_and_documented():
    from tests.test_hybrid import TIMM_PARAMS

    assert set(builders.BUILDERS) == set(REFERENCE_PARAMS) | set(TIMM_PARAMS)
    for name, variant in builders.BUILDERS.items():
        fn = getattr(keras_vit, name)
        assert fn is builders.get_builder(name)
        assert variant in fn.__doc__ and "Args:" in fn.__doc__
        params = inspect.signature(fn).parameters
        assert list(params)[:2] == ["num_classes", "weights"]
    with pytest.raises(ValueError, match="model='ViT_B17'"):
        builders.get_builder("ViT_B17")
    # One `def` for each name of the registry's table, and no other.
    defined = {
        node.name
        for node in ast.parse(inspect.getsource(builders)).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("ViT_")
    }
    assert defined == set(builders.BUILDERS)


def test_kwargs_override_the_variant():
    model = keras_vit.ViT_B16(
        num_classes=10, image_size=64, num_layers=1, patch_size=32
    )
    config = model.get_config()
    assert config["patch_size"] == 32 and config["num_layers"] == 1
    assert config["hidden_dim"] == 768 and config["num_classes"] == 10
    assert model.name == "vit_b16"
    assert model.output_shape == (None, 10)


@pytest.mark.parametrize("name", sorted(builders.BUILDERS))
def test_builders_refuse_non_finite_numbers_and_integer_policies(name):
    # Refused before anything is built (not a full-size model each).
    fn = builders.get_builder(name)
    for kwargs, match in (
        ({"layer_norm_epsilon": math.inf}, "layer_norm_epsilon=inf"),
        ({"dropout_rate": math.nan}, "dropout_rate=nan"),
        ({"drop_path_rate": math.inf}, "drop_path_rate=inf"),
        ({"dtype": "int32"}, "dtype='int32'"),
    ):
        with pytest.raises(ValueError, match=match):
            fn(num_classes=10, **kwargs)


@pytest.fixture
def ti16_preset(tmp_path, monkeypatch):
    """ViT_Ti16's variant made tiny, with a 5-class preset whose URL is the
    golden file (its numbers)."""
    from keras_vit import registry
    from keras_vit.registry import presets as registry_presets
    from keras_vit.weights import download
    from tests.weights.test_golden_parity import TINY
    from tests.weights.test_golden_parity import golden
    from tests.weights.test_loading import preset_record

    numbers = ("patch_size", "hidden_dim", "num_layers", "num_heads", "mlp_dim")
    monkeypatch.setitem(
        registry.VARIANTS, "Ti/16", {k: TINY[k] for k in numbers}
    )
    url = "file://" + golden("vit_token.npz")
    preset = preset_record("Ti/16", "tiny_test", url, 32, 5)
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry.PRESETS, preset]
    )
    monkeypatch.setattr(download, "CACHE_DIR", str(tmp_path / "cache"))
    return preset


def test_a_builder_takes_its_presets_head(ti16_preset):
    """A builder's num_classes defaults to its preset's class count, as
    ViT.from_preset and build() give: a forced 1000 dropped the head for a
    zero one (all outputs 0, CLIP's 512-wide projection lost)."""
    from tests.weights.test_golden_parity import expected

    want = expected("vit_token.expected.npz")
    for weights in ("tiny_test", "vit_ti16_tiny_test"):
        model = keras_vit.ViT_Ti16(weights=weights, classifier_activation=None)
        assert model.num_classes == 5
        np.testing.assert_allclose(
            model.predict(want["images"], verbose=0), want["logits"], atol=1e-4
        )
    # from_variant and from_preset with the short name too.
    for model in (
        keras_vit.ViT.from_variant("Ti/16", weights="tiny_test"),
        keras_vit.ViT.from_preset(
            "tiny_test", **keras_vit.registry.get_variant("Ti/16")
        ),
    ):
        assert model.num_classes == 5
    # Told otherwise, a new head; no weights, the default 1000.
    with pytest.warns(UserWarning, match="head"):
        tuned = keras_vit.ViT_Ti16(num_classes=3, weights="tiny_test")
    assert tuned.num_classes == 3
    assert keras_vit.ViT_Ti16().num_classes == 1000


def test_a_builder_passes_the_resampling_on(ti16_preset):
    """`interpolation` and `antialias` with `weights=` give what
    `load_weights` gives with them (a builder had no way to pass them:
    a preset loaded at a smaller size was always resampled bilinearly)."""
    from tests.weights import test_resample_entry_points as entry

    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        model = keras_vit.ViT_Ti16(
            weights="tiny_test", image_size=16, **entry.TIMM
        )
        default = keras_vit.ViT_Ti16(weights="tiny_test", image_size=16)
    assert model.num_classes == 5 and model.grid_size == (2, 2)
    path = keras_vit.weights.loading.resolve("tiny_test", "Ti/16")[0]
    entry.assert_same_weights(
        model, entry.loaded_as_load_weights(model, path, **entry.TIMM)
    )
    assert np.max(np.abs(entry.posemb(model) - entry.posemb(default))) > 1e-3
