"""`PatchEncoder`: patch projection, class token and position embeddings."""

import keras
import numpy as np
from keras import ops

from keras_vit import arg_checks
from keras_vit import patch_grid
from keras_vit.options import POSITION_EMBEDDING_TOKENS
from keras_vit.options import POSITION_EMBEDDINGS

#: The entry next to a `PatchEncoder`'s variables in a Keras weights file
#: (`.weights.h5`, `.keras`) that records its `(grid_h, grid_w)`: 1D
#: position embeddings do not say their grid, and a loader must not guess it
#: from their number (a 4x4 and a 2x8 grid both hold 16).
GRID_RECORD = "grid_size"
#: The entry beside it that records the prefix tokens the variables lead
#: with, `(class_token, distillation_token, num_register_tokens)` as ints:
#: Keras holds them by position, and a distillation token and a lone
#: register are both `(1, 1, D)`.
TOKENS_RECORD = "prefix_tokens"


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchEncoder(keras.layers.Layer):
    """Embeds flattened patches as tokens, as in Eq. 1 of the ViT paper.

    `z_0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos`
    ([Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)): a linear
    projection `E` of each patch to `hidden_dim`, a learnable class token
    prepended (initialised to zeros), and learned 1D position embeddings for
    the `N + 1` positions (initialised normal with std 0.02).

    The projection kernel has shape `(P·P·C, hidden_dim)`; reshaped to
    `(P, P, C, hidden_dim)` it is the original checkpoints' convolution
    kernel (see `keras_vit.patch_grid.dense_to_conv_kernel`).

    Inputs may be a grid `(B, grid_h, grid_w, P·P·C)`
    (`Patches(flatten=False)`) or a flat sequence `(B, N, P·P·C)`. When a
    grid input differs from the grid the position embeddings were built
    for, they are resampled on the 2D grid (the class token's entry is
    kept), so the layer runs at any resolution. A flat sequence does not say
    its grid (a 4x4 and a 2x8 grid both hold 16 patches), so it is taken to
    be on the layer's `grid_size` and must have its `N`; feed another grid
    as a grid. The grid is saved with the weights (`GRID_RECORD`), so that
    `keras_vit.load_weights` resamples them correctly and Keras's own
    `load_weights` refuses them on another grid of the same size.

    Args:
        hidden_dim: int, the token width `D`.
        grid_size: `(grid_h, grid_w)` or int, the patch grid the position
            embeddings are built for. Defaults to `None`: taken from a grid
            input's shape. Built from a flat sequence without it, 1D
            learned embeddings are built for its `N` positions on no known
            grid (they are then never resampled), and `"learned2d"` /
            `"sincos2d"` are refused.
        class_token: bool, whether to prepend a learnable class token.
            Defaults to `True`.
        position_embedding: `"learned"` (1D learned, as in the paper),
            `"learned2d"` (the paper's 2D ablation: a learned row and a
            learned column embedding of `hidden_dim / 2` each,
            concatenated; the class token gets none), `"sincos2d"` (fixed
            2D sine-cosine, big_vision) or `"none"`. Defaults to
            `"learned"`.
        interpolation: how learned embeddings are resampled to another grid:
            `"bilinear"`, `"bicubic"`, `"nearest"` or `"area"`. Defaults to
            `"bilinear"`.
        patch_bias: bool, whether the patch projection has a bias (CLIP's
            has none). Defaults to `True`.
        num_register_tokens: int, learned register tokens (Darcet et al.,
            2023) placed after the class token (and the distillation
            token), before the patches, as timm orders them. Defaults to
            `0`.
        distillation_token: bool, whether a learned distillation token
            (DeiT) follows the class token. Defaults to `False`.
        position_embedding_tokens: which tokens get a position embedding:
            `"all"` (the paper's: 1D learned embeddings have an entry for
            each prefix token too) or `"patches"` (the patches only, the
            prefix tokens added without one: DeiT III, DINOv2, timm's
            `no_embed_class`). 2D and sine-cosine embeddings never give
            the prefix tokens one. Defaults to `"all"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        patches: `(B, N, F)` or `(B, grid_h, grid_w, F)` flattened patches.

    Returns:
        `(B, num_prefix_tokens + N, hidden_dim)` tokens: the class token,
        the distillation token, the register tokens (those the layer has),
        then the patches.

    Example:

    >>> images = np.zeros((2, 224, 224, 3))
    >>> patches = keras_vit.layers.Patches(16, flatten=False)(images)
    >>> keras_vit.layers.PatchEncoder(hidden_dim=768)(patches).shape
    TensorShape([2, 197, 768])
    """

    def __init__(
        self,
        hidden_dim,
        grid_size=None,
        class_token=True,
        position_embedding="learned",
        interpolation="bilinear",
        patch_bias=True,
        num_register_tokens=0,
        distillation_token=False,
        position_embedding_tokens="all",
        **kwargs,
    ):
        arg_checks.float_dtype_policy("dtype", kwargs.get("dtype"))
        super().__init__(**kwargs)
        self.hidden_dim = arg_checks.positive_int("hidden_dim", hidden_dim)
        self.grid_size = (
            None
            if grid_size is None
            else arg_checks.size_2d("grid_size", grid_size)
        )
        self.class_token = arg_checks.boolean("class_token", class_token)
        self.position_embedding = arg_checks.one_of(
            "position_embedding", position_embedding, POSITION_EMBEDDINGS
        )
        if position_embedding == "sincos2d" and self.hidden_dim % 4:
            raise ValueError(
                "position_embedding='sincos2d' needs a hidden_dim that is a "
                f"multiple of 4. Received: hidden_dim={hidden_dim}"
            )
        if position_embedding == "learned2d" and self.hidden_dim % 2:
            raise ValueError(
                "position_embedding='learned2d' needs an even hidden_dim. "
                f"Received: hidden_dim={hidden_dim}"
            )
        self.interpolation = arg_checks.one_of(
            "interpolation", interpolation, patch_grid.INTERPOLATIONS
        )
        self.patch_bias = arg_checks.boolean("patch_bias", patch_bias)
        self.num_register_tokens = arg_checks.non_negative_int(
            "num_register_tokens", num_register_tokens
        )
        self.distillation_token = arg_checks.boolean(
            "distillation_token", distillation_token
        )
        self.position_embedding_tokens = arg_checks.one_of(
            "position_embedding_tokens",
            position_embedding_tokens,
            POSITION_EMBEDDING_TOKENS,
        )
        self.num_prefix_tokens = (
            int(self.class_token)
            + int(self.distillation_token)
            + self.num_register_tokens
        )
        self._num_patches = (
            None
            if self.grid_size is None
            else self.grid_size[0] * self.grid_size[1]
        )
        self.input_spec = keras.layers.InputSpec(min_ndim=3, max_ndim=4)
        self.projection = keras.layers.Dense(
            self.hidden_dim,
            kernel_initializer="lecun_normal",
            use_bias=self.patch_bias,
            name="projection",
            dtype=self.dtype_policy,
        )

    def _flat_grid(self, num_patches):
        """The grid of a flat `(B, num_patches, F)` input: the layer's own
        (`None` if it has none), never one guessed from `num_patches`."""
        if self.position_embedding == "none":
            return None  # no position signal: the grid plays no part
        if (
            num_patches is not None
            and self._num_patches is not None
            and num_patches != self._num_patches
        ):
            built = (
                "no known grid"
                if self.grid_size is None
                else f"a {self.grid_size[0]}x{self.grid_size[1]} grid"
            )
            raise ValueError(
                f"PatchEncoder {self.name!r} has position embeddings for "
                f"{self._num_patches} patches ({built}) and was given a flat "
                f"sequence of {num_patches}. A flat sequence does not say "
                "its patch grid: feed the patches as a grid (B, grid_h, "
                "grid_w, F), e.g. from Patches(flatten=False), and the "
                f"embeddings are resampled to it. Received: {num_patches} "
                "patches"
            )
        return self.grid_size

    def build(self, input_shape):
        arg_checks.known_last_dim(
            "PatchEncoder", input_shape, "the values of one patch"
        )
        if self.grid_size is None:
            if len(input_shape) == 4:
                grid = tuple(input_shape[1:3])
                if None not in grid:
                    self.grid_size = grid
                    self._num_patches = grid[0] * grid[1]
                elif self.position_embedding in ("learned", "learned2d"):
                    raise ValueError(
                        "PatchEncoder needs a known patch grid to build "
                        "learned position embeddings. Pass `grid_size`. "
                        f"Received: input shape {tuple(input_shape)}"
                    )
            elif self.position_embedding in ("learned2d", "sincos2d"):
                raise ValueError(
                    f"PatchEncoder(position_embedding="
                    f"{self.position_embedding!r}) fed a flat sequence of "
                    "patches needs `grid_size`: a number of patches does not "
                    "say their grid (a 4x4 and a 2x8 grid both hold 16). "
                    "Pass grid_size=(grid_h, grid_w), or feed the patches as "
                    "a grid (B, grid_h, grid_w, F) (Patches(flatten=False)). "
                    f"Received: input shape {tuple(input_shape)}"
                )
            elif self.position_embedding == "learned":
                if input_shape[1] is None:
                    raise ValueError(
                        "PatchEncoder needs a known number of patches to "
                        "build learned position embeddings. Pass "
                        f"`grid_size`. Received: input shape "
                        f"{tuple(input_shape)}"
                    )
                # Embeddings for N positions on no known grid: never
                # resampled (see `_position_embedding`).
                self._num_patches = input_shape[1]
        self.projection.build((None, input_shape[-1]))
        if self.class_token:
            self.cls = self.add_weight(
                shape=(1, 1, self.hidden_dim),
                initializer="zeros",
                name="class_token",
            )
        if self.distillation_token:  # timm's init (std 1e-6 for tokens)
            self.dist = self.add_weight(
                shape=(1, 1, self.hidden_dim),
                initializer=keras.initializers.RandomNormal(stddev=1e-6),
                name="distillation_token",
            )
        if self.num_register_tokens:
            self.registers = self.add_weight(
                shape=(1, self.num_register_tokens, self.hidden_dim),
                initializer=keras.initializers.RandomNormal(stddev=1e-6),
                name="register_tokens",
            )
        if self.position_embedding == "learned":
            self.pos_embedding = self.add_weight(
                shape=(
                    1,
                    self.position_prefix_tokens + self._num_patches,
                    self.hidden_dim,
                ),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                name="position_embedding",
            )
        if self.position_embedding == "learned2d":
            half = self.hidden_dim // 2
            self.pos_embedding_x = self.add_weight(
                shape=(self.grid_size[1], half),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                name="position_embedding_x",
            )
            self.pos_embedding_y = self.add_weight(
                shape=(self.grid_size[0], half),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                name="position_embedding_y",
            )

    def _position_embedding(self, grid, dtype):
        if self.position_embedding == "learned":
            posemb = self.pos_embedding
            if grid is None:  # a flat input: on the layer's own positions
                return ops.cast(posemb, dtype)
            static = all(isinstance(g, int) for g in grid)
            if self.grid_size is None:
                if static and grid[0] * grid[1] == self._num_patches:
                    return ops.cast(posemb, dtype)  # as many: no resampling
                raise ValueError(
                    f"PatchEncoder {self.name!r} was built from a flat "
                    f"sequence of {self._num_patches} patches without "
                    "`grid_size`, so the grid of its position embeddings is "
                    "not known and they cannot be resampled to another. "
                    "Create it with grid_size=(grid_h, grid_w). Received: "
                    f"grid={tuple(grid)}"
                )
            if not static or tuple(grid) != self.grid_size:
                posemb = patch_grid.resample_position_embeddings(
                    ops.convert_to_tensor(posemb),
                    grid,
                    source_grid=self.grid_size,
                    num_prefix_tokens=self.position_prefix_tokens,
                    interpolation=self.interpolation,
                )
            return ops.cast(posemb, dtype)
        if self.position_embedding == "learned2d":
            posemb = self._learned_2d(grid)
        else:
            posemb = patch_grid.sincos_2d_position_embedding(
                grid[0], grid[1], self.hidden_dim
            )
        if self.position_prefix_tokens:  # prefix tokens get no position
            posemb = ops.pad(posemb, [[self.position_prefix_tokens, 0], [0, 0]])
        return ops.cast(posemb[None], dtype)

    def _learned_2d(self, grid):
        # Patch (i, j) gets [x_j, y_i]: a column embedding and a row
        # embedding of D/2 each, concatenated (paper, Appendix D.4). At
        # another grid each axis is resampled on its own.
        x, y = self.pos_embedding_x, self.pos_embedding_y
        height, width = grid
        if (
            not all(isinstance(g, int) for g in grid)
            or tuple(grid) != self.grid_size
        ):
            x = patch_grid.resample_1d_embeddings(
                ops.convert_to_tensor(x), width, self.interpolation
            )
            y = patch_grid.resample_1d_embeddings(
                ops.convert_to_tensor(y), height, self.interpolation
            )
        half = self.hidden_dim // 2
        x = ops.broadcast_to(
            ops.convert_to_tensor(x)[None, :, :], (height, width, half)
        )
        y = ops.broadcast_to(
            ops.convert_to_tensor(y)[:, None, :], (height, width, half)
        )
        return ops.reshape(
            ops.concatenate([x, y], axis=-1), (-1, self.hidden_dim)
        )

    @property
    def position_prefix_tokens(self):
        """The prefix tokens that the added position embeddings have an
        entry for (zeros where not learned): all with
        `position_embedding_tokens="all"`, none with `"patches"`."""
        if self.position_embedding_tokens == "patches":
            return 0
        return self.num_prefix_tokens

    def position_embeddings(self, grid=None):
        """The embeddings added to the tokens, `(1, T, hidden_dim)` float32
        (the prefix tokens' entries first, zeros unless learned in 1D for
        them), on `grid` (defaults to the layer's own); `None` for
        `position_embedding="none"`."""
        if self.position_embedding == "none":
            return None
        grid = (
            self.grid_size if grid is None else arg_checks.size_2d("grid", grid)
        )
        posemb = self._position_embedding(grid, "float32")
        missing = self.num_prefix_tokens - self.position_prefix_tokens
        return ops.pad(posemb, [[0, 0], [missing, 0], [0, 0]])

    def call(self, patches):
        tokens, grid = self.project(patches)
        return self.add_positions(tokens, grid)

    def project(self, patches):
        """The first half of `call`: the patches' linear projection.

        Separate so that the patch tokens can be changed before the class
        token and position embeddings are added (masked patch prediction,
        `keras_vit.training.MaskedPatchPrediction`).

        Returns:
            `(tokens, grid)`: `(B, N, hidden_dim)` patch tokens and the
            `(grid_h, grid_w)` they came from (ints, or scalar tensors where
            the shape is dynamic; for a flat input the layer's own grid,
            `None` if it has none), to pass on to `add_positions`.
        """
        if len(patches.shape) == 4:
            shape = ops.shape(patches)
            grid = tuple(
                s if s is not None else shape[i + 1]
                for i, s in enumerate(patches.shape[1:3])
            )
            patches = ops.reshape(
                patches, (shape[0], grid[0] * grid[1], patches.shape[-1])
            )
        else:
            grid = self._flat_grid(patches.shape[1])
        return self.projection(patches), grid

    def add_positions(self, tokens, grid):
        """The second half of `call`: prepends the prefix tokens (class,
        distillation, registers: those the layer has) and adds the position
        embeddings for `grid` to `(B, N, hidden_dim)` patch tokens."""
        positions = self.position_embedding != "none"
        if positions and not self.position_prefix_tokens:
            tokens = tokens + self._position_embedding(grid, tokens.dtype)
        prefix = [
            ops.broadcast_to(
                ops.cast(weight, tokens.dtype),
                (ops.shape(tokens)[0], weight.shape[1], self.hidden_dim),
            )
            for weight, present in (
                (getattr(self, "cls", None), self.class_token),
                (getattr(self, "dist", None), self.distillation_token),
                (getattr(self, "registers", None), self.num_register_tokens),
            )
            if present
        ]
        if prefix:
            tokens = ops.concatenate([*prefix, tokens], axis=1)
        if positions and self.position_prefix_tokens:
            tokens = tokens + self._position_embedding(grid, tokens.dtype)
        return tokens

    def compute_output_shape(self, input_shape):
        if len(input_shape) == 4:
            grid = tuple(input_shape[1:3])
            n = None if None in grid else grid[0] * grid[1]
        else:
            n = input_shape[1]
        if n is not None:
            n += self.num_prefix_tokens
        return (input_shape[0], n, self.hidden_dim)

    def token_layout(self):
        """`(class_token, distillation_token, num_register_tokens)` as
        ints: the prefix tokens, in the order their variables lead."""
        return (
            int(self.class_token),
            int(self.distillation_token),
            int(self.num_register_tokens),
        )

    def save_own_variables(self, store):
        super().save_own_variables(store)
        if self.grid_size is not None:
            store[GRID_RECORD] = np.asarray(self.grid_size, "int32")
        store[TOKENS_RECORD] = np.asarray(self.token_layout(), "int32")

    def load_own_variables(self, store):
        keys = list(store.keys())
        if TOKENS_RECORD in keys:
            recorded = tuple(int(v) for v in np.asarray(store[TOKENS_RECORD]))
            if recorded != self.token_layout():
                raise ValueError(
                    f"The weights of PatchEncoder {self.name!r} were saved "
                    "with the prefix tokens (class_token, "
                    f"distillation_token, num_register_tokens) {recorded} "
                    f"and the layer has {self.token_layout()}: copied by "
                    "position, one token's weights would land in another's "
                    "place. Received: class_token={}, distillation_token={}, "
                    "num_register_tokens={}".format(*self.token_layout())
                )
        if GRID_RECORD in keys and self.position_embedding == "learned":
            recorded = tuple(int(g) for g in np.asarray(store[GRID_RECORD]))
            if self.grid_size is not None and recorded != tuple(self.grid_size):
                # Keras would copy them if the sizes agree (4x4 into 2x8).
                raise ValueError(
                    f"The weights of PatchEncoder {self.name!r} were saved "
                    f"on a {recorded[0]}x{recorded[1]} patch grid and the "
                    f"layer has {self.grid_size[0]}x{self.grid_size[1]}: "
                    "copied, its position embeddings would be scrambled. "
                    "Load them with keras_vit.load_weights(model, path), "
                    "which resamples them. Received: grid_size="
                    f"{tuple(self.grid_size)}"
                )
        super().load_own_variables(
            _Without(store, (GRID_RECORD, TOKENS_RECORD))
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "grid_size": self.grid_size,
                "class_token": self.class_token,
                "position_embedding": self.position_embedding,
                "interpolation": self.interpolation,
                "patch_bias": self.patch_bias,
                "num_register_tokens": self.num_register_tokens,
                "distillation_token": self.distillation_token,
                "position_embedding_tokens": self.position_embedding_tokens,
            }
        )
        return config


class _Without:
    """A Keras weights store seen without some of its entries."""

    def __init__(self, store, keys):
        self._store, self._keys = store, keys

    def keys(self):
        return [k for k in self._store.keys() if k not in self._keys]

    def __getitem__(self, key):
        return self._store[key]
