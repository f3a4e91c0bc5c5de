"""The patch grid: its size from a token count, position embeddings
resampled or generated over it, and the patch projection's kernel as a
conv or a dense layer holds it. Pure functions, shared by layers and
loaders (this was `keras_vit.ops`).

Everything here is built from `keras.ops`, so it runs eagerly on NumPy arrays
(weight loading) and symbolically inside a model (a `PatchEncoder` meeting an
input grid it was not built for).
"""

import math
import numbers

import keras
import numpy as np
from keras import ops

from keras_vit import arg_checks

#: Resampling methods. "bilinear_align_corners" is the original code's:
#: google-research/vision_transformer resizes position embeddings with
#: `scipy.ndimage.zoom(grid, zoom, order=1)`, linear interpolation whose
#: corner samples map onto corner samples. "bicubic_pytorch" is PyTorch's
#: `F.interpolate(mode="bicubic", align_corners=False)`, the one timm and
#: transformers resample with (`_pytorch_bicubic_matrix`). The others are
#: `keras.ops.image.resize`'s (pixel-centre aligned, as big_vision does
#: it; its "bicubic" is TensorFlow's cubic of a = -0.5).
INTERPOLATIONS = (
    "bilinear_align_corners",
    "bilinear",
    "bicubic",
    "bicubic_pytorch",
    "nearest",
    "area",
)

#: The resampling of position embeddings when weights are loaded at another
#: resolution (`keras_vit.weights.DEFAULT_INTERPOLATION`), and so the one a
#: `ViT(dynamic_image_size=True)` uses in its graph on each call: the
#: original code's (`scipy.ndimage.zoom`, linear).
LOADING_INTERPOLATION = "bilinear_align_corners"

#: Whether position embeddings are low-pass filtered when weights are loaded
#: onto a smaller grid (`keras_vit.load_weights(..., antialias=)`): not by
#: default, as the original code's method cannot be. timm's
#: `resample_abs_pos_embed` and `Dinov2WithRegistersModel` resample with
#: `interpolation="bicubic_pytorch"` and `antialias=True`.
LOADING_ANTIALIAS = False

#: The resampling methods that have no antialiased form: the original
#: code's linear interpolation is scipy's, which filters nothing, and
#: TensorFlow's nearest-neighbour resize ignores `antialias`. ("area"
#: averages, antialiased either way.)
NO_ANTIALIAS = ("bilinear_align_corners", "nearest")


def grid_from_length(num_tokens, name="position embeddings"):
    """Returns the square grid `(g, g)` holding `num_tokens` patches."""
    side = math.isqrt(num_tokens)
    if side * side != num_tokens:
        raise ValueError(
            f"Cannot infer the patch grid of {name} with {num_tokens} patch "
            "positions: it is not a square number. Pass the grid explicitly."
        )
    return side, side


