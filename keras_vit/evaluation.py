"""Linear few-shot evaluation: the paper's measure of a representation.

"Few-shot accuracies are obtained by solving a regularized least-squares
regression problem that maps the (frozen) representation of a subset of
training images to {-1, 1}^K target vectors" (arXiv 2010.11929, Sec. 4.1).
It is the measure behind the paper's Figures 3-5 and its ablations (the
position-embedding table of Appendix D.4 is ImageNet 5-shot).

The settings the paper leaves open are big_vision's standard few-shot
evaluator's (`big_vision/evaluators/fewshot_lsr.py` and
`configs/common_fewshot.py`, the code the paper's authors wrote later):
the representation is the pre-logits layer (or, without one, the pooled
feature that feeds the head); the features are standardised per dimension
on the few-shot training set; a constant feature of 100 stands for the
bias (large, so that it is almost unregularised); the L2 penalty is
2^10; 1, 5, 10 and 25 shots per class, 3 seeds, each seed drawing one
random order of every class's examples and taking its first k (so the
5 shots hold the 1 shot). Only the images a seed draws are run through the
model (and kept); the whole test split is. A tensorflow_datasets training
split is read once for its labels.

Example:

>>> result = keras_vit.evaluation.few_shot(model, "digits", shots=(1, 5, 10))
>>> print(result.summary())
>>> result.mean(5)
"""

import dataclasses

import numpy as np

from keras_vit import arg_checks
from keras_vit import data
from keras_vit import registry
from keras_vit.data import resize
from keras_vit.data.images import model_pixels
from keras_vit.data.pipeline import holdout_indices
from keras_vit.export.loaded_model import inference_model
from keras_vit.export.pixel_inputs import inputs_from_pixels
from keras_vit.models import model_checks
from keras_vit.models.vit import HEAD_LAYERS
from keras_vit.options import FEW_SHOT_L2_REG
from keras_vit.options import FEW_SHOT_SEEDS
from keras_vit.options import FEW_SHOT_SHOTS

#: The shots per class of big_vision's standard evaluator, its draws and
#: its L2 penalty (`keras_vit.options`, which the command line reads too).
SHOTS = FEW_SHOT_SHOTS
SEEDS = FEW_SHOT_SEEDS
L2_REG = FEW_SHOT_L2_REG
#: The constant feature that stands for the bias.
BIAS_FEATURE = 100.0
#: The first line of the summary of a model whose weights are random: its
#: accuracies look like any others (0.3-0.6 on digits), and untrained
#: features are a baseline worth running on purpose, not a mistake to
#: refuse.
UNTRAINED_NOTICE = (
    "NOTE: the model is untrained (random weights: a builder or variant name "
    "without weights); these accuracies are a random-features baseline"
)


@dataclasses.dataclass
class FewShotResult:
    """Linear few-shot accuracies.

    Attributes:
        accuracy: `{shots: [accuracy of each seed]}`.
        num_classes: classes of the task.
        num_test: test images each accuracy is measured on.
        dataset: where the images came from.
        l2_reg: the L2 penalty used.
        untrained: whether the model's weights were random (built from a
            name without weights), which `summary()` says first.
    """

    accuracy: dict
    num_classes: int
    num_test: int
    dataset: str = ""
    l2_reg: float = L2_REG
    untrained: bool = False

    def mean(self, shots):
        """The mean accuracy over seeds at `shots` per class.

        Raises:
            ValueError: for a shot count that was not run.
        """
        if shots not in self.accuracy:
            raise ValueError(
                f"`shots` must be a shot count of this evaluation, one of "
                f"{sorted(self.accuracy)}. Received: shots={shots!r}"
            )
        return float(np.mean(self.accuracy[shots]))

    def summary(self):
        """A table: shots, mean accuracy and each seed's (after a notice
        if the model was untrained)."""
        lines = [UNTRAINED_NOTICE] if self.untrained else []
        lines += [
            f"linear few-shot on {self.dataset or 'the data'}: "
            f"{self.num_classes} "
            f"classes, {self.num_test} test images, L2 {self.l2_reg:g}",
            "  shots  accuracy  (per seed)",
        ]
        for shots, values in sorted(self.accuracy.items()):
            seeds = ", ".join(f"{v:.4f}" for v in values)
            lines.append(f"  {shots:>5}  {self.mean(shots):.4f}    ({seeds})")
        return "\n".join(lines)


