"""`RotaryEmbedding`: the 2-D rotary position embeddings of DINOv3,
Perception Encoder and Naver's RoPE-ViT.

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

`rope_type="cat"` (timm's `RotaryEmbeddingCat` with `in_pixels=False`,
as Perception Encoder core `vit_pe_core_*` and Naver's axial RoPE-ViT
`vit_*_rope_*` use it) differs in the coordinates and the angles:

- A patch's coordinates are its column and row indices plus an offset,
  `x = j + offset`, `y = i + offset` (`rope_grid_offset`: PE's 1, Naver's
  0), and with a reference grid (`rope_reference_grid`, PE's pretraining
  grid, timm's `ref_feat_shape`) rescaled onto it, `x = (j + offset) /
  W * W_ref`, so that another image size spans the pretraining range.
- The angles are `x / period` then `y / period` (x first: timm's
  `grid_indexing="xy"`), with `rope_theta` PE's 10000 or Naver's 100.

`rope_type="mixed"` (timm's `RotaryEmbeddingMixed`, Naver's RoPE-Mixed,
Heo et al., 2024, https://arxiv.org/abs/2403.13298) learns the
frequencies: a weight `frequencies` `(2, layers, heads, d / 2)`, and the
angles of block `l`, head `h` are `x f[0, l, h] + y f[1, l, h]` on the
patch indices: one table per block and head.

timm's `"cat"` and `"mixed"` rotate adjacent pairs of a head's columns
`(2j, 2j + 1)` (its interleaved layout); keras_vit always rotates halves
`(j, j + d / 2)`. The two are the same attention with the query and key
columns of each head reordered, evens then odds (`adjacent_to_halves`):
the weights readers reorder a timm file's query and key projections so
(the rotation stays a split and a concatenation, which TFLite's XNNPACK
delegate takes, rather than a strided gather).

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
from keras_vit.options import ROPE_TYPES


def rope_periods(head_dim, theta, dtype="float32"):
    """The `head_dim // 4` periods `theta ** (4k / head_dim)`."""
    quarter = head_dim // 4
    exponents = ops.arange(quarter, dtype=dtype) * (4.0 / head_dim)
    return ops.power(ops.cast(theta, dtype), exponents)


def _axis(size, dtype, rope_type, offset, reference):
    """One axis' coordinates: DINOv3's centres in [-1, 1], else timm's
    patch indices plus `offset`, rescaled onto `reference` patches."""
    size_f = ops.cast(size, dtype)
    if rope_type == "dinov3":
        return 2.0 * (ops.arange(size, dtype=dtype) + 0.5) / size_f - 1.0
    index = ops.arange(size, dtype=dtype) + offset
    return index if reference is None else index / size_f * reference


def rope_coordinates(
    rows, cols, rope_type="dinov3", offset=0.0, reference=None, dtype="float32"
):
    """The `(rows * cols, 1)` row and column coordinates `(y, x)` of a
    `rows x cols` patch grid (row-major, as the patches): see the module's
    docstring. `reference`: `None` or the `(rows, cols)` grid onto which
    `"cat"` coordinates are rescaled."""
    ref_rows, ref_cols = (None, None) if reference is None else reference
    y = _axis(rows, dtype, rope_type, offset, ref_rows)
    x = _axis(cols, dtype, rope_type, offset, ref_cols)
    count = rows * cols
    y = ops.reshape(ops.broadcast_to(y[:, None], (rows, cols)), (count, 1))
    x = ops.reshape(ops.broadcast_to(x[None, :], (rows, cols)), (count, 1))
    return y, x


def _with_prefix(angles, num_prefix_tokens, dtype):
    """`[sin | cos]` of `(..., N, head_dim / 2)` angles in the half layout
    (each angle twice), after `num_prefix_tokens` rows `[0 | 1]`."""
    angles = ops.concatenate([angles, angles], axis=-1)
    table = ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
    if not num_prefix_tokens:
        return table
    head_dim = angles.shape[-1]
    shape = (*table.shape[:-2], num_prefix_tokens, head_dim)
    prefix = ops.concatenate(
        [ops.zeros(shape, dtype), ops.ones(shape, dtype)], axis=-1
    )
    return ops.concatenate([prefix, table], axis=-2)


def rope_table(
    rows,
    cols,
    head_dim,
    theta,
    num_prefix_tokens=0,
    dtype="float32",
    rope_type="dinov3",
    offset=0.0,
    reference=None,
    shift=(0.0, 0.0),
    scale=(1.0, 1.0),
):
    """The `(num_prefix_tokens + rows * cols, 2 * head_dim)` table `[sin |
    cos]` of an `rows x cols` patch grid (row-major, as the patches), in
    `dtype`, the prefix tokens' rows `[0 | 1]` (no rotation), for
    `rope_type` `"dinov3"` or `"cat"` (see the module's docstring).
    `rows` and `cols` may be scalar tensors (a dynamic image size). The
    coordinates `(y, x)` become `((y + shift[0]) * scale[0], (x +
    shift[1]) * scale[1])` (the train-time augmentations' draws)."""
    y, x = rope_coordinates(rows, cols, rope_type, offset, reference, dtype)
    y = (y + shift[0]) * scale[0]
    x = (x + shift[1]) * scale[1]
    inverse = 1.0 / rope_periods(head_dim, theta, dtype)[None, :]
    if rope_type == "dinov3":
        first, second = 2.0 * math.pi * y, 2.0 * math.pi * x
    else:  # timm's "cat": x then y (its grid_indexing="xy")
        first, second = x, y
    angles = ops.concatenate([first * inverse, second * inverse], axis=-1)
    return _with_prefix(angles, num_prefix_tokens, dtype)


def mixed_rope_table(rows, cols, frequencies, num_prefix_tokens=0):
    """The `(layers, num_prefix_tokens + rows * cols, heads, 2 * head_dim)`
    tables of Naver's RoPE-Mixed: each block's and head's learned
    `frequencies` `(2, layers, heads, head_dim / 2)` (x, then y) times
    the patch indices, in `frequencies`' dtype. Tokens before heads, as
    the queries and keys `apply_rope` rotates: transposed once here, not
    in every block."""
    dtype = frequencies.dtype
    y, x = rope_coordinates(rows, cols, "cat", dtype=dtype)
    angles = (
        x * frequencies[0][:, :, None, :] + y * frequencies[1][:, :, None, :]
    )  # (layers, heads, count, head_dim / 2)
    table = _with_prefix(angles, num_prefix_tokens, dtype)
    return ops.transpose(table, (0, 2, 1, 3))


def coordinate_augmentation(shift, jitter, rescale, rope_type, prefix=""):
    """Checks DINOv3's coordinate augmentation factors (see the module's
    docstring): each `None` (off) or a finite float, `shift >= 0`,
    `jitter >= 1`, `rescale >= 1`, any of them on only with
    `rope_type="dinov3"`; returns them as a dict by their names
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
    drawn = {k: v for k, v in checked.items() if v is not None}
    if drawn and rope_type != "dinov3":
        raise ValueError(
            "The train-time coordinate augmentations are DINOv3's: they "
            f"need rope_type='dinov3'. Received: rope_type={rope_type!r}, "
            + ", ".join(f"{k}={v!r}" for k, v in drawn.items())
        )
    return checked


def apply_rope(x, table):
    """`x * cos + rotate_half(x) * sin` for `(B, T, heads, d)` queries or
    keys and a `(T, 2d)` `rope_table` (or one `(T, heads, 2d)` per head, a
    block's of `mixed_rope_table`), computed in `x`'s dtype."""
    sin, cos = ops.split(ops.cast(table, x.dtype), 2, axis=-1)
    if len(table.shape) == 3:  # (T, heads, d) -> (1, T, heads, d)
        sin, cos = sin[None], cos[None]
    else:
        sin, cos = sin[None, :, None, :], cos[None, :, None, :]
    first, second = ops.split(x, 2, axis=-1)
    rotated = ops.concatenate([ops.negative(second), first], axis=-1)
    return x * cos + rotated * sin


def adjacent_to_halves(head_dim):
    """The order of a head's `head_dim` query or key columns that turns
    rotation of adjacent pairs `(2j, 2j + 1)` (timm's interleaved layout)
    into keras_vit's rotation of halves `(j, j + head_dim / 2)`: the even
    columns, then the odd ones. A query and its key reordered alike keep
    their dot product, so the attention is the same."""
    return [*range(0, head_dim, 2), *range(1, head_dim, 2)]


@keras.saving.register_keras_serializable(package="keras_vit")
class RotaryEmbedding(keras.layers.Layer):
    """The rotary table of a patch grid (2-D RoPE).

    A layer of `ViT(position_embedding="rope")` (named `rope`), not one of
    `keras_vit.layers`' building blocks: its output is a table that every
    block's attention takes (`MultiHeadSelfAttention(...)(x, rope=table)`).

    See the module's docstring for the mechanism. The layer computes the
    table from the grid of its input, so a model with `dynamic_image_size`
    gets each image's own table, and a fixed-size model a constant one;
    only `rope_type="mixed"` has a weight (its frequencies).

    Args:
        head_dim: int, the attention heads' width; a multiple of 4.
        rope_theta: float > 0, the base of the periods. Defaults to
            `100.0` (DINOv3's).
        num_prefix_tokens: int, the tokens before the patches (class,
            registers), which are not rotated. Defaults to `0`.
        grid_size: `(rows, cols)`, the grid of a flat `(B, N, ...)` input.
            Defaults to `None` (the input must then be a `(B, rows,
            cols, ...)` grid).
        rope_type: one of `keras_vit.options.ROPE_TYPES`: `"dinov3"`,
            `"cat"` or `"mixed"`. Defaults to `"dinov3"`.
        grid_offset: float, with `"cat"`: added to the patch indices.
            Defaults to `0.0`.
        reference_grid: `(rows, cols)` or `None`, with `"cat"`: the grid
            the indices are rescaled onto. Defaults to `None`.
        num_layers: int, with `"mixed"`: the blocks that get a table each.
            Defaults to `None`.
        num_heads: int, with `"mixed"`: the heads of each block. Defaults
            to `None`.
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
        cos]` (`apply_rope` takes it; `"mixed"`: `(num_layers, num_prefix_tokens
        + rows * cols, num_heads, 2 * head_dim)`, a table per block and
        head), computed in float32 (a float64 layer's: float64)
        and cast once to the compute dtype, as timm's.

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
        rope_type="dinov3",
        grid_offset=0.0,
        reference_grid=None,
        num_layers=None,
        num_heads=None,
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
        self.rope_type = arg_checks.one_of("rope_type", rope_type, ROPE_TYPES)
        self.grid_offset, self.reference_grid = check_cat_options(
            self.rope_type, grid_offset, reference_grid
        )
        self.num_layers, self.num_heads = _mixed_shape(
            self.rope_type, num_layers, num_heads
        )
        augmentation = coordinate_augmentation(
            shift_coords, jitter_coords, rescale_coords, self.rope_type
        )
        drawn = any(v is not None for v in augmentation.values())
        self.shift_coords, self.jitter_coords, self.rescale_coords = (
            augmentation.values()
        )
        self.seed = seed
        # Only a layer that draws has a generator (and its state variable).
        self.seed_generator = (
            keras.random.SeedGenerator(seed, name="coordinate_augmentation")
            if drawn
            else None
        )

    def build(self, input_shape):
        if self.rope_type == "mixed":
            self.frequencies = self.add_weight(
                name="frequencies",
                shape=(2, self.num_layers, self.num_heads, self.head_dim // 2),
                initializer=self._initial_frequencies,
                dtype=statistics_dtype(self.variable_dtype),
            )
        super().build(input_shape)

    def _initial_frequencies(self, shape, dtype=None):
        """timm's `init_random_2d_freqs`: the periods' inverses along a
        direction at a random angle per block and head, and at that angle
        plus 90 degrees."""
        inverse = 1.0 / rope_periods(self.head_dim, self.rope_theta, dtype)
        angle = keras.random.uniform((*shape[1:3], 1), 0, 2 * math.pi)
        angle = ops.cast(angle, dtype)
        fx = ops.concatenate(
            [inverse * ops.cos(angle), inverse * ops.cos(angle + math.pi / 2)],
            axis=-1,
        )
        fy = ops.concatenate(
            [inverse * ops.sin(angle), inverse * ops.sin(angle + math.pi / 2)],
            axis=-1,
        )
        return ops.stack([fx, fy])

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
        if self.rope_type == "mixed":
            table = mixed_rope_table(
                rows,
                cols,
                ops.cast(self.frequencies, dtype),
                self.num_prefix_tokens,
            )
        else:
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
                self.rope_type,
                self.grid_offset,
                self.reference_grid,
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
        if self.rope_type == "mixed":
            return (self.num_layers, tokens, self.num_heads, 2 * self.head_dim)
        return (tokens, 2 * self.head_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "head_dim": self.head_dim,
                "rope_theta": self.rope_theta,
                "num_prefix_tokens": self.num_prefix_tokens,
                "grid_size": self.grid_size,
                "rope_type": self.rope_type,
                "grid_offset": self.grid_offset,
                "reference_grid": self.reference_grid,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "shift_coords": self.shift_coords,
                "jitter_coords": self.jitter_coords,
                "rescale_coords": self.rescale_coords,
                "seed": self.seed,
            }
        )
        return config


def check_cat_options(rope_type, grid_offset, reference_grid, prefix=""):
    """`(grid_offset, reference_grid)` checked: a finite float >= 0 and
    `None` or a `(rows, cols)` grid, each other than its default only with
    `rope_type="cat"` (the others ignore them). `prefix`: of the names in
    the messages (`ViT`'s `"rope_"`)."""
    offset_name, grid_name = f"{prefix}grid_offset", f"{prefix}reference_grid"
    offset = arg_checks.non_negative_float32(offset_name, grid_offset)
    reference = (
        None
        if reference_grid is None
        else arg_checks.size_2d(grid_name, reference_grid)
    )
    if rope_type != "cat" and (offset or reference is not None):
        raise ValueError(
            f"{offset_name} and {grid_name} are for rope_type='cat' "
            "(patch-index coordinates). Received: "
            f"rope_type={rope_type!r}, {offset_name}={grid_offset!r} and "
            f"{grid_name}={reference_grid!r}"
        )
    return offset, reference


def _mixed_shape(rope_type, num_layers, num_heads):
    """`(num_layers, num_heads)`: positive ints with `"mixed"`, else
    `None`."""
    if rope_type != "mixed":
        return None, None
    return (
        arg_checks.positive_int("num_layers", num_layers),
        arg_checks.positive_int("num_heads", num_heads),
    )
