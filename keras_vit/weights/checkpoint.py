"""`Checkpoint`: weights in keras_vit's layout, plus what they describe.

Every loader turns its source format into one of these: a flat dict from
keras_vit variable paths (`"block_0/attention/qkv/kernel"`) to NumPy arrays
in keras_vit's layouts, so that checking and assigning is written once
(`keras_vit.weights.loading`).
"""

import dataclasses
import math
import re

import numpy as np

from keras_vit import patch_grid

_BLOCK = re.compile(r"^block_(\d+)/")
_STEM_UNIT = re.compile(r"^resnet_stem/block(\d+)_unit(\d+)/")
POSEMB = "patch_encoder/position_embedding"

#: The `ViT` arguments of DINOv3 that its tensors do not record, in
#: timm's layout and transformers' alike (timm's `vit_*_patch16_dinov3`
#: model arguments; transformers' `DINOv3ViTConfig` defaults).
DINOV3_DEFAULTS = {
    "position_embedding": "rope",
    "rope_theta": 100.0,
    "layer_norm_epsilon": 1e-5,
}

#: Formats that record no patch grid and whose releases (and own loaders:
#: the original code's `load_pretrained`, timm's `resample_abs_pos_embed`,
#: transformers' `interpolate_pos_encoding`) take their position embeddings
#: to be on a square grid. keras_vit's own files record their grid.
SQUARE_GRID_SOURCES = ("original", "big_vision", "timm", "huggingface")


