"""`RotaryEmbedding`: DINOv3's 2-D axial rotary position embedding.

Rotary position embeddings (RoPE; Su et al., 2021) rotate each query and
key by angles that depend on the token's position, so that their dot
product depends on the offset between the two. DINOv3 (Siméoni et al.,
2025, https://arxiv.org/abs/2508.10104) uses an axial 2-D form on the
patch tokens only; this module follows timm's `RotaryEmbeddingDinoV3` and
`apply_rot_embed_cat(..., half=True)` (timm/layers/pos_embed_sincos.py)
and transformers' `DINOv3ViTRopePositionEmbedding` / `apply_rotary_pos_emb`
(models/dinov3_vit/modeling_dinov3_vit.py), which agree:

- A patch at row `i`, column `j` of an `H x W` grid has the coordinates
  `y = 2 (i + 0.5) / H - 1` and `x = 2 (j + 0.5) / W - 1`: its centre,
  each axis normalised by its own side (timm's `normalize_coords=
  "separate"`) to [-1, 1]. A grid of any size or shape covers the same
  square, so nothing is resampled for another image size.
- A head of width `d` has `d / 4` periods `theta ** (4k / d)`, `k = 0 ..
  d/4 - 1` (`rope_theta`, DINOv3's 100). The angles are `2 pi y / period`
  then `2 pi x / period` (`d / 2` of them), repeated once: `(d,)` per
  patch.
- A query or key `v` of a patch becomes `v * cos + rotate_half(v) * sin`,
  `rotate_half([a, b]) = [-b, a]` over the two halves of the head.
- The class and register tokens are not rotated: their rows of the table
  are `sin = 0`, `cos = 1`, so the attention applies one table to all
  tokens, without slicing them apart.

DINOv3's train-time coordinate augmentations (timm's `shift_coords`,
`jitter_coords`, `rescale_coords`; transformers' `pos_embed_shift`,
`pos_embed_jitter`, `pos_embed_rescale`), each off unless given and only
applied when `training=True` (never at inference), draw one transform per
call (per batch: every image and every block share it), in this order:

- shift `s`: add `u ~ U(-s, s)`, one per axis, to the coordinates;
- jitter `j >= 1`: multiply them by `exp(u)`, `u ~ U(-log j, log j)`, one
  per axis (a log-uniform factor in [1/j, j]);
- rescale `r >= 1`: multiply both axes by one `exp(u)`, `u ~ U(-log r,
  log r)`.

The draws come from the layer's `keras.random.SeedGenerator`.
"""

import math

import keras
from keras import ops

from keras_vit import arg_checks
from keras_vit.layers.layer_norm import statistics_dtype


def rope_periods(head_dim, theta, dtype="float32"):
    """The `head_dim // 4` periods `theta ** (4k / head_dim)`."""
    quarter = head_dim // 4
    exponents = ops.arange(quarter, dtype=dtype) * (4.0 / head_dim)
    return ops.power(ops.cast(theta, dtype), exponents)


def rope_table(
    rows,
    cols,
    head_dim,
    theta,
    num_prefix_tokens=0,
    dtype="float32",
    shift=(0.0, 0.0),
    scale=(1.0, 1.0),
):
    """The `(num_prefix_tokens + rows * cols, 2 * head_dim)` table `[sin |
    cos]` of an `rows x cols` patch grid (row-major, as the patches), in
    `dtype`, the prefix tokens' rows `[0 | 1]` (no rotation). `rows` and
    `cols` may be scalar tensors (a dynamic image size). The coordinates
    `(y, x)` become `((y + shift[0]) * scale[0], (x + shift[1]) *
    scale[1])` (the train-time augmentations' draws)."""
    rows_f = ops.cast(rows, dtype)
    cols_f = ops.cast(cols, dtype)
    y = 2.0 * (ops.arange(rows, dtype=dtype) + 0.5) / rows_f - 1.0
    x = 2.0 * (ops.arange(cols, dtype=dtype) + 0.5) / cols_f - 1.0
    y = (y + shift[0]) * scale[0]
    x = (x + shift[1]) * scale[1]
    count = rows * cols
    y = ops.reshape(ops.broadcast_to(y[:, None], (rows, cols)), (count, 1))
    x = ops.reshape(ops.broadcast_to(x[None, :], (rows, cols)), (count, 1))
    periods = rope_periods(head_dim, theta, dtype)[None, :]
    angles = ops.concatenate(
        [2.0 * math.pi * y / periods, 2.0 * math.pi * x / periods], axis=-1
    )  # (count, head_dim / 2)
    angles = ops.concatenate([angles, angles], axis=-1)
    table = ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
    if num_prefix_tokens:
        prefix = ops.concatenate(
            [
                ops.zeros((num_prefix_tokens, head_dim), dtype),
                ops.ones((num_prefix_tokens, head_dim), dtype),
            ],
            axis=-1,
        )
        table = ops.concatenate([prefix, table], axis=0)
    return table


