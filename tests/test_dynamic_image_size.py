"""`ViT(dynamic_image_size=True)`: any resolution at call time, the same
outputs as a model rebuilt at that size with the weights loaded through
`keras_vit.load_weights`' resampling."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from tests.helpers import TINY
from tests.helpers import random_images
from tests.helpers import randomize_weights

#: `TINY` on a 4x4 reference grid of 4 px patches (16 px; `SIZES` has
#: sides that are no multiple of `TINY`'s 8), in one block, with logits out.
SMALL = dict(
    TINY,
    image_size=16,
    patch_size=4,
    num_layers=1,
    classifier_activation=None,
)

#: The prefix-token and position-embedding layouts the fixed path has.
LAYOUTS = {
    "class_token": {},
    "registers_distilled": {"num_register_tokens": 2, "distillation": True},
    "patches_only": {
        "position_embedding_tokens": "patches",
        "num_register_tokens": 1,
    },
    "gap_learned2d": {"pooling": "gap", "position_embedding": "learned2d"},
    "map_sincos2d": {"pooling": "map", "position_embedding": "sincos2d"},
}

#: The reference grid, a non-square one, and a bigger one.
SIZES = ((16, 16), (12, 20), (32, 24))


def _dynamic(seed=0, **kwargs):
    model = keras_vit.ViT(**{**SMALL, **kwargs}, dynamic_image_size=True)
    randomize_weights(model, seed=seed)
    return model


def _fixed_at(model, size, tmp_path):
    """A fixed-size model at `size`, `model`'s weights loaded (and its
    position embeddings resampled) by keras_vit.load_weights."""
    path = tmp_path / "dynamic.weights.h5"
    model.save_weights(path)
    config = {**model.get_config(), "image_size": size}
    config.update(dynamic_image_size=False, dynamic_image_padding=False)
    fixed = keras_vit.ViT.from_config(config)
    with warnings.catch_warnings():  # "Position embeddings resampled ..."
        warnings.simplefilter("ignore", UserWarning)
        keras_vit.load_weights(fixed, path)
    return fixed


def _outputs_at(model, size, images, tmp_path):
    """`_fixed_at(model, size)`'s outputs on `images`, called (the
    reference, not a traced `predict`)."""
    fixed = _fixed_at(model, size, tmp_path)
    return keras.ops.convert_to_numpy(fixed(images, training=False))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_outputs_equal_a_model_rebuilt_at_each_size(layout, tmp_path):
    model = _dynamic(**LAYOUTS[layout])
    assert model.input_shape == (None, None, None, 3)
    for size in SIZES:
        images = random_images((2, *size, 3), seed=size[0])
        expected = _outputs_at(model, size, images, tmp_path)
        assert np.abs(expected).max() > 1e-2  # the heads are not zero
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(model(images)), expected, atol=1e-5
        )
        # predict retraces with unknown sizes (the embeddings resampled
        # by the in-graph weights, not by NumPy's).
        np.testing.assert_allclose(
            model.predict(images, verbose=0), expected, atol=1e-5
        )


def test_an_unknown_size_graph_resamples_as_the_loader(tmp_path):
    model = _dynamic(num_register_tokens=1)
    call = tf.function(
        model, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    for size in SIZES[1:]:
        images = random_images((1, *size, 3), seed=1)
        expected = _outputs_at(model, size, images, tmp_path)
        np.testing.assert_allclose(call(images), expected, atol=1e-5)


@pytest.mark.slow  # ~12 s: XLA compiles each size twice
def test_jit_compiled_at_two_sizes(tmp_path):
    model = _dynamic(num_register_tokens=1, distillation=True)
    model.compile(jit_compile=True)
    call = tf.function(model, jit_compile=True)
    for size in ((12, 20), (32, 24)):
        images = random_images((2, *size, 3), seed=3)
        expected = _outputs_at(model, size, images, tmp_path)
        np.testing.assert_allclose(
            model.predict(images, verbose=0), expected, atol=1e-5
        )
        np.testing.assert_allclose(call(images), expected, atol=1e-5)


def test_padding_pads_the_bottom_and_right_with_zeros(tmp_path):
    model = _dynamic(include_preprocessing=False)
    padded = keras_vit.ViT(
        **{**model.get_config(), "dynamic_image_padding": True}
    )
    padded.set_weights(model.get_weights())
    images = random_images((2, 13, 18, 3)) / 255.0
    zeros = np.pad(images, [(0, 0), (0, 3), (0, 2), (0, 0)])
    expected = _outputs_at(model, (16, 20), zeros, tmp_path)
    np.testing.assert_allclose(
        padded.predict(images, verbose=0), expected, atol=1e-5
    )
    assert padded.input_grid(images.shape) == (4, 5)


def test_a_size_the_patch_size_does_not_divide_is_refused():
    model = _dynamic()
    images = random_images((1, 12, 18, 3))
    with pytest.raises(ValueError, match=r"patch_size=4.*\(12, 18, 3\)"):
        model(images)
    call = tf.function(
        model, input_signature=[tf.TensorSpec((None, None, None, 3))]
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"patch_size=4.*\[12 18\]"
    ):
        call(images)
    with pytest.raises(ValueError, match=r"\(height, width\)=\(12, 18\)"):
        model.input_grid(images.shape)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dynamic_image_size": "yes"}, "dynamic_image_size='yes'"),
        ({"dynamic_image_padding": True}, "dynamic_image_size=False"),
        (
            {"dynamic_image_size": True, "stem": {"block_units": [1]}},
            "stem=",
        ),
        (
            {"dynamic_image_size": True, "position_embedding": "relative"},
            "position_embedding='relative'",
        ),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        keras_vit.ViT(**SMALL, **kwargs)


def test_the_config_round_trips_through_a_safe_mode_keras_file(tmp_path):
    model = _dynamic(dynamic_image_padding=True, num_register_tokens=1)
    config = model.get_config()
    assert config["dynamic_image_size"] is True
    assert config["dynamic_image_padding"] is True
    path = tmp_path / "dynamic.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    assert reloaded.dynamic_image_size and reloaded.dynamic_image_padding
    assert reloaded.grid_size == model.grid_size == (4, 4)
    images = random_images((1, 20, 10, 3))
    np.testing.assert_allclose(
        reloaded.predict(images, verbose=0),
        model.predict(images, verbose=0),
        atol=1e-6,
    )


def test_intermediates_and_rollout_take_the_grid_from_the_input():
    model = _dynamic(num_register_tokens=1)
    images = random_images((1, 12, 20, 3))
    out = model.intermediates_model()(images)
    assert out["attention_weights"][0].shape == (1, 2, 2 + 3 * 5, 2 + 3 * 5)
    rollout = keras_vit.visualize.attention_rollout(model, images)
    assert rollout.grid == (3, 5) and rollout.maps.shape == (1, 3, 5)
    distances = keras_vit.visualize.mean_attention_distance(model, images)
    assert distances.shape == (1, 2) and np.all(np.isfinite(distances))


def test_builders_pass_it_through():
    model = keras_vit.ViT_Ti16(
        image_size=32, num_layers=1, num_classes=3, dynamic_image_size=True
    )
    assert model.dynamic_image_size and model.input_shape[1:3] == (None, None)
    assert model.predict(random_images((1, 48, 16, 3)), verbose=0).shape == (
        1,
        3,
    )


def test_tflite_exports_at_image_size_with_builtin_ops(tmp_path):
    from keras_vit import export
    from keras_vit.export import graph as graph_lib
    from keras_vit.export import runtime as runtime_lib

    model = _dynamic(num_register_tokens=1)
    result = export.export_tflite(
        model, tmp_path / "m.tflite", num_verify_images=4
    )
    assert result.report is not None and not result.report.failures
    ops = graph_lib.op_histogram(result.path)
    assert "CUSTOM" not in ops and "FLEX" not in " ".join(ops)
    images = random_images((1, 16, 16, 3), seed=5)
    expected = _outputs_at(model, (16, 16), images, tmp_path)
    np.testing.assert_allclose(
        runtime_lib.run_tflite(result.path, images), expected, atol=1e-4
    )


def test_a_saved_model_keeps_any_size(tmp_path):
    from keras_vit.export import saved_model as saved_model_lib

    model = _dynamic(num_register_tokens=1)
    saved_model_lib.build_archive(model).write_out(
        str(tmp_path / "sm"), verbose=False
    )
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures[
        "serving_default"
    ]
    for size in ((16, 16), (12, 20)):
        images = random_images((2, *size, 3), seed=6)
        (out,) = serve(images=tf.constant(images)).values()
        np.testing.assert_allclose(
            out, model.predict(images, verbose=0), atol=1e-5
        )


@pytest.mark.parametrize("padding", [False, True])
def test_a_saved_model_refuses_an_image_of_no_patch_one_way(tmp_path, padding):
    # Its serving signature takes (None, None, None, 3): a 0x8 or 8x0
    # image returned an output (eager and XLA refused it).
    from keras_vit.export import saved_model as saved_model_lib

    model = _dynamic(dynamic_image_padding=padding)
    saved_model_lib.build_archive(model).write_out(
        str(tmp_path / "sm"), verbose=False
    )
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures[
        "serving_default"
    ]
    for size in ((0, 8), (8, 0)):
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="at least one patch"
        ):
            serve(images=tf.zeros((1, *size, 3)))
    assert serve(images=tf.zeros((1, 8, 8, 3)))  # one patch each way: served


def test_from_preset_loads_weights_into_a_dynamic_model(tmp_path):
    # A checkpoint at another resolution: resampled once, on loading, to
    # the reference grid of image_size, then on each call to the input's.
    source = keras_vit.ViT(**{**SMALL, "image_size": 24})
    randomize_weights(source, seed=7)
    source.save_weights(tmp_path / "source.weights.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = keras_vit.ViT.from_preset(
            str(tmp_path / "source.weights.h5"),
            **SMALL,
            dynamic_image_size=True,
        )
        fixed = keras_vit.ViT.from_preset(
            str(tmp_path / "source.weights.h5"), **SMALL
        )
    assert model.dynamic_image_size and model.grid_size == (4, 4)
    images = random_images((1, 16, 16, 3), seed=8)
    np.testing.assert_allclose(
        model.predict(images, verbose=0),
        fixed.predict(images, verbose=0),
        atol=1e-6,
    )
    assert model.predict(random_images((1, 8, 28, 3)), verbose=0).shape == (
        1,
        5,
    )


def test_few_shot_evaluates_a_dynamic_model_at_its_image_size():
    from keras_vit import evaluation

    model = _dynamic(include_top=False, image_size=32, patch_size=8)
    fixed = keras_vit.ViT(**{**model.get_config(), "dynamic_image_size": False})
    fixed.set_weights(model.get_weights())
    a = evaluation.few_shot(model, "digits", shots=2, seeds=1)
    b = evaluation.few_shot(fixed, "digits", shots=2, seeds=1)
    assert a.accuracy == b.accuracy
