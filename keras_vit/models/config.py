"""`ViTConfig`: a ViT's architecture, checked once.

`vit_config(...)` is the one place for the rules between `ViT`'s
arguments (`hidden_dim` and `num_heads`, the position embeddings' width,
token pooling and the class token, the image and the patch size); each
layer still checks its own arguments. A `ViT` keeps the `ViTConfig` it was
built from (`model.vit_config`) beside its `Preprocessing`
(`keras_vit.models.preprocessing`: normalisation, evaluation resize, class
names), and its `get_config` is derived from the two.
"""

import dataclasses

import keras
import numpy as np

from keras_vit import arg_checks
from keras_vit.layers.layer_scale import layer_scale_init as _check_scale
from keras_vit.layers.rotary import check_cat_options
from keras_vit.layers.rotary import coordinate_augmentation
from keras_vit.options import ACTIVATIONS
from keras_vit.options import MODEL_POOLINGS
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.options import POSITION_EMBEDDING_TOKENS
from keras_vit.options import ROPE_TYPES

#: The resolution of a `ViT` whose arguments (and weights) give none.
DEFAULT_IMAGE_SIZE = 224


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """A ViT's architecture: `ViT`'s arguments, checked and resolved
    (`image_size` a `(height, width)` pair, `class_token` a bool) by
    `vit_config`. See `keras_vit.ViT` for their meaning. `stem` is `None`,
    a dict of `ResNetStem` arguments, or a serialized Keras layer.

    The one source of the arguments' names and defaults: each field's
    default is `ViT`'s (a test holds its signature to them), before
    `vit_config` resolves it."""

    image_size: object = None
    patch_size: int = 16
    hidden_dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    mlp_dim: int = 3072
    num_classes: int = 1000
    include_top: bool = True
    pooling: object = "token"
    class_token: bool = None
    position_embedding: str = "learned"
    rope_theta: float = 100.0
    rope_type: str = "dinov3"
    rope_grid_offset: float = 0.0
    rope_reference_grid: object = None
    rope_with_learned: bool = False
    rope_shift_coords: float = None
    rope_jitter_coords: float = None
    rope_rescale_coords: float = None
    representation_size: object = None
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0
    drop_path_rate: float = 0.0
    layer_norm_epsilon: float = 1e-6
    classifier_activation: object = "softmax"
    include_preprocessing: bool = True
    num_channels: int = 3
    stem: object = None
    activation: str = "gelu"
    layer_scale_init: object = None
    qk_norm: bool = False
    qkv_bias: bool = True
    use_gated_mlp: bool = False
    patch_bias: bool = True
    norm_pre: bool = False
    fc_norm: bool = False
    position_embedding_tokens: str = "all"
    num_register_tokens: int = 0
    distillation: bool = False
    pool_include_prefix: bool = False
    pooling_num_heads: object = None
    dynamic_image_size: bool = False
    dynamic_image_padding: bool = False

    def to_dict(self):
        """The fields as `ViT` arguments (the activation serialized)."""
        config = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
        }
        config["classifier_activation"] = keras.saving.serialize_keras_object(
            self.classifier_activation
        )
        return config

    @property
    def num_prefix_tokens(self):
        """The tokens before the patch tokens: the class token (if any),
        the distillation token (if any), then the register tokens."""
        return (
            int(self.class_token)
            + int(self.distillation)
            + self.num_register_tokens
        )

    def token_grid(self, feature_size):
        """The `(rows, columns)` token grid of a `feature_size` map (the
        image, or the stem's feature map), or `ValueError` when the patch
        size does not divide it."""
        for side in feature_size:
            if side % self.patch_size:
                where = (
                    ""
                    if tuple(feature_size) == self.image_size
                    else f" (the stem's {tuple(feature_size)} feature map)"
                )
                raise ValueError(
                    "`image_size` must be a multiple of `patch_size` in both "
                    f"dimensions{where}. Received: "
                    f"image_size={self.image_size} "
                    f"and patch_size={self.patch_size}"
                )
        return (
            feature_size[0] // self.patch_size,
            feature_size[1] // self.patch_size,
        )


#: `ViT`'s architecture defaults: the `ViTConfig` fields'.
DEFAULTS = {
    field.name: field.default for field in dataclasses.fields(ViTConfig)
}


def vit_config(**arguments):
    """Checks `ViT`'s architecture arguments and returns their `ViTConfig`.

    Arguments not given take `DEFAULTS` (`ViT`'s); `image_size=None` is
    224. Each argument is checked alone (`_ALONE`), then the rules between
    them (`_RULES`) resolve what depends on others. Raises `ValueError`
    naming the argument and the value received.
    """
    unknown = sorted(set(arguments) - set(DEFAULTS))
    if unknown:
        raise ValueError(
            "Unknown ViT architecture argument(s). Received: "
            + ", ".join(f"{name}={arguments[name]!r}" for name in unknown)
        )
    values = {**DEFAULTS, **arguments}
    for name, check in _ALONE.items():
        values[name] = check(name, values[name])
    for rule in _RULES:
        values.update(rule(values))
    return ViTConfig(**values)