def coordinate_augmentation(shift, jitter, rescale, prefix=""):
    """Checks DINOv3's coordinate augmentation factors (see the module's
    docstring): each `None` (off) or a finite float, `shift >= 0`,
    `jitter >= 1`, `rescale >= 1`; returns them as a dict by their names
    (`shift_coords`, ...), each with `prefix` (`ViT`'s: `"rope_"`)."""
    checked = {}
    for name, value, least in (
        (f"{prefix}shift_coords", shift, 0.0),
        (f"{prefix}jitter_coords", jitter, 1.0),
        (f"{prefix}rescale_coords", rescale, 1.0),
    ):
        if value is not None:
            value = arg_checks.finite_non_negative_float(name, value)
            if value < least:
                raise ValueError(
                    f"`{name}` is a factor of at least {least:g} (or None: "
                    f"off). Received: {name}={value!r}"
                )
        checked[name] = value
    return checked


def apply_rope(x, table):
    """`x * cos + rotate_half(x) * sin` for `(B, T, heads, d)` queries or
    keys and a `(T, 2d)` `rope_table`, computed in `x`'s dtype."""
    sin, cos = ops.split(ops.cast(table, x.dtype), 2, axis=-1)
    sin, cos = sin[None, :, None, :], cos[None, :, None, :]
    first, second = ops.split(x, 2, axis=-1)
    rotated = ops.concatenate([ops.negative(second), first], axis=-1)
    return x * cos + rotated * sin