def fit_predict(
    train_features, train_labels, test_features, num_classes, l2_reg=L2_REG
):
    """Regularised least squares to {-1, 1}^K targets, in closed form.

    Args:
        train_features: `(N, D)` features of the few-shot examples.
        train_labels: `(N,)` int labels in `[0, num_classes)`.
        test_features: `(M, D)` features to classify.
        num_classes: int, `K`.
        l2_reg: float > 0, the penalty on the weights. Defaults to `2**10`.

    Returns:
        `(M,)` predicted labels.
    """
    l2_reg = arg_checks.positive_float("l2_reg", l2_reg)
    num_classes = arg_checks.positive_int("num_classes", num_classes)
    train_features, train_labels = _examples(
        "train", train_features, train_labels, num_classes
    )
    _finite("train_features", train_features)
    _finite("test_features", test_features)
    x = np.asarray(train_features, "float64")
    mean = x.mean(axis=0, keepdims=True)
    std = x.std(axis=0, keepdims=True) + 1e-5
    x = _with_bias((x - mean) / std)
    y = 2.0 * np.eye(num_classes)[train_labels] - 1.0
    n, d = x.shape
    # min ||x w - y||^2 + l2 ||w||^2: (x'x + l2 I)^-1 x'y, or with fewer
    # examples than features the same as x'(x x' + l2 I)^-1 y (smaller).
    if n >= d:
        w = np.linalg.solve(x.T @ x + l2_reg * np.eye(d), x.T @ y)
    else:
        w = x.T @ np.linalg.solve(x @ x.T + l2_reg * np.eye(n), y)
    test = _with_bias((np.asarray(test_features, "float64") - mean) / std)
    return np.argmax(test @ w, axis=1)


def _finite(name, features):
    """Raises for NaN or infinite features (a model's overflow): the
    solve gives NaN weights, and argmax over NaN scores picks class 0 for
    every image, an accuracy of 1/K with no error."""
    bad = ~np.isfinite(np.atleast_1d(np.asarray(features, "float64")))
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(bad), -1).any(axis=1))
        raise ValueError(
            f"`{name}` must be finite; {len(rows)} row(s) hold NaN or "
            f"infinite values (the model's features overflowed?). "
            f"Received: {name} with rows {rows[:5].tolist()} not finite"
        )


def _with_bias(x):
    return np.concatenate([x, np.full((len(x), 1), BIAS_FEATURE)], axis=1)


def sample_shots(
    labels, num_classes, shots, seed, class_names=None, test_fraction=None
):
    """Each class's first `k` examples in one random order per seed.

    Args:
        labels: `(N,)` int labels.
        num_classes: int.
        shots: examples per class, a sequence of positive ints.
        seed: int.
        class_names: the classes' names, for the error. Defaults to
            `None`: their indices.
        test_fraction: the share of the images held out to test on before
            the examples were drawn, for the error. Defaults to `None`.

    Returns:
        `{k: indices into labels}` for every `k` in `shots` (larger `k`
        hold the smaller ones' examples).

    Raises:
        ValueError: if a class has fewer than `max(shots)` examples.
    """
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    orders = [
        rng.permutation(np.flatnonzero(labels == c)) for c in range(num_classes)
    ]
    short = [(c, len(order)) for c, order in enumerate(orders)]
    _refuse_short_classes(short, shots, class_names, test_fraction)
    return {k: np.concatenate([order[:k] for order in orders]) for k in shots}


def _refuse_short_classes(counts, shots, class_names, test_fraction):
    """Raises if a class of `counts` (`(class, examples)`) has fewer
    examples than `max(shots)`, naming the classes (by name where known)
    and what to change."""
    most = max(shots)
    short = [(c, n) for c, n in counts if n < most]
    if not short:
        return
    listing = ", ".join(
        f"class {c}: {n}" if class_names is None else f"{class_names[c]!r}: {n}"
        for c, n in short[:5]
    )
    held = (
        ""
        if test_fraction is None
        else " or a smaller test_fraction (--test-fraction), which holds "
        "out fewer of them"
    )
    received = f"shots={list(shots)}" + (
        "" if test_fraction is None else f", test_fraction={test_fraction!r}"
    )
    raise ValueError(
        f"Every class needs {most} training examples for the largest of "
        f"shots; {len(short)} class(es) have fewer ({listing}"
        f"{' ...' if len(short) > 5 else ''}). Pass fewer shots (--shots)"
        f"{held}, or add images. Received: {received}"
    )


