"""`ViT(image_resize=...)`: how images are resized for inference and
evaluation, recorded by the model and taken from a preset."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import registry
from keras_vit.data import datasets
from keras_vit.data import eval_pipeline
from keras_vit.data import resize
from keras_vit.data.images import load_image_files
from keras_vit.registry import presets as registry_presets
from tests.helpers import TINY
from tests.weights.test_loading import local_preset  # noqa: F401 (a fixture)

CROP = {"crop_pct": 0.9, "interpolation": "bicubic", "antialias": True}


def test_a_model_squashes_unless_told_and_keeps_its_setting(tmp_path):
    assert keras_vit.ViT(**TINY).image_resize == resize.DEFAULT
    model = keras_vit.ViT(**TINY, image_resize={"crop_pct": 0.9})
    assert model.image_resize == {**resize.DEFAULT, "crop_pct": 0.9}
    model = keras_vit.ViT(**TINY, image_resize=CROP)
    assert keras_vit.ViT.from_config(model.get_config()).image_resize == CROP
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.image_resize == CROP


def test_a_bad_setting_is_refused_by_the_model():
    with pytest.raises(ValueError, match=r"crop_pct.*Received: image_resize"):
        keras_vit.ViT(**TINY, image_resize={"crop_pct": 2})


def test_a_preset_gives_its_evaluations_resize(local_preset, monkeypatch):  # noqa: F811
    preset = {**local_preset, "image_resize": registry_presets.TIMM_CROP}
    monkeypatch.setattr(
        registry_presets, "PRESETS", [*registry.PRESETS[:-1], preset]
    )
    name = preset["unique_name"]
    assert keras_vit.ViT.from_preset(name).image_resize == CROP
    told = keras_vit.ViT.from_preset(name, image_resize=None)
    assert told.image_resize == resize.DEFAULT  # told otherwise


def test_every_preset_records_whose_evaluation_it_follows():
    kinds = {
        "google": registry_presets.GOOGLE_SQUASH,
        "hf": registry_presets.HF_SQUASH,
        "crop": registry_presets.TIMM_CROP,
        "full": registry_presets.TIMM_FULL_CROP,
    }
    for setting in kinds.values():
        assert resize.check(setting) == setting
    for preset in registry.PRESETS:
        name, top1 = preset["unique_name"], preset["top1_source"] or ""
        if "vision_transformer" in top1:  # Google's number, Google's squash
            want = "google"
        elif preset["source"] == "huggingface":
            want = "hf"
        elif preset["image_size"] > 224 or "deit3" in name or "dinov2" in name:
            # timm's 384 px ViTs, DeiT III and DINOv2 (timm 1.0.31's
            # pretrained_cfg), except Google's 384 px files timm does not
            # list (B/32 and L/16): their publisher's squash.
            want = (
                "google"
                if name
                in ("vit_b32_in21k_ft_in1k_384", "vit_l16_in21k_ft_in1k_384")
                else "full"
            )
        else:
            want = "crop"
        assert preset["image_resize"] == kinds[want], name


def test_files_and_the_evaluation_pipeline_resize_alike(tmp_path):
    path = keras_vit.sample_image_path()
    (cropped,) = load_image_files([path], (32, 32), image_resize=CROP)
    (squashed,) = load_image_files([path], (32, 32))
    assert np.abs(cropped - squashed).mean() > 5.0  # the cat is 3:2
    image = datasets.read_image(tf.constant(path))  # as the files are read
    pairs = tf.data.Dataset.from_tensors((image, 0))
    images, _ = next(iter(eval_pipeline(pairs, 2, 32, 1, image_resize=CROP)))
    np.testing.assert_allclose(images[0], cropped, atol=1e-3)
    with pytest.raises(ValueError, match=r"Received: image_resize='x'"):
        eval_pipeline(pairs, 2, 32, 1, image_resize="x")


def test_files_take_a_square_size_as_an_int_and_refuse_a_bad_one():
    path = keras_vit.sample_image_path()
    np.testing.assert_array_equal(
        load_image_files([path], 24), load_image_files([path], (24, 24))
    )
    with pytest.raises(ValueError, match=r"Received: image_size=\(0, 24\)"):
        load_image_files([path], (0, 24))


def test_a_presets_setting_is_its_own():
    # Records shared one dict per setting: editing one preset's (or the
    # constant) changed 33 others.
    first = registry.get_preset("vit_b16_augreg_in21k_ft_in1k")
    first["image_resize"]["crop_pct"] = 1.0
    try:
        deit = registry.get_preset("vit_s16_deit_distilled_in1k")
        assert deit["image_resize"]["crop_pct"] == 0.9
        assert registry_presets.TIMM_CROP["crop_pct"] == 0.9
    finally:
        first["image_resize"]["crop_pct"] = 0.9
