"""`keras_vit.weights.save_npz`: what the original `.npz` layout holds is
written exactly (a hybrid's ResNet stem too), what it has no place for is
refused before any file is opened."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from tests import helpers
from tests.helpers import random_images
from tests.helpers import randomize_weights

#: Any tiny ViT, logits out (softmax hides differences).
TINY = dict(helpers.TINY, classifier_activation=None)


@pytest.mark.parametrize(
    "options, named",
    [
        ({"layer_scale_init": 1e-5}, ["layer_scale_init=1e-05"]),
        ({"qk_norm": True}, ["qk_norm=True"]),
        ({"use_gated_mlp": True}, ["use_gated_mlp=True"]),
        ({"norm_pre": True}, ["norm_pre=True"]),
        ({"num_register_tokens": 2}, ["num_register_tokens=2"]),
        ({"distillation": True}, ["distillation=True"]),
        ({"pooling": "map"}, ["pooling='map'"]),
        (
            {"position_embedding_tokens": "patches"},
            ["position_embedding_tokens='patches'"],
        ),
        # These two failed with a bare KeyError of a missing weight.
        ({"pooling": "gap", "fc_norm": True}, ["fc_norm=True"]),
        ({"patch_bias": False}, ["patch_bias=False"]),
        (
            {"layer_scale_init": 1e-6, "qk_norm": True, "patch_bias": False},
            ["layer_scale_init=1e-06", "qk_norm=True", "patch_bias=False"],
        ),
        (
            {
                "patch_size": 1,
                "stem": keras.layers.Conv2D(16, 8, strides=8, name="conv"),
            },
            ["stem='Conv2D'"],
        ),
    ],
)
def test_what_the_layout_has_no_place_for_is_refused(tmp_path, options, named):
    # Written, their weights were dropped (or the file read as another
    # model): refused, naming each, and no file is written.
    model = keras_vit.ViT(**{**TINY, **options})
    with pytest.raises(ValueError) as error:
        keras_vit.weights.save_npz(model, str(tmp_path / "m.npz"))
    message = str(error.value)
    assert message.startswith("save_npz cannot store ")
    for setting in named:
        assert f"{setting} (the original .npz layout " in message
    assert message.endswith("Received: " + ", ".join(named))
    assert os.listdir(tmp_path) == []


def test_patch_only_position_embeddings_without_prefix_tokens_are_stored(
    tmp_path,
):
    # Without a class token, "patches" and "all" are the same embeddings.
    options = {"pooling": "gap", "position_embedding_tokens": "patches"}
    model = keras_vit.ViT(**{**TINY, **options})
    randomize_weights(model)
    path = str(tmp_path / "gap.npz")
    keras_vit.weights.save_npz(model, path)
    loaded = keras_vit.ViT(**{**TINY, "pooling": "gap"})
    keras_vit.load_weights(loaded, path)
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        loaded.predict(images, verbose=0),
        model.predict(images, verbose=0),
        atol=1e-5,
    )


def test_a_hybrid_round_trips_in_the_original_layout(tmp_path):
    # It failed on the embedding kernel (the stem's 128 channels taken for
    # the image's 3); the stem is written under the names the reader takes.
    hybrid = {
        **TINY,
        "patch_size": 1,
        "stem": {"block_units": [1], "width": 32},
    }
    model = keras_vit.ViT(**hybrid)
    randomize_weights(model, scale=0.1)
    path = str(tmp_path / "hybrid.npz")
    keras_vit.weights.save_npz(model, path)
    with np.load(path) as arrays:
        assert arrays["embedding/kernel"].shape == (1, 1, 128, model.hidden_dim)
        np.testing.assert_array_equal(
            arrays["block1/unit1/conv_proj/kernel"],
            model.get_layer("resnet_stem").units[0].proj_conv.kernel.numpy(),
        )
        assert {"conv_root/kernel", "gn_root/scale", "gn_root/bias"} <= set(
            arrays.files
        )
    loaded = keras_vit.ViT(**hybrid)
    keras_vit.load_weights(loaded, path)
    for want, got in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(want.numpy(), got.numpy(), want.path)
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        loaded.predict(images, verbose=0),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
