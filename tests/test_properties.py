"""Property: any constructor arguments either build a working model or are
refused with a ValueError/TypeError raised by keras_vit itself."""

import math
import traceback

import keras
import numpy as np
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import keras_vit

# Per argument: values of the right kind (which may still clash with each
# other, e.g. an image size that the patch size does not divide) ...
VALID = {
    "image_size": st.one_of(
        st.sampled_from([8, 16, 24, 32]),
        st.tuples(st.sampled_from([8, 16, 24]), st.sampled_from([8, 16, 40])),
    ),
    "patch_size": st.sampled_from([4, 8]),
    "hidden_dim": st.sampled_from([4, 6, 8, 12]),
    "num_layers": st.integers(1, 2),
    "num_heads": st.sampled_from([1, 2, 3, 4]),
    "mlp_dim": st.integers(1, 16),
    "num_classes": st.integers(2, 4),
    "include_top": st.booleans(),
    "pooling": st.sampled_from(["token", "gap", None]),
    "class_token": st.sampled_from([True, False, None]),
    "position_embedding": st.sampled_from(
        ["learned", "learned2d", "sincos2d", "none"]
    ),
    "representation_size": st.one_of(st.none(), st.integers(1, 8)),
    "dropout_rate": st.floats(0.0, 0.9),
    "attention_dropout_rate": st.floats(0.0, 0.9),
    "drop_path_rate": st.floats(0.0, 0.9),
    "layer_norm_epsilon": st.floats(1e-7, 1e-3),
    "classifier_activation": st.sampled_from(["softmax", None, "sigmoid"]),
    "include_preprocessing": st.booleans(),
    "num_channels": st.integers(1, 4),
    "dtype": st.sampled_from([None, "float32", "mixed_bfloat16"]),
}
# ... and values that are wrong whatever the other arguments are.
INVALID = st.one_of(
    st.integers(-3, 0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "16",
            "max",
            "",
            None,
            True,
            (8,),
            (8, -8),
            [4, 4, 4],
            "int32",
            "uint8",
            1e39,
        ]
    ),
)


@st.composite
def arguments(draw):
    names = sorted(VALID)
    kwargs = {
        name: draw(VALID[name])
        for name in draw(st.sets(st.sampled_from(names)))
    }
    for name in draw(st.lists(st.sampled_from(names), max_size=2)):
        kwargs[name] = draw(INVALID)
    return kwargs


DEFAULTS = dict(
    image_size=16,
    patch_size=8,
    hidden_dim=8,
    num_layers=1,
    num_heads=2,
    mlp_dim=8,
    num_classes=3,
)


def _raised_by_keras_vit(error):
    frames = traceback.extract_tb(error.__traceback__)
    return "keras_vit" in frames[-1].filename


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(arguments())
def test_builds_and_runs_or_raises_a_clear_error(kwargs):
    kwargs = {**DEFAULTS, **kwargs}
    try:
        model = keras_vit.ViT(**kwargs)
    except (ValueError, TypeError) as error:
        assert _raised_by_keras_vit(error), traceback.format_exc()
        assert str(error)
        return
    # What was accepted is usable: finite numbers (layer_norm_epsilon=inf
    # gave every image the same features), a floating-point policy.
    for name, value in model.get_config().items():
        if isinstance(value, float):
            assert math.isfinite(value) and value < 1e30, (name, value)
    assert keras.backend.is_float_dtype(model.compute_dtype)
    batch = np.random.default_rng(0).integers(
        0, 256, (2, *model.image_size, model.num_channels)
    )
    out = model(batch.astype("float32"), training=True).numpy()
    assert np.isfinite(out).all()
    assert out.shape[0] == 2