def resample_position_embeddings(
    posemb,
    target_grid,
    source_grid=None,
    num_prefix_tokens=1,
    interpolation="bilinear",
    antialias=False,
):
    """Resamples learned position embeddings to a new patch grid.

    Fine-tuning a ViT at a new resolution keeps the patch size, so the patch
    grid changes; the paper (Section 3.2) 2D-interpolates the pre-trained
    position embeddings on the grid. The prefix tokens (the class token) keep
    their embeddings as they are.

    Args:
        posemb: `(1, T, D)` or `(T, D)` embeddings: `num_prefix_tokens`
            prefix entries followed by the grid in row-major order.
        target_grid: `(height, width)` of the new patch grid, or an int for
            a square grid; a side known only when the graph runs may be a
            scalar integer tensor.
        source_grid: `(height, width)` of the grid in `posemb`. Defaults to
            `None`, the square grid that holds `T - num_prefix_tokens`.
        num_prefix_tokens: int, entries at the start that are not on the
            grid (1 for the class token, 0 without). Defaults to `1`.
        interpolation: one of `INTERPOLATIONS`: `"bilinear_align_corners"`
            (the original code's `scipy.ndimage.zoom(..., order=1)`),
            `"bilinear"`, `"bicubic"`, `"nearest"`, `"area"` (pixel-centre
            aligned, `keras.ops.image.resize`), `"bicubic_pytorch"`
            (PyTorch's `F.interpolate(mode="bicubic",
            align_corners=False)`, timm's and transformers'). Defaults to
            `"bilinear"`.
        antialias: bool, whether to low-pass filter when downsampling
            (`"area"` always does); refused with the interpolations of
            `NO_ANTIALIAS`, which have no such filter. With
            `"bicubic_pytorch"`, PyTorch's `antialias=True` (also onto a
            larger grid, where it is the cubic of a = -0.5). Defaults to
            `False`.

    Returns:
        The embeddings on `target_grid`, same rank and dtype as `posemb`:
        `(1, num_prefix_tokens + th · tw, D)` or without the leading 1.

    Example:

    >>> posemb = np.random.normal(size=(1, 1 + 14 * 14, 768))
    >>> resampled = keras_vit.patch_grid.resample_position_embeddings(
    ...     posemb, (24, 24)
    ... )
    >>> resampled.shape
    TensorShape([1, 577, 768])
    """
    interpolation = arg_checks.one_of(
        "interpolation", interpolation, INTERPOLATIONS
    )
    num_prefix_tokens = arg_checks.non_negative_int(
        "num_prefix_tokens", num_prefix_tokens
    )
    antialias = _checked_antialias(antialias, interpolation)
    target_grid = _grid_size("target_grid", target_grid)
    posemb, squeeze, source_grid = _checked_posemb(
        posemb, num_prefix_tokens, source_grid
    )
    dim = posemb.shape[2]
    prefix = posemb[:, :num_prefix_tokens]
    grid = ops.reshape(posemb[:, num_prefix_tokens:], (1, *source_grid, dim))
    grid = _resize_grid(
        grid, source_grid, target_grid, interpolation, antialias
    )
    grid = ops.reshape(grid, (1, -1, dim))
    out = ops.concatenate([prefix, grid], axis=1)
    return out[0] if squeeze else out


def _checked_antialias(antialias, interpolation):
    """`antialias` as a bool, or `ValueError`: not a bool, or `True` with
    an interpolation of `NO_ANTIALIAS` (which would ignore it, and the
    embeddings come back aliased without a word)."""
    antialias = arg_checks.boolean("antialias", antialias)
    if antialias and interpolation in NO_ANTIALIAS:
        raise ValueError(
            "`antialias=True` needs an interpolation with a low-pass filter, "
            f"not one of {NO_ANTIALIAS}: use 'bilinear', 'bicubic', "
            f"'bicubic_pytorch' or 'area'. Received: antialias={antialias}, "
            f"interpolation={interpolation!r}"
        )
    return antialias


def _checked_posemb(posemb, num_prefix_tokens, source_grid):
    """`(posemb, squeeze, source_grid)`: `posemb` as a `(1, T, D)` float
    tensor, whether it was `(T, D)`, and its checked grid."""
    posemb = _float_tensor("posemb", posemb)
    squeeze = len(posemb.shape) == 2
    if squeeze:
        posemb = posemb[None]
    if len(posemb.shape) != 3:
        raise ValueError(
            "`posemb` must have shape (1, T, D) or (T, D). "
            f"Received: posemb.shape={tuple(posemb.shape)}"
        )
    num_tokens = posemb.shape[1]
    if num_prefix_tokens > num_tokens:
        raise ValueError(
            f"`num_prefix_tokens` must be at most the {num_tokens} positions "
            f"of posemb. Received: num_prefix_tokens={num_prefix_tokens}"
        )
    if source_grid is None:
        source_grid = grid_from_length(num_tokens - num_prefix_tokens)
    source_grid = arg_checks.size_2d("source_grid", source_grid)
    if source_grid[0] * source_grid[1] + num_prefix_tokens != num_tokens:
        raise ValueError(
            f"`source_grid` {source_grid} with {num_prefix_tokens} prefix "
            f"tokens does not match posemb with {num_tokens} positions. "
            f"Received: source_grid={source_grid}, "
            f"num_prefix_tokens={num_prefix_tokens}"
        )
    return posemb, squeeze, source_grid


