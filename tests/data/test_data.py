import gzip
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_vit import data
from keras_vit.data import datasets


def _examples(n=12, size=(10, 14), channels=1, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, *size, channels)).astype("uint8")
    labels = (np.arange(n) % 3).astype("int64")
    return tf.data.Dataset.from_tensor_slices((images, labels)), images, labels


def test_eval_pipeline_resizes_to_rgb_in_order():
    ds, images, labels = _examples()
    batches = list(data.eval_pipeline(ds, 3, (20, 28), batch_size=5))
    assert [b[0].shape[0] for b in batches] == [5, 5, 2]
    x = np.concatenate([b[0].numpy() for b in batches])
    y = np.concatenate([b[1].numpy() for b in batches])
    assert x.shape == (12, 20, 28, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(x[..., 0], x[..., 2])  # gray -> RGB
    np.testing.assert_array_equal(y.argmax(1), labels)
    assert 0 <= x.min() and x.max() <= 255


@pytest.mark.parametrize("known", [True, False], ids=["known", "given"])
def test_a_padded_eval_pipeline_counts_every_example_in_whole_batches(known):
    # Static shapes (a TPU's) dropped the last partial batch: 2 of 12
    # examples went unevaluated without a word.
    ds, images, labels = _examples()
    size = None
    if not known:  # a filtered split (a validation hold-out) has no size
        ds, size = ds.filter(lambda x, y: True), 12
    batches = list(
        data.eval_pipeline(ds, 3, (20, 28), 5, pad=True, num_examples=size)
    )
    assert [b[0].shape[0] for b in batches] == [5, 5, 5]
    x, y, w = (
        np.concatenate([b[i].numpy() for b in batches]) for i in range(3)
    )
    unpadded = list(data.eval_pipeline(ds, 3, (20, 28), 5))
    np.testing.assert_array_equal(
        x[:12], np.concatenate([b[0].numpy() for b in unpadded])
    )
    np.testing.assert_array_equal(y[:12].argmax(1), labels)
    # Keras averages over all 15 rows: 15 / 12 per example, 0 for blanks.
    np.testing.assert_array_equal(w, [np.float32(15 / 12)] * 12 + [0] * 3)
    assert not x[12:].any() and not y[12:].any()
    assert w.dtype == np.float32
    spec = data.eval_pipeline(ds, 3, (20, 28), 5, pad=True, num_examples=12)
    assert [s.shape[0] for s in spec.element_spec] == [5, 5, 5]  # static
    # A whole number of batches gets no padding, weights of 1.
    (_, _, w), *_ = data.eval_pipeline(
        ds, 3, (8, 8), 12, pad=True, num_examples=12
    )
    np.testing.assert_array_equal(w, np.ones(12, "float32"))


def test_a_padded_eval_pipeline_refuses_what_it_cannot_weigh():
    ds, _, _ = _examples()
    with pytest.raises(ValueError, match="Received: num_examples=None"):
        data.eval_pipeline(ds.filter(lambda x, y: True), 3, (8, 8), 5, pad=True)
    with pytest.raises(ValueError, match="drop_remainder=True and pad=True"):
        data.eval_pipeline(ds, 3, (8, 8), 5, drop_remainder=True, pad=True)
    with pytest.raises(ValueError, match="Received: pad='yes'"):
        data.eval_pipeline(ds, 3, (8, 8), 5, pad="yes")
    # A size that is not the split's would weigh it wrong: refused as the
    # split is read.
    with pytest.raises(
        tf.errors.FailedPreconditionError, match="expected to contain 10"
    ):
        list(data.eval_pipeline(ds, 3, (8, 8), 5, pad=True, num_examples=10))


@pytest.mark.parametrize("fixed_size", [True, False])
def test_train_pipeline_shapes_and_reproducibility(fixed_size):
    ds, images, labels = _examples(n=40)
    if not fixed_size:  # images of unknown size take the per-image path
        ds = tf.data.Dataset.from_generator(
            lambda: zip(images, labels),
            output_signature=(
                tf.TensorSpec((None, None, 1), tf.uint8),
                tf.TensorSpec((), tf.int64),
            ),
        )
    aug = data.Augmentation(random_resized_crop=True, flip=True)

    def run(seed):
        pipe = data.train_pipeline(
            ds, 3, (16, 16), 8, augmentation=aug, seed=seed, deterministic=True
        )
        return [(x.numpy(), y.numpy()) for x, y in pipe]

    first, again, other = run(1), run(1), run(2)
    assert len(first) == 5  # 40 / 8, partial batches dropped
    assert first[0][0].shape == (8, 16, 16, 3)
    np.testing.assert_allclose(first[0][0], again[0][0])
    assert not np.allclose(first[0][0], other[0][0])
    np.testing.assert_allclose(first[0][1].sum(1), 1.0)


def test_repeat_makes_whole_epochs():
    ds, _, labels = _examples(n=10)
    pipe = data.train_pipeline(
        ds,
        3,
        (10, 14),
        4,
        augmentation=data.NO_AUGMENTATION,
        shuffle=False,
        repeat=True,
        num_examples=10,
        deterministic=True,
    )
    got = [y.numpy().argmax(1) for _, y in pipe.take(4)]
    # 10 examples, batch 4: each epoch is batches [0:4], [4:8]; then again.
    np.testing.assert_array_equal(got[0], labels[:4])
    np.testing.assert_array_equal(got[2], labels[:4])


@pytest.mark.parametrize("fixed_size", [True, False])
def test_a_stream_started_at_an_epoch_is_that_epoch_of_the_whole_stream(
    fixed_size,
):
    # What a resumed run relies on: every random choice (shuffle order, crop,
    # flip, RandAugment, MixUp / CutMix) is a function of the seed, the epoch
    # and the position in it, not of what the process drew before. (The
    # stream used to restart at epoch 1's draws.)
    ds, images, labels = _examples(n=24, channels=3)
    if not fixed_size:
        ds = tf.data.Dataset.from_generator(
            lambda: zip(images, labels),
            output_signature=(
                tf.TensorSpec((None, None, 3), tf.uint8),
                tf.TensorSpec((), tf.int64),
            ),
        )
    aug = data.Augmentation(rand_augment=2, mixup=0.4, cutmix=1.0)

    def epochs(initial_epoch, count, seed=5):
        pipe = data.train_pipeline(
            ds,
            3,
            (8, 8),
            8,
            augmentation=aug,
            seed=seed,
            deterministic=True,
            repeat=True,
            num_examples=24,
            initial_epoch=initial_epoch,
        )
        batches = [
            np.concatenate([x.numpy().ravel(), y.numpy().ravel()])
            for x, y in pipe.take(3 * count)
        ]
        return [
            np.concatenate(batches[3 * i : 3 * i + 3]) for i in range(count)
        ]

    whole = epochs(0, 3)
    np.testing.assert_array_equal(epochs(2, 1)[0], whole[2])
    np.testing.assert_array_equal(epochs(1, 2)[1], whole[2])
    np.testing.assert_array_equal(epochs(0, 1)[0], whole[0])  # built again
    assert not np.array_equal(whole[0], whole[1])
    assert not np.array_equal(epochs(0, 1, seed=6)[0], whole[0])


def _flat(batches):
    return np.concatenate(
        [
            np.concatenate([x.numpy().ravel(), y.numpy().ravel()])
            for x, y in batches
        ]
    )


def test_a_stream_that_is_not_repeated_is_one_epoch_per_iteration():
    # Without `repeat` (a training set of unknown size), every iteration
    # replayed epoch 0's augmentation seeds (positions restarted), and a
    # pipeline started at an epoch did not give that epoch of the whole
    # stream (its shuffle was another seed's first one).
    ds, _, _ = _examples(n=24, channels=3)
    aug = data.Augmentation(rand_augment=1, mixup=0.4)

    def pipe(initial_epoch=0, repeat=False):
        return data.train_pipeline(
            ds,
            3,
            (8, 8),
            8,
            augmentation=aug,
            seed=3,
            deterministic=True,
            shuffle_buffer=24,
            repeat=repeat,
            num_examples=24,
            initial_epoch=initial_epoch,
        )

    repeated = list(pipe(repeat=True).take(9))
    whole = [_flat(repeated[3 * i : 3 * i + 3]) for i in range(3)]
    once = pipe()
    for epoch in range(3):  # each iteration is the next epoch
        np.testing.assert_array_equal(_flat(once), whole[epoch])
    np.testing.assert_array_equal(_flat(pipe(initial_epoch=2)), whole[2])
    assert not np.array_equal(whole[0], whole[1])


def test_fit_on_a_stream_that_is_not_repeated_resumes_as_uninterrupted():
    import keras

    ds, _, _ = _examples(n=16, channels=3)

    def pipe(initial_epoch):
        return data.train_pipeline(
            ds,
            3,
            (8, 8),
            4,
            augmentation=data.Augmentation(),
            seed=1,
            deterministic=True,
            initial_epoch=initial_epoch,
        )

    def model():
        keras.utils.set_random_seed(0)
        m = keras.Sequential(
            [
                keras.Input((8, 8, 3)),
                keras.layers.Rescaling(1 / 255),
                keras.layers.Flatten(),
                keras.layers.Dense(3),
            ]
        )
        m.compile(
            optimizer=keras.optimizers.SGD(0.1), loss="categorical_crossentropy"
        )
        return m

    whole = model()
    whole.fit(pipe(0), epochs=3, verbose=0)
    resumed = model()
    resumed.fit(pipe(0), epochs=2, verbose=0)
    resumed.fit(
        pipe(2), initial_epoch=2, epochs=3, verbose=0
    )  # a new process's
    for got, want in zip(resumed.weights, whole.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_mixup_and_cutmix_mix_images_and_labels_normalised():
    # Labels that sum to 1 are one-hot labels too: a pipeline that dropped
    # the mixing passed. Against the same seed without mixing (the same
    # shuffle, crops and flips), each batch's images must differ and some
    # labels be soft.
    ds, _, _ = _examples(n=16)

    def batches(aug):
        return [
            (x.numpy(), y.numpy())
            for x, y in data.train_pipeline(
                ds, 3, (12, 12), 8, augmentation=aug
            )
        ]

    mixed = batches(data.Augmentation(mixup=0.4, cutmix=1.0))
    plain = batches(data.Augmentation())
    assert len(mixed) == len(plain) == 2
    soft = 0
    for (x, y), (x_plain, y_plain) in zip(mixed, plain):
        assert x.shape == (8, 12, 12, 3)
        np.testing.assert_allclose(y.sum(1), 1.0, atol=1e-5)
        assert set(np.unique(y_plain)) == {0.0, 1.0}
        assert not np.allclose(x, x_plain)
        assert 0 <= x.min() and x.max() <= 255
        soft += int((y.max(1) < 1 - 1e-6).sum())
    assert soft >= 4


def test_rand_augment_changes_the_images_within_the_pixel_range():
    # The same seed, crop and flip with and without RandAugment: only its
    # operations differ (a pipeline that dropped it would give equal
    # batches).
    ds, _, _ = _examples(n=8, channels=3)

    def first_batch(rand_augment):
        aug = data.Augmentation(
            random_resized_crop=False, flip=False, rand_augment=rand_augment
        )
        pipeline = data.train_pipeline(
            ds, 3, (12, 12), 4, augmentation=aug, shuffle=False
        )
        return next(iter(pipeline))[0].numpy()

    plain, augmented = first_batch(0), first_batch(2)
    assert augmented.shape == (4, 12, 12, 3)
    assert not np.allclose(augmented, plain)
    assert augmented.min() >= 0 and augmented.max() <= 255


@pytest.mark.parametrize("fixed_size", [True, False])
def test_rand_augment_draws_its_operations_per_image(fixed_size):
    # Keras's RandAugment draws its operations once a call: the batched
    # path (same-sized images) gave every image of a batch the same ones.
    # At magnitude 0 the geometric and colour operations leave an image as
    # it is and the others (auto-contrast, equalisation, ...) change it:
    # 32 copies of one image come out in several forms, some unchanged.
    one = np.random.default_rng(0).integers(30, 200, (16, 16, 3), "uint8")
    images, labels = np.repeat(one[None], 64, 0), np.zeros(64, "int64")
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    if not fixed_size:  # images of unknown size take the per-image path
        ds = tf.data.Dataset.from_generator(
            lambda: zip(images, labels),
            output_signature=(
                tf.TensorSpec((None, None, 3), tf.uint8),
                tf.TensorSpec((), tf.int64),
            ),
        )
    aug = data.Augmentation(
        random_resized_crop=False,
        flip=False,
        rand_augment=1,
        rand_augment_magnitude=0.0,
    )
    pipeline = data.train_pipeline(
        ds, 2, (16, 16), 32, augmentation=aug, shuffle=False
    )
    for x, _ in pipeline:
        x = x.numpy()
        unchanged = np.all(np.abs(x - one) < 1e-3, axis=(1, 2, 3))
        assert 0 < unchanged.sum() < 32
        assert len({image.tobytes() for image in np.round(x, 2)}) >= 3


def test_bad_augmentation_and_sizes():
    with pytest.raises(ValueError, match="crop_area"):
        data.Augmentation(crop_area=(0.0, 1.0))
    with pytest.raises(ValueError, match="rand_augment=-1"):
        data.Augmentation(rand_augment=-1)
    with pytest.raises(ValueError, match="cutmix='a'"):
        data.Augmentation(cutmix="a")
    ds, _, _ = _examples()
    with pytest.raises(ValueError, match="batch_size=0"):
        data.train_pipeline(ds, 3, (8, 8), 0)
    with pytest.raises(ValueError, match="validation_split=1.5"):
        data.split_validation(ds, 12, 1.5)


@pytest.mark.parametrize(
    "name, value",
    [
        ("seed", 2**70),
        ("seed", -1),
        ("seed", 1.5),
        ("shuffle_buffer", 0),
        ("shuffle_buffer", 2**70),
        ("batch_size", 2**70),
        ("num_classes", 0),
        ("num_classes", 2.0),
        ("num_examples", 0),
        ("num_examples", 3),
        ("initial_epoch", 2**23),
        ("initial_epoch", -1),
        ("shuffle", "yes"),
        ("repeat", 1),
        ("deterministic", None),
        ("augmentation", "flip"),
    ],
)
def test_train_pipeline_arguments_are_named(name, value):
    # seed=2**70 and shuffle_buffer=0 were TensorFlow's unnamed errors;
    # num_examples below the batch with repeat looped forever on empty
    # epochs.
    ds, _, _ = _examples()
    args = dict(
        dataset=ds,
        num_classes=3,
        image_size=(8, 8),
        batch_size=4,
        repeat=True,
        num_examples=12,
    )
    args[name] = value
    with pytest.raises(
        ValueError, match=re.escape(f"Received: {name}={value!r}")
    ):
        data.train_pipeline(**args)


def test_pipeline_datasets_and_split_arguments_are_named():
    ds, _, _ = _examples()
    for pipeline in (data.train_pipeline, data.eval_pipeline):
        with pytest.raises(ValueError, match="Received: dataset="):
            pipeline([1, 2], 3, (8, 8), 4)
        with pytest.raises(ValueError, match="Received: dataset="):
            pipeline(ds.map(lambda x, y: x), 3, (8, 8), 4)
        with pytest.raises(ValueError, match="Received: num_classes=-1"):
            pipeline(ds, -1, (8, 8), 4)
    with pytest.raises(ValueError, match="Received: drop_remainder='no'"):
        data.eval_pipeline(ds, 3, (8, 8), 4, drop_remainder="no")
    with pytest.raises(ValueError, match="Received: validation_split='a'"):
        data.split_validation(ds, 12, "a")
    with pytest.raises(ValueError, match="Received: seed=-1"):
        data.split_validation(ds, 12, 0.5, seed=-1)
    with pytest.raises(ValueError, match="leaves none in the rest"):
        data.split_validation(ds, 1, 0.5)


def test_holdout_and_subsets_read_only_their_own_images(tmp_path):
    # An image folder's held-out images are read alone: a training pass of
    # the old shuffle-buffer split held every decoded image in memory.
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        for i in range(5):
            Image.new("L", (4, 4), 10 * i + (100 if label == "b" else 0)).save(
                tmp_path / label / f"{i}.png"
            )
    d = data.load(f"folder:{tmp_path}")
    assert d.train_labels.tolist() == [0] * 5 + [1] * 5
    values = [int(x.numpy()[0, 0, 0]) for x, _ in d.train]
    train, held, n_train, n_held = d.holdout(0.3, seed=1)
    assert (n_train, n_held) == (7, 3)
    got_train = [int(x.numpy()[0, 0, 0]) for x, _ in train]
    got_held = [int(x.numpy()[0, 0, 0]) for x, _ in held]
    assert sorted(got_train + got_held) == sorted(values)
    assert got_held == [
        int(x.numpy()[0, 0, 0]) for x, _ in d.holdout(0.3, seed=1)[1]
    ]
    assert got_held != [
        int(x.numpy()[0, 0, 0]) for x, _ in d.holdout(0.3, seed=2)[1]
    ]
    # Only the chosen files are opened: the others may even be broken.
    (tmp_path / "a" / "0.png").write_bytes(b"")
    (tmp_path / "b" / "4.png").write_bytes(b"")
    broken = data.load(f"folder:{tmp_path}")
    assert [int(y) for _, y in broken.subset([2, 5, 7])] == [0, 1, 1]
    assert [int(x.numpy()[0, 0, 0]) for x, _ in broken.subset([2, 5, 7])] == [
        20,
        100,
        120,
    ]
    # Arrays: the same, by index.
    digits = data.load("digits")
    chosen = [int(y) for _, y in digits.subset([0, 10, 20])]
    assert chosen == digits.train_labels[[0, 10, 20]].tolist()


def _class_ordered_folder(path, classes=8, per_class=8):
    # Image i (class i // per_class) is a 4x4 grey square of value i.
    from PIL import Image

    for c in range(classes):
        (path / f"c{c}").mkdir()
        for i in range(per_class):
            Image.new("L", (4, 4), c * per_class + i).save(
                path / f"c{c}" / f"{i}.png"
            )
    return data.load(f"folder:{path}")


def _epoch_pipe(source, epoch=0):
    return data.train_pipeline(
        source,
        8,
        (4, 4),
        8,
        augmentation=data.NO_AUGMENTATION,
        shuffle_buffer=4,
        seed=1,
        deterministic=True,
        initial_epoch=epoch,
    )


def _values(pipe):
    # The image values of one iteration (one epoch), batch by batch.
    batches = []
    for x, y in pipe:
        values = x.numpy()[:, 0, 0, 0].astype(int)
        # Each label is its image's.
        np.testing.assert_array_equal(y.numpy().argmax(1), values // 8)
        batches.append(values)
    return np.stack(batches)


def test_an_image_folder_is_shuffled_whole_before_it_is_read(tmp_path):
    # An image folder lists its files class by class, and a shuffle buffer
    # smaller than the folder (10,000 decoded images by default) mixed only
    # a window of them: every batch held a few neighbouring classes (30,000
    # images of 100 classes, batch 128: batch 0 held classes 0..33). Its
    # training source is shuffled whole, by index, before any image is read.
    d = _class_ordered_folder(tmp_path)
    buffered = _values(_epoch_pipe(d.train))  # a buffer of 4: a window
    assert len(set(buffered[0] // 8)) <= 2  # classes 0 and 1
    source = d.training_source()
    assert source.size == 64
    pipe = _epoch_pipe(source)
    epochs = [_values(pipe) for _ in range(3)]  # one epoch per iteration
    for batches in epochs:
        assert sorted(batches.ravel()) == list(range(64))
        # 8 of 64 images drawn at random: 5.3 classes on average.
        assert np.mean([len(set(b // 8)) for b in batches]) >= 4
    assert not np.array_equal(epochs[0], epochs[1])
    # A stream started at an epoch (a resumed run) draws that epoch.
    np.testing.assert_array_equal(_values(_epoch_pipe(source, 2)), epochs[2])
    # Its training part after a hold-out: shuffled the same way, and only
    # its images are read (the held-out files may be broken).
    train, held, n_train, _ = d.holdout(0.25, seed=0, training=True)
    held_values = {int(x.numpy()[0, 0, 0]) for x, _ in held}
    for value in held_values:
        (tmp_path / f"c{value // 8}" / f"{value % 8}.png").write_bytes(b"")
    values = _values(_epoch_pipe(train))
    assert sorted(values.ravel()) == sorted(set(range(64)) - held_values)
    assert values.size == n_train == 48
    assert np.mean([len(set(b // 8)) for b in values]) >= 4


def test_arrays_are_shuffled_whole_by_index():
    # The in-memory arrays (digits, Fashion-MNIST) are read by index too: a
    # buffer of 10,000 mixed only the first 10,000 of Fashion-MNIST's 60,000
    # into an epoch's first batches.
    digits = data.load("digits")
    source = digits.training_source()
    assert source.size == digits.num_train
    pipe = data.train_pipeline(
        source, 10, (8, 8), 64, augmentation=data.NO_AUGMENTATION, seed=2
    )
    labels = np.concatenate([y.numpy().argmax(1) for _, y in pipe])
    whole = len(labels)
    assert whole == digits.num_train // 64 * 64
    np.testing.assert_array_equal(
        np.bincount(labels, minlength=10)
        <= np.bincount(digits.train_labels, minlength=10),
        True,
    )
    assert not np.array_equal(labels, digits.train_labels[:whole])


def test_validation_split_is_disjoint_and_stable():
    ds, _, _ = _examples(n=20)
    ids = tf.data.Dataset.range(20).map(
        lambda i: (tf.zeros((2, 2, 1), tf.uint8), i)
    )
    train, val, n_train, n_val = data.split_validation(ids, 20, 0.25, seed=3)
    assert (n_train, n_val) == (15, 5)
    a = sorted(int(y) for _, y in train)
    b = sorted(int(y) for _, y in val)
    assert sorted(a + b) == list(range(20))
    assert b == sorted(
        int(y) for _, y in data.split_validation(ids, 20, 0.25, seed=3)[1]
    )


def test_digits():
    d = data.load("digits")
    assert (d.num_train, d.num_test, d.num_classes, d.channels) == (
        1437,
        360,
        10,
        1,
    )
    x, y = next(iter(d.train))
    assert (
        x.shape == (8, 8, 1)
        and x.dtype == tf.uint8
        and int(x.numpy().max()) <= 255
    )


@pytest.mark.parametrize("name", ["digits", "fashion_mnist", "folder:"])
def test_a_data_dir_is_refused_with_a_dataset_that_never_reads_it(
    name, tmp_path
):
    # It was passed to tensorflow_datasets alone: the arrays and image
    # folders were read from their own places, the folder named ignored.
    if name == "folder:":
        name += str(tmp_path)
    received = f"Received: data_dir='/my/tfds', dataset={name!r}"
    with pytest.raises(ValueError, match=re.escape(received)):
        data.load(name, data_dir="/my/tfds")
    datasets.check_data_dir(name, None)  # no folder named: nothing to say
    datasets.check_data_dir("cifar10", "/my/tfds")  # tensorflow_datasets'


def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape
    )
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype("uint8").tobytes())


def test_fashion_mnist_from_the_keras_cache(tmp_path, monkeypatch):
    # Files in the exact format (IDX, gzip) and place keras.datasets uses.
    folder = tmp_path / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x_train, y_train = rng.integers(0, 256, (6, 28, 28)), np.arange(6) % 10
    x_test, y_test = rng.integers(0, 256, (2, 28, 28)), np.array([3, 4])
    for name, array in (
        ("train-images-idx3-ubyte.gz", x_train),
        ("train-labels-idx1-ubyte.gz", y_train),
        ("t10k-images-idx3-ubyte.gz", x_test),
        ("t10k-labels-idx1-ubyte.gz", y_test),
    ):
        _write_idx(folder / name, array)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    d = data.load("fashion_mnist")
    assert (d.num_train, d.num_test, d.channels) == (6, 2, 1)
    assert d.class_names[9] == "Ankle boot"
    x, y = next(iter(d.test))
    np.testing.assert_array_equal(x.numpy()[..., 0], x_test[0])
    assert int(y) == 3


def _fashion_mnist_cache(tmp_path):
    folder = tmp_path / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, array in (
        ("train-images-idx3-ubyte.gz", rng.integers(0, 256, (6, 28, 28))),
        ("train-labels-idx1-ubyte.gz", np.arange(6) % 10),
        ("t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (2, 28, 28))),
        ("t10k-labels-idx1-ubyte.gz", np.array([3, 4])),
    ):
        _write_idx(folder / name, array)
    return folder


def _cut_gzip(path):
    path.write_bytes(path.read_bytes()[:-30])


def _html(path):
    path.write_bytes(b"<html>Service unavailable</html>")


def _not_idx(path):
    with gzip.open(path, "wb") as f:
        f.write(b"<html>Service unavailable</html>")


def _few_images(path):
    _write_idx(path, np.zeros((5, 28, 28)))  # 5 images, 6 labels


def _short_data(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    with gzip.open(path, "wb") as f:
        f.write(raw[:-100])


@pytest.mark.parametrize(
    "spoil, why",
    [
        (_cut_gzip, r"\(EOFError"),  # a download cut short
        (_html, r"\(BadGzipFile"),  # an error page saved as .gz
        (_not_idx, "not a 3-dimensional uint8 IDX file"),
        (_short_data, "bytes of data for its shape"),
        (_few_images, None),
    ],
)
def test_an_unreadable_fashion_mnist_file_is_named(
    tmp_path, monkeypatch, spoil, why
):
    # gzip's and NumPy's errors (EOFError, BadGzipFile, a reshape's
    # ValueError) named no file.
    folder = _fashion_mnist_cache(tmp_path)
    images = folder / "train-images-idx3-ubyte.gz"
    spoil(images)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    named = images
    if why is None:
        named = folder / "train-labels-idx1-ubyte.gz"
        why = f"6 labels for the 5 images of {re.escape(str(images))}"
    with pytest.raises(ValueError) as error:
        datasets.fashion_mnist_arrays()
    message = str(error.value)
    assert re.search(why, message), message
    assert message.endswith(
        f"delete it to download it again. Received: path={str(named)!r}"
    ), message


def test_fashion_mnist_is_read_from_the_debian_folder(tmp_path, monkeypatch):
    # The lookup the test below makes where the Debian package is
    # installed (not on CI), on files of its format in a stand-in folder:
    # an empty Keras cache, then the Debian folder, never a download.
    import keras

    debian = tmp_path / "debian"
    debian.mkdir()
    rng = np.random.default_rng(1)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (5, 28, 28)),
        "train-labels-idx1-ubyte.gz": rng.integers(0, 10, 5),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (3, 28, 28)),
        "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 3),
    }
    for name, array in arrays.items():
        _write_idx(debian / name, array)
    monkeypatch.setattr(datasets, "DEBIAN_FASHION_MNIST", str(debian))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "empty_cache"))

    def download():
        raise AssertionError("downloaded")

    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", download)
    (x_train, y_train), (x_test, y_test) = datasets.fashion_mnist_arrays()
    for got, name in (
        (x_train, "train-images-idx3-ubyte.gz"),
        (y_train, "train-labels-idx1-ubyte.gz"),
        (x_test, "t10k-images-idx3-ubyte.gz"),
        (y_test, "t10k-labels-idx1-ubyte.gz"),
    ):
        np.testing.assert_array_equal(got, arrays[name])


@pytest.mark.skipif(
    not os.path.isdir(datasets.DEBIAN_FASHION_MNIST),
    reason="the Debian package dataset-fashion-mnist is not installed",
)
def test_fashion_mnist_from_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))  # an empty Keras cache
    (x_train, y_train), (x_test, y_test) = datasets.fashion_mnist_arrays()
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert set(np.unique(y_test)) == set(range(10))


def test_image_folder(tmp_path):
    from PIL import Image

    for label, color in (("cats", 40), ("dogs", 200)):
        (tmp_path / label).mkdir()
        for i in range(3):
            size = (20 + i, 16)
            mode, fill = ("L", color) if i == 0 else ("RGB", (color,) * 3)
            Image.new(mode, size, fill).save(tmp_path / label / f"{i}.png")
    (tmp_path / "dogs" / "notes.txt").write_text("not an image")
    d = data.load(f"folder:{tmp_path}")
    assert d.class_names == ["cats", "dogs"] and d.num_train == 6
    x = np.concatenate(
        [b[0].numpy() for b in data.eval_pipeline(d.train, 2, (8, 8), 6)]
    )
    y = np.concatenate(
        [b[1].numpy() for b in data.eval_pipeline(d.train, 2, (8, 8), 6)]
    )
    assert x.shape == (6, 8, 8, 3)
    np.testing.assert_allclose(x[y.argmax(1) == 0], 40, atol=1)
    with pytest.raises(ValueError, match="at least two class sub-folders"):
        (tmp_path / "empty").mkdir()
        data.load(f"folder:{tmp_path / 'empty'}")


def test_image_folder_reads_webp_and_names_a_file_that_is_no_image(tmp_path):
    # tf.io.decode_image reads WebP, which the folder reader skipped; a file
    # that is not an image failed as "Unknown image file format", unnamed.
    from PIL import Image

    pixels = np.random.default_rng(0).integers(
        0, 256, (6, 5, 3), dtype=np.uint8
    )
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.fromarray(pixels).save(tmp_path / label / "0.webp", lossless=True)
    d = data.load(f"folder:{tmp_path}")
    assert d.num_train == 2
    np.testing.assert_array_equal(next(iter(d.train))[0].numpy(), pixels)
    for name, contents in (
        ("html.jpg", b"<html>404</html>"),
        ("empty.png", b""),
        ("short.gif", b"GI"),
    ):
        path = tmp_path / "b" / name
        path.write_bytes(contents)
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=f"{datasets.NOT_AN_IMAGE}.*{name}",
        ):
            for _ in data.load(f"folder:{tmp_path}").train:
                pass
        path.unlink()


def test_unlabelled_image_folder(tmp_path):
    # Self-supervised pre-training reads any folder: images at the top and
    # in sub-folders, one class.
    from PIL import Image

    (tmp_path / "trip" / "day2").mkdir(parents=True)
    for i, where in enumerate(["", "trip", "trip/day2"]):
        Image.new("RGB", (10, 12), (30 * i,) * 3).save(
            tmp_path / where / f"{i}.jpg"
        )
    (tmp_path / "trip" / "notes.txt").write_text("not an image")
    d = data.load(f"folder:{tmp_path}", labels=False)
    assert d.class_names == ["unlabelled"] and d.num_train == 3
    x = np.concatenate(
        [b[0].numpy() for b in data.eval_pipeline(d.train, 1, (8, 8), 3)]
    )
    np.testing.assert_allclose(
        sorted(x.mean(axis=(1, 2, 3))), [0, 30, 60], atol=2
    )
    # With labels the same folder is refused: one sub-folder is no classes.
    with pytest.raises(ValueError, match="at least two class sub-folders"):
        data.load(f"folder:{tmp_path}")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ValueError, match="holds no images.*nothing"):
        data.load(f"folder:{tmp_path / 'nothing'}", labels=False)


def test_tensorflow_datasets_names(tmp_path):
    # A real tensorflow_datasets builder, prepared offline into tmp_path:
    # the same TFRecord files and dataset_info.json as a downloaded dataset.
    tfds = pytest.importorskip("tensorflow_datasets")

    class KerasVitTinyImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(12, 12, 3)),
                        "label": tfds.features.ClassLabel(
                            names=["a", "b", "c"]
                        ),
                    }
                ),
                supervised_keys=("image", "label"),
            )

        def _split_generators(self, dl_manager):
            return {
                "train": self._generate_examples(9, 0),
                "test": self._generate_examples(4, 1),
            }

        def _generate_examples(self, n, seed):
            rng = np.random.default_rng(seed)
            for i in range(n):
                yield (
                    i,
                    {
                        "image": rng.integers(
                            0, 256, (12, 12, 3), dtype=np.uint8
                        ),
                        "label": i % 3,
                    },
                )

    d = data.load("keras_vit_tiny_images", data_dir=str(tmp_path))
    assert (d.num_train, d.num_test, d.class_names, d.channels) == (
        9,
        4,
        ["a", "b", "c"],
        3,
    )
    # A held-out fraction is the split's tail, read by split slicing.
    every = [x.numpy().tobytes() for x, _ in d.train]
    train, held, n_train, n_held = d.holdout(0.34)
    assert (n_train, n_held) == (6, 3)
    assert [x.numpy().tobytes() for x, _ in train] == every[:6]
    assert [x.numpy().tobytes() for x, _ in held] == every[6:]
    # Its PNGs, which tensorflow_datasets decodes (and caches, small), are
    # trained on decoded, as they are read.
    assert isinstance(d.training_source(), tf.data.Dataset)
    train = d.holdout(0.34, training=True)[0]
    assert isinstance(train, tf.data.Dataset)
    assert [x.numpy().tobytes() for x, _ in train] == every[:6]
    x, y = next(iter(d.train))
    assert x.shape == (12, 12, 3) and x.dtype == tf.uint8
    batch = next(iter(data.eval_pipeline(d.test, 3, (16, 16), 4)))
    assert batch[0].shape == (4, 16, 16, 3)
    with pytest.raises(ValueError, match="Unknown dataset"):
        data.load("not_a_dataset_name_xyz")
    # Without labels: the image feature alone, one class.
    d = data.load("keras_vit_tiny_images", data_dir=str(tmp_path), labels=False)
    assert (d.num_train, d.num_test, d.class_names) == (9, 4, ["unlabelled"])
    x, y = next(iter(d.train))
    assert x.shape == (12, 12, 3) and int(y) == 0