@keras.saving.register_keras_serializable(package="keras_vit")
class RotaryEmbedding(keras.layers.Layer):
    """The rotary table of a patch grid (DINOv3's 2-D axial RoPE).

    A layer of `ViT(position_embedding="rope")` (named `rope`), not one of
    `keras_vit.layers`' building blocks: its output is a table that every
    block's attention takes (`MultiHeadSelfAttention(...)(x, rope=table)`).

    See the module's docstring for the mechanism. The layer has no
    weights: it computes `rope_table` from the grid of its input, so a
    model with `dynamic_image_size` gets each image's own table, and a
    fixed-size model a constant one.

    Args:
        head_dim: int, the attention heads' width; a multiple of 4.
        rope_theta: float > 0, the base of the periods. Defaults to
            `100.0` (DINOv3's).
        num_prefix_tokens: int, the tokens before the patches (class,
            registers), which are not rotated. Defaults to `0`.
        grid_size: `(rows, cols)`, the grid of a flat `(B, N, ...)` input.
            Defaults to `None` (the input must then be a `(B, rows,
            cols, ...)` grid).
        shift_coords: float >= 0 or `None`, the train-time shift (see the
            module's docstring). Defaults to `None` (off).
        jitter_coords: float >= 1 or `None`, the train-time per-axis
            scale factor. Defaults to `None` (off).
        rescale_coords: float >= 1 or `None`, the train-time scale factor
            of both axes. Defaults to `None` (off).
        seed: int or `None`, the seed of the augmentations' draws.
            Defaults to `None`.
        **kwargs: base layer arguments such as `name`.

    Call arguments:
        patches: `(B, rows, cols, ...)` patches, or `(B, N, ...)` ones of
            `grid_size`; only their shape is read.
        training: bool, whether to apply the augmentations that are on.

    Returns:
        The `(num_prefix_tokens + rows * cols, 2 * head_dim)` table `[sin |
        cos]` (`apply_rope` takes it), computed in float32 (a float64
        layer's: float64) and cast once to the compute dtype, as timm's.

    Example:

    >>> layer = keras_vit.layers.rotary.RotaryEmbedding(head_dim=8)
    >>> layer(np.zeros((1, 2, 3, 5))).shape
    TensorShape([6, 16])
    """

    def __init__(
        self,
        head_dim,
        rope_theta=100.0,
        num_prefix_tokens=0,
        grid_size=None,
        shift_coords=None,
        jitter_coords=None,
        rescale_coords=None,
        seed=None,
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.head_dim = arg_checks.positive_int("head_dim", head_dim)
        if self.head_dim % 4:
            raise ValueError(
                "Rotary position embeddings need a head width that is a "
                f"multiple of 4. Received: head_dim={head_dim}"
            )
        self.rope_theta = arg_checks.positive_float32("rope_theta", rope_theta)
        self.num_prefix_tokens = arg_checks.non_negative_int(
            "num_prefix_tokens", num_prefix_tokens
        )
        self.grid_size = (
            None
            if grid_size is None
            else arg_checks.size_2d("grid_size", grid_size)
        )
        augmentation = coordinate_augmentation(
            shift_coords, jitter_coords, rescale_coords
        )
        self.shift_coords, self.jitter_coords, self.rescale_coords = (
            augmentation.values()
        )
        self.seed = seed
        # Only a layer that draws has a generator (and its state variable).
        self.seed_generator = (
            keras.random.SeedGenerator(seed, name="coordinate_augmentation")
            if any(value is not None for value in augmentation.values())
            else None
        )

    def _grid(self, patches_shape):
        if len(patches_shape) == 4:
            return patches_shape[1], patches_shape[2]
        if self.grid_size is None:
            raise ValueError(
                "A RotaryEmbedding without grid_size takes (B, rows, cols, "
                f"...) patches. Received: inputs of shape {patches_shape}"
            )
        return self.grid_size

    def _draws(self, dtype):
        """The coordinates' `(shift, scale)` of one training step."""

        def uniform(shape, bound):
            return keras.random.uniform(
                shape, -bound, bound, dtype=dtype, seed=self.seed_generator
            )

        shift, scale = ops.zeros((2,), dtype), ops.ones((2,), dtype)
        if self.shift_coords is not None:
            shift = uniform((2,), self.shift_coords)
        if self.jitter_coords is not None:
            scale = ops.exp(uniform((2,), math.log(self.jitter_coords)))
        if self.rescale_coords is not None:
            scale = scale * ops.exp(
                uniform((1,), math.log(self.rescale_coords))
            )
        return shift, scale

    def call(self, patches, training=None):
        rows, cols = self._grid(tuple(ops.shape(patches)))
        dtype = statistics_dtype(self.compute_dtype)
        draws = {}
        if training and self.seed_generator is not None:
            draws["shift"], draws["scale"] = self._draws(dtype)
        table = rope_table(
            rows,
            cols,
            self.head_dim,
            self.rope_theta,
            self.num_prefix_tokens,
            dtype,
            **draws,
        )
        return ops.cast(table, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        rows, cols = self._grid(tuple(input_shape))
        tokens = (
            None
            if rows is None or cols is None
            else self.num_prefix_tokens + rows * cols
        )
        return (tokens, 2 * self.head_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "rope_theta": self.rope_theta,
                "num_prefix_tokens": self.num_prefix_tokens,
                "grid_size": self.grid_size,
                "shift_coords": self.shift_coords,
                "jitter_coords": self.jitter_coords,
                "rescale_coords": self.rescale_coords,
                "seed": self.seed,
            }
        )
        return config