def _resize_grid(grid, source_grid, target_grid, interpolation, antialias):
    """The `(1, h, w, D)` embeddings `grid` resized from `source_grid` to
    `target_grid` (computed in float32, returned in `grid`'s dtype)."""
    static = all(isinstance(g, int) for g in target_grid)
    if static and target_grid == source_grid:
        return grid
    dtype = grid.dtype
    grid = ops.cast(grid, "float32")
    if interpolation in SEPARABLE:
        # One weight matrix per axis, built in the graph for a side known
        # only when it runs (XLA compiles it: each side is a constant of
        # the compiled shape).
        rows, cols = (
            _axis_weights(size_in, size_out, interpolation, antialias)
            for size_in, size_out in zip(source_grid, target_grid)
        )
        # Along the width first, then the height: PyTorch's order of sums.
        grid = ops.einsum("bw,nhwd->nhbd", cols, grid)
        grid = ops.einsum("ah,nhbd->nabd", rows, grid)
    elif static:
        grid = ops.image.resize(
            grid,
            target_grid,
            interpolation=interpolation,
            antialias=antialias,
        )
    else:
        # A grid known only when the graph runs (a model called at a
        # resolution decided at run time): keras.ops.image.resize takes
        # Python sizes only, TensorFlow's resize (which it wraps) takes
        # tensors.
        import tensorflow as tf

        grid = tf.image.resize(
            grid, target_grid, method=interpolation, antialias=antialias
        )
    return ops.cast(grid, dtype)


#: The interpolations computed here as one weight matrix per axis (the
#: others are `keras.ops.image.resize`'s).
SEPARABLE = ("bilinear_align_corners", "bicubic_pytorch")


def _axis_weights(size_in, size_out, interpolation, antialias):
    """`(size_out, size_in)` float32 weights of a `SEPARABLE`
    interpolation along one axis; `size_out` may be a scalar integer
    tensor (then not antialiased)."""
    static = isinstance(size_out, int)
    if interpolation == "bilinear_align_corners":
        if static:
            return _align_corners_matrix(size_in, size_out)
        return _align_corners_weights(size_in, size_out)
    if static:
        return _pytorch_bicubic_matrix(size_in, size_out, antialias)
    if antialias:
        raise ValueError(
            "`antialias=True` with interpolation='bicubic_pytorch' needs a "
            "target grid of Python integers, not one known only when the "
            f"graph runs. Received: antialias={antialias}, "
            f"interpolation={interpolation!r}"
        )
    return _pytorch_bicubic_weights(size_in, size_out)


def resample_1d_embeddings(
    embeddings, length, interpolation="bilinear", antialias=False
):
    """Resamples `(n, D)` embeddings along their first axis to `length`.

    The rows or the columns of `position_embedding="learned2d"`, each
    resampled on its own when the patch grid changes; the same methods
    (and `antialias`) as `resample_position_embeddings`.

    Returns:
        `(length, D)` embeddings.
    """
    (length,) = _grid_size("length", (length,), size=1)
    embeddings = _float_tensor("embeddings", embeddings)
    if len(embeddings.shape) != 2:
        raise ValueError(
            "`embeddings` must have shape (n, D). "
            f"Received: embeddings.shape={tuple(embeddings.shape)}"
        )
    return resample_position_embeddings(
        embeddings,
        (length, 1),
        source_grid=(embeddings.shape[0], 1),
        num_prefix_tokens=0,
        interpolation=interpolation,
        antialias=antialias,
    )


