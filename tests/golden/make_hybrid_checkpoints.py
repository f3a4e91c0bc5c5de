"""Make the tiny HYBRID (ResNet stem + ViT) reference checkpoints and outputs.

DEVELOPER-SIDE ONLY, like make_checkpoints.py (whose helpers it imports):
it needs torch and timm, which keras_vit does not depend on; it is not run
by the test suite or by CI. The tests only read the small files it wrote,
which are committed. Run it from the repository root with the same
virtual environment as make_checkpoints.py (no network access is needed;
no weights are downloaded):

    /path/to/venv/bin/python tests/golden/make_hybrid_checkpoints.py

Last run with: torch 2.14.1+cu130 (CPU), timm 1.0.31, safetensors 0.8.0,
numpy 2.4.6, Python 3.11.7.

It is deterministic (fixed seeds, one CPU thread) and writes next to itself.

The models are timm's hybrid ViTs (``vit_base_r50_s16_224``,
``vit_small_r26_s32_224``, ... in timm/models/vision_transformer_hybrid.py)
made tiny. Backbone: ``timm.models.resnetv2.ResNetV2`` exactly as timm's
``_resnetv2`` helper builds it (``preact=False``: non-pre-activation
bottlenecks, ``stem_type='same'``, ``StdConv2dSame(eps=1e-8)``,
``num_classes=0, global_pool=''``), with small ``stem_chs`` / ``channels``
and ``GroupNormAct(num_groups=4)`` (timm's default eps 1e-5) instead of 32
groups; then ``HybridEmbed`` (patch size 1, i.e. a 1x1 conv from the
backbone map to the width) in a ``VisionTransformer``: width 32, depth 2,
4 heads, MLP 64, 5 classes, class token + token pooling, LayerNorm eps
1e-6, qkv bias, exact GELU.

* ``hybrid_r2s``: 32x32 images, ``layers=(1, 1)``, ``stem_chs=16``,
  ``channels=(32, 64)``: root conv /2, max-pool /2, stage 2 /2 = stride
  8, 32 -> 16 -> 8 -> 8 -> 4, a 4x4 map, 16 patch tokens + the class
  token.
* ``hybrid_r4s``: 64x64 images, ``layers=(1, 1, 1, 1)``, ``stem_chs=16``,
  ``channels=(32, 32, 32, 32)``: stride 32, 64 -> 32 -> 16 -> 16 -> 8 ->
  4 -> 2, a 2x2 map, 4 patch tokens + the class token.

The widths are smaller than the paper's (64-wide root, 256 * 2**i wide
stages) to keep the files small; the ViT part alone is most of each file.

Every parameter is moved away from its initialisation (+ N(0, 0.1) noise,
N(0, 0.2) for every LayerNorm/GroupNorm scale and bias), eval mode. Model
input ``images / 127.5 - 1`` in NCHW; outputs are float32.

Files, for NAME in (``hybrid_r2s``, ``hybrid_r4s``):

* ``NAME.timm.safetensors``: timm ``VisionTransformer.state_dict()``
  (``patch_embed.backbone.stem.conv.weight``, ...; torch layouts).
* ``NAME.npz``: the same weights in the original google-research
  ``vision_transformer`` hybrid .npz layout (``conv_root/kernel``,
  ``gn_root/scale``, ``block{s}/unit{u}/conv{1,2,3}/kernel``,
  ``.../gn{1,2,3}/scale|bias``, ``.../conv_proj/kernel``,
  ``.../gn_proj/scale|bias``, then the plain ViT keys with
  ``embedding/kernel`` (1, 1, C_backbone, 32)). Convolution kernels HWIO,
  GroupNorm scales/biases (C,). Proven by loading it into a fresh timm
  model with timm's own loader (``VisionTransformer.load_pretrained``) and
  reproducing the logits.
* ``NAME.expected.npz`` (``np.savez_compressed``): ``images`` (4, H, W, 3)
  float32 pixel values in [0, 255]; ``logits`` (4, 5); ``features`` (4, 32)
  = pooled pre-head feature (final-LayerNorm class token); ``backbone`` =
  the ResNet's output map, NHWC, before the 1x1 projection; and, to debug
  the stem alone (hybrid_r2s only), ``stem`` = the root block's output
  (conv, GroupNorm, ReLU, max-pool), NHWC; ``patch_tokens`` =
  ``patch_embed`` output (4, L, 32): the projected map flattened
  row-major over (h, w), before the class token and position embedding.
* ``hybrid_manifest.json``: every file, its configuration, its arrays'
  shapes, the library versions, and the measured facts below.

Self-proofs besides timm's loader: an independent float64 NumPy forward of
the backbone (and the 1x1 embedding) from ``NAME.npz`` with the formulas
written below reproduces timm's ``backbone``/``patch_tokens``; the same
NumPy code with PyTorch-style symmetric padding, or with the original JAX
code's standardisation/GroupNorm epsilons, differs (by how much is
recorded in the manifest's "facts": padding is pinned down hard, the
JAX standardisation only at the 1e-5 level, GroupNorm's eps not at all
at float32 tolerances).

What timm computes (and the NumPy reference re-implements):

* StdConv2dSame (eps 1e-8 in timm's hybrids): per output channel, over
  (in, kh, kw): ``w_hat = (w - mean) / sqrt(var + 1e-8)``, var biased
  (``F.batch_norm`` in training mode); no conv bias. (The original JAX
  code: ``(w - mean) / (std + 1e-5)``; its Flax GroupNorm eps is 1e-6.)
* GroupNorm: eps 1e-5 (timm's GroupNormAct default), biased variance over
  (h, w, channels of the group); groups are contiguous channel blocks.
* "SAME" padding as TensorFlow: total ``max((ceil(n/s)-1)*s + k - n, 0)``,
  ``total // 2`` before (top/left), the rest after (bottom/right); zeros
  for convolutions, -inf for the 3x3/2 max-pool.
* Root: conv 7x7/2 -> GroupNorm -> ReLU -> max-pool 3x3/2 (SAME).
* Bottleneck (not pre-activation): conv1 1x1 -> GN -> ReLU -> conv2 3x3
  (stride here) -> GN -> ReLU -> conv3 1x1 -> GN (no ReLU) -> + shortcut
  -> ReLU. Shortcut in the first unit of every stage = conv_proj 1x1 with
  the stage stride -> GN (no ReLU); identity in the other units. Stage
  strides (1, 2, 2, ...); mid width = out / 4. No norm after the last
  stage (ResNetV2.norm is Identity when preact=False).
"""

