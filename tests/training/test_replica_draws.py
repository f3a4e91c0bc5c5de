"""Under `tf.distribute`, every replica draws its own masks (dropout,
attention dropout, stochastic depth, masked patches), while one device
draws exactly what Keras's own seeding gives.

A seed generator's state is mirrored across replicas, so without the
replica's index folded into each seed (`keras_vit.layers._dropout`)
replica 0's image `i` and replica 1's image `i` got the same masks: a
global batch held one replica batch's worth of distinct draws.
"""

import numpy as np
import pytest

from tests.training import two_devices as two_devices_scripts
from tests.training.two_devices import result

#: Every seeded draw of a training step, run on both replicas of
#: MirroredStrategy (the same inputs and weights on each), then on one
#: device with the generators reset; and Keras's own draws from the same
#: generator states (plain `keras.layers.Dropout`s, a plain
#: `SeedGenerator`): what the package drew before replicas drew apart.
#: Prints `{"replicas": {site: [out_0, out_1]}, "one": {site: out},
#: "keras": {site: out}}` (outputs, and gradients as `<site>_grad`).
two_devices_scripts.register(
    "replica_draws",
    """
    from keras_vit import layers as L
    from keras_vit.training import MaskedPatchPrediction, callbacks

    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    tokens = rng.normal(size=(8, 5, 8)).astype("float32")
    images = rng.uniform(0, 255, (8, 16, 16, 3)).astype("float32")
    RATES = {"dropout": dict(dropout_rate=0.5),
             "attention": dict(attention_dropout_rate=0.5),
             "drop_path": dict(drop_path_rate=0.5)}
    SMALL = dict(image_size=16, patch_size=4, hidden_dim=8, num_layers=1,
                 num_heads=2, mlp_dim=16)

    def sites():
        blocks = {}
        for kind, rate in RATES.items():
            for remat in (False, True):
                blocks[kind + "_remat" * remat] = L.TransformerBlock(
                    2, 16, remat=remat, **rate)
        for kind in RATES:  # remat or not: the same weights
            blocks[kind](tokens)
            blocks[kind + "_remat"](tokens)
            blocks[kind + "_remat"].set_weights(blocks[kind].get_weights())
        vit = keras_vit.ViT(**SMALL, dropout_rate=0.5, include_top=False)
        mpp = MaskedPatchPrediction(keras_vit.ViT(**SMALL, include_top=False))
        mpp(images)
        return blocks, vit.get_layer("embedding_dropout"), mpp

    def reseed(blocks, embedding, mpp):
        # A block and its remat twin: the same generator states.
        for name, block in blocks.items():
            kind = name.removesuffix("_remat")
            callbacks.seed_model(block, 7, list(RATES).index(kind))
        callbacks.seed_model(embedding, 7, 10)
        callbacks.seed_model(mpp, 7, 11)

    def step(blocks, embedding, mpp):
        out = {}
        x = tf.constant(tokens)
        for name, block in blocks.items():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = block(x, training=True)
                loss = tf.reduce_sum(y * tf.sin(y))
            out[name], out[name + "_grad"] = y, tape.gradient(loss, x)
        out["embedding"] = embedding(tf.ones((8, 17, 8)), training=True)
        out["masked_patches"] = tf.cast(
            mpp(images, training=True)["corrupted"], "float32")
        return out

    strategy = STRATEGIES[1][1]
    with strategy.scope():
        layers = sites()
    reseed(*layers)
    per_replica = tf.function(
        lambda: strategy.run(lambda: step(*layers)))()
    result = {"replicas": {
        name: [np.asarray(v).tolist()
               for v in strategy.experimental_local_results(value)]
        for name, value in per_replica.items()}}
    reseed(*layers)
    one = tf.function(lambda: step(*layers))()
    result["one"] = {name: np.asarray(v).tolist() for name, v in one.items()}

    # Keras's own draws from the generators' states after reseeding.
    blocks, embedding, mpp = layers
    reseed(*layers)
    for kind in RATES:
        block = blocks[kind]
        for owner, attr in ((block, "dropout"), (block, "drop_path"),
                            (block.attention, "attention_dropout")):
            old = getattr(owner, attr)
            plain = keras.layers.Dropout(old.rate, noise_shape=old.noise_shape)
            if old.rate:
                plain.seed_generator.state.assign(old.seed_generator.state)
            object.__setattr__(owner, attr, plain)
    plain_embedding = keras.layers.Dropout(embedding.rate)
    plain_embedding.seed_generator.state.assign(
        embedding.seed_generator.state)
    (mpp_state,) = callbacks.seed_state_variables(mpp)
    generator = keras.random.SeedGenerator(0)
    generator.state.assign(mpp_state)
    count = round(mpp.corrupt_rate * 16)
    draws = np.asarray(keras.random.uniform((8, 16), seed=generator))
    keras_draws = {
        kind: np.asarray(blocks[kind](tf.constant(tokens), training=True))
        for kind in RATES}
    keras_draws["embedding"] = np.asarray(
        plain_embedding(tf.ones((8, 17, 8)), training=True))
    keras_draws["masked_patches"] = (
        np.argsort(np.argsort(draws, axis=-1), axis=-1) < count
    ).astype("float32")
    result["keras"] = {k: v.tolist() for k, v in keras_draws.items()}
    print(json.dumps(result))
""",
)

SITES = (
    "dropout",
    "attention",
    "drop_path",
    "dropout_remat",
    "attention_remat",
    "drop_path_remat",
    "embedding",
    "masked_patches",
)


@pytest.fixture(scope="module")
def draws(two_devices):
    out = result(two_devices, "replica_draws")
    return {
        part: {
            name: np.asarray(value, dtype="float32")
            for name, value in values.items()
        }
        for part, values in out.items()
    }


@pytest.mark.parametrize("site", SITES)
def test_each_replica_draws_its_own_masks(draws, site):
    first, second = draws["replicas"][site]
    assert first.shape == second.shape
    # The same inputs and weights: only the masks can tell them apart.
    assert not np.allclose(first, second), site


@pytest.mark.parametrize("site", SITES)
def test_replica_zero_draws_what_one_device_draws(draws, site):
    np.testing.assert_allclose(
        draws["replicas"][site][0], draws["one"][site], rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("kind", ["dropout", "attention", "drop_path"])
def test_rematerialised_blocks_recompute_each_replicas_masks(draws, kind):
    # The seeds are drawn (and folded) outside `keras.remat`: the forward
    # pass and its recomputation for the gradient drop alike, on each
    # replica as in the plain block.
    for name in (kind, kind + "_grad"):
        remat = name.replace(kind, kind + "_remat")
        for replica in range(2):
            np.testing.assert_allclose(
                draws["replicas"][remat][replica],
                draws["replicas"][name][replica],
                rtol=1e-5,
                atol=1e-6,
            )


@pytest.mark.parametrize(
    "site", ["dropout", "attention", "drop_path", "embedding", "masked_patches"]
)
def test_one_device_draws_keras_own_masks(draws, site):
    # Replica 0 folds to the identity: a run without a strategy draws what
    # Keras's own Dropout and SeedGenerator draw from the same states, so
    # seeded runs and resumed runs are unchanged.
    np.testing.assert_allclose(
        draws["one"][site], draws["keras"][site], rtol=1e-6, atol=1e-6
    )
