"""Masked patch prediction (paper Section 4.6): targets, corruption, loss,
training, saving, and handing the backbone on to fine-tuning."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.training import MaskedPatchPrediction
from keras_vit.training import make_optimizer
from keras_vit.training import mean_color_classes
from tests.helpers import TINY
from tests.helpers import random_images
from tests.training import two_devices
from tests.training.test_train import assert_two_devices_match_one
from tests.training.two_devices import result

SMALL = dict(TINY, hidden_dim=32, mlp_dim=64)


def test_mean_color_classes_by_hand():
    image = np.zeros((1, 8, 8, 3), "float32")
    image[0, :4, :4] = 255.0  # white: levels (7, 7, 7)
    image[0, :4, 4:, 0] = 255.0  # red: (7, 0, 0)
    image[0, 4:, :4, 1] = 255.0  # green in half the tile:
    image[0, 4:, :2, 1] = 0.0  #   mean 127.5 -> level 4
    image[0, 4:, 4:] = 31.9  # 31.9 / 255 * 8 = 1.0008 -> 1
    classes = np.asarray(mean_color_classes(image, 4))
    np.testing.assert_array_equal(classes, [[511, 448, 4 * 8, 64 + 8 + 1]])
    # 1 bit per channel, 8 classes: green's mean 127.5 is level 1 (2 * 0.5),
    # 31.9 level 0. [-1, 1] pixels (a model without preprocessing) give the
    # same classes as the [0, 255] image.
    np.testing.assert_array_equal(
        mean_color_classes(image, 4, bits=1), [[7, 4, 2, 0]]
    )
    np.testing.assert_array_equal(
        mean_color_classes(image / 127.5 - 1, 4, value_range=(-1, 1)), classes
    )
    # One channel (the red one), tiles of 4 x 8: white + red -> 7; green
    # (no red) + 31.9 -> mean 15.95 -> level 0.
    np.testing.assert_array_equal(
        mean_color_classes(image[..., :1], (4, 8)), [[7, 0]]
    )


def test_mean_color_classes_rejects_bad_input():
    with pytest.raises(ValueError, match=r"tile_size=\(5, 5\)"):
        mean_color_classes(np.zeros((1, 8, 8, 3)), 5)
    with pytest.raises(ValueError, match="value_range=\\(1, 1\\)"):
        mean_color_classes(np.zeros((1, 8, 8, 3)), 4, value_range=(1, 1))
    with pytest.raises(ValueError, match="bits=0"):
        mean_color_classes(np.zeros((1, 8, 8, 3)), 4, bits=0)


def test_arguments_are_checked():
    backbone = keras_vit.ViT(**SMALL)
    for kwargs, message in [
        (dict(backbone="vit"), "backbone='vit'"),
        (dict(corrupt_rate=0.0), "corrupt_rate=0.0"),
        (dict(mask_rate=1.2), "mask_rate=1.2"),
        (
            dict(mask_rate=0.8, replace_rate=0.3),
            "mask_rate=0.8 and replace_rate=0.3",
        ),
        (dict(bits=9), "bits=9"),
    ]:
        with pytest.raises(ValueError, match=message):
            MaskedPatchPrediction(**{"backbone": backbone, **kwargs})


def test_corruption_counts_and_kinds():
    mpp = MaskedPatchPrediction(keras_vit.ViT(**SMALL), seed=0)
    mpp.build()
    batch, n, width = 64, 50, SMALL["hidden_dim"]
    # Every patch token distinct, so each output row says where it came from.
    tokens = (
        np.arange(batch * n * width, dtype="float32").reshape(batch, n, width)
        + 10.0
    )
    out, corrupted = mpp._corrupt(keras.ops.convert_to_tensor(tokens))
    out, corrupted = np.asarray(out), np.asarray(corrupted)
    assert (corrupted.sum(axis=1) == 25).all()  # exactly half of every image
    np.testing.assert_array_equal(out[~corrupted], tokens[~corrupted])
    mask = np.asarray(mpp.mask_token)
    rows, originals = out[corrupted], tokens[corrupted]
    masked = (rows == mask).all(-1)
    kept = (rows == originals).all(-1)
    pool = {tuple(r) for r in tokens.reshape(-1, width)}
    replaced = ~masked & ~kept & np.array([tuple(r) in pool for r in rows])
    assert (masked | kept | replaced).all()  # nothing else happens to a patch
    shares = np.array([masked.mean(), replaced.mean(), kept.mean()])
    np.testing.assert_allclose(
        shares, [0.8, 0.1, 0.1], atol=0.03
    )  # 1,600 patches
    # Fresh draws at each call.
    _, again = mpp._corrupt(keras.ops.convert_to_tensor(tokens))
    assert (np.asarray(again) != corrupted).any()


def test_a_replaced_patch_is_always_another_patch():
    # Two patches, both replaced: each can only become the other.
    mpp = MaskedPatchPrediction(
        keras_vit.ViT(**SMALL),
        corrupt_rate=1.0,
        mask_rate=0.0,
        replace_rate=1.0,
        seed=0,
    )
    mpp.build()
    tokens = np.arange(2 * SMALL["hidden_dim"], dtype="float32").reshape(
        1, 2, -1
    )
    for _ in range(20):
        out, _ = mpp._corrupt(keras.ops.convert_to_tensor(tokens))
        np.testing.assert_array_equal(np.asarray(out)[0], tokens[0, ::-1])


def test_loss_counts_corrupted_patches_only():
    mpp = MaskedPatchPrediction(keras_vit.ViT(**SMALL), seed=0)
    images = random_images((2, 32, 32, 3))
    targets = np.asarray(mean_color_classes(images, 8))
    corrupted = np.zeros((2, 16), bool)
    corrupted[:, ::2] = True
    right = np.eye(512, dtype="float32")[targets] * 50.0
    wrong = np.roll(right, 1, axis=-1)
    half = np.where(corrupted[..., None], right, wrong)
    flipped = np.where(corrupted[..., None], wrong, right)

    def loss(logits, labels=None, sample_weight=None):
        pred = {"logits": logits, "corrupted": corrupted, "targets": targets}
        return float(mpp.compute_loss(images, labels, pred, sample_weight))

    assert loss(half) < 1e-6
    assert loss(flipped) > 40
    # Labels are ignored; a per-image sample weight weighs its patches.
    first_right = np.stack([half[0], flipped[1]])
    assert loss(first_right, np.array([3, 4]), np.array([1.0, 0.0])) < 1e-6
    assert loss(first_right, None, np.array([0.0, 2.0])) > 40
    np.testing.assert_allclose(
        loss(first_right, None, np.array([1.0, 1.0])),
        loss(first_right),
        rtol=1e-6,
    )


def test_forward_outputs():
    mpp = MaskedPatchPrediction(keras_vit.ViT(**SMALL), seed=0)
    images = random_images((3, 32, 32, 3))
    out = mpp(images)
    assert (
        tuple(out["logits"].shape) == (3, 16, 512)
        and out["logits"].dtype == "float32"
    )
    assert tuple(out["corrupted"].shape) == (3, 16)
    np.testing.assert_array_equal(out["targets"], mean_color_classes(images, 8))
    # The backbone's classifier takes no part, so it is not trained.
    trainable = {id(w) for w in mpp.trainable_weights}
    head = {id(w) for w in mpp.backbone.get_layer("head").weights}
    assert len(head) == 2 and not head & trainable
    assert head <= {id(w) for w in mpp.weights}  # still saved with the model
    assert "mask_token" in {w.name for w in mpp.trainable_weights}
    assert len(trainable) == len(mpp.weights) - 2


@pytest.mark.parametrize(
    "kwargs, tile",
    [
        (dict(dtype="mixed_bfloat16"), 8),
        (
            dict(
                image_size=32,
                patch_size=1,
                stem={
                    "block_units": [1, 1],
                    "width": 8,
                    "root_width": 16,
                    "groups": 4,
                },
            ),
            8,
        ),
        (dict(include_preprocessing=False, pooling="gap"), 8),
    ],
)
def test_other_backbones(kwargs, tile):
    backbone = keras_vit.ViT(**{**SMALL, **kwargs})
    mpp = MaskedPatchPrediction(backbone)
    assert mpp.tile_size == (tile, tile)
    images = random_images((2, 32, 32, 3))
    if not backbone.include_preprocessing:
        images = images / 127.5 - 1
        assert mpp.value_range == (-1.0, 1.0)
    out = mpp(images)
    assert (
        tuple(out["logits"].shape) == (2, 16, 512)
        and out["logits"].dtype == "float32"
    )


def test_an_fc_norm_backbones_patch_tokens_go_through_its_final_norm():
    # With pooling="gap", fc_norm=True the final LayerNorm comes after the
    # pooling, and forward_features stops before it: the colour head read
    # unnormalised tokens (mean up to 0.65, std 0.5-1.3) and fc_norm was
    # left out of training.
    backbone = keras_vit.ViT(
        **SMALL, pooling="gap", fc_norm=True, include_top=False
    )
    mpp = MaskedPatchPrediction(backbone, seed=0)
    images = random_images((2, 32, 32, 3))
    mpp(images)  # built
    seen = []
    call = mpp.color_head.call
    mpp.color_head.call = lambda x, **kw: seen.append(x) or call(x, **kw)
    mpp(images)
    tokens = keras.ops.convert_to_numpy(seen[0])
    # LayerNorm at its initial scale 1 and offset 0: each token is
    # normalised.
    np.testing.assert_allclose(tokens.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(tokens.std(-1), 1, atol=1e-2)
    trainable = {id(w) for w in mpp.trainable_weights}
    fc_norm = {id(w) for w in backbone.get_layer("fc_norm").weights}
    assert len(fc_norm) == 2 and fc_norm <= trainable


def _one_colour_images(count, seed):
    # Each image one colour of 8, with noise that keeps its class: a masked
    # patch carries no colour, so only the other patches can tell it.
    rng = np.random.default_rng(seed)
    palette = np.array(
        [
            [255, 0, 0],
            [0, 255, 0],
            [0, 0, 255],
            [255, 255, 0],
            [0, 255, 255],
            [255, 0, 255],
            [255, 255, 255],
            [40, 40, 40],
        ],
        "float32",
    )
    images = palette[rng.integers(0, len(palette), count)][:, None, None, :]
    noise = rng.uniform(-8, 8, (count, 32, 32, 3))
    return np.clip(images + noise, 0, 255).astype("float32")


@pytest.mark.slow
def test_pretraining_learns_the_task_and_fine_tunes(tmp_path):
    keras.utils.set_random_seed(0)
    images = _one_colour_images(512, seed=0)
    mpp = MaskedPatchPrediction(keras_vit.ViT(**SMALL), seed=0)
    mpp.compile(
        optimizer=make_optimizer(
            "adamw", 3e-3, 0.05, warmup_steps=10, total_steps=8 * 16
        )
    )
    before = mpp.evaluate(images, batch_size=64, verbose=0, return_dict=True)
    mpp.fit(images, batch_size=32, epochs=8, verbose=0)
    after = mpp.evaluate(
        _one_colour_images(256, seed=1),
        batch_size=64,
        verbose=0,
        return_dict=True,
    )
    # 8 colours: a guess is right 1 time in 8; the other patches tell.
    assert before["patch_accuracy"] < 0.2
    assert after["patch_accuracy"] > 0.9, after
    assert after["loss"] < before["loss"] - 2

    # The whole model saves and loads (safe mode), weights and settings.
    path = tmp_path / "mpp.keras"
    mpp.save(path)
    loaded = keras.saving.load_model(path)
    assert (
        isinstance(loaded, MaskedPatchPrediction)
        and loaded.get_config() == mpp.get_config()
    )
    for a, b in zip(mpp.weights, loaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # The backbone fine-tunes like any checkpoint: a new head, its encoder.
    keras_vit.weights.save_npz(mpp.backbone, str(tmp_path / "mpp.npz"))
    with pytest.warns(UserWarning, match="head"):
        model = keras_vit.ViT.from_preset(
            str(tmp_path / "mpp.npz"), **{**SMALL, "num_classes": 3}
        )
    for name in ("patch_encoder", "block_1", "encoder_norm"):
        for a, b in zip(
            model.get_layer(name).weights, mpp.backbone.get_layer(name).weights
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


two_devices.register(
    "masked_patches_mirrored",
    """
    from keras_vit.training import MaskedPatchPrediction, make_optimizer
    from tests.helpers import TINY_BLOCK

    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (16, 16, 16, 3)).astype("float32")
    losses = {}
    for name, strategy in STRATEGIES:
        keras.utils.set_random_seed(1)
        with strategy.scope():
            backbone = keras_vit.ViT(image_size=16, patch_size=4, **TINY_BLOCK)
            # Every patch masked: no random draws, so both runs see one task.
            mpp = MaskedPatchPrediction(backbone, corrupt_rate=1.0,
                                        mask_rate=1.0, replace_rate=0.0)
            # Plain SGD, no clipping: the update is proportional to the
            # gradient, so a wrongly scaled loss would show.
            mpp.compile(make_optimizer("sgd", 0.5, total_steps=4, clipnorm=None,
                                       momentum=0.0))
        ds = tf.data.Dataset.from_tensor_slices(images).batch(16)
        history = mpp.fit(ds, epochs=3, verbose=0)
        losses[name] = [strategy.num_replicas_in_sync, history.history["loss"]]
    print(json.dumps(losses))
""",
)


def test_mirrored_strategy_over_two_devices_matches_one_device(two_devices):
    assert_two_devices_match_one(result(two_devices, "masked_patches_mirrored"))


def test_dropout_follows_the_training_flag():
    # All patches masked: no random draws left but the backbone's dropout.
    backbone = keras_vit.ViT(**{**SMALL, "dropout_rate": 0.5})
    mpp = MaskedPatchPrediction(
        backbone, corrupt_rate=1.0, mask_rate=1.0, replace_rate=0.0
    )
    images = random_images((2, 32, 32, 3))
    a, b = (np.asarray(mpp(images, training=False)["logits"]) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    c, d = (np.asarray(mpp(images, training=True)["logits"]) for _ in range(2))
    assert np.abs(c - d).max() > 1e-3
