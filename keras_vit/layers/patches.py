"""`Patches`: cut an image into non-overlapping square patches."""

import keras
from keras import ops

from keras_vit import arg_checks


@keras.saving.register_keras_serializable(package="keras_vit")
class Patches(keras.layers.Layer):
    """Cuts images into non-overlapping `patch_size × patch_size` patches.

    This is the first step of the Vision Transformer
    ([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)): an image
    of shape `(H, W, C)` becomes `N = (H / P) · (W / P)` patches, each
    flattened to `P · P · C` values.

    Patches come in row-major order over the patch grid (left to right, then
    top to bottom), and each patch is flattened as (row inside the patch,
    column inside the patch, channel), which is the order of the original
    checkpoints' convolution kernel `(P, P, C, D)` reshaped to `(P·P·C, D)`.
    Non-square images work; `H` and `W` must both be multiples of `P`.

    The layer is a reshape, a transpose and a reshape (`keras.ops` only), so
    it costs no arithmetic and converts to builtin TFLite ops
    (`tf.image.extract_patches` would become a Flex op that phones cannot
    run, and a patch-extracting convolution costs `(P·P·C)²` MACs per patch).

    Args:
        patch_size: int, the side of a square patch in pixels.
        flatten: bool. If `True`, the output is `(B, N, P·P·C)`; if `False`
            it keeps the patch grid, `(B, H / P, W / P, P·P·C)`. Defaults to
            `True`.
        pad: bool. If `True`, an image whose height or width is not a
            multiple of `P` is padded with zeros on the bottom and the right
            to the next multiple (timm's `dynamic_img_pad`); if `False`
            such an image is refused: a `ValueError` when its size is known
            while the graph is built, else TensorFlow's
            `InvalidArgumentError` when it runs (under XLA, which drops
            such checks, the reshape's own error). An image of no patch one
            way (a height or width of 0) is refused either way. Defaults to
            `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: a `(B, H, W, C)` tensor, channels last.

    Returns:
        A `(B, N, P·P·C)` tensor (or `(B, H / P, W / P, P·P·C)` with
        `flatten=False`).

    Example:

    >>> import numpy as np
    >>> images = np.arange(4 * 4 * 1, dtype="float32").reshape(1, 4, 4, 1)
    >>> patches = keras_vit.layers.Patches(patch_size=2)(images)
    >>> patches.shape
    TensorShape([1, 4, 4])
    >>> keras.ops.convert_to_numpy(patches[0, 1])  # the top-right patch
    array([ 2.,  3.,  6.,  7.], dtype=float32)
    """

    def __init__(self, patch_size, flatten=True, pad=False, **kwargs):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.patch_size = arg_checks.positive_int("patch_size", patch_size)
        self.flatten = arg_checks.boolean("flatten", flatten)
        self.pad = arg_checks.boolean("pad", pad)
        self.input_spec = keras.layers.InputSpec(ndim=4)

    def _grid(self, input_shape):
        _, height, width, _ = input_shape
        p = self.patch_size
        if self.pad:
            height, width = (
                None if size is None else -(-size // p) * p
                for size in (height, width)
            )
        for name, size in (("height", height), ("width", width)):
            if size is not None and size % p:
                raise ValueError(
                    f"The image {name} must be a multiple of patch_size. "
                    f"Received: patch_size={p} for an image of shape "
                    f"{tuple(input_shape)[1:]} ({name} {size})."
                )
            if size == 0:
                raise ValueError(
                    f"The image {name} must hold at least one patch. "
                    f"Received: patch_size={p} for an image of shape "
                    f"{tuple(input_shape)[1:]} ({name} 0)."
                )
        grid_h = None if height is None else height // p
        grid_w = None if width is None else width // p
        return grid_h, grid_w

    def build(self, input_shape):
        self._grid(input_shape)
        if input_shape[-1] is not None:
            # The channels are fixed once built (the projection after this
            # layer expects P·P·C values): a wrong count fails here, named.
            self.input_spec = keras.layers.InputSpec(
                ndim=4, axes={-1: input_shape[-1]}
            )

    def call(self, images):
        p = self.patch_size
        images = self._checked(images)
        if self.pad:
            images = self._padded(images)
        static = tuple(images.shape)
        dynamic = ops.shape(images)
        batch, height, width, channels = (
            s if s is not None else d for s, d in zip(static, dynamic)
        )
        grid_h, grid_w = height // p, width // p
        # (B, H, W, C) -> (B, gh, P, gw, P·C): the width axis splits into
        # (patch column index, pixels of one patch row), channels ride along.
        x = ops.reshape(images, (batch, grid_h, p, grid_w, p * channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4))  # (B, gh, gw, P, P·C)
        if self.flatten:
            return ops.reshape(x, (batch, grid_h * grid_w, p * p * channels))
        return ops.reshape(x, (batch, grid_h, grid_w, p * p * channels))

    def _padded(self, images):
        """`images` zero-padded on the bottom and the right to multiples of
        the patch size."""
        p = self.patch_size
        shape = ops.shape(images)
        extra = [(-shape[axis]) % p for axis in (1, 2)]
        return ops.pad(images, [[0, 0], [0, extra[0]], [0, extra[1]], [0, 0]])

    def _checked(self, images):
        """`images`, or an error naming their size when it holds no patch
        one way, or (without `pad`) the patch size does not divide it (in
        the graph where the size is known only then)."""
        static = tuple(images.shape)
        self._grid(static)  # a ValueError where the sizes are known
        if None not in static[1:3] or keras.backend.backend() != "tensorflow":
            return images
        import tensorflow as tf

        p = self.patch_size
        shape = tf.shape(images)
        # A 0x8 image made an empty grid, and a model's output with no
        # patch at all, where eager and XLA refuse it.
        checks = [
            tf.debugging.Assert(
                tf.reduce_all(shape[1:3] > 0),  # 0 is a multiple of p
                [
                    f"Patches {self.name!r}: the image height and width must "
                    f"hold at least one patch (patch_size={p}) each. "
                    "Received: image (height, width) =",
                    shape[1:3],
                ],
            )
        ]
        if not self.pad:
            checks.append(
                tf.debugging.Assert(
                    tf.equal((shape[1] % p) + (shape[2] % p), 0),
                    [
                        f"Patches {self.name!r}: the image height and width "
                        f"must be multiples of patch_size={p} (or pad them: "
                        "dynamic_image_padding=True). Received: image "
                        "(height, width) =",
                        shape[1:3],
                    ],
                )
            )
        with tf.control_dependencies(checks):
            return tf.identity(images)

    def compute_output_shape(self, input_shape):
        grid_h, grid_w = self._grid(input_shape)
        channels = input_shape[-1]
        dim = None if channels is None else self.patch_size**2 * channels
        if not self.flatten:
            return (input_shape[0], grid_h, grid_w, dim)
        n = None if grid_h is None or grid_w is None else grid_h * grid_w
        return (input_shape[0], n, dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "patch_size": self.patch_size,
                "flatten": self.flatten,
                "pad": self.pad,
            }
        )
        return config