def test_a_misspelt_tensorflow_datasets_name_is_one_line_with_close_names():
    # tensorflow_datasets' error lists all its ~450 datasets: the message
    # was 462 lines; its first line is kept, and the closest names given.
    pytest.importorskip("tensorflow_datasets")
    with pytest.raises(ValueError) as error:
        data.load("cifar_10")
    message = str(error.value)
    assert "\n" not in message and len(message) < 400, message
    assert message == (
        "Unknown dataset. Expected 'fashion_mnist', 'digits', 'folder:PATH' "
        "or a tensorflow_datasets name (did you mean 'cifar10' or 'cifar100' "
        "or 'cifar10_n'?). Received: dataset='cifar_10' "
        "(DatasetNotFoundError: Dataset cifar_10 not found.)"
    )
    with pytest.raises(ValueError) as error:
        data.load("digit")  # this module's names too
    assert "(did you mean 'digits'?)" in str(error.value)
    with pytest.raises(ValueError) as error:
        data.load("qqqqzzzz")  # nothing close: no hint
    assert "did you mean" not in str(error.value)
    assert "\n" not in str(error.value)


def test_tensorflow_datasets_without_labels(tmp_path):
    # An STL-10-like dataset: no label feature, an "unlabelled" split (and a
    # second image feature, so the image is found by its supervised key...
    # which it lacks: then it must be the only image feature).
    tfds = pytest.importorskip("tensorflow_datasets")

    class KerasVitUnlabelledImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return self.dataset_info_from_configs(
                features=tfds.features.FeaturesDict(
                    {
                        "image": tfds.features.Image(shape=(8, 8, 3)),
                        "id": tfds.features.Text(),
                    }
                ),
            )

        def _split_generators(self, dl_manager):
            return {
                "train": self._generate_examples(3, 10),
                "unlabelled": self._generate_examples(5, 20),
                "test": self._generate_examples(2, 30),
            }

        def _generate_examples(self, n, value):
            for i in range(n):
                yield (
                    i,
                    {
                        "image": np.full((8, 8, 3), value, np.uint8),
                        "id": str(i),
                    },
                )

    name = "keras_vit_unlabelled_images"
    with pytest.raises(
        ValueError, match=f"no \\(image, label\\).*dataset='{name}'"
    ):
        data.load(name, data_dir=str(tmp_path))
    assert not list(tmp_path.iterdir())  # refused before preparing anything
    d = data.load(name, data_dir=str(tmp_path), labels=False)
    assert (d.num_train, d.num_test, d.class_names, d.channels) == (
        8,
        2,
        ["unlabelled"],
        3,
    )
    # Both training splits are read, images only, label 0.
    train = [(int(x[0, 0, 0]), int(y)) for x, y in d.train]
    assert sorted(train) == [(10, 0)] * 3 + [(20, 0)] * 5
    assert [int(x[0, 0, 0]) for x, _ in d.test] == [30, 30]