def _grid_size(name, value, size=2):
    """`value` as a tuple of `size` grid sides, or raises: each a positive
    Python or NumPy integer (made an `int`), or a scalar integer tensor (a
    side known only when the graph runs); an int gives a square grid."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,) * size
    if not isinstance(value, (tuple, list)) or len(value) != size:
        raise ValueError(
            f"`{name}` must be an int or a (height, width) pair of positive "
            f"integers. Received: {name}={value!r}"
        )
    sides = []
    for side in value:
        if isinstance(side, numbers.Integral) and not isinstance(side, bool):
            if side >= 1:
                sides.append(int(side))
                continue
        elif (
            ops.is_tensor(side)
            and len(side.shape) == 0
            and "int" in keras.backend.standardize_dtype(side.dtype)
        ):
            sides.append(side)
            continue
        shown = value[0] if size == 1 else value
        raise ValueError(
            f"`{name}` must hold positive integers (or scalar integer "
            f"tensors). Received: {name}={shown!r}"
        )
    return tuple(sides)


def _float_tensor(name, value):
    """`value` as a floating-point tensor, or raises naming `name`."""
    try:
        tensor = ops.convert_to_tensor(value)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"`{name}` must be an array of floating-point numbers "
            f"({type(error).__name__}: {error}). Received: {name} of type "
            f"{type(value).__name__}"
        ) from None
    dtype = keras.backend.standardize_dtype(tensor.dtype)
    if not keras.backend.is_float_dtype(dtype):
        raise ValueError(
            f"`{name}` must be an array of floating-point numbers. "
            f"Received: {name} of dtype {dtype}"
        )
    return tensor


def _align_corners_matrix(size_in, size_out):
    """`(size_out, size_in)` weights of 1D linear interpolation that maps the
    first and last samples onto each other (scipy.ndimage.zoom, order=1)."""
    matrix = np.zeros((size_out, size_in), "float32")
    if size_in == 1:
        matrix[:, 0] = 1.0
        return matrix
    step = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    positions = np.arange(size_out) * step
    low = np.minimum(np.floor(positions).astype(int), size_in - 2)
    frac = (positions - low).astype("float32")
    matrix[np.arange(size_out), low] = 1.0 - frac
    matrix[np.arange(size_out), low + 1] += frac
    return matrix


def _align_corners_weights(size_in, size_out):
    """`_align_corners_matrix(size_in, size_out)` for a `size_out` that may
    be a scalar integer tensor: `(size_out, size_in)` float32 weights."""
    if size_in == 1:
        return ops.ones((size_out, 1), "float32")
    size_out = ops.cast(size_out, "int32")
    steps = ops.cast(ops.maximum(size_out - 1, 1), "float32")
    positions = ops.cast(ops.arange(size_out), "float32") * (
        (size_in - 1) / steps
    )
    low = ops.minimum(ops.cast(ops.floor(positions), "int32"), size_in - 2)
    frac = (positions - ops.cast(low, "float32"))[:, None]
    return (
        ops.one_hot(low, size_in) * (1.0 - frac)
        + ops.one_hot(low + 1, size_in) * frac
    )


#: The cubic convolution coefficient of PyTorch's bicubic interpolation
#: (`aten/src/ATen/native/UpSample.h`, `get_cubic_upsample_coefficients`)
#: and of its antialiased form (`UpSampleKernel.cpp`, `aa_filter`, PIL's).
PYTORCH_CUBIC_A = -0.75
PYTORCH_ANTIALIAS_CUBIC_A = -0.5


def _cubic_near(x, a):
    """Keys' cubic convolution kernel at a distance `0 <= x <= 1`."""
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic_far(x, a):
    """Keys' cubic convolution kernel at a distance `1 <= x <= 2`."""
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _cubic_taps(t, a):
    """The weights of the four samples `floor(s) - 1 ... floor(s) + 2`
    around a point `s` with `t = s - floor(s)`: the kernel at distances
    `1 + t, t, 1 - t, (1 - t) + 1`, rounded as PyTorch's
    `get_cubic_upsample_coefficients` rounds them. Arithmetic only: NumPy
    arrays or tensors alike."""
    rest = 1 - t
    return (
        _cubic_far(t + 1, a),
        _cubic_near(t, a),
        _cubic_near(rest, a),
        _cubic_far(rest + 1, a),
    )


