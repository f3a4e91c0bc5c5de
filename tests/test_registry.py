"""The one registry of variants, builders and presets, and `build`."""

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import keras_vit
from keras_vit import builders
from keras_vit import cli
from keras_vit import registry
from keras_vit import resolver
from keras_vit.registry import presets as registry_presets
from tests.weights.test_golden_parity import TINY
from tests.weights.test_golden_parity import expected
from tests.weights.test_golden_parity import golden
from tests.weights.test_loading import local_preset  # noqa: F401 (a fixture)

# Every preset as it resolved before the registry (variant, short name, URL,
# resolution, classes, parameters), frozen from the PRESETS that loops and
# special cases generated in keras_vit/weights/download.py.
BEFORE = [
    (
        "B/16",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-B_16.npz",
        224,
        21843,
        103186515,
    ),
    (
        "B/16",
        "in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_16.npz",
        384,
        1000,
        86859496,
    ),
    (
        "B/32",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-B_32.npz",
        224,
        21843,
        104843091,
    ),
    (
        "B/32",
        "in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_32.npz",
        384,
        1000,
        88297192,
    ),
    (
        "L/16",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-L_16.npz",
        224,
        21843,
        326740307,
    ),
    (
        "L/16",
        "in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_16.npz",
        384,
        1000,
        304715752,
    ),
    (
        "L/32",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-L_32.npz",
        224,
        21843,
        328949075,
    ),
    (
        "L/32",
        "in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_32.npz",
        384,
        1000,
        306632680,
    ),
    (
        "H/14",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-H_14.npz",
        224,
        21843,
        660385363,
    ),
    (
        "B/16",
        "in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_16-224.npz",
        224,
        1000,
        86567656,
    ),
    (
        "L/16",
        "in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_16-224.npz",
        224,
        1000,
        304326632,
    ),
    (
        "Ti/16",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0.npz",
        224,
        21843,
        9740115,
    ),
    (
        "Ti/16",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        224,
        1000,
        5717416,
    ),
    (
        "Ti/16",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        384,
        1000,
        5790376,
    ),
    (
        "S/32",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0.npz",
        224,
        21843,
        30903507,
    ),
    (
        "S/32",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        224,
        1000,
        22878952,
    ),
    (
        "S/32",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        384,
        1000,
        22915432,
    ),
    (
        "S/16",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0.npz",
        224,
        21843,
        30075219,
    ),
    (
        "S/16",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        224,
        1000,
        22050664,
    ),
    (
        "S/16",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        384,
        1000,
        22196584,
    ),
    (
        "B/32",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0.npz",
        224,
        21843,
        104252499,
    ),
    (
        "B/32",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        224,
        1000,
        88224232,
    ),
    (
        "B/32",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        384,
        1000,
        88297192,
    ),
    (
        "B/16",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
        224,
        21843,
        102595923,
    ),
    (
        "B/16",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        86567656,
    ),
    (
        "B/16",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        86859496,
    ),
    (
        "B/8",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
        224,
        21843,
        102605139,
    ),
    (
        "B/8",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        86576872,
    ),
    (
        "L/16",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1.npz",
        224,
        21843,
        325690707,
    ),
    (
        "L/16",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        304326632,
    ),
    (
        "L/16",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        304715752,
    ),
    (
        "S/16",
        "augreg_in1k",
        "https://storage.googleapis.com/vit_models/augreg/S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        22050664,
    ),
    (
        "S/16",
        "augreg_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        22196584,
    ),
    (
        "B/32",
        "augreg_in1k",
        "https://storage.googleapis.com/vit_models/augreg/B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        88224232,
    ),
    (
        "B/32",
        "augreg_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        88297192,
    ),
    (
        "B/16",
        "augreg_in1k",
        "https://storage.googleapis.com/vit_models/augreg/B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        86567656,
    ),
    (
        "B/16",
        "augreg_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        86859496,
    ),
    (
        "B/16",
        "sam_in1k",
        "https://storage.googleapis.com/vit_models/sam/ViT-B_16.npz",
        224,
        1000,
        86567656,
    ),
    (
        "B/32",
        "sam_in1k",
        "https://storage.googleapis.com/vit_models/sam/ViT-B_32.npz",
        224,
        1000,
        88224232,
    ),
    (
        "R50+B/16",
        "in21k",
        "https://storage.googleapis.com/vit_models/imagenet21k/R50+ViT-B_16.npz",
        224,
        21843,
        115277971,
    ),
    (
        "R50+B/16",
        "in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/R50+ViT-B_16.npz",
        384,
        1000,
        98950952,
    ),
    (
        "R26+S/32",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0.npz",
        224,
        21843,
        44456467,
    ),
    (
        "R26+S/32",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        224,
        1000,
        36431912,
    ),
    (
        "R26+S/32",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        384,
        1000,
        36468392,
    ),
    (
        "R50+L/32",
        "augreg_in21k",
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0.npz",
        224,
        21843,
        350358931,
    ),
    (
        "R50+L/32",
        "augreg_in21k_ft_in1k",
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        224,
        1000,
        328994856,
    ),
    (
        "R50+L/32",
        "augreg_in21k_ft_in1k_384",
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        384,
        1000,
        329092136,
    ),
    (
        "B/16",
        "augreg2_in21k_ft_in1k",
        "https://huggingface.co/timm/vit_base_patch16_224.augreg2_in21k_ft_in1k/resolve/main/model.safetensors",
        224,
        1000,
        86567656,
    ),
    (
        "B/8",
        "augreg2_in21k_ft_in1k",
        "https://huggingface.co/timm/vit_base_patch8_224.augreg2_in21k_ft_in1k/resolve/main/model.safetensors",
        224,
        1000,
        86576872,
    ),
    (
        "B/16",
        "hf_in21k_ft_in1k",
        "https://huggingface.co/google/vit-base-patch16-224/resolve/main/model.safetensors",
        224,
        1000,
        86567656,
    ),
    (
        "L/16",
        "hf_in21k_ft_in1k",
        "https://huggingface.co/google/vit-large-patch16-224/resolve/main/model.safetensors",
        224,
        1000,
        304326632,
    ),
]
TINY_NUMBERS = {
    k: TINY[k]
    for k in ("patch_size", "hidden_dim", "num_layers", "num_heads", "mlp_dim")
}