def _image_bytes(format, size=(12, 10), seed=0):
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(
        0, 256, (*size, 3), dtype=np.uint8
    )
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=format)
    return buffer.getvalue()


@pytest.mark.parametrize("format", ["JPEG", "PNG", "GIF", "BMP", "WEBP"])
def test_an_image_cut_short_is_named_where_the_pipeline_reads_it(
    tmp_path, format
):
    # A file with a valid signature that does not decode (a copy cut short)
    # failed with TensorFlow's "Invalid JPEG data", naming no file.
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        for i in range(3):
            (tmp_path / label / f"{i}.png").write_bytes(
                _image_bytes("PNG", seed=i)
            )
    whole = _image_bytes(format)
    (tmp_path / "b" / "cut").write_bytes(b"")  # (no image extension: not read)
    bad = tmp_path / "b" / f"cut.{format.lower()}"
    bad.write_bytes(whole[: len(whole) // 2])
    d = data.load(f"folder:{tmp_path}")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=f"{re.escape(datasets.NOT_DECODABLE)}.*{bad}",
    ):
        for _ in d.train:
            pass
    # Wherever it is read: in a training pipeline, shuffled, in parallel.
    pipe = data.train_pipeline(
        d.train, 2, (8, 8), 2, repeat=True, num_examples=7
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=f"{re.escape(datasets.NOT_DECODABLE)}.*{bad}",
    ):
        for _ in pipe.take(20):
            pass
    # The other files read as before, in order, and only the chosen ones are.
    good = [int(y) for _, y in d.subset([0, 1, 2, 3, 4, 5])]
    assert good == [0, 0, 0, 1, 1, 1]
    # A file that is no image is still named as such.
    bad.write_bytes(b"<html>")
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=f"{datasets.NOT_AN_IMAGE}.*{bad}"
    ):
        for _ in data.load(f"folder:{tmp_path}").train:
            pass