@dataclasses.dataclass
class Checkpoint:
    """Weights in keras_vit's layout, with the architecture they imply.

    Attributes:
        tensors: dict from keras_vit variable path to array.
        source: the format read: `"original"` (google-research `.npz`),
            `"big_vision"`, `"timm"`, `"huggingface"` or `"keras"`.
        path: the file the weights came from.
        patch_size: int or `None` (unknown).
        num_heads: int or `None` (not recorded by fused-QKV formats).
        grid_size: `(rows, cols)` of the position embeddings' patch grid, as
            the file records it or as given (`source_grid=`), or `None`:
            then square for the formats of `SQUARE_GRID_SOURCES`, and
            unknown for the others (see `position_grid`).
        unexpected: names (in the source's own naming) of tensors the file
            holds that keras_vit has no place for.
        missing: source names a complete checkpoint of this format would
            have and this file lacks.
        misshaped: `"name (source name): ..."` lines for the tensors of the
            file whose rank is not the format's (they are not converted).
        position_embedding_tokens: `"all"` or `"patches"` when the reader
            knows whether the 1D position embeddings have entries for the
            prefix tokens (see `position_prefix_tokens`), else `None`.
        layout_defaults: `keras_vit.ViT` arguments that the file's layout
            implies but its tensors do not record (Hugging Face's DINOv2,
            CLIP and SigLIP layouts: the activation and LayerNorm epsilon
            of the family's transformers config; CLIP's `patch_bias=False`;
            a big_vision two-tower file's tanh GELU and, its `head` being
            the image embedding, `classifier_activation=None`).
            `keras_vit.weights.convert.architecture` passes them on; an
            argument given replaces them. A gated MLP's (`use_gated_mlp`)
            activation is SiLU in every format that has one (timm's
            `SwiGLU` and `SwiGLUPacked`, transformers' `Dinov2SwiGLUFFN`):
            added here, over the layout's own.
        adjacent_rope_pairs: whether the file's rotary embedding rotates
            adjacent pairs of each head's query and key columns (timm's
            `"cat"` and `"mixed"` RoPE): loading reorders those columns
            for keras_vit's rotation of halves
            (`keras_vit.layers.rotary.adjacent_to_halves`).
        perception_encoder: for a timm file whose tensors fit two layouts
            (Perception Encoder core's, and a `VisionTransformer`'s with
            `norm_pre`, no patch-embedding bias and attention pooling:
            the same names and shapes), the `layout_defaults` of the first;
            `None` for every other file. The model, a Hub config or the
            caller's `position_embedding` decides (`read_as`, `decided_by`).
    """

    tensors: dict
    source: str
    path: str
    patch_size: int = None
    num_heads: int = None
    grid_size: tuple = None
    unexpected: list = dataclasses.field(default_factory=list)
    missing: list = dataclasses.field(default_factory=list)
    misshaped: list = dataclasses.field(default_factory=list)
    position_embedding_tokens: str = None
    layout_defaults: dict = dataclasses.field(default_factory=dict)
    adjacent_rope_pairs: bool = False
    perception_encoder: dict = None

    def read_as(self, perception_encoder):
        """The checkpoint read as Perception Encoder core (its
        `layout_defaults`, its RoPE's adjacent pairs) or, with
        `perception_encoder` false, as timm's `VisionTransformer`, for a
        file that fits both; itself for every other file."""
        if self.perception_encoder is None:
            return self
        if not perception_encoder:
            return dataclasses.replace(self, perception_encoder=None)
        return dataclasses.replace(
            self,
            layout_defaults={**self.layout_defaults, **self.perception_encoder},
            adjacent_rope_pairs=True,
            perception_encoder=None,
        )

    def decided_by(self, position_embedding):
        """`read_as` Perception Encoder core where `position_embedding`
        (the `ViT` argument given, or a Hub config's) is `"rope"`, else as
        timm's `VisionTransformer`; refuses, naming both, where it is
        `None` for a file that fits both."""
        if self.perception_encoder is None:
            return self
        if position_embedding is None:
            raise ValueError(
                f"{self.path} fits two timm layouts that its tensors cannot "
                "tell apart: Perception Encoder core's (vit_pe_core_*: "
                "rotary embeddings, rope_type='cat', with the learned "
                "table) and a VisionTransformer's with norm_pre, no "
                "patch-embedding bias and attention pooling (learned "
                "position embeddings only). Say which: "
                "position_embedding='rope' or 'learned' (keras-vit "
                "convert --position-embedding rope|learned), or load it "
                "through its Hub config.json, whose architecture says it."
            )
        rope = position_embedding == "rope"
        if rope and not self.class_token:
            raise ValueError(
                f"{self.path}: Perception Encoder core without a class "
                "token (PE core G/14) is not supported: its attention "
                "pooling's MLP is narrower than its blocks' "
                "(attn_pool_mlp_ratio 4, mlp_ratio 5.83), and keras_vit's "
                "attention pooling has the blocks' MLP width; its Hub "
                "config is refused for the same reason."
            )
        return self.read_as(rope)

    def __post_init__(self):
        if self.use_gated_mlp and self.source != "keras":
            self.layout_defaults = {
                **self.layout_defaults,
                "activation": "silu",
            }

    def _shape(self, path, ndim):
        """The shape of tensor `path` if it has `ndim` dimensions, else
        `None`."""
        value = self.tensors.get(path)
        if value is None or np.ndim(value) != ndim:
            return None
        return np.shape(value)

    @property
    def class_token(self):
        return "patch_encoder/class_token" in self.tensors

    @property
    def num_register_tokens(self):
        shape = self._shape("patch_encoder/register_tokens", 3)
        return 0 if shape is None else shape[1]

    @property
    def distillation(self):
        return "patch_encoder/distillation_token" in self.tensors

    @property
    def pooling(self):
        """`"map"` for an attention-pooling head (its probe), `"gap"` for
        a final norm after pooling (`fc_norm`) or no class token, else
        `"token"`."""
        if "pooling/probe" in self.tensors:
            return "map"
        if self.fc_norm or not self.class_token:
            return "gap"
        return "token"

    @property
    def norm_pre(self):
        return "norm_pre/gamma" in self.tensors

    @property
    def fc_norm(self):
        return "fc_norm/gamma" in self.tensors

    @property
    def layer_scale(self):
        return "block_0/ls1/gamma" in self.tensors

    @property
    def qk_norm(self):
        return "block_0/attention/q_norm/gamma" in self.tensors

    @property
    def qkv_bias(self):
        """Whether the attention's fused projection has a bias: `False`
        for a timm file without `qkv.bias` (DINOv3's S and B); the other
        formats always have one."""
        return (
            self.source != "timm"
            or "block_0/attention/qkv/bias" in self.tensors
            or any("attn.qkv.bias" in line for line in self.misshaped)
            or not self.num_layers
        )

    @property
    def patch_bias(self):
        """Whether the patch embedding has a bias: `False` for a timm file
        without one (CLIP's) and for Hugging Face's CLIP layout; the other
        formats always have one (a file that lacks it is incomplete, and
        reported so)."""
        if "patch_encoder/projection/bias" in self.tensors or any(
            "patch_embed.proj.bias" in line for line in self.misshaped
        ):
            return True
        if self.source == "timm":
            return False
        return self.layout_defaults.get("patch_bias", True)

    @property
    def num_prefix_tokens(self):
        """The tokens before the patches: class, distillation, then
        registers."""
        return (
            int(self.class_token)
            + int(self.distillation)
            + self.num_register_tokens
        )

    @property
    def position_prefix_tokens(self):
        """The entries before the patches' in the 1D position embeddings:
        `num_prefix_tokens`, or 0 when they cover the patches only
        (`position_embedding_tokens="patches"`): as the reader says, else
        from the grid a keras_vit file records, else `num_prefix_tokens`
        (a count alone does not say it: 9 entries are a 3x3 grid, or a
        class token and 2x4)."""
        posemb = self._shape(POSEMB, 3)
        prefix = self.num_prefix_tokens
        if posemb is None or not prefix:
            return prefix
        if self.position_embedding_tokens is not None:
            return 0 if self.position_embedding_tokens == "patches" else prefix
        if self.grid_size is not None and self.source == "keras":
            cells = int(self.grid_size[0]) * int(self.grid_size[1])
            return 0 if posemb[1] == cells else prefix
        return prefix

    @property
    def hidden_dim(self):
        kernel = self._shape("patch_encoder/projection/kernel", 2)
        return None if kernel is None else kernel[-1]

    @property
    def num_layers(self):
        blocks = {
            int(m.group(1)) for k in self.tensors if (m := _BLOCK.match(k))
        }
        return len(blocks)

    @property
    def use_gated_mlp(self):
        """Whether the MLP is gated: `mlp_fc1` (gate and value, packed)
        is twice as wide as `mlp_fc2`'s input, which no plain MLP is. The
        `.npz` layouts have no gated MLP: such shapes there are a broken
        file, reported as shape mismatches."""
        if self.source in ("original", "big_vision"):
            return False
        fc1 = self._shape("block_0/mlp_fc1/kernel", 2)
        fc2 = self._shape("block_0/mlp_fc2/kernel", 2)
        return fc1 is not None and fc2 is not None and fc1[1] == 2 * fc2[0]

    @property
    def mlp_dim(self):
        """The MLP width: `mlp_fc1`'s, or with a gated MLP its half (the
        gated product's, `keras_vit.ViT`'s `mlp_dim`)."""
        kernel = self._shape("block_0/mlp_fc1/kernel", 2)
        if kernel is None:
            return None
        return kernel[-1] // 2 if self.use_gated_mlp else kernel[-1]

    @property
    def num_classes(self):
        bias = self._shape("head/bias", 1)
        return None if bias is None else bias[0]

    @property
    def representation_size(self):
        bias = self._shape("pre_logits/bias", 1)
        return None if bias is None else bias[0]

    @property
    def head_classes(self):
        """The class count of a well-formed head, else `None`.

        Well-formed: a `(inputs, classes)` kernel and a `(classes,)` bias
        whose inputs are the pre-logits width (or, without a pre-logits
        layer, the token width). A head that is not is a broken checkpoint,
        not one for another class count."""
        kernel, bias = (
            self._shape("head/kernel", 2),
            self._shape("head/bias", 1),
        )
        if kernel is None or bias is None or kernel[1] != bias[0]:
            return None
        if (
            "pre_logits/kernel" in self.tensors
            or "pre_logits/bias" in self.tensors
        ):
            pre_kernel = self._shape("pre_logits/kernel", 2)
            inputs = self.representation_size
            if pre_kernel is None or pre_kernel[1] != inputs:
                return None
            if self.hidden_dim is not None and pre_kernel[0] != self.hidden_dim:
                return None
        else:
            inputs = self.hidden_dim
        if inputs is not None and kernel[0] != inputs:
            return None
        return bias[0]

    @property
    def position_grid(self):
        """The patch grid of the position embeddings, or `None` if none.

        The grid the file records (or `source_grid=` gave); for a format
        that records none (`SQUARE_GRID_SOURCES`) the square grid, as its
        releases and its own loaders have it.

        Raises:
            ValueError: if the grid is not known (a keras_vit file that
                does not record it, or a format's non-square count), or
                does not hold the embeddings' positions.
        """
        posemb = self.tensors.get(POSEMB)
        if posemb is None or np.ndim(posemb) != 3:
            return None
        positions = np.shape(posemb)[1] - self.position_prefix_tokens
        how = (
            "Pass the grid it was trained on: "
            "keras_vit.load_weights(model, path, source_grid=(rows, cols))"
            + (
                ""
                if self.source == "keras"
                else " or keras-vit convert ... --source-grid ROWS COLS"
            )
            + "."
        )
        if self.grid_size is not None:
            grid = tuple(int(g) for g in self.grid_size)
            if grid[0] * grid[1] != positions:
                raise ValueError(
                    f"The position embeddings in {self.path} hold {positions} "
                    f"patch positions, not the {grid[0]}x{grid[1]} patch grid "
                    f"recorded for them. Received: grid_size={grid}"
                )
            return grid
        if self.source in SQUARE_GRID_SOURCES:
            side = math.isqrt(positions)
            if side * side == positions:
                return side, side
            raise ValueError(
                f"The position embeddings in {self.path} hold {positions} "
                f"patch positions, not a square grid, and the {self.source} "
                f"format records no grid. {how}"
            )
        raise ValueError(
            f"{self.path} does not record the patch grid of its "
            f"{positions} position embeddings (a file written before "
            f"keras_vit recorded it), and guessing it from their number "
            f"would scramble any other grid. {how}"
        )

    @property
    def stem_units(self):
        """Units per stage of a hybrid's ResNet stem, or `None`."""
        units = {}
        for key in self.tensors:
            m = _STEM_UNIT.match(key)
            if m:
                stage, unit = int(m.group(1)), int(m.group(2))
                units[stage] = max(units.get(stage, 0), unit)
        return [units[s] for s in sorted(units)] or None

    @property
    def image_size(self):
        """The resolution the checkpoint was trained at, if it is known."""
        grid = self.position_grid
        if grid is None or self.patch_size is None:
            return None
        stride = self.patch_size
        if self.stem_units:  # root 4, then 2 per stage after the first
            stride *= 4 * 2 ** (len(self.stem_units) - 1)
        return (grid[0] * stride, grid[1] * stride)

    def describe(self):
        """A one-line summary of the architecture, for error messages."""
        parts = [
            f"hidden_dim={self.hidden_dim}",
            f"num_layers={self.num_layers}",
            f"mlp_dim={self.mlp_dim}",
        ]
        if self.num_heads:
            parts.append(f"num_heads={self.num_heads}")
        if self.patch_size:
            parts.append(f"patch_size={self.patch_size}")
        if self.stem_units:
            parts.append(f"stem block_units={self.stem_units}")
        parts.append(f"class_token={self.class_token}")
        if self.num_register_tokens:
            parts.append(f"num_register_tokens={self.num_register_tokens}")
        if self.distillation:
            parts.append("distillation=True")
        if self.num_prefix_tokens and not self.position_prefix_tokens:
            parts.append("position_embedding_tokens='patches'")
        if self.pooling != ("token" if self.class_token else "gap"):
            parts.append(f"pooling={self.pooling!r}")
        for option in (
            "layer_scale",
            "qk_norm",
            "use_gated_mlp",
            "norm_pre",
            "fc_norm",
        ):
            if getattr(self, option):
                parts.append(f"{option}=True")
        if not self.patch_bias:
            parts.append("patch_bias=False")
        if not self.qkv_bias:
            parts.append("qkv_bias=False")
        if self.num_classes is not None:
            parts.append(f"num_classes={self.num_classes}")
        if self.representation_size is not None:
            parts.append(f"representation_size={self.representation_size}")
        return ", ".join(parts)