def linear_few_shot(
    train_features,
    train_labels,
    test_features,
    test_labels,
    num_classes,
    shots=SHOTS,
    seeds=SEEDS,
    l2_reg=L2_REG,
):
    """Few-shot accuracies of features already computed.

    Args:
        train_features: `(N, D)` features of the training split (or of the
            examples `sample_shots` picks; the others are not read).
        train_labels: `(N,)` int labels.
        test_features: `(M, D)` features of the test split.
        test_labels: `(M,)` int labels.
        num_classes: int.
        shots: examples per class, a sequence of positive ints. Defaults
            to `(1, 5, 10, 25)`.
        seeds: int, how many random draws. Defaults to `3`.
        l2_reg: float, the L2 penalty. Defaults to `2**10`.

    Returns:
        A `FewShotResult`.
    """
    shots, seeds = _check(shots, seeds)
    l2_reg = arg_checks.positive_float("l2_reg", l2_reg)
    num_classes = arg_checks.positive_int("num_classes", num_classes)
    train_features, train_labels = _examples(
        "train", train_features, train_labels, num_classes
    )
    test_features, test_labels = _examples(
        "test", test_features, test_labels, num_classes
    )
    draws = [
        sample_shots(train_labels, num_classes, shots, seed)
        for seed in range(seeds)
    ]
    return _score(
        draws,
        train_features,
        train_labels,
        test_features,
        test_labels,
        num_classes,
        l2_reg,
    )


def _score(
    draws, features, labels, test_features, test_labels, num_classes, l2_reg
):
    """Accuracies of each draw (`{k: indices into features and labels}`)."""
    test_labels = np.asarray(test_labels)
    accuracy = {k: [] for k in draws[0]}
    for draw in draws:
        for k, indices in draw.items():
            predicted = fit_predict(
                features[indices],
                labels[indices],
                test_features,
                num_classes,
                l2_reg,
            )
            accuracy[k].append(float(np.mean(predicted == test_labels)))
    return FewShotResult(accuracy, num_classes, len(test_labels), l2_reg=l2_reg)


def _examples(split, features, labels, num_classes):
    """`(features, labels)` of one split as `(N, D)` features and `(N,)`
    int labels in `[0, num_classes)` (an `(N, 1)` column is taken as
    `(N,)`), or a `ValueError` naming the argument: a label column
    compared with `(N,)` predictions would broadcast to `(N, N)` and give
    a wrong accuracy, a label out of range would be dropped or wrap."""
    features, labels = np.asarray(features), np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if features.ndim != 2:
        raise ValueError(
            f"`{split}_features` must be 2-D (examples, features). "
            f"Received: {split}_features of shape {features.shape}"
        )
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"`{split}_labels` must be 1-D integer class indices. Received: "
            f"{split}_labels of shape {labels.shape} and dtype {labels.dtype}"
        )
    if len(labels) != len(features):
        raise ValueError(
            f"`{split}_labels` must have one label per row of "
            f"`{split}_features`. Received: {len(labels)} labels for "
            f"{len(features)} rows"
        )
    outside = labels[(labels < 0) | (labels >= num_classes)]
    if outside.size:
        raise ValueError(
            f"`{split}_labels` must be in [0, num_classes={num_classes}). "
            f"Received: {split}_labels holding {outside[:5].tolist()}"
        )
    return features, labels


def _check(shots, seeds):
    if isinstance(shots, (int, np.integer)):
        shots = (shots,)
    shots = tuple(arg_checks.positive_int("shots", k) for k in shots)
    if not shots or len(set(shots)) != len(shots):
        raise ValueError(
            "`shots` must hold distinct positive integers. Received: "
            f"shots={shots!r}"
        )
    return tuple(sorted(shots)), arg_checks.positive_int("seeds", seeds)


def random_weights(model, weights=None):
    """Whether `model` and `weights`, as `few_shot` and `keras-vit
    few-shot` take them, build a model with random weights: a builder or
    variant name with no `weights` (a preset's unique name, a file and a
    built model bring theirs)."""

    if weights is not None or not isinstance(model, str):
        return False
    try:
        return registry.resolve(model).preset is None
    except ValueError:  # a file or folder
        return False


