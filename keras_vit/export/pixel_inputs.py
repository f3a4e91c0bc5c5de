"""[0, 255] RGB pixels turned into what a model takes: as they are for a
model that normalises them itself, else normalised as its `normalization`
records."""

import functools

import numpy as np

from keras_vit.models.preprocessing import scale_and_offset


def takes_pixels(model):
    """Whether the model takes RGB pixel values in [0, 255] itself."""
    return bool(getattr(model, "include_preprocessing", True))


def normalization(model):
    """The normalisation of the model's weights' inputs (a `keras_vit.ViT`'s
    `normalization`: `None`, the paper's [-1, 1], or `{"mean", "std"}` on
    [0, 1] pixels); `None` for other models."""
    return getattr(model, "normalization", None)


def normalize_pixels(pixels, normalization):
    """[0, 255] RGB pixels normalised as `normalization` says: `None`, the
    paper's `pixels / 127.5 - 1`, or `{"mean", "std"}` on [0, 1] pixels (a
    `keras_vit.ViT`'s `normalization`, or an export's metadata
    `input.normalization`). The same float32 multiply-add as the model's
    own `rescaling` layer (`scale_and_offset`, the one source
    of the numbers), so a model built with `include_preprocessing=False`
    sees exactly what its `include_preprocessing=True` twin computes."""
    scale, offset = scale_and_offset(normalization)
    pixels = np.asarray(pixels, "float32")
    return pixels * np.asarray(scale, "float32") + np.asarray(offset, "float32")


def inputs_from_pixels(model):
    """The function that turns [0, 255] RGB pixels `(N, H, W, C)` into what
    `model` takes: float32 pixels as they are for a model that normalises
    them itself (`takes_pixels`), else `normalize_pixels` with its
    `normalization`. The conversion of every image file and NumPy batch
    fed to a model (`keras-vit predict` and `inspect`, few-shot
    evaluation, an export's calibration and verification); training's
    `tf.data` pipelines do the same multiply-add in the graph
    (`keras_vit.training.train._as_model_inputs`), from the same numbers.

    Raises:
        ValueError: for a model that takes already-normalised inputs and
            records no normalisation (not a `keras_vit.ViT`): feeding it
            pixels, or guessing, would give wrong answers silently.
    """
    if takes_pixels(model):
        return _float32
    if not hasattr(model, "normalization"):
        raise ValueError(
            "The model takes already-normalised inputs "
            "(include_preprocessing=False) and records no `normalization`, "
            "so image files and datasets cannot be turned into its inputs: "
            "pass arrays of its inputs, or use a model built with "
            "include_preprocessing=True. Received: model="
            f"{model.name!r} with include_preprocessing=False"
        )
    return functools.partial(
        normalize_pixels, normalization=normalization(model)
    )


def _float32(pixels):
    return np.asarray(pixels, "float32")


def input_range(model):
    """`(low, high)` of what `model` takes for [0, 255] pixels: `(0, 255)`
    for a model that takes pixels; for a `keras_vit.ViT` built with
    `include_preprocessing=False`, the range of `inputs_from_pixels` over
    every channel (`(-1, 1)` for the paper's), widened by 0.1% of its span
    for the rounding of a caller's own normalisation; `None` when
    unknown (not a `keras_vit.ViT`)."""
    if takes_pixels(model):
        return (0.0, 255.0)
    if not hasattr(model, "normalization"):
        return None
    # (2, 1) broadcast over the channels of a per-channel normalisation.
    ends = normalize_pixels(np.array([[0.0], [255.0]]), normalization(model))
    low, high = float(ends.min()), float(ends.max())
    margin = 1e-3 * (high - low)
    return (low - margin, high + margin)