def position_tokens_of(length, prefix, path, source_grid=None):
    """Whether `length` position embeddings after `prefix` tokens cover
    every token (`"all"`) or the patches only (`"patches"`), for formats
    that do not record it (timm's `no_embed_class`; big_vision, whose
    class token has an entry in old files only): the reading whose patch
    count is `source_grid`'s, else a square; `None` when there are no
    prefix tokens; `"all"` when neither reading fits, which the grid's own
    checks (`Checkpoint.position_grid`) then report.

    Raises:
        ValueError: when both readings fit.
    """
    if not prefix:
        return None
    counts = {"all": length - prefix, "patches": length}
    if source_grid is not None:
        fits = [k for k, n in counts.items() if n == math.prod(source_grid)]
    else:
        fits = [
            k for k, n in counts.items() if n > 0 and math.isqrt(n) ** 2 == n
        ]
    if len(fits) == 1:
        return fits[0]
    if not fits:  # reported by the grid's own checks (position_grid)
        return "all"
    raise ValueError(
        f"The {length} position embeddings in {path} fit both a square grid "
        f"of {length - prefix} patches after the {prefix} class/"
        f"distillation/register tokens and one of {length} patches (timm's "
        "no_embed_class) and the file does not say which. Pass "
        "position_embedding_tokens='all' or 'patches' "
        "(keras_vit.weights.read_checkpoint) or source_grid=(rows, cols)."
    )