def test_image_folder_skips_hidden_folders_and_names_empty_classes(tmp_path):
    # A notebook's .ipynb_checkpoints (with copies of images) took label 0,
    # shifting every class's label by one; an empty class folder took a
    # label and an output that no image trains.
    from PIL import Image

    for where, value in (
        ("a", 10),
        ("b", 200),
        (".ipynb_checkpoints", 99),
        ("a/.ipynb_checkpoints", 99),
    ):
        (tmp_path / where).mkdir()
        Image.new("RGB", (6, 6), (value,) * 3).save(tmp_path / where / "0.png")
    Image.new("RGB", (6, 6), (99,) * 3).save(tmp_path / "b" / "._1.png")
    d = data.load(f"folder:{tmp_path}")
    assert d.class_names == ["a", "b"] and d.num_train == 2
    np.testing.assert_array_equal(d.train_labels, [0, 1])
    x, y = next(iter(data.eval_pipeline(d.train, 2, (6, 6), 2)))
    np.testing.assert_allclose(x.numpy().mean(axis=(1, 2, 3)), [10, 200])
    np.testing.assert_array_equal(y.numpy().argmax(1), [0, 1])
    unlabelled = data.load(f"folder:{tmp_path}", labels=False)
    assert unlabelled.num_train == 2
    (tmp_path / "c_empty").mkdir()
    (tmp_path / "d_hidden_only").mkdir()
    Image.new("RGB", (6, 6)).save(tmp_path / "d_hidden_only" / ".0.png")
    with pytest.raises(
        ValueError,
        match=re.escape("no images (")
        + r".*'c_empty', 'd_hidden_only'\. .*Received: dataset='folder:",
    ):
        data.load(f"folder:{tmp_path}")


