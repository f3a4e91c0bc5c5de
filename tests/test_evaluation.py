"""Linear few-shot evaluation: the closed form, the draws, a whole model."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import cli
from keras_vit import evaluation
from tests.helpers import TEST_VARIANT
from tests.helpers import TINY
from tests.helpers import fewer_digits
from tests.helpers import randomize_weights


def _ridge_reference(x, labels, test, num_classes, l2_reg):
    """The same problem through scikit-learn's Ridge (an independent solver):
    standardised features, a constant feature of 100, targets in {-1, 1}."""
    from sklearn.linear_model import Ridge

    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-5

    def design(f):
        return np.hstack([(f - mean) / std, np.full((len(f), 1), 100.0)])

    targets = 2.0 * np.eye(num_classes)[labels] - 1.0
    ridge = Ridge(alpha=l2_reg, fit_intercept=False, solver="cholesky")
    return ridge.fit(design(x), targets).predict(design(test)).argmax(axis=1)


@pytest.mark.parametrize(
    "n, d", [(40, 8), (12, 30)]
)  # more examples than features, and fewer
def test_closed_form_matches_ridge_regression(n, d):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, d) + rng.normal(size=d)
    labels = np.arange(n) % 4
    test = rng.normal(size=(200, d)) * 3
    for l2_reg in (1e-2, 1.0, 1024.0):
        np.testing.assert_array_equal(
            evaluation.fit_predict(x, labels, test, 4, l2_reg),
            _ridge_reference(x, labels, test, 4, l2_reg),
        )


def test_separable_features_are_classified():
    # Class c's features sit around 5 * e_c: one shot each is enough.
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(5), 30)
    features = 5 * np.eye(5)[labels] + rng.normal(scale=0.3, size=(150, 5))
    result = evaluation.linear_few_shot(
        features, labels, features, labels, 5, shots=(1, 5), seeds=2
    )
    assert result.accuracy[5] == [1.0, 1.0] and result.mean(1) > 0.95
    assert result.l2_reg == 1024.0


def test_draws_take_k_per_class_nested_and_by_seed():
    labels = np.repeat(np.arange(3), [10, 7, 12])
    draws = evaluation.sample_shots(labels, 3, (1, 5), seed=0)
    for k in (1, 5):
        assert np.bincount(labels[draws[k]], minlength=3).tolist() == [k] * 3
    assert set(draws[1]) <= set(draws[5])
    again = evaluation.sample_shots(labels, 3, (1, 5), seed=0)
    other = evaluation.sample_shots(labels, 3, (1, 5), seed=1)
    np.testing.assert_array_equal(draws[5], again[5])
    assert not np.array_equal(draws[5], other[5])
    with pytest.raises(
        ValueError, match=r"needs 8 training examples.*class 1: 7"
    ):
        evaluation.sample_shots(labels, 3, (1, 8), seed=0)


def test_bad_arguments_are_named():
    x, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    for kwargs, message in [
        ({"shots": 0}, "shots=0"),
        ({"shots": (5, 5)}, "distinct"),
        ({"seeds": 0}, "seeds=0"),
        ({"l2_reg": -1.0}, "l2_reg=-1.0"),
        # inf made every weight 0, every prediction class 0.
        ({"l2_reg": float("inf")}, "finite.*l2_reg=inf"),
        ({"l2_reg": float("nan")}, "l2_reg=nan"),
    ]:
        with pytest.raises(ValueError, match=message):
            evaluation.linear_few_shot(x, y, x, y, 2, **kwargs)


def test_bad_features_and_labels_are_named():
    x, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    for args, message in [
        ((x, y.astype("float32"), x, y, 2), "train_labels.*float32"),
        ((x, y, x, y[:3], 2), "test_labels.*3 labels for 4 rows"),
        ((x, y, x[:, :, None], y, 2), r"test_features.*\(4, 2, 1\)"),
        ((x, y, x, np.array([0, 1, 2, 1]), 2), r"num_classes=2.*\[2\]"),
        ((x, np.array([0, -1, 0, 1]), x, y, 2), r"train_labels.*\[-1\]"),
        ((x, y, x, y, 0), "num_classes=0"),
    ]:
        with pytest.raises(ValueError, match=message):
            evaluation.linear_few_shot(*args, shots=1, seeds=1)
    # The classifier alone: a negative label would wrap to the last class.
    with pytest.raises(ValueError, match=r"train_labels.*\[-1\]"):
        evaluation.fit_predict(x, np.array([0, -1, 0, 1]), x, 2)


def test_a_shot_count_not_run_and_non_finite_features_are_named():
    # mean(3) raised a bare KeyError; NaN features (an overflow) gave NaN
    # scores whose argmax is class 0 for every image, 1/K with no error.
    result = evaluation.FewShotResult({1: [0.5, 0.7], 5: [0.9]}, 2, 10)
    assert result.mean(1) == pytest.approx(0.6)
    with pytest.raises(ValueError) as caught:
        result.mean(3)
    assert str(caught.value).endswith("one of [1, 5]. Received: shots=3")
    rng = np.random.default_rng(0)
    x, labels = rng.normal(size=(6, 4)), np.array([0, 1, 2] * 2)
    broken = x.copy()
    broken[4, 2] = np.nan
    for train, test, name in ((broken, x, "train"), (x, broken, "test")):
        with pytest.raises(ValueError) as caught:
            evaluation.fit_predict(train, labels, test, 3)
        message = str(caught.value)
        assert message.startswith(f"`{name}_features` must be finite; 1 row")
        assert message.endswith("rows [4] not finite")
    with pytest.raises(ValueError, match="`test_features` must be finite"):
        evaluation.linear_few_shot(x, labels, broken * np.inf, labels, 3, 1, 1)


def test_a_label_column_is_taken_as_labels():
    # Keras's (N, 1) sparse labels: compared with (N,) predictions they
    # would broadcast to (N, N), an accuracy near chance whatever the
    # features; taken as (N,) they give the same result as (N,) labels.
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(3), 20)
    features = 5 * np.eye(3)[labels] + rng.normal(scale=0.3, size=(60, 3))
    flat, column = (
        evaluation.linear_few_shot(
            features, y, features, y, 3, shots=(1, 5), seeds=2
        )
        for y in (labels, labels[:, None])
    )
    assert column.accuracy == flat.accuracy
    assert flat.mean(5) == 1.0


@pytest.mark.parametrize("include_top", [True, False])
def test_the_representation_is_what_the_head_reads_after_fc_norm(
    include_top,
):
    # With pooling="gap", fc_norm=True the head reads the pooled feature
    # normalised; few-shot read it before the norm (per-image std 0.4-0.5
    # where the head's input has 1.0).
    model = keras_vit.ViT(
        **{**TINY, "num_classes": 3},
        pooling="gap",
        fc_norm=True,
        include_top=include_top,
    )
    randomize_weights(model, scale=0.5)
    images = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3))
    head_input = (
        keras.Model(model.input, model.get_layer("head").input)
        if include_top
        else model
    ).predict(images, verbose=0)
    np.testing.assert_allclose(
        evaluation.representation_model(model).predict(images, verbose=0),
        head_input,
        atol=1e-6,
    )


@pytest.mark.parametrize("include_top", [True, False])
def test_a_distilled_model_is_read_as_the_mean_of_its_two_tokens(
    include_top,
):
    # Without a head (a DeiT preset loaded with include_top=False) few-shot
    # read the pooling layer's output, the class token alone (max
    # difference 1.1 from the mean on this model), where the model's own
    # output and timm's pre-logits are the two tokens' mean.
    model = keras_vit.ViT(
        **{**TINY, "num_classes": 3},
        distillation=True,
        include_top=include_top,
    )
    randomize_weights(model, scale=0.5)
    images = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3))
    # The final tokens, through the model's own layers: class, distillation.
    tokens = np.asarray(model.forward_features(images))
    expected = (tokens[:, 0] + tokens[:, 1]) / 2
    assert np.abs(tokens[:, 0] - expected).max() > 0.1
    np.testing.assert_allclose(
        evaluation.representation_model(model).predict(images, verbose=0),
        expected,
        atol=1e-5,
    )


def test_few_shot_of_a_model_on_digits(capsys):
    # The representation is the pre-logits layer's, else the pooled token.
    with_pre_logits = keras_vit.ViT(**TINY, representation_size=12)
    assert evaluation.representation_model(with_pre_logits).output_shape == (
        None,
        12,
    )
    with pytest.raises(ValueError, match="pooling=None"):
        evaluation.representation_model(
            keras_vit.ViT(**TINY, include_top=False, pooling=None)
        )
    keras.utils.set_random_seed(0)
    model = keras_vit.ViT(
        **{**TINY, "num_classes": 3, "hidden_dim": 64, "mlp_dim": 128}
    )
    assert evaluation.representation_model(model).output_shape == (None, 64)
    result = evaluation.few_shot(model, "digits", shots=(1, 10), seeds=2)
    print(result.summary())
    assert (
        result.num_classes == 10
        and result.num_test == 360
        and result.dataset == "digits"
    )
    assert sorted(result.accuracy) == [1, 10] and all(
        len(v) == 2 for v in result.accuracy.values()
    )
    # An untrained model's features of digits are already far above chance
    # at 10 shots (0.44-0.46 here; chance 0.1), which labels out of step
    # with the images would bring down to chance.
    assert result.mean(10) > 0.3
    # The features are the model's: computing them by hand gives the same.
    from keras_vit.export import load_images

    train = load_images("digits", (32, 32), limit=None, split="train")
    test = load_images("digits", (32, 32), limit=None, split="test")
    features = evaluation.representation_model(model)
    by_hand = evaluation.linear_few_shot(
        features.predict(train.images, verbose=0),
        train.labels,
        features.predict(test.images, verbose=0),
        test.labels,
        10,
        shots=(1, 10),
        seeds=2,
    )
    for k in (1, 10):
        np.testing.assert_allclose(
            result.accuracy[k], by_hand.accuracy[k], atol=0.006
        )


def test_few_shot_command(tmp_path, capsys):
    model = keras_vit.ViT(**TINY)
    randomize_weights(model, scale=0.3)
    path = str(tmp_path / "m.keras")
    model.save(path)
    assert (
        cli.main(
            [
                "few-shot",
                path,
                "--dataset",
                "digits",
                "--shots",
                "2",
                "--seeds",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "linear few-shot on digits: 10 classes, 360 test images, L2 1024" in out
    )
    assert (
        cli.main(["few-shot", path, "--dataset", "digits", "--shots", "500"])
        == 2
    )
    assert "needs 500 training examples" in capsys.readouterr().err


def test_an_untrained_model_is_named_so_in_the_output(capsys, monkeypatch):
    # `keras-vit few-shot ViT_Ti16 --dataset digits` (no --weights)
    # printed a table like a trained model's, nothing saying the weights
    # were random. Untrained features stay allowed (a baseline). (A name:
    # the registered tiny variant, as a builder's name takes that path.)
    fewer_digits(monkeypatch)
    argv = ["few-shot", TEST_VARIANT, "--image-size", "32", "--dataset"]
    argv += ["digits", "--shots", "1", "--seeds", "1", "--quiet"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == evaluation.UNTRAINED_NOTICE
    assert lines[1].startswith("linear few-shot on digits: 10 classes")
    assert "untrained" in evaluation.UNTRAINED_NOTICE
    # The library says it too, for a name (built small here); a built
    # model, a preset's unique name or a file brings its weights.
    monkeypatch.setattr(
        evaluation, "inference_model", lambda m: keras_vit.ViT(**TINY)
    )
    result = evaluation.few_shot(
        "ViT_Ti16", "digits", shots=1, seeds=1, verbose=0
    )
    assert result.untrained
    assert result.summary().startswith(evaluation.UNTRAINED_NOTICE + "\n")
    assert evaluation.random_weights("B/16")
    for model, weights in (
        ("ViT_B16", "augreg_in21k"),
        ("vit_b16_augreg_in21k_ft_in1k", None),
        ("runs/demo/best.keras", None),
        (keras_vit.ViT(**TINY), None),
    ):
        assert not evaluation.random_weights(model, weights), model


def test_sources_without_labels_or_selection_give_the_same_result():
    # A tensorflow_datasets split knows neither its labels nor how to read
    # chosen examples alone: its labels are read in a pass, its examples
    # filtered out of the stream; the draws and accuracies are the same.
    import dataclasses

    from keras_vit import data

    keras.utils.set_random_seed(0)
    model = keras_vit.ViT(**{**TINY, "hidden_dim": 32, "mlp_dim": 64})
    digits = data.load("digits")
    plain = dataclasses.replace(digits, train_labels=None, select=None)
    a = evaluation.few_shot(model, digits, shots=(1, 3), seeds=2)
    b = evaluation.few_shot(model, plain, shots=(1, 3), seeds=2)
    assert a.accuracy == b.accuracy


def test_a_tensorflow_datasets_splits_labels_are_read_without_its_images(
    tmp_path, monkeypatch
):
    # Few-shot read a tensorflow_datasets split's labels from its decoded
    # examples: each of its JPEGs (ImageNet's 1.28M) was decoded for its
    # label and dropped. They come from the records, no image decoded.
    import tensorflow as tf

    from keras_vit import data
    from keras_vit.data import datasets
    from tests.data.test_data import _jpeg_builder

    tfds = pytest.importorskip("tensorflow_datasets")
    _jpeg_builder(
        tfds,
        "KerasVitFewShotJpegs",
        tfds.features.Image(shape=(16, 20, 3), encoding_format="jpeg"),
        "RGB",
        train=6,
    )
    decoded = []  # one entry per image decoded
    decode_image = datasets.decode_image

    def counted(contents, channels=3):
        def count():
            decoded.append(1)
            return np.int64(0)

        with tf.control_dependencies([tf.py_function(count, [], tf.int64)]):
            return tf.identity(decode_image(contents, channels))

    monkeypatch.setattr(datasets, "decode_image", counted)
    d = data.load("keras_vit_few_shot_jpegs", data_dir=str(tmp_path))
    labels = evaluation._train_labels(d)
    assert decoded == []
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(labels), [3, 3])
    # In the split's order (tensorflow_datasets' shuffled one), which
    # reading its examples decodes each image for (the count counts).
    assert labels.tolist() == [int(y) for _, y in d.train]
    assert len(decoded) == 6
    # The shots (here the last two) decode theirs alone: a filter of the
    # decoded split decoded every image up to the last one chosen.
    examples = list(d.train)
    before = len(decoded)
    chosen = list(d.subset([4, 5]))
    assert len(decoded) - before == 2
    for got, want in zip(chosen, examples[4:], strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        assert int(got[1]) == int(want[1])


def test_an_image_folder_is_tested_on_a_held_out_share(tmp_path):
    # A folder has no test split: refused unless a share is held out, and
    # the shots are drawn from the other images only.
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, level in (("dark", 40), ("light", 200)):
        (tmp_path / label).mkdir()
        for i in range(10):
            pixels = np.clip(
                level + rng.normal(scale=10, size=(16, 16, 3)), 0, 255
            )
            Image.fromarray(pixels.astype(np.uint8)).save(
                tmp_path / label / f"{i}.png"
            )
    model = keras_vit.ViT(**{**TINY, "image_size": 16, "num_classes": 2})
    folder = f"folder:{tmp_path}"
    with pytest.raises(ValueError, match="pass test_fraction"):
        evaluation.few_shot(model, folder, shots=2)
    with pytest.raises(ValueError, match="test_fraction=1.0"):
        evaluation.few_shot(model, folder, shots=2, test_fraction=1.0)
    with pytest.raises(ValueError, match="applies to those without one"):
        evaluation.few_shot(model, "digits", shots=2, test_fraction=0.2)
    result = evaluation.few_shot(
        model, folder, shots=(1, 4), seeds=2, test_fraction=0.3
    )
    assert result.num_test == 6 and result.num_classes == 2
    # Dark and light images: a linear readout of any features separates them.
    assert result.mean(4) == 1.0
    # The shots never include the held-out images: the images read are
    # the test share once, and shots from the others.
    import dataclasses

    from keras_vit import data

    loaded = data.load(folder)
    read = []

    def select(indices):
        read.append(set(indices.tolist()))
        return loaded.select(indices)

    evaluation.few_shot(
        model,
        dataclasses.replace(loaded, select=select),
        shots=(1, 4),
        seeds=2,
        test_fraction=0.3,
    )
    held, shots = read
    assert len(held) == 6 and 4 <= len(shots) <= 14 and not held & shots


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [0, "auto"])
def test_few_shot_shows_progress_unless_asked_not_to(capsys, verbose):
    model = keras_vit.ViT(**TINY)
    result = evaluation.few_shot(
        model, "digits", shots=1, seeds=1, batch_size=128, verbose=verbose
    )
    out = capsys.readouterr().out
    assert result.accuracy[1]
    # Keras's bar: the steps done of the steps there are (360 test images
    # in 3 batches of 128; 10 shots in 1).
    assert ("3/3" in out and "1/1" in out) == (verbose != 0), out
    if verbose == 0:
        assert out == ""


def test_few_shot_refuses_a_bad_verbose():
    with pytest.raises(ValueError, match="Received: verbose=3"):
        evaluation.few_shot(keras_vit.ViT(**TINY), "digits", verbose=3)


def test_few_shot_normalises_the_images_of_a_model_that_takes_them():
    # A model built with include_preprocessing=False was fed the pipeline's
    # [0, 255] pixels: its features, and so its accuracies, were those of
    # images 127.5 times too bright. Fed its normalised inputs, it scores
    # what its twin (the same weights, normalising pixels itself) scores,
    # to within one test image of 360 (float rounding of near ties).
    config = {**TINY, "hidden_dim": 32, "mlp_dim": 64}
    keras.utils.set_random_seed(0)
    raw = keras_vit.ViT(**config, include_preprocessing=False)
    twin = keras_vit.ViT(**config)
    twin.set_weights(raw.get_weights())
    results = [
        evaluation.few_shot(m, "digits", shots=(1, 5), seeds=2, verbose=0)
        for m in (raw, twin)
    ]
    for k in (1, 5):
        np.testing.assert_allclose(
            results[0].accuracy[k], results[1].accuracy[k], atol=0.003
        )
    # Features that tell digits apart (chance: 0.1).
    assert results[1].mean(5) > 0.2