#: The presets issue 25 added (the modern families), after `BEFORE`'s.
FAMILY_PRESETS = [
    "vit_s16_deit_distilled_in1k",
    "vit_s16_deit3_in21k_ft_in1k",
    "vit_s14_dinov2_lvd142m_518",
    "vit_s14_dinov2_reg4_lvd142m_518",
    "vit_b16_clip_openai",
    "vit_b16_siglip_webli",
    "vit_s16_dinov3_lvd1689m_256",
    "vit_b16_dinov3_lvd1689m_256",
    "vit_ti16_eupe_lvd1689m_256",
]


def test_every_old_preset_resolves_as_before():
    names = [p["unique_name"] for p in registry.PRESETS]
    assert names[len(BEFORE) :] == FAMILY_PRESETS
    for variant, name, url, image_size, num_classes, params in BEFORE:
        builder = registry.BUILDER_OF[variant]
        for preset in (
            registry.find_preset(variant, name),
            registry.find_preset(
                variant, f"{registry.model_name(variant)}_{name}"
            ),
            *[p for p in keras_vit.list_presets(builder) if p["name"] == name],
        ):
            got = (
                preset["url"],
                preset["image_size"],
                preset["num_classes"],
                preset["params"],
            )
            assert got == (url, image_size, num_classes, params), (
                variant,
                name,
            )


def test_records_are_whole_and_unique():
    names = [p["unique_name"] for p in registry.PRESETS]
    assert len(set(names)) == len(names)
    arguments = set(inspect.signature(keras_vit.ViT.__init__).parameters)
    for preset in registry.PRESETS:
        assert tuple(preset) == registry.FIELDS, preset["unique_name"]
        assert (
            preset["unique_name"]
            == f"{registry.model_name(preset['variant'])}_{preset['name']}"
        )
        assert preset["variant"] in registry.VARIANTS  # S/14: no builder
        assert set(preset["vit_arguments"]) <= arguments
        norm = preset["normalization"]  # None: [-1, 1]
        if norm is not None:  # ImageNet's or CLIP's mean and std
            assert set(norm) == {"mean", "std"}
            assert all(len(norm[k]) == 3 for k in norm)
            assert all(0 < v < 1 for k in norm for v in norm[k])
        assert preset["license"] in ("Apache-2.0", "MIT", "LicenseRef-DINOv3")