def test_an_image_folder_digest_tells_which_files_it_holds(tmp_path):
    # A validation split is drawn by index over the files: with one image
    # added, 4 of the 10 images held out before were trained on. The digest
    # lets a resumed run tell (keras_vit.training.train).
    from PIL import Image

    folder = tmp_path / "photos"
    for label in ("a", "b"):
        (folder / label).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (4, 4)).save(folder / label / f"{i}.png")
    digest = data.load(f"folder:{folder}").train_digest
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert (
        datasets.files_digest(str(folder), datasets.images_under(str(folder)))
        == digest
    )
    assert data.load(f"folder:{folder}", labels=False).train_digest == digest
    (folder / "notes.txt").write_text("not an image")
    assert data.load(f"folder:{folder}").train_digest == digest
    moved = tmp_path / "moved"
    os.rename(folder, moved)  # the same files elsewhere
    assert data.load(f"folder:{moved}").train_digest == digest
    changes = []
    for change in (
        lambda: Image.new("RGB", (4, 4)).save(moved / "b" / "3.png"),
        lambda: os.rename(moved / "b" / "3.png", moved / "a" / "3.png"),
        lambda: os.rename(moved / "a" / "3.png", moved / "a" / "4.png"),
        lambda: os.remove(moved / "a" / "4.png"),
    ):
        change()
        changes.append(data.load(f"folder:{moved}").train_digest)
    assert changes[-1] == digest  # back to the same six files
    assert len({digest, *changes[:-1]}) == 4  # each change tells
    assert data.load("digits").train_digest is None  # its size tells