def _pytorch_bicubic_matrix(size_in, size_out, antialias=False):
    """`(size_out, size_in)` float32 weights of PyTorch's 1-D bicubic
    resampling to a size, `F.interpolate(x, size=..., mode="bicubic",
    align_corners=False, antialias=...)`, pure NumPy, computed in float32
    as PyTorch computes them for a float32 tensor.

    Output `i` samples the input at `s = (i + 0.5) · size_in / size_out -
    0.5` (not clamped); the four samples around it weigh the cubic of
    `PYTORCH_CUBIC_A`, and indices past an edge read the edge sample.
    With `antialias`, output `i` centred at `c = (i + 0.5) · scale` (scale
    `size_in / size_out`) weighs each input `j` the cubic of
    `PYTORCH_ANTIALIAS_CUBIC_A` at `(j + 0.5 - c) / max(scale, 1)`, over
    the inputs within `2 · max(scale, 1)` of `c` (the window's ends
    truncated toward zero), renormalised to sum to 1, so samples past an
    edge drop out.
    """
    f32 = np.float32
    scale = f32(size_in) / f32(size_out)
    outputs = np.arange(size_out, dtype=f32)
    if antialias:
        return _pytorch_antialias_matrix(size_in, outputs, scale)
    source = (outputs + f32(0.5)) * scale - f32(0.5)
    first = np.floor(source)
    matrix = np.zeros((size_out, size_in), f32)
    taps = _cubic_taps(source - first, f32(PYTORCH_CUBIC_A))
    for k, weight in enumerate(taps):
        inputs = np.clip(first.astype(int) - 1 + k, 0, size_in - 1)
        np.add.at(matrix, (np.arange(size_out), inputs), weight)
    return matrix


def _pytorch_antialias_matrix(size_in, outputs, scale):
    """`_pytorch_bicubic_matrix(..., antialias=True)` for the float32
    output indices `outputs` and the float32 `scale`."""
    f32 = np.float32
    stretch = max(scale, f32(1))
    centre = (outputs + f32(0.5)) * scale
    low = np.maximum(np.trunc(centre - 2 * stretch + f32(0.5)), 0)
    high = np.minimum(np.trunc(centre + 2 * stretch + f32(0.5)), size_in)
    inputs = np.arange(size_in)[None]
    x = np.abs((inputs + f32(0.5) - centre[:, None]) * (f32(1) / stretch))
    a = f32(PYTORCH_ANTIALIAS_CUBIC_A)
    weights = np.where(
        x < 1, _cubic_near(x, a), np.where(x < 2, _cubic_far(x, a), f32(0))
    )
    weights *= (inputs >= low[:, None]) & (inputs < high[:, None])
    total = weights.sum(axis=1, keepdims=True, dtype=f32)
    return (weights / np.where(total == 0, f32(1), total)).astype(f32)


def _pytorch_bicubic_weights(size_in, size_out):
    """`_pytorch_bicubic_matrix(size_in, size_out)` (not antialiased) for
    a `size_out` that may be a scalar integer tensor."""
    size_out = ops.cast(size_out, "int32")
    scale = ops.divide(size_in, ops.cast(size_out, "float32"))
    source = (ops.cast(ops.arange(size_out), "float32") + 0.5) * scale - 0.5
    first = ops.floor(source)
    taps = _cubic_taps((source - first)[:, None], PYTORCH_CUBIC_A)
    first = ops.cast(first, "int32")
    return sum(
        ops.one_hot(ops.clip(first - 1 + k, 0, size_in - 1), size_in) * weight
        for k, weight in enumerate(taps)
    )


