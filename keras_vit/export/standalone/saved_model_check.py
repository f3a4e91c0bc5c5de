"""Reloads a SavedModel with TensorFlow alone and runs its signatures.

    python .../keras_vit/export/standalone/saved_model_check.py \\
        SAVED_MODEL IMAGES.npy OUT.npz

Run by `verification.verify_saved_model` by its path, in a fresh
interpreter: it imports TensorFlow, NumPy and the standard library, never
keras_vit. It runs `serving_default` on the float inputs of IMAGES.npy and,
if the SavedModel has them (a model that takes [0, 255] pixels),
`serving_uint8` on the same pixels rounded to uint8 and `serving_bytes` on
those encoded as PNG files, in batches of 16 and on one image alone (the
batch is dynamic), and writes the outputs to OUT.npz (`serving_default`,
`serving_default_single`, and so on). Prints one line of JSON: every
signature the SavedModel has, the output key, and whether keras_vit was
imported; the caller judges which signatures it should have.
"""

import json
import sys

import numpy as np
import tensorflow as tf

#: The signatures run (those the SavedModel has): their input's name and
#: dtype (`keras_vit.export.serving_signatures`' names).
SIGNATURES = (
    ("serving_default", "images", tf.float32),
    ("serving_uint8", "images", tf.uint8),
    ("serving_bytes", "image_bytes", tf.string),
)


def _inputs(images, dtype):
    """`images` as a signature of `dtype` takes them: as they are, rounded
    to uint8 (clipped: values outside [0, 255], not pixels, would wrap), or
    those as PNG files (lossless: the signature decodes the same pixels)."""
    if dtype == tf.float32:
        return images
    pixels = np.clip(np.round(images), 0, 255).astype("uint8")
    if dtype == tf.uint8:
        return pixels
    return np.array([tf.io.encode_png(p).numpy() for p in pixels], object)


def main(argv=None):
    """Runs the check; prints its JSON line."""
    path, images_path, out_path = sys.argv[1:4] if argv is None else argv
    images = np.load(images_path)
    loaded = tf.saved_model.load(path)
    result = {"signatures": sorted(loaded.signatures.keys())}
    arrays = {}
    for name, input_name, dtype in SIGNATURES:
        if name not in loaded.signatures:
            continue
        fn = loaded.signatures[name]
        x = _inputs(images, dtype)

        def run(batch, fn=fn, input_name=input_name, dtype=dtype):
            return fn(**{input_name: tf.constant(batch, dtype)})

        chunks = [run(x[i : i + 16]) for i in range(0, len(x), 16)]
        key = sorted(chunks[0])[0]
        arrays[name] = np.concatenate([c[key].numpy() for c in chunks])
        arrays[name + "_single"] = run(x[:1])[key].numpy()
        result["output_key"] = key
    result["keras_vit_imported"] = "keras_vit" in sys.modules
    np.savez(out_path, **arrays)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
