"""`.keras` files written by an earlier keras_vit keep loading, exactly.

The files in tests/golden/ were saved before the model moved out of
`keras_vit/model.py` (see tests/golden/make_saved_models.py): their configs
name the module `keras_vit.model`, which no longer exists, and Keras finds
the classes by their registered names (`keras_vit>ViT`,
`keras_vit>MaskedPatchPrediction`).
"""

import os

import keras
import numpy as np
import pytest

import keras_vit

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")


@pytest.fixture(scope="module")
def expected():
    with np.load(os.path.join(GOLDEN, "saved_models.expected.npz")) as f:
        return dict(f)


def _load(name):
    return keras.saving.load_model(os.path.join(GOLDEN, f"saved_{name}.keras"))


@pytest.mark.parametrize("name", ["vit", "hybrid"])
def test_an_earlier_saved_vit_loads_and_computes_the_same(name, expected):
    model = _load(name)
    assert type(model) is keras_vit.ViT
    out = model.predict(expected["images"], verbose=0)
    np.testing.assert_allclose(out, expected[name], atol=1e-5)
    # Saved again, it loads again, to the same config.
    clone = keras_vit.ViT.from_config(model.get_config())
    assert clone.get_config() == model.get_config()


def test_an_earlier_saved_masked_patch_prediction_loads(expected):
    mpp = _load("mpp")
    assert type(mpp) is keras_vit.training.MaskedPatchPrediction
    assert type(mpp.backbone) is keras_vit.ViT
    out = mpp.backbone.predict(expected["images"], verbose=0)
    np.testing.assert_allclose(out, expected["mpp_tokens"], atol=1e-5)
    assert mpp(expected["images"])["logits"].shape == (2, 16, 512)