import json
import math
import re
import sys
from functools import partial
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ next to the goldens
import make_checkpoints as base  # noqa: E402  (same folder: sys.path[0])
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.layers import GroupNormAct  # noqa: E402
from timm.layers import HybridEmbed  # noqa: E402
from timm.layers import StdConv2dSame  # noqa: E402
from timm.models.resnetv2 import Bottleneck  # noqa: E402
from timm.models.resnetv2 import ResNetV2  # noqa: E402
from timm.models.vision_transformer import VisionTransformer  # noqa: E402

HERE = Path(__file__).resolve().parent
TOL = 1e-6
WS_EPS = 1e-8  # timm's _resnetv2: partial(StdConv2dSame, eps=1e-8)
GN_EPS = 1e-5  # timm's GroupNormAct default (the hybrid factory keeps it)
GN_GROUPS = 4

VIT = dict(
    patch_size=1,
    embed_dim=32,
    depth=2,
    num_heads=4,
    mlp_ratio=2,
    num_classes=5,
    class_token=True,
    global_pool="token",
)
CONFIGS = {
    "hybrid_r2s": dict(
        img_size=32,
        layers=(1, 1),
        stem_chs=16,
        channels=(32, 64),
        grid=(4, 4),
        stride=8,
    ),
    "hybrid_r4s": dict(
        img_size=64,
        layers=(1, 1, 1, 1),
        stem_chs=16,
        channels=(32, 32, 32, 32),
        grid=(2, 2),
        stride=32,
    ),
}
SEEDS = {"hybrid_r2s": 21, "hybrid_r4s": 22}
VERSIONS = {k: v for k, v in base.VERSIONS.items() if k != "transformers"}

