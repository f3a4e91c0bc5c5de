"""Dropout with a seed drawn beforehand, for rematerialised layers; and
every training draw's seed made the replica's own.

A rematerialised function (`keras.remat`) must not advance a dropout
layer's `SeedGenerator`: on JAX the new seed state is a value of the
`jax.checkpoint` trace and escapes it (`UnexpectedTracerError`); on
TensorFlow `tf.recompute_grad` runs the function again for the gradient,
the generator has moved on, and the recomputed dropout masks are not the
forward pass's, so the gradients are silently wrong. The layers draw the
seeds outside (`draw`), close over them, and drop inside with
`seeded_dropout`: the same masks as the layer's own call, recomputed alike.

Under a `tf.distribute` strategy a generator's state is mirrored: every
replica would draw the same seed, and so the same masks for its `i`-th
image. `next_seed`, the one way the package's draws take a seed, folds
the replica's index into it; replica 0, and a run without a strategy,
keep the generator's seed as it is.
"""

import keras


class _DrawnSeed(keras.random.SeedGenerator):
    """A `SeedGenerator` that always gives one seed drawn beforehand, and
    holds no state of its own (Keras's random ops take a seed generator
    and call `next()` on it; this one is never advanced)."""

    def __init__(self, seed):  # no state variable: nothing to advance
        self._seed = seed
        # What Keras's own generators hold (the seed they were made with),
        # and what its PyTorch dropout reads: without it the call raised
        # AttributeError, and with `None` the drop is torch's own
        # unseeded one, which would not recompute the masks.
        self._initial_seed = seed

    def next(self, ordered=True):
        return self._seed


def next_seed(generator):
    """`generator.next()`, this replica's own: under `tf.distribute`
    (MirroredStrategy, MultiWorkerMirroredStrategy, TPUStrategy) the seed
    folded with the replica's index in the whole sync group, so that
    replicas holding the same mirrored state draw differently. Replica 0,
    a run without a strategy (or in the cross-replica context) and the
    JAX backend get the generator's seed unchanged: the draws of a single
    device, and of resumed runs, stay what they were."""
    seed = generator.next()
    if keras.backend.backend() != "tensorflow":
        return seed
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None:
        return seed
    replica = context.replica_id_in_sync_group
    static = tf.get_static_value(replica)
    if static is not None and int(static) == 0:
        return seed
    replica = tf.cast(replica, seed.dtype)
    folded = tf.random.experimental.stateless_fold_in(seed, replica)
    if static is not None:
        return folded
    return tf.where(tf.equal(replica, 0), seed, folded)  # TPU: traced id


def replica_seed(generator):
    """A `seed` argument for `keras.random`'s ops: `next_seed`'s."""
    return _DrawnSeed(next_seed(generator))


def draw(layer, count):
    """`count` seeds from the `keras.layers.Dropout` `layer`'s generator
    (`next_seed`), in the order its own calls would draw them; `None`s
    for a rate of 0 (the layer then draws none)."""
    if not layer.rate:
        return [None] * count
    return [next_seed(layer.seed_generator) for _ in range(count)]


def seeded_dropout(layer, inputs, seed, training):
    """What `layer(inputs, training=training)` computes (a
    `keras.layers.Dropout`), with `seed` from `draw`; without a seed, the
    layer's own call."""
    if seed is None or not training:
        return layer(inputs, training=training)
    return keras.random.dropout(
        inputs, layer.rate, noise_shape=layer.noise_shape, seed=_DrawnSeed(seed)
    )


@keras.saving.register_keras_serializable(package="keras_vit")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose training draws are the replica's own
    (`next_seed`); the same masks as Keras's on one device, and the same
    arguments and config."""

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return keras.random.dropout(
                inputs,
                self.rate,
                noise_shape=self.noise_shape,
                seed=replica_seed(self.seed_generator),
            )
        return inputs