def _two_class_info(builder, tfds):
    """The `DatasetInfo` of a test builder of 8x8 images in classes a, b."""
    return builder.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(8, 8, 3)),
                "label": tfds.features.ClassLabel(names=["a", "b"]),
            }
        ),
        supervised_keys=("image", "label"),
    )


def test_an_unlabelled_test_split_is_not_tested_on(tmp_path):
    # imagenet2012's test split has label -1 on every image: it was tested
    # on, one-hot to zeros (accuracy 0.40 and loss 0.0 on such labels).
    tfds = pytest.importorskip("tensorflow_datasets")

    class KerasVitNoTestLabels(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return _two_class_info(self, tfds)

        def _split_generators(self, dl_manager):
            return {
                "train": self._generate_examples(4, 0),
                "validation": self._generate_examples(3, 1),
                "test": self._generate_examples(2, -1),
            }

        def _generate_examples(self, n, label):
            for i in range(n):
                yield (
                    i,
                    {"image": np.zeros((8, 8, 3), np.uint8), "label": label},
                )

    d = data.load("keras_vit_no_test_labels", data_dir=str(tmp_path))
    assert d.num_test == 3
    assert [int(y) for _, y in d.test] == [1, 1, 1]
    # Without labels the test split's images are as good as any.
    d = data.load(
        "keras_vit_no_test_labels", data_dir=str(tmp_path), labels=False
    )
    assert d.num_test == 2


@pytest.mark.parametrize("label", [-1, 3])
def test_a_label_outside_the_classes_is_refused_not_zero_hot(label):
    # tf.one_hot(-1) is all zeros: scored and trained against no class.
    images = tf.zeros((2, 8, 8, 3), tf.uint8)
    ds = tf.data.Dataset.from_tensor_slices(
        (images, tf.constant([0, label], tf.int64))
    )
    batches = data.eval_pipeline(ds, 3, (8, 8), 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_classes=3"):
        list(batches)
    # Both training paths: same-sized images batched first, and any sizes.
    any_size = tf.data.Dataset.from_generator(
        lambda: iter(ds),
        output_signature=(
            tf.TensorSpec((None, None, 3), tf.uint8),
            tf.TensorSpec((), tf.int64),
        ),
    )
    for dataset in (ds, any_size):
        train = data.train_pipeline(dataset, 3, (8, 8), 2, seed=0)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="num_classes=3"
        ):
            next(iter(train))
    ok = tf.data.Dataset.from_tensor_slices(
        (images, tf.constant([0, 2], tf.int64))
    )
    ((_, labels),) = list(data.eval_pipeline(ok, 3, (8, 8), 2))
    np.testing.assert_array_equal(labels, [[1, 0, 0], [0, 0, 1]])


def test_tensorflow_datasets_home_folder_and_a_failed_download(
    tmp_path, monkeypatch
):
    # "~/tfds" was taken literally (a folder named "~" under the current
    # one), and a download that failed (offline) gave a raw ConnectionError
    # after minutes, naming neither the dataset nor data_dir.
    tfds = pytest.importorskip("tensorflow_datasets")
    offline = {"on": True}

    class KerasVitOfflineImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return _two_class_info(self, tfds)

        def _split_generators(self, dl_manager):
            if offline["on"]:
                raise ConnectionError("Failed to resolve 'example.org'")
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i in range(4):
                image = np.zeros((8, 8, 3), np.uint8)
                yield i, {"image": image, "label": i % 2}

    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    name = "keras_vit_offline_images"
    with pytest.raises(ValueError) as error:
        data.load(name, data_dir="~/tfds")
    message = str(error.value)
    assert "(ConnectionError: Failed to resolve 'example.org')" in message
    assert message.endswith(f"Received: dataset='{name}', data_dir='~/tfds'"), (
        message
    )
    offline["on"] = False
    d = data.load(name, data_dir="~/tfds")
    assert d.num_train == 4 and d.num_test is None
    assert (home / "tfds" / name).is_dir()
    assert not list(cwd.iterdir())  # no ./~/tfds


def _pil_jpeg(seed, mode):
    """A noise image (16x20) as PIL writes it as a JPEG, and PIL's pixels of
    those bytes, `(H, W, C)`."""
    import io

    from PIL import Image

    channels = 1 if mode == "L" else 3
    noise = np.random.default_rng(seed).integers(
        0, 256, (16, 20, channels), dtype=np.uint8
    )
    buffer = io.BytesIO()
    Image.fromarray(noise.squeeze(-1) if mode == "L" else noise).save(
        buffer, format="JPEG", quality=90
    )
    pixels = np.asarray(Image.open(io.BytesIO(buffer.getvalue())))
    return buffer.getvalue(), pixels.reshape(16, 20, channels)


def _jpeg_builder(tfds, class_name, feature, mode, train=4):
    """A tensorflow_datasets builder class of `train` (4) train and 2 test
    JPEGs written by PIL, labels alternately 0 and 1, stored as given;
    `pixels[split]` PIL's pixels."""
    pixels = {"train": [], "test": []}

    def generate(split, n, seed):
        for i in range(n):
            contents, expected = _pil_jpeg(seed + i, mode)
            pixels[split].append(expected)
            yield i, {"image": contents, "label": i % 2}

    def info(builder):
        return builder.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "image": feature,
                    "label": tfds.features.ClassLabel(num_classes=2),
                }
            ),
            supervised_keys=("image", "label"),
        )

    body = {
        "__module__": __name__,
        "VERSION": tfds.core.Version("1.0.0"),
        "_info": info,
        "_split_generators": lambda builder, dl_manager: {
            "train": generate("train", train, 0),
            "test": generate("test", 2, 10),
        },
        "_generate_examples": lambda builder: None,
    }
    type(class_name, (tfds.core.GeneratorBasedBuilder,), body)
    return pixels