def sincos_2d_position_embedding(grid_h, grid_w, dim, temperature=10000.0):
    """Fixed 2D sine-cosine position embeddings for a patch grid.

    A quarter of the channels encode the column with sines, a quarter with
    cosines, then the same for the row, at frequencies spaced geometrically
    from 1 to `1 / temperature` (the "sincos2d" embedding of big_vision's
    `vit.py`, used by "Better plain ViT baselines", arXiv 2205.01580).

    Args:
        grid_h: int, rows of the patch grid.
        grid_w: int, columns of the patch grid.
        dim: int, embedding width; a multiple of 4.
        temperature: float, the longest wavelength. Defaults to `10000.0`.

    Returns:
        A float32 `(grid_h · grid_w, dim)` tensor in row-major grid order.

    Example:

    >>> keras_vit.patch_grid.sincos_2d_position_embedding(14, 14, 768).shape
    TensorShape([196, 768])
    """
    grid_h, grid_w = _grid_size("grid", (grid_h, grid_w))
    dim = arg_checks.positive_int("dim", dim)
    temperature = arg_checks.finite_positive_float("temperature", temperature)
    if dim % 4:
        raise ValueError(
            "The sincos2d position embedding needs a width that is a "
            f"multiple of 4. Received: dim={dim}"
        )
    quarter = dim // 4
    omega = ops.arange(quarter, dtype="float32") / max(quarter - 1, 1)
    omega = 1.0 / (temperature**omega)
    rows = ops.cast(ops.arange(grid_h), "float32")
    cols = ops.cast(ops.arange(grid_w), "float32")
    y = ops.reshape(ops.repeat(rows, grid_w), (-1, 1)) * omega[None]
    x = ops.reshape(ops.tile(cols, [grid_h]), (-1, 1)) * omega[None]
    return ops.concatenate(
        [ops.sin(x), ops.cos(x), ops.sin(y), ops.cos(y)], axis=1
    )


def conv_to_dense_kernel(kernel):
    """Reshapes a patch-embedding conv kernel to `PatchEncoder`'s kernel.

    The original checkpoints embed patches with a stride-`P` convolution
    whose kernel is `(P, P, C, D)`; flattening its first three axes gives
    the `(P·P·C, D)` kernel of a `Dense` applied to `Patches` output (same
    (row, column, channel) order), so both compute the same tokens.

    Args:
        kernel: a `(P, P, C, D)` array.

    Returns:
        The `(P·P·C, D)` kernel.
    """
    kernel = ops.convert_to_tensor(kernel)
    if len(kernel.shape) != 4:
        raise ValueError(
            "Expected a (P, P, C, D) convolution kernel. "
            f"Received: kernel.shape={tuple(kernel.shape)}"
        )
    p, q, c, d = kernel.shape
    return ops.reshape(kernel, (p * q * c, d))


def dense_to_conv_kernel(kernel, patch_size, num_channels=3):
    """The inverse of `conv_to_dense_kernel`: `(P·P·C, D)` → `(P, P, C, D)`.

    Args:
        kernel: a `(P·P·C, D)` array, e.g. `PatchEncoder`'s projection
            kernel.
        patch_size: int, `P`.
        num_channels: int, `C`. Defaults to `3`.

    Returns:
        The `(P, P, C, D)` convolution kernel.
    """
    kernel = ops.convert_to_tensor(kernel)
    p = arg_checks.positive_int("patch_size", patch_size)
    c = arg_checks.positive_int("num_channels", num_channels)
    if len(kernel.shape) != 2 or kernel.shape[0] != p * p * c:
        raise ValueError(
            f"Expected a ({p}·{p}·{c}, D) kernel for patch_size={p} and "
            f"num_channels={c}. Received: kernel.shape={tuple(kernel.shape)}"
        )
    return ops.reshape(kernel, (p, p, c, kernel.shape[1]))