def test_the_registry_imports_nothing_heavy():
    # The package's own __init__ imports Keras; load the registry alone.
    code = (
        "import sys, types\n"
        "package = types.ModuleType('keras_vit')\n"
        f"package.__path__ = [{os.path.dirname(keras_vit.__file__)!r}]\n"
        "sys.modules['keras_vit'] = package\n"
        "import keras_vit.registry\n"
        "heavy = {'keras', 'tensorflow', 'numpy', 'jax', 'torch'} & "
        "set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert len(keras_vit.registry.PRESETS) > 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_resolve_names():
    assert registry.resolve("ViT_B16") == ("ViT_B16", "B/16", None)
    assert registry.resolve("S/8") == (None, "S/8", None)
    resolved = registry.resolve("vit_b16_augreg_in21k_ft_in1k")
    assert (
        resolved.builder == "ViT_B16"
        and resolved.preset["name"] == "augreg_in21k_ft_in1k"
    )
    with pytest.raises(
        ValueError, match=r"ViT_Ti16, .*B/16.*Received: model='ViT_X'"
    ):
        registry.resolve("ViT_X")
    with pytest.raises(
        ValueError,
        match=r"short preset name.*'vit_h14_in21k'.*Received: model='in21k'",
    ):
        registry.resolve("in21k")
    with pytest.raises(ValueError, match="Received: model=3"):
        registry.resolve(3)
    # A unique name of another variant is refused like a short one.
    with pytest.raises(
        ValueError, match="exists for variants \\['H/14'\\], not for S/16"
    ):
        registry.find_preset("S/16", "vit_h14_in21k")


@pytest.mark.parametrize("variant", [["B/16"], {"B": 16}])
def test_a_variant_that_is_no_string_is_a_clear_error(variant):
    # Unhashable: a bare TypeError from the table's lookup before.
    for get in (registry.get_variant, keras_vit.ViT.from_variant):
        with pytest.raises(ValueError, match="Unknown ViT variant") as info:
            get(variant)
        assert str(info.value).endswith(f"Received: variant={variant!r}")


def test_builders_are_made_from_the_registry():
    assert list(builders.BUILDERS) == list(registry.BUILDERS)
    for name, variant in registry.BUILDERS.items():
        fn = getattr(keras_vit, name)
        assert fn is getattr(builders, name) is builders.get_builder(name)
        assert fn.__name__ == name and fn.__module__ == "keras_vit.builders"
        for preset in registry.PRESETS:
            if preset["variant"] == variant:
                assert (
                    f"`{preset['name']}` (`{preset['unique_name']}`)"
                    in fn.__doc__
                )
    assert (
        "768 wide, 12 blocks, 12 heads, MLP 3072" in keras_vit.ViT_B16.__doc__
    )


def test_the_builders_parameter_counts_are_those_of_their_models():
    import keras

    assert list(registry.variants.PARAMS) == list(registry.BUILDERS)
    for name, params in registry.variants.PARAMS.items():
        # Counted from the variables' shapes, none allocated (ViT-H/14
        # alone would take 2.5 GB).
        with keras.StatelessScope(initialize_variables=False):
            counted = builders.get_builder(name)().count_params()
        assert counted == params, name


def test_build_names(tmp_path):
    small = dict(image_size=32, num_layers=1, num_classes=3)
    model = resolver.resolve_model("ViT_Ti16", **small)
    assert model.name == "vit_ti16" and model.hidden_dim == 192
    model = resolver.resolve_model("S/32", **small)
    assert model.patch_size == 32 and model.hidden_dim == 384
    with pytest.raises(ValueError, match="Received: model='ViT_X'"):
        resolver.resolve_model("ViT_X")
    with pytest.raises(
        ValueError, match="is its own weights.*Received: weights='x.npz'"
    ):
        resolver.resolve_model("vit_b16_augreg_in21k", weights="x.npz")
    with pytest.raises(
        ValueError, match=r"training run\'s folder\. Received: model=None"
    ):
        resolver.resolve_model(None)


def test_build_a_preset_by_its_unique_name(local_preset):  # noqa: F811
    want = expected("vit_token.expected.npz")
    for model in (
        resolver.resolve_model(
            "vit_tiny8_tiny_test"
        ),  # the variant has no builder
        keras_vit.ViT.from_preset("vit_tiny8_tiny_test"),
        keras_vit.ViT.from_variant("Tiny/8", weights="vit_tiny8_tiny_test"),
    ):
        assert model.image_size == (32, 32) and model.num_classes == 5
        logits = model.predict(want["images"], verbose=0)
        probabilities = np.exp(want["logits"]) / np.exp(want["logits"]).sum(
            -1, keepdims=True
        )
        np.testing.assert_allclose(logits, probabilities, atol=1e-5)


def test_a_presets_vit_arguments_build_its_model(
    local_preset,  # noqa: F811 (the fixture)
    monkeypatch,
):
    preset = {**local_preset, "vit_arguments": {"classifier_activation": None}}
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry_presets.PRESETS[:-1], preset]
    )
    want = expected("vit_token.expected.npz")
    model = keras_vit.ViT.from_preset("vit_tiny8_tiny_test")
    np.testing.assert_allclose(
        model.predict(want["images"], verbose=0), want["logits"], atol=1e-4
    )
    # Told otherwise, the caller wins.
    softmax = keras_vit.ViT.from_preset(
        "vit_tiny8_tiny_test", classifier_activation="softmax"
    )
    assert softmax.classifier_activation == "softmax"


