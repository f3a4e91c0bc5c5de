"""keras_vit's own files (`.keras`, `.weights.h5`): what their tensors
cannot tell apart is checked, never guessed."""

import numpy as np
import pytest

import keras_vit
from tests.helpers import random_images
from tests.helpers import randomize_weights

TINY = dict(
    image_size=32,
    patch_size=8,
    hidden_dim=32,
    num_layers=1,
    num_heads=2,
    mlp_dim=64,
    num_classes=5,
    classifier_activation=None,
)


def _tiny(seed=0, **kwargs):
    model = keras_vit.ViT(**{**TINY, **kwargs})
    randomize_weights(model, seed=seed)
    return model


def _save(model, path):
    path = str(path)
    (model.save if path.endswith(".keras") else model.save_weights)(path)
    return path


def _weights(model):
    return [w.numpy().copy() for w in model.weights]


def _refused(model, path, match):
    """Asserts that loading `path` into `model` is refused with `match`
    and changes none of its weights."""
    before = _weights(model)
    with pytest.raises(ValueError, match=match):
        keras_vit.load_weights(model, path)
    for old, w in zip(before, model.weights):
        np.testing.assert_array_equal(old, w.numpy())


def _assert_same_outputs(a, b):
    images = random_images((2, 32, 32, 3))
    np.testing.assert_allclose(
        a.predict(images, verbose=0), b.predict(images, verbose=0), atol=1e-5
    )


def test_a_keras_file_refuses_another_number_of_heads(tmp_path):
    # The fused QKV kernel has the same shape for 2 and 4 heads: the heads
    # the config records are what tells them apart.
    path = _save(_tiny(), tmp_path / "a.keras")
    _refused(
        _tiny(seed=1, num_heads=4), path, "num_heads: checkpoint 2, model 4"
    )
    loaded = _tiny(seed=1)
    checkpoint = keras_vit.load_weights(loaded, path)
    assert checkpoint.num_heads == 2
    _assert_same_outputs(loaded, _tiny())


@pytest.mark.parametrize(
    "setting, received",
    [
        ({"activation": "quick_gelu"}, "activation='quick_gelu'"),
        ({"layer_norm_epsilon": 1e-5}, "layer_norm_epsilon=1e-05"),
    ],
)
def test_a_keras_file_refuses_another_activation_or_epsilon(
    tmp_path, setting, received
):
    # Same tensors, other outputs: refused, naming the file's and the
    # model's values.
    path = _save(_tiny(), tmp_path / "a.keras")
    name = next(iter(setting))
    theirs = f"{name}={keras_vit.ViT(**TINY).vit_config.to_dict()[name]!r}"
    _refused(
        _tiny(seed=1, **setting),
        path,
        rf"with {theirs} \(its config records them\).*Received: {received}$",
    )