manifest = {}
facts = {}


def check(ok, message):
    """Fail loudly (and unlike ``assert``, also under ``python -O``)."""
    if not ok:
        raise SystemExit(f"make_hybrid_checkpoints.py: CHECK FAILED: {message}")


max_diff = base.max_diff
to_numpy = base.to_numpy


def record(filename, description, config=None, arrays=None):
    entry = {"description": description}
    if config is not None:
        entry["config"] = config
    if arrays is not None:
        entry["arrays"] = {
            k: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)}
            for k, v in arrays.items()
        }
    manifest[filename] = entry


def new_model(name, seed):
    """timm's hybrid, built like vision_transformer_hybrid.py does."""
    cfg = CONFIGS[name]
    torch.manual_seed(seed)
    backbone = ResNetV2(  # = timm's _resnetv2(layers, ...) + tiny widths
        layers=cfg["layers"],
        channels=cfg["channels"],
        stem_chs=cfg["stem_chs"],
        num_classes=0,
        global_pool="",
        in_chans=3,
        preact=False,
        stem_type="same",
        conv_layer=partial(StdConv2dSame, eps=WS_EPS),
        norm_layer=partial(GroupNormAct, num_groups=GN_GROUPS),
    )
    model = VisionTransformer(  # = _create_vision_transformer_hybrid
        img_size=cfg["img_size"],
        embed_layer=partial(HybridEmbed, backbone=backbone),
        **VIT,
    ).eval()
    base.check_activations_and_norms(model, name)

    # The structure these goldens claim (see the docstring).
    pe = model.patch_embed
    check(tuple(pe.grid_size) == cfg["grid"], f"{name}: grid {pe.grid_size}")
    check(pe.num_patches == math.prod(cfg["grid"]), f"{name}: num_patches")
    check(
        tuple(pe.feature_ratio) == (cfg["stride"],) * 2,
        f"{name}: stride {pe.feature_ratio}",
    )
    check(pe.feature_dim == cfg["channels"][-1], f"{name}: feature_dim")
    check(model.pos_embed.shape == (1, 1 + pe.num_patches, 32), "pos_embed")
    check(
        tuple(pe.proj.kernel_size) == (1, 1) and pe.proj.bias is not None,
        "1x1 projection with bias",
    )
    check(isinstance(backbone.norm, torch.nn.Identity), "no final norm")
    convs = [m for m in backbone.modules() if isinstance(m, torch.nn.Conv2d)]
    check(
        all(
            isinstance(m, StdConv2dSame) and m.eps == WS_EPS and m.bias is None
            for m in convs
        ),
        "StdConv2dSame eps 1e-8",
    )
    gns = [m for m in backbone.modules() if isinstance(m, torch.nn.GroupNorm)]
    check(
        all(
            isinstance(m, GroupNormAct)
            and m.eps == GN_EPS
            and m.num_groups == GN_GROUPS
            and m.num_channels // GN_GROUPS >= 2
            for m in gns
        ),
        "GroupNorm eps 1e-5, >= 2 channels/group",
    )
    check(isinstance(backbone.stem.norm.act, torch.nn.ReLU), "stem ReLU")
    for s, stage in enumerate(backbone.stages):
        for u, blk in enumerate(stage.blocks):
            check(isinstance(blk, Bottleneck), "non-preact Bottleneck")
            check((blk.downsample is not None) == (u == 0), "proj in unit 1")
            check(
                blk.conv1.stride == (1, 1)
                and blk.conv3.stride == (1, 1)
                and blk.conv2.stride == ((2, 2) if s and not u else (1, 1)),
                "stride on conv2",
            )
            check(
                isinstance(blk.norm3.act, torch.nn.Identity)
                and isinstance(blk.act3, torch.nn.ReLU),
                "ReLU after add",
            )
            if blk.downsample is not None:
                check(
                    isinstance(blk.downsample.norm.act, torch.nn.Identity),
                    "no ReLU on the shortcut",
                )
    return model


