"""Dropout with a seed drawn beforehand, for rematerialised layers.

A rematerialised function (`keras.remat`) must not advance a dropout
layer's `SeedGenerator`: on JAX the new seed state is a value of the
`jax.checkpoint` trace and escapes it (`UnexpectedTracerError`); on
TensorFlow `tf.recompute_grad` runs the function again for the gradient,
the generator has moved on, and the recomputed dropout masks are not the
forward pass's, so the gradients are silently wrong. The layers draw the
seeds outside (`draw`), close over them, and drop inside with
`seeded_dropout`: the same masks as the layer's own call, recomputed alike.
"""

import keras


class _DrawnSeed(keras.random.SeedGenerator):
    """A `SeedGenerator` that always gives one seed drawn beforehand, and
    holds no state of its own (Keras's random ops take a seed generator
    and call `next()` on it; this one is never advanced)."""

    def __init__(self, seed):  # no state variable: nothing to advance
        self._seed = seed

    def next(self, ordered=True):
        return self._seed


def draw(layer, count):
    """`count` seeds from the `keras.layers.Dropout` `layer`'s generator,
    in the order its own calls would draw them; `None`s for a rate of 0
    (the layer then draws none)."""
    if not layer.rate:
        return [None] * count
    return [layer.seed_generator.next() for _ in range(count)]


def seeded_dropout(layer, inputs, seed, training):
    """What `layer(inputs, training=training)` computes (a
    `keras.layers.Dropout`), with `seed` from `draw`; without a seed, the
    layer's own call."""
    if seed is None or not training:
        return layer(inputs, training=training)
    return keras.random.dropout(
        inputs, layer.rate, noise_shape=layer.noise_shape, seed=_DrawnSeed(seed)
    )
