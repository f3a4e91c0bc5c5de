"""Position embeddings resampled on load as timm resamples them, from
committed goldens.

tests/golden/make_resample_references.py (developer-side: torch, timm)
recorded timm's `resample_abs_pos_embed` with its defaults (bicubic,
antialiased: its loaders', DINOv2's and transformers'
`Dinov2WithRegistersModel`'s) onto smaller grids, square and not, and
the tiny DINOv2 goldens' outputs at 12 and 8x12 px (from 16 px). Onto a
smaller grid antialiasing changes the embeddings by up to ~1, so
`load_weights(..., interpolation="bicubic", antialias=True)` must give
timm's, and without `antialias` it does not.
"""

import os

import numpy as np
import pytest

import keras_vit
from keras_vit import patch_grid
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
#: timm's resampled embeddings, to float32's (measured: 2e-6).
ATOL = 2e-5
#: The goldens' cases: (prefix entries, source grid, target grid), as
#: tests/golden/resample_manifest.json records them.
CASES = {
    "8x8_to_5x5": (1, (8, 8), (5, 5)),
    "8x8_to_3x6": (1, (8, 8), (3, 6)),
    "6x8_to_4x3": (1, (6, 8), (4, 3)),
    "patches_8x8_to_5x5": (0, (8, 8), (5, 5)),
    "4x4_to_6x6": (1, (4, 4), (6, 6)),
}
TINY = dict(patch_size=4, hidden_dim=8, num_layers=1, num_heads=2, mlp_dim=16)


def golden(name):
    with np.load(os.path.join(GOLDEN, name)) as data:
        return {key: data[key] for key in data.files}


def _model(prefix, grid):
    tokens = "all" if prefix else "patches"
    return keras_vit.ViT(
        **TINY,
        image_size=(4 * grid[0], 4 * grid[1]),
        num_classes=3,
        position_embedding_tokens=tokens,
    )


def _file(tmp_path, case):
    """A keras_vit file (it records its grid) of a model on the case's
    source grid, holding the golden's position embeddings."""
    prefix, source, _ = CASES[case]
    model = _model(prefix, source)
    model.get_layer("patch_encoder").pos_embedding.assign(
        golden("resample.expected.npz")[f"{case}/posemb"]
    )
    path = str(tmp_path / f"{case}.weights.h5")
    model.save_weights(path)
    return path


def _loaded(path, case, **resampling):
    prefix, _, target = CASES[case]
    model = _model(prefix, target)
    with pytest.warns(UserWarning, match="Position embeddings resampled"):
        keras_vit.load_weights(model, path, **resampling)
    return model.get_layer("patch_encoder").pos_embedding.numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_weights_resamples_as_timm(tmp_path, case):
    path = _file(tmp_path, case)
    loaded = _loaded(path, case, interpolation="bicubic", antialias=True)
    expected = golden("resample.expected.npz")[f"{case}/timm"]
    np.testing.assert_allclose(loaded, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "case", ["8x8_to_5x5", "8x8_to_3x6", "6x8_to_4x3", "patches_8x8_to_5x5"]
)
def test_without_antialias_a_smaller_grid_is_not_timms(tmp_path, case):
    loaded = _loaded(_file(tmp_path, case), case, interpolation="bicubic")
    expected = golden("resample.expected.npz")[f"{case}/timm"]
    assert np.max(np.abs(loaded - expected)) > 0.1  # measured: 0.6 to 1.4


def _dinov2(name, size, **resampling):
    path = os.path.join(GOLDEN, f"family_{name}.timm.safetensors")
    base = convert.model_for_checkpoint(read_checkpoint(path), num_heads=2)
    config = {**base.get_config(), "image_size": size}
    config.pop("name", None)
    model = keras_vit.ViT(**config)
    with pytest.warns(UserWarning, match="patch grid"):
        keras_vit.load_weights(model, path, **resampling)
    return model


@pytest.mark.parametrize("name", ["dinov2", "dinov2_reg"])
@pytest.mark.parametrize("size", ["12", "8x12"])
def test_dinov2_on_a_smaller_grid_gives_timms_outputs(name, size):
    """The tiny DINOv2 goldens (16 px, a 4x4 grid) at 12 px (3x3) and
    8x12 px (2x3): timm's outputs with the embeddings resampled as its
    loaders do, keras_vit's with `interpolation="bicubic",
    antialias=True`; without antialiasing, others."""
    expected = golden("resample_family.expected.npz")
    images = expected[f"{name}/images_{size}"]
    want = expected[f"{name}/features_{size}"]
    shape = images.shape[1:3]
    model = _dinov2(name, shape, interpolation="bicubic", antialias=True)
    outputs = model.predict(images, verbose=0)
    np.testing.assert_allclose(outputs, want, atol=1e-5, rtol=0)
    aliased = _dinov2(name, shape, interpolation="bicubic")
    assert np.max(np.abs(aliased.predict(images, verbose=0) - want)) > 1e-3


def test_the_note_says_antialiased(tmp_path):
    path = _file(tmp_path, "8x8_to_5x5")
    model = _model(1, (5, 5))
    with pytest.warns(UserWarning, match=r"5x5 patch grid \(bicubic, anti"):
        keras_vit.load_weights(
            model, path, interpolation="bicubic", antialias=True
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"antialias": "yes"}, "Received: antialias='yes'"),
        ({"antialias": 1}, "Received: antialias=1"),
        (
            {"antialias": True},  # the default interpolation has no filter
            "Received: antialias=True, interpolation='bilinear_align_corners'",
        ),
        (
            {"antialias": True, "interpolation": "nearest"},
            "Received: antialias=True, interpolation='nearest'",
        ),
    ],
)
def test_antialias_is_checked_before_the_file_is_read(kwargs, message):
    model = _model(1, (2, 2))
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(model, "not-there.npz", **kwargs)
    with pytest.raises(ValueError, match=message):
        keras_vit.weights.load_checkpoint(model, None, **kwargs)


def test_antialias_reaches_learned2d_embeddings(tmp_path):
    """`position_embedding="learned2d"`'s rows and columns are resampled
    with the same filter."""
    small, big = (
        keras_vit.ViT(
            **TINY,
            image_size=(4 * rows, 4 * cols),
            position_embedding="learned2d",
            num_classes=3,
        )
        for rows, cols in ((3, 2), (8, 6))
    )
    rng = np.random.default_rng(0)
    for variable in big.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    path = str(tmp_path / "big.weights.h5")
    big.save_weights(path)
    with pytest.warns(UserWarning, match="bicubic, antialiased"):
        keras_vit.load_weights(
            small, path, interpolation="bicubic", antialias=True
        )
    for name, length in (("x", 2), ("y", 3)):  # columns, rows
        key = f"patch_encoder/position_embedding_{name}"
        source = next(v for v in big.weights if v.path == key).numpy()
        loaded = next(v for v in small.weights if v.path == key).numpy()
        want, aliased = (
            patch_grid.resample_1d_embeddings(
                source, length, "bicubic", antialias=antialias
            )
            for antialias in (True, False)
        )
        np.testing.assert_allclose(loaded, want, atol=1e-6)
        assert np.max(np.abs(loaded - np.asarray(aliased))) > 0.1