def images_and_input(size):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(4, size, size, 3)).astype(np.float32)
    x = torch.from_numpy(images / 127.5 - 1).permute(0, 3, 1, 2).contiguous()
    check(x.dtype == torch.float32 and x.shape == (4, 3, size, size), "input")
    return images, x


@torch.no_grad()
def outputs(model, x):
    out = base.timm_outputs(model, x)
    bb = model.patch_embed.backbone
    stem = bb.stem(x)
    feat = bb(x)
    check(max_diff(feat, bb.stages(stem)) == 0.0, "backbone = stages(stem)")
    tokens = model.patch_embed(x)
    check(
        max_diff(
            tokens, model.patch_embed.proj(feat).flatten(2).transpose(1, 2)
        )
        == 0.0,
        "patch tokens",
    )
    out["backbone"] = to_numpy(feat.permute(0, 2, 3, 1))
    out["stem"] = to_numpy(stem.permute(0, 2, 3, 1))
    out["patch_tokens"] = to_numpy(tokens)
    return out


def hybrid_layout(model):
    """The weights as the original hybrid .npz that timm's loader reads."""
    out = base.jax_layout(model, "original")  # ViT part + embedding/kernel
    check(out["embedding/kernel"].shape[:2] == (1, 1), "1x1 embedding")
    sd = {k: to_numpy(v) for k, v in model.state_dict().items()}
    p = "patch_embed.backbone."

    def conv(key):  # OIHW -> HWIO
        return sd[p + key + ".weight"].transpose(2, 3, 1, 0)

    out["conv_root/kernel"] = conv("stem.conv")
    out["gn_root/scale"] = sd[p + "stem.norm.weight"]
    out["gn_root/bias"] = sd[p + "stem.norm.bias"]
    used = {
        p + "stem.conv.weight",
        p + "stem.norm.weight",
        p + "stem.norm.bias",
    }
    bb = model.patch_embed.backbone
    for i, stage in enumerate(bb.stages):
        for j, blk in enumerate(stage.blocks):
            t = f"stages.{i}.blocks.{j}."
            n = f"block{i + 1}/unit{j + 1}/"  # unit1, not BiT's unit01
            parts = [
                ("conv1", "norm1", "1"),
                ("conv2", "norm2", "2"),
                ("conv3", "norm3", "3"),
            ]
            if blk.downsample is not None:
                parts.append(("downsample.conv", "downsample.norm", "_proj"))
            for c, g, suffix in parts:
                out[f"{n}conv{suffix}/kernel"] = conv(t + c)
                out[f"{n}gn{suffix}/scale"] = sd[p + t + g + ".weight"]
                out[f"{n}gn{suffix}/bias"] = sd[p + t + g + ".bias"]
                used |= {
                    p + t + c + ".weight",
                    p + t + g + ".weight",
                    p + t + g + ".bias",
                }
    check(used == {k for k in sd if k.startswith(p)}, "backbone keys")
    return {
        k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()
    }


def prove_timm_loads(path, name, reference, x, expected_logits):
    fresh = new_model(name, seed=12345)
    fresh.load_pretrained(str(path))  # -> timm's _load_weights (hybrid)
    fresh.eval()
    ref_sd = reference.state_dict()
    for k, v in fresh.state_dict().items():
        check(torch.equal(v, ref_sd[k]), f"{path.name}: {k} differs")
    d = max_diff(base.timm_outputs(fresh, x)["logits"], expected_logits)
    check(d <= TOL, f"{path.name}: logits differ by {d}")
    print(
        f"  proof ok: timm load_pretrained({path.name}) reproduces the "
        f"logits (max diff {d:.1e})"
    )