def test_build_files(tmp_path):
    want = expected("vit_token.expected.npz")
    model = resolver.resolve_model(
        golden("vit_token.npz"), classifier_activation=None
    )
    np.testing.assert_allclose(
        model.predict(want["images"], verbose=0), want["logits"], atol=1e-4
    )
    weights = str(tmp_path / "tiny.weights.h5")
    model.save_weights(weights)
    same = resolver.resolve_model(weights, **TINY)
    np.testing.assert_allclose(
        same.predict(want["images"], verbose=0), want["logits"], atol=1e-4
    )
    path = str(tmp_path / "tiny.keras")
    model.save(path)
    loaded = resolver.resolve_model(path)
    assert (
        isinstance(loaded, keras_vit.ViT)
        and loaded.count_params() == model.count_params()
    )
    reloaded = resolver.resolve_model(path, weights=weights)
    np.testing.assert_allclose(
        reloaded.predict(want["images"], verbose=0), want["logits"], atol=1e-4
    )
    with pytest.raises(
        ValueError, match="not to a .keras file. Received: image_size=64"
    ):
        resolver.resolve_model(path, image_size=64)
    with pytest.raises(
        ValueError, match="is the model's weights.*Received: weights="
    ):
        resolver.resolve_model(golden("vit_token.npz"), weights=weights)
    with pytest.raises(ValueError, match="does not exist"):
        resolver.resolve_model(str(tmp_path / "none.keras"))
    # A training run's folder is its model.keras; the errors name the
    # argument the caller gives.
    os.replace(path, tmp_path / "model.keras")
    assert resolver.resolve_model(tmp_path).count_params() == (
        model.count_params()
    )
    with pytest.raises(ValueError, match="Received: reference='ViT_X'"):
        resolver.resolve_model("ViT_X", name="reference")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no model.keras.*reference="):
        resolver.resolve_model(tmp_path / "empty", name="reference")


def test_convert_takes_a_unique_name(tmp_path):
    from keras_vit.weights.convert import model_for_checkpoint

    checkpoint = keras_vit.weights.read_checkpoint(golden("vit_token.npz"))
    with pytest.raises(ValueError, match="Received: model='ViT_X'"):
        model_for_checkpoint(checkpoint, model="ViT_X")
    with pytest.raises(
        ValueError, match="hidden_dim"
    ):  # B/16's numbers, a tiny file
        model_for_checkpoint(checkpoint, model="vit_b16_augreg_in21k")


def test_presets_listing_shows_the_unique_name(capsys):
    (preset,) = keras_vit.list_presets("vit_ti16_augreg_in21k")
    assert preset["builder"] == "ViT_Ti16" and preset["name"] == "augreg_in21k"
    assert cli.main(["presets", "--model", "ViT_Ti16"]) == 0
    out = capsys.readouterr().out
    assert "unique_name" in out and "vit_ti16_augreg_in21k_ft_in1k_384" in out
    # Each preset's evaluation resize (keras_vit.data.resize.describe).
    rows = {line.split()[2]: line for line in out.splitlines()[1:-1]}
    assert rows["vit_ti16_augreg_in21k"].endswith("crop 0.9 bicubic")
    assert rows["vit_ti16_augreg_in21k_ft_in1k_384"].endswith(
        "squash bilinear, no antialias"
    )


def test_train_config_resolves_its_model_through_the_registry():
    from keras_vit.training import TrainConfig

    TrainConfig(model={"name": "vit_ti16_augreg_in21k"}).check()
    with pytest.raises(ValueError, match="ViT_Ti16, .*Received: model='ViT_X'"):
        TrainConfig(model={"name": "ViT_X"}).check()
    with pytest.raises(
        ValueError, match="is a preset.*Received: weights='x.npz'"
    ):
        TrainConfig(
            model={"name": "vit_ti16_augreg_in21k", "weights": "x.npz"}
        ).check()