def _choice(choices):
    return lambda name, value: arg_checks.one_of(name, value, choices)


def _optional(check):
    return lambda name, value: None if value is None else check(name, value)


#: The checks of each argument that needs no other, by name: each takes
#: the name and the value, and returns the value checked.
_ALONE = {
    **dict.fromkeys(
        ("patch_size", "num_layers", "mlp_dim", "num_classes", "num_channels"),
        arg_checks.positive_int,
    ),
    **dict.fromkeys(
        ("dropout_rate", "attention_dropout_rate", "drop_path_rate"),
        arg_checks.rate,
    ),
    **dict.fromkeys(
        (
            "include_top",
            "include_preprocessing",
            "qk_norm",
            "qkv_bias",
            "use_gated_mlp",
            "patch_bias",
            "norm_pre",
            "fc_norm",
            "distillation",
            "pool_include_prefix",
            "rope_with_learned",
            "dynamic_image_size",
            "dynamic_image_padding",
        ),
        arg_checks.boolean,
    ),
    "representation_size": arg_checks.optional_positive_int,
    "layer_norm_epsilon": arg_checks.epsilon,
    "rope_theta": arg_checks.positive_float32,
    "rope_type": _choice(ROPE_TYPES),
    "pooling_num_heads": arg_checks.optional_positive_int,
    "classifier_activation": lambda _, value: _activation(value),
    "activation": _choice(ACTIVATIONS),
    "pooling": _choice((*MODEL_POOLINGS, None)),
    "position_embedding": _choice(MODEL_POSITION_EMBEDDINGS),
    "position_embedding_tokens": _choice(POSITION_EMBEDDING_TOKENS),
    "num_register_tokens": arg_checks.non_negative_int,
    "layer_scale_init": _optional(_check_scale),
    "image_size": lambda name, value: arg_checks.size_2d(
        name, DEFAULT_IMAGE_SIZE if value is None else value
    ),
}


def _width_and_heads(v):
    hidden_dim = arg_checks.positive_int("hidden_dim", v["hidden_dim"])
    num_heads = arg_checks.positive_int("num_heads", v["num_heads"])
    if hidden_dim % num_heads:
        raise ValueError(
            "`hidden_dim` must be divisible by `num_heads`. Received: "
            f"hidden_dim={hidden_dim} and num_heads={num_heads}"
        )
    return {"hidden_dim": hidden_dim, "num_heads": num_heads}


def _pooling(v):
    pooling, class_token = v["pooling"], v["class_token"]
    if v["include_top"] and pooling is None:
        raise ValueError(
            "A model with include_top=True needs pooling='token', 'gap' or "
            "'map'. Received: pooling=None"
        )
    if class_token is None:  # the paper's GAP models have none, nor SigLIP
        class_token = pooling not in ("gap", "map")
    class_token = arg_checks.boolean("class_token", class_token)
    if pooling == "token" and not class_token:
        raise ValueError(
            "pooling='token' needs a class token. Received: class_token=False"
        )
    if v["pool_include_prefix"] and pooling != "map":
        raise ValueError(
            "pool_include_prefix=True lets the attention-pooling probe "
            "attend to the class and register tokens too, so it is for "
            "pooling='map'. Received: pool_include_prefix=True and "
            f"pooling={pooling!r}"
        )
    if v["pooling_num_heads"] is not None and pooling != "map":
        raise ValueError(
            "pooling_num_heads is the attention-pooling head's, so it is "
            "for pooling='map'. Received: pooling_num_heads="
            f"{v['pooling_num_heads']} and pooling={pooling!r}"
        )
    if v["fc_norm"] and pooling != "gap":
        raise ValueError(
            "fc_norm=True (the final LayerNorm after pooling) is for "
            "pooling='gap'. Received: "
            f"fc_norm=True and pooling={pooling!r}"
        )
    return {"class_token": class_token}