# ---- independent float64 NumPy reference of the backbone (NHWC, HWIO) ----


def np_pad(x, k, s, mode, value):
    """Pad H and W of NHWC x for a k x k window with stride s."""
    pads = []
    for n in x.shape[1:3]:
        if mode == "tf_same":
            total = max((math.ceil(n / s) - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        else:  # "symmetric": PyTorch-style padding=(k - 1) // 2 both sides
            pads.append(((k - 1) // 2,) * 2)
    return np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=value)


def np_windows(x, k, s):
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    for dy in range(k):
        for dx in range(k):
            yield (
                dy,
                dx,
                x[
                    :,
                    dy : dy + s * (oh - 1) + 1 : s,
                    dx : dx + s * (ow - 1) + 1 : s,
                    :,
                ],
            )


def np_std_conv(x, w, s, opt):
    w = w.astype(np.float64)
    mean = w.mean(axis=(0, 1, 2), keepdims=True)
    if opt["ws"] == "timm":
        w = (w - mean) / np.sqrt(w.var(axis=(0, 1, 2), keepdims=True) + WS_EPS)
    else:  # the original JAX code
        w = (w - mean) / (w.std(axis=(0, 1, 2), keepdims=True) + 1e-5)
    k = w.shape[0]
    x = np_pad(x, k, s, opt["pad"], 0.0)
    return sum(
        np.einsum("nhwc,cd->nhwd", patch, w[dy, dx])
        for dy, dx, patch in np_windows(x, k, s)
    )


def np_group_norm(x, scale, bias, opt):
    n, h, w, c = x.shape
    g = x.reshape(n, h, w, GN_GROUPS, c // GN_GROUPS)
    mean = g.mean(axis=(1, 2, 4), keepdims=True)
    var = g.var(axis=(1, 2, 4), keepdims=True)
    g = (g - mean) / np.sqrt(var + opt["gn_eps"])
    return g.reshape(n, h, w, c) * scale + bias


def np_max_pool(x, opt):
    x = np_pad(x, 3, 2, opt["pad"], -np.inf)
    return np.max(np.stack([p for _, _, p in np_windows(x, 3, 2)]), axis=0)


def np_backbone(w, images, num_stages, opt):
    relu = partial(np.maximum, 0.0)
    x = images.astype(np.float64) / 127.5 - 1
    x = np_std_conv(x, w["conv_root/kernel"], 2, opt)
    x = relu(np_group_norm(x, w["gn_root/scale"], w["gn_root/bias"], opt))
    stem = x = np_max_pool(x, opt)
    for s in range(1, num_stages + 1):
        u = 1
        while f"block{s}/unit{u}/conv1/kernel" in w:
            b = f"block{s}/unit{u}/"
            stride = 2 if (s > 1 and u == 1) else 1

            # Called only in this unit, whose prefix `b` is.
            def gn(y, name):
                return np_group_norm(
                    y,
                    w[f"{b}{name}/scale"],  # noqa: B023
                    w[f"{b}{name}/bias"],  # noqa: B023
                    opt,
                )

            shortcut = x
            if f"{b}conv_proj/kernel" in w:
                shortcut = gn(
                    np_std_conv(x, w[f"{b}conv_proj/kernel"], stride, opt),
                    "gn_proj",
                )
            y = relu(gn(np_std_conv(x, w[f"{b}conv1/kernel"], 1, opt), "gn1"))
            y = relu(
                gn(np_std_conv(y, w[f"{b}conv2/kernel"], stride, opt), "gn2")
            )
            y = gn(np_std_conv(y, w[f"{b}conv3/kernel"], 1, opt), "gn3")
            x = relu(y + shortcut)
            u += 1
    return stem, x


def prove_numpy(name, weights, images, out):
    n_stages = len(CONFIGS[name]["layers"])
    timm_opt = dict(ws="timm", gn_eps=GN_EPS, pad="tf_same")
    stem, feat = np_backbone(weights, images, n_stages, timm_opt)
    scale = float(np.max(np.abs(out["backbone"])))
    d_stem = max_diff(stem, out["stem"])
    d_feat = max_diff(feat, out["backbone"])
    kernel = weights["embedding/kernel"][0, 0].astype(np.float64)
    tokens = (
        feat.reshape(feat.shape[0], -1, feat.shape[-1]) @ kernel
        + weights["embedding/bias"]
    )
    d_tok = max_diff(tokens, out["patch_tokens"])
    check(
        d_stem <= 1e-5 and d_feat <= 1e-5 * max(scale, 1) and d_tok <= 1e-4,
        f"{name}: NumPy reference differs: stem "
        f"{d_stem}, backbone {d_feat} (max |x| {scale}), tokens {d_tok}",
    )
    print(
        f"  proof ok: float64 NumPy backbone from {name}.npz matches timm "
        f"(stem {d_stem:.1e}, backbone {d_feat:.1e}, max |backbone| "
        f"{scale:.1f}, patch tokens {d_tok:.1e})"
    )

    # Negative controls: the goldens tell these variants apart.
    variants = {
        "symmetric (PyTorch-style) padding instead of TF SAME": dict(
            timm_opt, pad="symmetric"
        ),
        "original JAX weight standardisation (w-m)/(std+1e-5)": dict(
            timm_opt, ws="jax"
        ),
        "GroupNorm eps 1e-6 (Flax default) instead of 1e-5": dict(
            timm_opt, gn_eps=1e-6
        ),
    }
    diffs = {}
    for label, opt in variants.items():
        d = max_diff(
            np_backbone(weights, images, n_stages, opt)[1], out["backbone"]
        )
        diffs[label] = float(f"{d:.3g}")
        print(f"    variant {label}: backbone max diff {d:.2e}")
    check(
        diffs["symmetric (PyTorch-style) padding instead of TF SAME"] > 1e-2,
        "padding variant not detected",
    )
    return diffs


def make(name):
    cfg = CONFIGS[name]
    images, x = images_and_input(cfg["img_size"])
    model = new_model(name, SEEDS[name])
    base.perturb_(model, SEEDS[name])
    out = outputs(model, x)
    check(np.all(np.isfinite(out["logits"])), "finite logits")
    check(float(np.std(out["logits"])) > 0.1, "logits too flat")
    check(
        out["backbone"].shape == (4, *cfg["grid"], cfg["channels"][-1]),
        f"backbone shape {out['backbone'].shape}",
    )

    config = dict(
        img_size=cfg["img_size"],
        in_chans=3,
        backbone=dict(
            class_name="timm.models.resnetv2.ResNetV2",
            layers=list(cfg["layers"]),
            channels=list(cfg["channels"]),
            stem_chs=cfg["stem_chs"],
            bottle_ratio=0.25,
            mid_channels=[c // 4 for c in cfg["channels"]],
            preact=False,
            stem_type="same",
            num_classes=0,
            global_pool="",
            conv_layer="StdConv2dSame(eps=1e-8), bias=False",
            norm_layer=f"GroupNormAct(num_groups={GN_GROUPS}, eps=1e-5)",
            act_layer="ReLU",
            output_channels=cfg["channels"][-1],
            output_stride=cfg["stride"],
            output_grid=list(cfg["grid"]),
        ),
        vit=dict(
            VIT,
            class_name="timm.models.VisionTransformer",
            embed_layer="timm.layers.HybridEmbed(backbone, "
            "patch_size=1): Conv2d 1x1 with bias",
            num_patches=math.prod(cfg["grid"]),
            num_tokens=1 + math.prod(cfg["grid"]),
            norm_layer="LayerNorm eps 1e-6",
            act_layer="exact GELU",
            qkv_bias=True,
        ),
    )

    fname = f"{name}.timm.safetensors"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(HERE / fname))
    record(
        fname,
        "timm VisionTransformer.state_dict() of the hybrid "
        "(safetensors.torch.save_file)",
        config,
        state,
    )

    fname = f"{name}.npz"
    weights = base.write_npz(fname, hybrid_layout(model))
    record(
        fname,
        "the same weights in the original google-research/"
        "vision_transformer hybrid .npz layout (np.savez, float32, "
        "kernels HWIO, GroupNorm scale/bias (C,)); loaded by timm's "
        "VisionTransformer.load_pretrained",
        config,
        weights,
    )
    prove_timm_loads(HERE / fname, name, model, x, out["logits"])
    diffs = prove_numpy(name, weights, images, out)

    fname = f"{name}.expected.npz"
    keep = dict(images=images, **out)
    if name != "hybrid_r2s":  # the stem is the same; keep the files small
        del keep["stem"]
    arrays = base.write_npz(fname, keep, True)
    record(
        fname,
        "inputs and timm outputs: images = pixel values in "
        "[0, 255] NHWC (model input images / 127.5 - 1, NCHW); logits "
        "(no softmax); features = forward_head(forward_features(x), "
        "pre_logits=True); backbone = patch_embed.backbone(x) in NHWC "
        "(before the 1x1 projection); patch_tokens = patch_embed(x) "
        "(flattened row-major over h, w)"
        + ("; stem = backbone.stem(x) in NHWC" if "stem" in keep else ""),
        config,
        arrays,
    )
    facts[name] = {
        "backbone_params": sum(
            p.numel() for p in model.patch_embed.backbone.parameters()
        ),
        "total_params": sum(p.numel() for p in model.parameters()),
        "num_tokens": 1 + model.patch_embed.num_patches,
        "stem_shape_nhwc": list(out["stem"].shape[1:]),
        "backbone_shape_nhwc": list(out["backbone"].shape[1:]),
        "numpy_variant_backbone_max_diffs": diffs,
    }
    return weights


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name in CONFIGS:
        print(name)
        make(name)

    manifest_out = {
        "about": "Tiny hybrid (ResNetV2 + ViT) reference checkpoints made by "
        "make_hybrid_checkpoints.py (developer-side, needs "
        "torch/timm); its docstring spells out the computation.",
        "versions": VERSIONS,
        "inputs": "images: np.random.default_rng(0).integers(0, 256, "
        "(4, S, S, 3)) as float32 with S = img_size (32 for "
        "hybrid_r2s, 64 for hybrid_r4s); model input "
        "torch.from_numpy(images / 127.5 - 1).permute(0, 3, 1, 2)",
        "facts": facts,
        "files": dict(sorted(manifest.items())),
    }
    text = json.dumps(manifest_out, indent=1)
    text = re.sub(
        r"\{\s+\"shape\": \[([\d,\s]*)\],\s+\"dtype\": "
        r"(\"\w+\")\s+\}",
        lambda m: (
            '{"shape": [%s], "dtype": %s}'
            % (", ".join(re.findall(r"\d+", m.group(1))), m.group(2))
        ),
        text,
    )
    text = re.sub(
        r"\[\s+([\d,\s]+?)\s+\]",  # short int lists on one line
        lambda m: "[%s]" % ", ".join(re.findall(r"\d+", m.group(1))),
        text,
    )
    (HERE / "hybrid_manifest.json").write_text(text + "\n")

    total = 0
    for path in sorted(HERE.iterdir()):
        if path.name in manifest or path.name == "hybrid_manifest.json":
            total += path.stat().st_size
            print(f"{path.stat().st_size:>8}  {path.name}")
    print(f"{total:>8}  total")
    check(total < 720_000, "hybrid golden files are too large")


if __name__ == "__main__":
    main()
