"""transformers' run-time resampling of position embeddings, exactly.

tests/golden/make_transformers_resample_references.py (developer-side:
torch, transformers) called each transformers class's own
`interpolate_pos_encoding` on random tables (onto larger, smaller and
non-square grids); keras_vit's `resample_position_embeddings` with
`transformers_resampling(model_type)` must give the same tables up to
float32 rounding (1e-6 + 1e-6 · |value|: the sums' order differs). The
models' outputs at other sizes are in tests/weights/test_hf_family_parity.py.
"""

import json
import os

import numpy as np
import pytest
from keras import ops

from keras_vit import patch_grid
from keras_vit.weights import loading
from keras_vit.weights.huggingface import INTERPOLATE_POS_ENCODING_ANTIALIAS
from keras_vit.weights.huggingface import transformers_resampling

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
with open(os.path.join(GOLDEN, "transformers_resample_manifest.json")) as f:
    _RECORDED = json.load(f)["files"]["transformers_resample.expected.npz"]
CASES = _RECORDED["cases"]
PREFIX = _RECORDED["prefix"]


@pytest.fixture(scope="module")
def tables():
    path = os.path.join(GOLDEN, "transformers_resample.expected.npz")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _resampled(tables, model_type, case, target=None):
    side, grid = CASES[case]
    return patch_grid.resample_position_embeddings(
        tables[f"{model_type}/{case}/posemb"],
        tuple(grid) if target is None else target,
        source_grid=(side, side),
        num_prefix_tokens=PREFIX[model_type],
        **transformers_resampling(model_type),
    )


def test_every_recorded_class_has_a_resampling():
    assert set(PREFIX) <= set(INTERPOLATE_POS_ENCODING_ANTIALIAS)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("model_type", sorted(PREFIX))
def test_tables_match_interpolate_pos_encoding(tables, model_type, case):
    np.testing.assert_allclose(
        np.asarray(_resampled(tables, model_type, case)),
        tables[f"{model_type}/{case}/out"],
        atol=1e-6,
        rtol=1e-6,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_grid_known_when_the_graph_runs_gets_the_same_weights(tables, case):
    # The sides as tensors: the weights are built with keras.ops (as a
    # PatchEncoder meeting a grid decided at run time builds them).
    grid = tuple(ops.convert_to_tensor(n, "int32") for n in CASES[case][1])
    np.testing.assert_allclose(
        np.asarray(_resampled(tables, "vit", case, target=grid)),
        tables[f"vit/{case}/out"],
        atol=1e-6,
        rtol=1e-6,
    )


def test_antialiasing_needs_a_grid_of_python_integers(tables):
    grid = (ops.convert_to_tensor(5, "int32"), 5)
    with pytest.raises(ValueError, match="Received: antialias=True"):
        _resampled(tables, "dinov2_with_registers", "8x8_to_5x5", grid)


def test_tensorflows_bicubic_is_not_pytorchs(tables):
    # What the new interpolation is for: "bicubic" (a = -0.5) is far from
    # every class that does not antialias.
    side, grid = CASES["8x8_to_12x12"]
    theirs = patch_grid.resample_position_embeddings(
        tables["clip_vision_model/8x8_to_12x12/posemb"],
        tuple(grid),
        num_prefix_tokens=1,
        interpolation="bicubic",
    )
    want = tables["clip_vision_model/8x8_to_12x12/out"]
    assert np.abs(np.asarray(theirs) - want).max() > 1e-3


@pytest.mark.parametrize(
    "model_type", sorted(INTERPOLATE_POS_ENCODING_ANTIALIAS)
)
def test_transformers_resampling_is_what_loading_takes(model_type):
    resize = transformers_resampling(model_type)
    assert loading.checked_resampling(**resize) == resize


@pytest.mark.parametrize("model_type", ["beit", None, ["vit"], "ViT"])
def test_an_unknown_model_type_is_named(model_type):
    with pytest.raises(ValueError, match="Received: model_type="):
        transformers_resampling(model_type)