def _position_embedding(v):
    position_embedding, hidden_dim = v["position_embedding"], v["hidden_dim"]
    if position_embedding == "sincos2d" and hidden_dim % 4:
        raise ValueError(
            "position_embedding='sincos2d' needs a hidden_dim that is a "
            f"multiple of 4. Received: hidden_dim={hidden_dim}"
        )
    augmentation = coordinate_augmentation(
        v["rope_shift_coords"],
        v["rope_jitter_coords"],
        v["rope_rescale_coords"],
        v["rope_type"],
        prefix="rope_",
    )
    given = {k: a for k, a in augmentation.items() if a is not None}
    if given and position_embedding != "rope":
        raise ValueError(
            "The coordinate augmentations (rope_shift_coords, "
            "rope_jitter_coords, rope_rescale_coords) are DINOv3's RoPE's, "
            "for position_embedding='rope'. Received: "
            + ", ".join(f"{k}={a!r}" for k, a in given.items())
            + f" and position_embedding={position_embedding!r}"
        )
    head_dim = hidden_dim // v["num_heads"]
    if position_embedding == "rope" and head_dim % 4:
        raise ValueError(
            "position_embedding='rope' rotates each head's queries and keys "
            "in 2-D, so the head width hidden_dim / num_heads must be a "
            f"multiple of 4. Received: hidden_dim={hidden_dim} and "
            f"num_heads={v['num_heads']}"
        )
    offset, reference = check_cat_options(
        v["rope_type"],
        v["rope_grid_offset"],
        v["rope_reference_grid"],
        prefix="rope_",
    )
    rope_options = {
        "rope_theta": v["rope_theta"] != ViTConfig.rope_theta,
        "rope_type": v["rope_type"] != "dinov3",
        "rope_grid_offset": offset != 0.0,
        "rope_reference_grid": reference is not None,
        "rope_with_learned": v["rope_with_learned"],
    }
    changed = [name for name, other in rope_options.items() if other]
    if position_embedding != "rope" and changed:
        raise ValueError(
            f"{', '.join(changed)} set the rotary position embedding, so "
            "they are for position_embedding='rope'. Received: "
            f"position_embedding={position_embedding!r} and "
            + ", ".join(f"{name}={v[name]!r}" for name in changed)
        )
    if position_embedding == "learned2d" and hidden_dim % 2:
        raise ValueError(
            "position_embedding='learned2d' needs an even hidden_dim. "
            f"Received: hidden_dim={hidden_dim}"
        )
    return {
        "rope_grid_offset": offset,
        "rope_reference_grid": reference,
        **augmentation,
    }


def _distillation(v):
    if not v["distillation"]:
        return {}
    if not (v["class_token"] and v["pooling"] in ("token", None)):
        raise ValueError(
            "distillation=True (DeiT's distillation token and head) needs "
            "a class token and pooling='token' (or None). Received: "
            f"distillation=True, pooling={v['pooling']!r} and "
            f"class_token={v['class_token']}"
        )
    if v["representation_size"] is not None:
        raise ValueError(
            "distillation=True has no pre-logits layer. Received: "
            f"representation_size={v['representation_size']}"
        )
    return {}


def _dynamic(v):
    if v["dynamic_image_padding"] and not v["dynamic_image_size"]:
        raise ValueError(
            "dynamic_image_padding=True pads images of any size, so it "
            "needs dynamic_image_size=True (a fixed-size model takes only "
            "its image_size). Received: dynamic_image_padding=True and "
            "dynamic_image_size=False"
        )
    if v["dynamic_image_size"] and v["stem"] is not None:
        raise ValueError(
            "dynamic_image_size=True is for plain ViTs: a hybrid's stem "
            "maps the image to its feature map at a size fixed when the "
            "model is built. Build the hybrid at each image_size instead. "
            f"Received: dynamic_image_size=True and stem={v['stem']!r}"
        )
    if v["dynamic_image_size"] and v["position_embedding"] == "relative":
        raise ValueError(
            "dynamic_image_size=True needs position embeddings on the patch "
            "grid: relative positions along the token sequence are learned "
            "for one sequence length. Received: dynamic_image_size=True and "
            "position_embedding='relative'"
        )
    return {}


#: The rules between arguments, in order: each takes the values (each
#: checked alone) and returns those it resolves.
_RULES = (
    _width_and_heads,
    _pooling,
    _position_embedding,
    _distillation,
    _dynamic,
)


def _activation(classifier_activation):
    """`classifier_activation` checked: `None`, a name, a function or a
    layer, as Keras's `Dense` takes an `activation`. A saved config's dict
    (`to_dict`) becomes the object it describes, as `Dense` reads its own:
    `keras.activations.deserialize` gave a layer's class name, a string no
    activation has."""
    if classifier_activation is None:
        return None
    try:
        resolved = keras.activations.get(classifier_activation)
    except (ValueError, TypeError):
        raise ValueError(
            "Unknown `classifier_activation`. Received: "
            f"classifier_activation={classifier_activation!r}"
        ) from None
    if isinstance(classifier_activation, dict):  # from a saved config
        return resolved
    return classifier_activation


def activation_kind(activation):
    """`"logits"`, `"probabilities"` or `"outputs"` for a classifier
    activation in any spelling `keras_vit.ViT` takes: `None`, a name, a
    function, a saved config's dict, or a layer (`Softmax`, `Activation`,
    `Identity`). Resolved, not compared as a string: a
    `keras.activations.linear` head read as "outputs" had its logits
    reported as probabilities by `keras-vit predict`."""
    if activation is None or isinstance(activation, keras.layers.Identity):
        return "logits"
    if isinstance(activation, keras.layers.Activation):
        return activation_kind(activation.activation)
    if isinstance(activation, keras.layers.Softmax):
        # The head's output is (batch, classes): -1 and 1 are its classes.
        axes = set(np.atleast_1d(activation.axis).tolist())
        return "probabilities" if axes <= {-1, 1} else "outputs"
    try:
        function = keras.activations.get(activation)
    except (ValueError, TypeError):
        return "outputs"
    if function is keras.activations.linear:
        return "logits"
    if function is keras.activations.softmax:
        return "probabilities"
    return "outputs"
