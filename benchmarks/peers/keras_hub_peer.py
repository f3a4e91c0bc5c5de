"""The keras-hub peer: keras-hub's `ViTBackbone` at a keras_vit variant's
sizes, with a 1000-class head on the class token, at any image size."""

import keras

from keras_vit import registry as variants


def model(variant, dtype=None, image_size=224):
    """keras-hub's ViT of `variant` (a name of `keras_vit.registry`) as a
    `keras.Model` classifier of `image_size` px images in the dtype policy
    `dtype`."""
    import keras_hub  # an optional dependency: imported when it is timed

    v = variants.get_variant(variant)
    if "stem" in v:
        raise ValueError("keras-hub has no hybrid ViT")
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(image_size, image_size, 3),
        patch_size=v["patch_size"],
        num_layers=v["num_layers"],
        num_heads=v["num_heads"],
        hidden_dim=v["hidden_dim"],
        mlp_dim=v["mlp_dim"],
        dtype=dtype,
    )
    inputs = keras.Input((image_size, image_size, 3))
    tokens = backbone(inputs)
    outputs = keras.layers.Dense(1000, dtype=dtype)(tokens[:, 0])
    return keras.Model(inputs, outputs)