def representation_model(model):
    """A model from `model`'s input to the representation few-shot reads:
    the pre-logits layer's output, else the pooled feature that feeds the
    head, after `fc_norm` where the model has it (for `include_top=False`,
    the model's own output). With DeiT's
    distillation token, the mean of the class and distillation tokens'
    features (what its two heads read, and timm's pre-logits), as the
    model's own output without a head.

    Raises:
        ValueError: for a model that is not a `keras_vit.ViT`, or one
            without pooling (its output is a token sequence).
    """
    import keras

    model_checks.require_vit(model, "Few-shot evaluation")
    names = [layer.name for layer in model.layers]
    if getattr(model, "distillation", False) and "pooling" in names:
        # The head layers skip pre-logits and fc_norm with distillation
        # (`vit._call_head`): the two tokens' mean is their input, and
        # without a head the model's output. Not the pooling layer's
        # output alone, which is the class token.
        pooling = model.get_layer("pooling")
        tokens = pooling.input
        return keras.Model(
            model.input,
            (pooling.output + tokens[:, 1]) / 2,
            name=f"{model.name}_representation",
        )
    # The last of the layers before the head (pre-logits after fc_norm
    # after pooling): with fc_norm, the pooled feature normalised, as the
    # head reads it (timm's and big_vision's pre-logits).
    for name in reversed(HEAD_LAYERS[: HEAD_LAYERS.index("head")]):
        if name in names:
            return keras.Model(
                model.input,
                model.get_layer(name).output,
                name=f"{model.name}_representation",
            )
    raise ValueError(
        "Few-shot evaluation needs one feature vector per image, and this "
        "model returns its tokens (pooling=None). Received: model="
        f"{model.name!r} with pooling={model.pooling!r}"
    )


def few_shot(
    model,
    dataset,
    shots=SHOTS,
    seeds=SEEDS,
    l2_reg=L2_REG,
    data_dir=None,
    batch_size=64,
    test_fraction=None,
    verbose="auto",
):
    """The paper's linear few-shot evaluation of a model's representation.

    Args:
        model: a `keras_vit.ViT` (its pre-logits or pooled feature is read;
            the head is not used), a `.keras` file or a builder name. The
            images are resized as its `image_resize` says and fed as it
            takes them: [0, 255] pixels, normalised as its `normalization`
            says if it was built with `include_preprocessing=False`.
        dataset: a name `keras_vit.data.load` reads (`"digits"`,
            `"fashion_mnist"`, `"folder:PATH"`, a tensorflow_datasets name)
            or a loaded `keras_vit.data.Dataset`.
        shots: examples per class. Defaults to `(1, 5, 10, 25)`.
        seeds: int, random draws of the examples. Defaults to `3`.
        l2_reg: float, the L2 penalty. Defaults to `2**10`.
        data_dir: tensorflow_datasets folder. Defaults to `None`.
        batch_size: int, images per forward pass. Defaults to `64`.
        test_fraction: float in (0, 1), for a dataset without a test split
            (an image folder): the share of its images held out to test on
            (a fixed random choice), the few shots drawn from the others.
            Defaults to `None`.
        verbose: the progress of the feature extraction, as Keras's
            `predict` shows it: `0` (none), `1` (a progress bar), `2` (a
            line when done) or `"auto"` (`1`). Defaults to `"auto"`.

    Returns:
        A `FewShotResult`.

    Example:

    >>> model = keras_vit.ViT_B16(weights="in21k")
    >>> result = few_shot(model, "cifar100", shots=5)
    """

    shots, seeds = _check(shots, seeds)
    l2_reg = arg_checks.positive_float("l2_reg", l2_reg)
    batch_size = arg_checks.positive_int("batch_size", batch_size)
    verbose = arg_checks.verbosity("verbose", verbose)
    untrained, model = random_weights(model), inference_model(model)
    features_of = representation_model(model)
    if not isinstance(dataset, data.Dataset):
        dataset = data.load(dataset, data_dir=data_dir)
    labels = _train_labels(dataset)
    # The examples the shots are drawn from (indices into the training split).
    pool, test = _test_split(dataset, len(labels), test_fraction)
    chosen, draws = _draw_shots(
        labels, pool, dataset.class_names, shots, seeds, test_fraction
    )
    (features, _), (test_features, test_labels) = _split_features(
        model,
        features_of,
        (dataset.subset(chosen), test),
        dataset.num_classes,
        batch_size,
        verbose,
    )
    result = _score(
        draws,
        features,
        labels[chosen],
        test_features,
        test_labels,
        dataset.num_classes,
        l2_reg,
    )
    return dataclasses.replace(
        result, dataset=dataset.name, untrained=untrained
    )


