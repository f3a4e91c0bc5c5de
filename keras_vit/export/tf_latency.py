"""Latencies of a model as Keras and as its SavedModel, at one thread count.

    python -m keras_vit.export.tf_latency \\
        THREADS MODEL.keras SAVED_MODEL RUNS WARMUP

The program `benchmark_export` runs in a fresh process per thread count
(TensorFlow fixes its thread pools when it starts): the model is called in
a `tf.function` (Keras's fastest path) and the SavedModel through its
`serving_default` signature, at batch 1 on random pixels, by
`keras_vit.timing`'s rule. Prints one line of JSON: the milliseconds of
each timed call, `{"keras": [...], "saved_model": [...]}`.
"""

import json
import sys

import keras
import numpy as np
import tensorflow as tf

from keras_vit import timing


def _milliseconds(fn, runs, warmup):
    return [1e3 * t for t in timing.latencies(fn, runs, warmup)]


def main(argv=None):
    """Times both and prints the JSON line."""
    threads, keras_path, saved_path, runs, warmup = (
        sys.argv[1:6] if argv is None else argv
    )
    threads, runs, warmup = int(threads), int(runs), int(warmup)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    # keras_vit is imported (by `-m keras_vit.export.tf_latency`), so the
    # layers of a keras_vit .keras file are registered.
    model = keras.saving.load_model(keras_path, compile=False)
    pixels = np.random.default_rng(0).uniform(
        0, 255, (1, *model.input_shape[1:])
    )
    x = tf.constant(pixels.astype("float32"))
    call = tf.function(lambda images: model(images, training=False))
    result = {"keras": _milliseconds(lambda: call(x).numpy(), runs, warmup)}
    serve = tf.saved_model.load(saved_path).signatures["serving_default"]
    result["saved_model"] = _milliseconds(
        lambda: [t.numpy() for t in serve(images=x).values()], runs, warmup
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