def test_tensorflow_datasets_jpegs_decode_as_pil_decodes_them(tmp_path):
    # tensorflow_datasets decodes JPEGs with TensorFlow's default DCT: off
    # PIL's (timm's) pixels by up to 18 levels; image folders read PIL's.
    tfds = pytest.importorskip("tensorflow_datasets")
    cases = (
        (  # encoded as JPEG, 3 channels, one size
            "KerasVitPilJpegs",
            tfds.features.Image(shape=(16, 20, 3), encoding_format="jpeg"),
            "RGB",
            (16, 20, 3),
        ),
        (  # files stored as they are (no format), grayscale, any size
            "KerasVitPilGrayJpegFiles",
            tfds.features.Image(shape=(None, None, 1)),
            "L",
            (None, None, 1),
        ),
    )
    for class_name, feature, mode, shape in cases:
        pixels = _jpeg_builder(tfds, class_name, feature, mode)
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()
        for labels in (True, False):
            d = data.load(name, data_dir=str(tmp_path), labels=labels)
            assert d.train.element_spec[0].shape.as_list() == list(shape)
            for split, images in (("train", d.train), ("test", d.test)):
                read = sorted(x.numpy().tobytes() for x, _ in images)
                want = sorted(p.tobytes() for p in pixels[split])
                assert read == want, (class_name, labels, split)