def _draw_shots(labels, pool, class_names, shots, seeds, test_fraction):
    """`(chosen, draws)`: the training examples any draw takes (sorted
    indices into the training split), and per seed `{shots: indices into
    chosen}`, the examples of `pool` drawn (`test_fraction`, for the
    error, is what held the others out)."""
    draws = [
        {
            k: pool[i]
            for k, i in sample_shots(
                labels[pool],
                len(class_names),
                shots,
                seed,
                class_names=class_names,
                test_fraction=test_fraction,
            ).items()
        }
        for seed in range(seeds)
    ]
    chosen = np.unique(np.concatenate([draw[shots[-1]] for draw in draws]))
    # Only the drawn images' features are computed: the draws index them
    # within `chosen`.
    draws = [
        {k: np.searchsorted(chosen, i) for k, i in draw.items()}
        for draw in draws
    ]
    return chosen, draws


def _train_labels(dataset):
    """The labels of `dataset`'s training split, in order: known already
    (arrays, image folders), else read in one pass, without decoding an
    image where the source allows (tensorflow_datasets: each of ImageNet's
    1.28M training images was decoded for its label, then dropped)."""
    if dataset.train_labels is not None:
        return dataset.train_labels
    if dataset.read_train_labels is not None:
        labels = dataset.read_train_labels()
    else:
        labels = dataset.train.map(lambda image, label: label)
    return np.concatenate(list(labels.batch(4096).as_numpy_iterator()))


def _test_split(dataset, num_train, test_fraction):
    """`(pool, test)`: the indices of the training examples the shots are
    drawn from, and the `(image, label)` pairs to test on (the dataset's
    test split, or `test_fraction` of its training images held out)."""
    pool = np.arange(num_train)
    test = dataset.test
    if test is None:
        if test_fraction is None:
            raise ValueError(
                "Few-shot evaluation needs test images, and this dataset has "
                "no "
                "test split: pass test_fraction (--test-fraction), e.g. 0.2, "
                "to hold out part of its images. Received: "
                f"dataset={dataset.name!r}"
            )

        if (
            isinstance(test_fraction, bool)
            or not isinstance(test_fraction, (int, float))
            or not 0 < test_fraction < 1
        ):
            raise ValueError(
                f"`test_fraction` must be a number in (0, 1). Received: "
                f"test_fraction={test_fraction!r}"
            )
        pool, held = holdout_indices(
            num_train, test_fraction, name="test_fraction"
        )
        test = dataset.subset(held)
    elif test_fraction is not None:
        raise ValueError(
            f"The dataset has a test split; test_fraction applies to those "
            f"without one. Received: test_fraction={test_fraction!r} for "
            f"dataset={dataset.name!r}"
        )
    return pool, test


def _split_features(
    model, features_of, splits, num_classes, batch_size, verbose
):
    """`[(features, labels)]` of `features_of` (`model`'s representation)
    on each of `splits` (datasets of `(image, label)`)."""
    return [
        _features(features_of, model, pairs, num_classes, batch_size, verbose)
        for pairs in splits
    ]


def _features(features_of, model, pairs, num_classes, batch_size, verbose=0):
    """`(features, labels)` of `features_of` (`model`'s representation,
    which records no preprocessing) on a dataset of `(image, label)`, in
    order, with a Keras progress bar of the batches at `verbose` 1 or 2.
    The images are read as `model` is evaluated: at its `image_size` (a
    `ViT(dynamic_image_size=True)` takes any size), resized as its
    `image_resize` says (a preset's evaluation: timm's centre crop or the
    squash), and turned into what it takes
    (`keras_vit.export.pixel_inputs.inputs_from_pixels`: normalised for
    `include_preprocessing=False`)."""
    import keras

    prepare = inputs_from_pixels(model)
    channels = features_of.input_shape[-1]
    batches = data.eval_pipeline(
        pairs,
        num_classes,
        model.image_size,
        batch_size,
        image_resize=resize.of_model(model),
    )
    known = int(batches.cardinality())
    progress = keras.utils.Progbar(
        known if known >= 0 else None, verbose=verbose
    )
    features, labels = [], []
    for step, (images, onehot) in enumerate(batches.as_numpy_iterator(), 1):
        images = prepare(model_pixels(images, channels))
        features.append(
            np.asarray(features_of.predict_on_batch(images), "float32")
        )
        labels.append(np.argmax(onehot, axis=-1))
        progress.update(step, finalize=step == known)
    if known < 0:
        progress.update(len(features), finalize=True)
    return np.concatenate(features), np.concatenate(labels)