def conv_to_projection(kernel):
    """(P, P, C, D) conv kernel → (P·P·C, D) projection kernel, and P."""
    if kernel is None:
        return None, None
    kernel = np.asarray(kernel)
    if kernel.ndim != 4:
        raise ValueError(
            "Expected a (P, P, C, D) patch-embedding kernel. "
            f"Received: shape {kernel.shape}"
        )
    return np.asarray(patch_grid.conv_to_dense_kernel(kernel)), kernel.shape[0]


def torch_conv_to_projection(weight):
    """PyTorch (D, C, P, P) conv weight → (P·P·C, D) kernel, and P."""
    if weight is None:
        return None, None
    weight = np.asarray(weight)
    if weight.ndim != 4:
        raise ValueError(
            "Expected a (D, C, P, P) patch-embedding weight. "
            f"Received: shape {weight.shape}"
        )
    return conv_to_projection(weight.transpose(2, 3, 1, 0))


def transpose(value):
    """A PyTorch `Linear` weight `(out, in)` as a Keras kernel; `None` stays."""
    return None if value is None else value.T


def torch_norm(src, prefix, out, name):
    """A PyTorch LayerNorm/GroupNorm `prefix.{weight,bias}` → gamma, beta."""
    out[f"{name}/gamma"] = src.take(f"{prefix}.weight", 1)
    out[f"{name}/beta"] = src.take(f"{prefix}.bias", 1)