def _train_batches(source, seed=1):
    """One epoch of `train_pipeline` on `source` (16x20 images, batch 4,
    no augmentation) as `[(images, labels)]` arrays."""
    pipe = data.train_pipeline(
        source,
        2,
        (16, 20),
        4,
        augmentation=data.NO_AUGMENTATION,
        seed=seed,
        deterministic=True,
    )
    return [(x.numpy(), y.numpy()) for x, y in pipe]


def _same_batches(a, b):
    return len(a) == len(b) and all(
        np.array_equal(xa, xb) and np.array_equal(ya, yb)
        for (xa, ya), (xb, yb) in zip(a, b)
    )


def test_tensorflow_datasets_jpegs_are_shuffled_before_they_are_decoded(
    tmp_path, monkeypatch
):
    # A tensorflow_datasets split went through train_pipeline's shuffle
    # buffer decoded: for ImageNet some 10,000 full-size images (~4 GB)
    # where their JPEGs take ~1.1 GB. Its training source shuffles the
    # records, each image its JPEG's bytes, and decodes after the buffer
    # (as big_vision's and timm's readers do), with the same seeds.
    from keras_vit.data.pipeline import Encoded

    tfds = pytest.importorskip("tensorflow_datasets")
    pixels = _jpeg_builder(
        tfds,
        "KerasVitShuffledJpegs",
        tfds.features.Image(shape=(16, 20, 3), encoding_format="jpeg"),
        "RGB",
        train=16,
    )
    d = data.load("keras_vit_shuffled_jpegs", data_dir=str(tmp_path))
    source = d.training_source()
    assert isinstance(source, Encoded)
    record = (tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.int64))
    assert source.examples.element_spec == record
    assert source.element_spec == d.train.element_spec
    shuffled = []  # the spec of what each shuffle buffer holds
    shuffle = tf.data.Dataset.shuffle

    def recorded(dataset, *args, **kwargs):
        shuffled.append(dataset.element_spec)
        return shuffle(dataset, *args, **kwargs)

    monkeypatch.setattr(tf.data.Dataset, "shuffle", recorded)
    batches = _train_batches(source)
    assert shuffled == [record]  # the JPEGs' bytes, not their pixels
    shuffled.clear()
    decoded = _train_batches(d.train)
    assert shuffled == [d.train.element_spec]
    # The same batches as the decoded split's shuffled by the same seed:
    # the same examples, order and (PIL's) pixels.
    assert len(batches) == 4
    assert _same_batches(batches, decoded)
    images = np.concatenate([x for x, _ in batches])
    labels = np.concatenate([y.argmax(1) for _, y in batches])
    expected = {p.tobytes(): i % 2 for i, p in enumerate(pixels["train"])}
    seen = {
        np.round(x).astype(np.uint8).tobytes(): y
        for x, y in zip(images, labels)
    }
    assert seen == expected
    # A seed gives its order every time, another seed another order.
    assert _same_batches(_train_batches(source), batches)
    assert not _same_batches(_train_batches(source, seed=2), batches)
    # The training part of a hold-out (the split's head): encoded too.
    train, _, n_train, _ = d.holdout(0.25, training=True)
    assert isinstance(train, Encoded) and n_train == 12
    assert _same_batches(
        _train_batches(train), _train_batches(d.holdout(0.25)[0])
    )
    # Without labels: label 0, the same images.
    d = data.load(
        "keras_vit_shuffled_jpegs", data_dir=str(tmp_path), labels=False
    )
    source = d.training_source()
    assert isinstance(source, Encoded)
    unlabelled = list(source.decoded(source.examples))
    assert [int(y) for _, y in unlabelled] == [0] * 16
    assert sorted(x.numpy().tobytes() for x, _ in unlabelled) == sorted(
        p.tobytes() for p in pixels["train"]
    )


def test_a_run_trains_on_a_tensorflow_datasets_split_decoded_after_shuffle(
    tmp_path,
):
    # What a run hands train_pipeline (`_load_data`) for a tensorflow_datasets
    # split of JPEGs, with and without a hold-out: the encoded records.
    import importlib
    import types

    from keras_vit.data.pipeline import Encoded
    from keras_vit.training import TrainConfig

    tfds = pytest.importorskip("tensorflow_datasets")
    _jpeg_builder(
        tfds,
        "KerasVitRunJpegs",
        tfds.features.Image(shape=(16, 20, 3), encoding_format="jpeg"),
        "RGB",
        train=8,
    )
    train_module = importlib.import_module("keras_vit.training.train")
    for split, num_train in ((0.0, 8), (0.25, 6)):
        config = TrainConfig.from_dict(
            {
                "model": "Ti/16",
                "dataset": "keras_vit_run_jpegs",
                "data_dir": str(tmp_path),
                "output": str(tmp_path / "run"),
                "image_size": 16,
                "patch_size": 4,
                "batch_size": 2,
                "validation_split": split,
            }
        )
        loaded = train_module._load_data(
            config, types.SimpleNamespace(kind="default")
        )
        assert isinstance(loaded.train, Encoded), split
        assert loaded.num_train == num_train
        assert len(list(loaded.train.examples)) == num_train


def test_images_next_to_class_folders_are_ignored_with_a_warning(tmp_path):
    # train/cat/*.png, train/dog/*.png and train/stray.png: the loose images
    # were ignored without a word (as Keras's image_dataset_from_directory).
    import warnings

    from PIL import Image

    for label in ("cat", "dog"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (6, 6)).save(tmp_path / label / "0.png")

    def load(**kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d = data.load(f"folder:{tmp_path}", **kwargs)
        return d, [str(w.message) for w in caught if "image" in str(w.message)]

    d, said = load()
    assert d.num_train == 2 and said == []  # none loose: no warning
    for name in ("stray.png", "other.jpg"):
        Image.new("RGB", (6, 6)).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    d, said = load()
    assert d.num_train == 2 and d.class_names == ["cat", "dog"]
    assert len(said) == 1, said
    assert said[0].startswith(
        f"2 images lie directly in the image folder {str(tmp_path)!r}, "
    )
    assert "ignored: each class needs its own sub-folder" in said[0]
    assert os.path.join(str(tmp_path), "CLASS", "other.jpg") in said[0]
    d, said = load(labels=False)  # read, not ignored: no warning
    assert d.num_train == 4 and said == []
