"""`Preprocessing`: how to feed a ViT and read its outputs, beside its
architecture.

What describes the model's inputs and outputs but builds no layer: how its
inputs are normalised (`normalization`), how an image is resized to its
input for inference and evaluation (`image_resize`), the names of its
classes (`class_names`), and the preset its weights came from
(`weights_preset`, whose record gives exports its licence and
publisher). A `keras_vit.ViT` takes the fields as keyword
arguments, keeps them as one record (`model.preprocessing`) beside its
`ViTConfig` and saves them in its config, so a `.keras` file carries its
labels. Presets fill the record (their `normalization` and
`image_resize`, ImageNet-1k's names for a 1000-class head, their unique
name), training fills `class_names` with its dataset's, and exports write
it into their metadata. With
`include_preprocessing=True` the model's `rescaling` layer applies
`normalization` (`scale_and_offset`).
"""

import dataclasses
import math
import numbers

from keras_vit import arg_checks
from keras_vit.data import resize


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """How a ViT's inputs are prepared and its outputs named. The one
    source of these arguments' names and defaults (`keras_vit.ViT` takes
    them as keyword arguments; see it for their meaning).

    Each field is checked alone when the record is made (a `ValueError`
    naming it and the value received) and kept resolved: `normalization`
    `None` or per-channel float tuples, `image_resize` complete
    (`keras_vit.data.resize.check`), `class_names` `None` or a tuple of
    strings, `weights_preset` `None` or a preset's unique name.
    `check_fits` checks it against a `ViTConfig`."""

    normalization: object = None
    image_resize: object = None
    class_names: object = None
    weights_preset: object = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = _CHECKS[field.name](getattr(self, field.name))
            object.__setattr__(self, field.name, value)

    def to_dict(self):
        """The fields as `ViT` arguments (the class names a list)."""
        config = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
        }
        if self.class_names is not None:
            config["class_names"] = list(self.class_names)
        return config

    def check_fits(self, config):
        """Raises `ValueError` where the record does not fit the
        architecture `config` (a `ViTConfig`): a `normalization` without
        one number per channel, `class_names` without one name per class
        (or for a model without a head)."""
        norm = self.normalization
        for key in () if norm is None else ("mean", "std"):
            if len(norm[key]) != config.num_channels:
                raise ValueError(
                    f"`normalization['{key}']` must hold one number per "
                    f"channel ({config.num_channels}). Received: "
                    f"normalization={norm!r}"
                )
        names = self.class_names
        if names is None:
            return
        if not config.include_top:
            raise ValueError(
                "`class_names` name the head's outputs, and a model with "
                "include_top=False has none. Received: "
                f"class_names={_shown(names)} and include_top=False"
            )
        if len(names) != config.num_classes:
            raise ValueError(
                f"`class_names` must hold one name per class "
                f"(num_classes={config.num_classes}). Received: "
                f"{len(names)} names, class_names={_shown(names)}"
            )


#: The `ViT` arguments that a `Preprocessing` holds, in its field order.
PREPROCESSING_ARGUMENTS = tuple(
    field.name for field in dataclasses.fields(Preprocessing)
)


def scale_and_offset(normalization):
    """The `(scale, offset)` that map [0, 255] pixels to the inputs a model
    of this `normalization` (a `Preprocessing`'s, or an export's metadata
    `input.normalization`) takes, as one multiply-add: floats for `None`,
    the paper's `[-1, 1]`; per-channel float tuples for a mean and std's
    `(pixels / 255 - mean) / std` (folded: `scale = 1 / (255 std)`,
    `offset = -mean / std`)."""
    if normalization is None:
        return 1.0 / 127.5, -1.0
    std, mean = normalization["std"], normalization["mean"]
    scale = tuple(1.0 / (255.0 * s) for s in std)
    offset = tuple(-m / s for m, s in zip(mean, std))
    return scale, offset


def _shown(names):
    """`names` for an error message, the first ten."""
    names = list(names)
    return repr(names if len(names) <= 10 else [*names[:10], "..."])


def _normalization(normalization):
    """`normalization` checked: `None`, or `{"mean": ..., "std": ...}` with
    as many finite numbers each (the stds > 0), as float tuples."""
    if normalization is None:
        return None
    if not isinstance(normalization, dict) or set(normalization) != {
        "mean",
        "std",
    }:
        raise ValueError(
            '`normalization` must be None or {"mean": (...), "std": (...)} '
            f"(per channel, on [0, 1] pixels). Received: "
            f"normalization={normalization!r}"
        )
    checked = {}
    for key in ("mean", "std"):
        values = normalization[key]
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            values = ()
        if not values or len(values) != len(checked.get("mean", values)):
            raise ValueError(
                f"`normalization['{key}']` must hold one number per channel, "
                "as many as the mean. Received: "
                f"normalization={normalization!r}"
            )
        checked[key] = tuple(
            arg_checks.finite_positive_float(f"normalization['{key}']", v)
            if key == "std"
            else _finite(f"normalization['{key}']", v)
            for v in values
        )
    _refuse_pixel_units(checked, normalization)
    return checked


def _refuse_pixel_units(checked, normalization):
    """Refuses a mean outside [0, 1] or a std above 1: the numbers of
    [0, 255] pixels (mmcv's and many configs' `123.675, 116.28, 103.53`),
    which would map every image into a band near one value, and the model
    would still predict, confidently and wrongly."""
    if all(0 <= m <= 1 for m in checked["mean"]) and all(
        s <= 1 for s in checked["std"]
    ):
        return
    scaled = {
        key: tuple(round(v / 255, 6) for v in values)
        for key, values in checked.items()
    }
    raise ValueError(
        "`normalization` is the mean and std of pixels in [0, 1]: each "
        "mean in [0, 1], each std at most 1. These look like [0, 255] "
        f"pixel units; divide them by 255 ({scaled}). Received: "
        f"normalization={normalization!r}"
    )


def _finite(name, value):
    """`value` as a float, or `ValueError` if it is no finite number."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
    ):
        raise ValueError(
            f"`{name}` must be a finite number. Received: {name}={value!r}"
        )
    return float(value)


def _class_names(class_names):
    """`class_names` checked: `None`, or a list or tuple of one or more
    strings, as a tuple."""
    if class_names is None:
        return None
    if not isinstance(class_names, (list, tuple)) or not all(
        isinstance(name, str) for name in class_names
    ):
        raise ValueError(
            "`class_names` must be None or a list of strings, one per "
            f"class. Received: class_names={class_names!r}"
        )
    if not class_names:
        raise ValueError(
            "`class_names` must name at least one class (None for no "
            f"names). Received: class_names={class_names!r}"
        )
    return tuple(class_names)


def _weights_preset(name):
    """`name` checked: `None` or a string, the unique name of the preset
    the weights came from. Not looked up: a `.keras` file must still load
    where its preset was renamed or registered at run time (an export then
    writes no licence for it)."""
    if name is None or (isinstance(name, str) and name):
        return name
    raise ValueError(
        "`weights_preset` must be None or a preset's unique name (see "
        "keras_vit.list_presets()), as ViT.from_preset records it. "
        f"Received: weights_preset={name!r}"
    )


#: Each field's check: takes the value, returns it checked.
_CHECKS = {
    "normalization": _normalization,
    "image_resize": resize.check,
    "class_names": _class_names,
    "weights_preset": _weights_preset,
}