def torch_linear(src, prefix, out, name):
    """A PyTorch `Linear` `prefix.{weight,bias}` → Keras kernel, bias."""
    out[f"{name}/kernel"] = transpose(src.take(f"{prefix}.weight", 2))
    out[f"{name}/bias"] = src.take(f"{prefix}.bias", 1)


def torch_gated_linear(src, gate, value, out, name):
    """A gated MLP's two PyTorch `Linear`s, `gate` and `value` (prefixes),
    as keras_vit's one packed `mlp_fc1`: the gate's outputs first."""
    parts = [{}, {}]
    for part, prefix in zip(parts, (gate, value)):
        torch_linear(src, prefix, part, "fc1")
    for kind, axis in (("kernel", 1), ("bias", 0)):
        out[f"{name}/{kind}"] = concatenate(
            [part[f"fc1/{kind}"] for part in parts], axis
        )


def concatenate(parts, axis=0):
    """Concatenates parts, or `None` if any part is missing."""
    if any(part is None for part in parts):
        return None
    return np.concatenate(parts, axis=axis)


class TensorSource:
    """The tensors of a file by their own names; remembers what was taken.

    Converters `take()` each tensor they expect. A tensor the file lacks
    comes back as `None` and is recorded in `missing`, one of the wrong
    rank comes back as `None` and is recorded in `misshaped`; whatever the
    converters never took is reported by `remaining()` as unexpected.
    Nothing is silently dropped, and every fault is reported together.
    """

    def __init__(self, tensors, path, misshaped=()):
        self._tensors = dict(tensors)
        self.path = path
        self.missing = []
        self.misshaped = list(misshaped)

    def __contains__(self, name):
        return name in self._tensors

    def keys(self):
        return list(self._tensors)

    def take(self, name, ndim=None):
        if name not in self._tensors:
            self.missing.append(name)
            return None
        value = np.asarray(self._tensors.pop(name))
        if ndim is not None and value.ndim != ndim:
            # Not converted, and reported with every other mismatch.
            self.misshaped.append(
                f"{name} (source name): shape {value.shape}, expected "
                f"{ndim} dimensions"
            )
            return None
        return value

    def take_if_present(self, name, ndim=None):
        return self.take(name, ndim) if name in self._tensors else None

    def remaining(self):
        return sorted(self._tensors)

    def checkpoint(self, tensors, source, **kwargs):
        """The `Checkpoint` of what was converted (missing parts left out)."""
        return Checkpoint(
            tensors={k: v for k, v in tensors.items() if v is not None},
            source=source,
            path=self.path,
            unexpected=self.remaining(),
            missing=sorted(self.missing),
            misshaped=sorted(self.misshaped),
            **kwargs,
        )
