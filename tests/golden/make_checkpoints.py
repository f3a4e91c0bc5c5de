"""Make the tiny reference checkpoints in tests/golden/ and their outputs.

DEVELOPER-SIDE ONLY. This script needs torch, timm and transformers, which
keras_vit does not depend on; it is not run by the test suite or by CI. The
tests only read the small files it wrote, which are committed.

Run it from the repository root with a virtual environment that has those
libraries (no network access is needed; no weights are downloaded):

    python3 -m venv /path/to/venv
    /path/to/venv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /path/to/venv/bin/pip install timm safetensors transformers numpy
    /path/to/venv/bin/python tests/golden/make_checkpoints.py

Last run with: torch 2.14.1+cu130 (CPU), torchvision 0.29.1, timm 1.0.31,
transformers 5.24.0, safetensors 0.8.0, numpy 2.4.6, Python 3.11.7.

It is deterministic (fixed seeds, one CPU thread) and writes next to itself.
Every model is tiny: 32x32 RGB images, 8x8 patches (4x4 grid), width 32,
depth 2, 4 heads, MLP 64, 5 classes, LayerNorm eps 1e-6, qkv bias, exact
(erf) GELU. Every parameter is moved away from its initialisation
(+ N(0, 0.1) noise, N(0, 0.2) for LayerNorm scales and biases). The
model input is ``images / 127.5 - 1`` in NCHW, the reference outputs are
logits (no softmax), float32.

Files (NAME is ``vit_token``: class token + token pooling, or ``vit_gap``:
no class token, final LayerNorm on all tokens then mean, no head norm):

* ``NAME.timm.safetensors``: timm ``VisionTransformer.state_dict()``
  (timm key names, torch layouts).
* ``NAME.npz``: the same weights in the original google-research
  ``vision_transformer`` .npz layout (``embedding/kernel``,
  ``Transformer/encoderblock_{i}/MultiHeadDotProductAttention_1/...``).
  Proven by loading it into a fresh timm model with timm's own loader
  (``VisionTransformer.load_pretrained``) and reproducing the logits.
* ``NAME.expected.npz``: ``images`` (4, 32, 32, 3) float32 pixel values in
  [0, 255], ``logits`` (4, 5), ``features`` (4, 32) = pooled pre-head
  feature. All ``*.expected.npz`` are ``np.savez_compressed`` (``np.load``
  reads them as usual); the weight ``.npz`` files are plain ``np.savez``.
* ``vit_prelogits.npz`` / ``.expected.npz``: the vit_token weights in the
  original layout plus a representation layer ``pre_logits`` (32 -> 24,
  Dense then tanh) and a head (24 -> 5). timm dropped that layer, so the
  expected logits are computed in float64 NumPy from timm's pooled feature:
  ``tanh(f @ pre_kernel + pre_bias) @ head_kernel + head_bias``; its
  expected file also has ``features`` (f) and ``pre_logits`` (the tanh).
* ``vit_bigvision.npz`` / ``.expected.npz``: the vit_gap weights in
  big_vision's layout, stacked ("scan") blocks: ``params/`` prefix,
  ``params/pos_embedding``, ``params/Transformer/encoderblock/...`` with a
  leading depth axis, ``MultiHeadDotProductAttention_0``, ``LayerNorm_0/1``,
  ``MlpBlock_0``. Proven with timm's loader like ``NAME.npz`` (the unstacked
  ``encoderblock_{i}`` variant is proven too, but not kept).
* ``vit_token.hf.safetensors`` / ``.hf.config.json`` / ``.hf.expected.npz``:
  a Hugging Face ``ViTForImageClassification`` as ``save_pretrained``
  writes it (the Hub's key names: ``vit.encoder.layer.{i}.attention.
  attention.query.weight``, ...), its config.json, and its ``logits``
  and ``features`` (final-LayerNorm class token). Proven by
  ``from_pretrained`` on the local folder.
* ``vit_token.hf_base.safetensors`` / ``.hf_base.expected.npz``: the same
  model's ``.vit`` submodule alone (``ViTModel`` naming without the ``vit.``
  prefix; it has no pooler), with ``features``.
* ``manifest.json``: every file, its configuration, its arrays' shapes and
  the library versions.
"""

import json
import math
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

# Never reach for a hub: everything here is made locally.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import timm  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import load_file as load_safetensors  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.models.vision_transformer import VisionTransformer  # noqa: E402
from transformers import ViTConfig  # noqa: E402
from transformers import ViTForImageClassification  # noqa: E402
from transformers import ViTModel  # noqa: E402

HERE = Path(__file__).resolve().parent
TOL = 1e-6

COMMON = dict(
    img_size=32,
    patch_size=8,
    embed_dim=32,
    depth=2,
    num_heads=4,
    mlp_ratio=2,
    num_classes=5,
)
TIMM_CONFIGS = {
    "vit_token": dict(COMMON, class_token=True, global_pool="token"),
    "vit_gap": dict(
        COMMON, class_token=False, global_pool="avg", fc_norm=False
    ),
}
SEEDS = {"vit_token": 1, "vit_gap": 2, "prelogits": 3, "hf": 4}
PRE_LOGITS_SIZE = 24
HF_CONFIG = dict(
    image_size=32,
    patch_size=8,
    num_channels=3,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    hidden_act="gelu",
    layer_norm_eps=1e-6,
    qkv_bias=True,
    num_labels=5,
)
VERSIONS = {
    "python": sys.version.split()[0],
    "torch": torch.__version__,
    "timm": timm.__version__,
    "transformers": transformers.__version__,
    "safetensors": safetensors.__version__,
    "numpy": np.__version__,
}

manifest = {}


def check(ok, message):
    """Fail loudly (and unlike ``assert``, also under ``python -O``)."""
    if not ok:
        raise SystemExit(f"make_checkpoints.py: CHECK FAILED: {message}")


def max_diff(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    check(a.shape == b.shape, f"shape {a.shape} != {b.shape}")
    return float(np.max(np.abs(a - b)))


def to_numpy(t):
    return t.detach().cpu().numpy().astype(np.float32)


def shapes(arrays):
    return {k: list(np.shape(v)) for k, v in arrays.items()}


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


def write_npz(filename, arrays, compressed=False):
    """float32 .npz; weights uncompressed (as the JAX checkpoints are)."""
    arrays = {
        k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()
    }
    with open(HERE / filename, "wb") as f:  # exact name, no added suffix
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
    with np.load(HERE / filename, allow_pickle=False) as back:
        check(sorted(back.files) == sorted(arrays), f"{filename} keys")
    return arrays


def check_activations_and_norms(model, label):
    """LayerNorm eps 1e-6 everywhere and the MLP's GELU is the exact one."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    check(norms, f"{label}: no LayerNorm found")
    for m in norms:
        check(m.eps == 1e-6, f"{label}: LayerNorm eps {m.eps} != 1e-6")
    x = torch.linspace(-4, 4, 101, dtype=torch.float64)
    exact = 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))
    if isinstance(model, VisionTransformer):
        act = model.blocks[0].mlp.act
    else:
        act = model.vit.layers[0].mlp.activation_fn
    check(max_diff(act(x), exact) < 1e-12, f"{label}: GELU is not exact")


def perturb_(model, seed):
    """Move every parameter away from its initialisation, seeded."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            before = p.clone()
            std = 0.2 if "norm" in name else 0.1  # LayerNorm: scale != 1
            p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))
            check(bool((p != before).all()), f"{name} not perturbed")


def make_images():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(4, 32, 32, 3)).astype(np.float32)
    x = torch.from_numpy(images / 127.5 - 1).permute(0, 3, 1, 2).contiguous()
    check(x.dtype == torch.float32 and x.shape == (4, 3, 32, 32), "input")
    return images, x


def new_timm(config, seed):
    torch.manual_seed(seed)
    model = VisionTransformer(**config).eval()
    check_activations_and_norms(model, "timm")
    return model


@torch.no_grad()
def timm_outputs(model, x):
    tokens = model.forward_features(x)
    features = model.forward_head(tokens, pre_logits=True)
    logits = model.forward_head(tokens)
    check(max_diff(logits, model(x)) == 0.0, "forward_head != forward")
    return {"logits": to_numpy(logits), "features": to_numpy(features)}


def jax_layout(model, layout):
    """A timm ViT's weights as the JAX .npz layouts that timm's loader reads.

    layout: "original" (google-research/vision_transformer), "big_vision"
    (unstacked encoderblock_{i}) or "big_vision_scan" (stacked blocks).
    """
    sd = {k: to_numpy(v) for k, v in model.state_dict().items()}
    dim = sd["patch_embed.proj.weight"].shape[0]
    heads = model.blocks[0].attn.num_heads
    head_dim = dim // heads
    big_vision = layout.startswith("big_vision")
    pre = "params/" if big_vision else ""
    mha, ln2, mlp = (
        ("MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
        if big_vision
        else ("MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    )

    out = {
        pre + "embedding/kernel": sd["patch_embed.proj.weight"].transpose(
            2, 3, 1, 0
        ),  # HWIO
        pre + "embedding/bias": sd["patch_embed.proj.bias"],
    }
    if "cls_token" in sd:
        out[pre + "cls"] = sd["cls_token"]
    pos_key = (
        "pos_embedding"
        if big_vision
        else "Transformer/posembed_input/pos_embedding"
    )
    out[pre + pos_key] = sd["pos_embed"]

    blocks = []
    for i in range(len(model.blocks)):
        b = f"blocks.{i}."
        qkv_w, qkv_b = sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"]
        blk = {
            "LayerNorm_0/scale": sd[b + "norm1.weight"],
            "LayerNorm_0/bias": sd[b + "norm1.bias"],
        }
        for j, name in enumerate(("query", "key", "value")):
            w = qkv_w[j * dim : (j + 1) * dim]  # (out, in), out = (heads, hd)
            blk[f"{mha}/{name}/kernel"] = w.T.reshape(dim, heads, head_dim)
            blk[f"{mha}/{name}/bias"] = qkv_b[j * dim : (j + 1) * dim].reshape(
                heads, head_dim
            )
        blk[f"{mha}/out/kernel"] = sd[b + "attn.proj.weight"].T.reshape(
            heads, head_dim, dim
        )
        blk[f"{mha}/out/bias"] = sd[b + "attn.proj.bias"]
        blk[f"{ln2}/scale"] = sd[b + "norm2.weight"]
        blk[f"{ln2}/bias"] = sd[b + "norm2.bias"]
        for r in range(2):
            blk[f"{mlp}/Dense_{r}/kernel"] = sd[b + f"mlp.fc{r + 1}.weight"].T
            blk[f"{mlp}/Dense_{r}/bias"] = sd[b + f"mlp.fc{r + 1}.bias"]
        blocks.append(blk)

    if layout == "big_vision_scan":
        for key in blocks[0]:
            out[pre + "Transformer/encoderblock/" + key] = np.stack(
                [blk[key] for blk in blocks]
            )
    else:
        for i, blk in enumerate(blocks):
            for key, value in blk.items():
                out[pre + f"Transformer/encoderblock_{i}/" + key] = value

    out[pre + "Transformer/encoder_norm/scale"] = sd["norm.weight"]
    out[pre + "Transformer/encoder_norm/bias"] = sd["norm.bias"]
    out[pre + "head/kernel"] = sd["head.weight"].T
    out[pre + "head/bias"] = sd["head.bias"]
    return {
        k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()
    }


def prove_timm_loads(path, config, reference, x, expected_logits, label):
    """timm's own .npz loader, on a fresh model, reproduces the reference."""
    fresh = new_timm(config, seed=12345)
    fresh.load_pretrained(str(path))  # -> timm's _load_weights
    fresh.eval()
    ref_sd = reference.state_dict()
    for k, v in fresh.state_dict().items():
        check(torch.equal(v, ref_sd[k]), f"{label}: {k} differs after load")
    d = max_diff(timm_outputs(fresh, x)["logits"], expected_logits)
    check(d <= TOL, f"{label}: logits differ by {d}")
    print(
        f"  proof ok: timm load_pretrained({path.name}) reproduces "
        f"the logits (max diff {d:.1e})"
    )


def make_timm(name, images, x):
    config = TIMM_CONFIGS[name]
    model = new_timm(config, SEEDS[name])
    perturb_(model, SEEDS[name])
    outputs = timm_outputs(model, x)
    check(np.all(np.isfinite(outputs["logits"])), "finite logits")
    check(float(np.std(outputs["logits"])) > 0.1, "logits too flat")

    timm_config = dict(
        config,
        class_name="timm.models.VisionTransformer",
        norm_layer="timm LayerNorm (default eps 1e-6)",
        act_layer="nn.GELU (exact)",
    )

    fname = f"{name}.timm.safetensors"
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(HERE / fname))
    record(
        fname,
        "timm VisionTransformer.state_dict() (safetensors.torch.save_file)",
        timm_config,
        state,
    )

    fname = f"{name}.npz"
    weights = write_npz(fname, jax_layout(model, "original"))
    record(
        fname,
        "the same weights in the original google-research/"
        "vision_transformer .npz layout (np.savez, float32); loaded by "
        "timm's VisionTransformer.load_pretrained",
        timm_config,
        weights,
    )
    prove_timm_loads(HERE / fname, config, model, x, outputs["logits"], fname)

    fname = f"{name}.expected.npz"
    arrays = write_npz(fname, dict(images=images, **outputs), True)
    record(
        fname,
        "inputs and timm outputs: images = pixel values in "
        "[0, 255] NHWC (model input images / 127.5 - 1, NCHW); logits "
        "(no softmax); features = forward_head(forward_features(x), "
        "pre_logits=True)",
        timm_config,
        arrays,
    )
    return model, outputs, weights


def make_prelogits(model, outputs, weights, images, x):
    """vit_token + the original code's representation layer (Dense, tanh)."""
    rng = np.random.default_rng(SEEDS["prelogits"])
    dim = weights["head/kernel"].shape[0]
    classes = weights["head/kernel"].shape[1]
    extra = {
        "pre_logits/kernel": rng.normal(0, 0.5, (dim, PRE_LOGITS_SIZE)),
        "pre_logits/bias": rng.normal(0, 0.1, (PRE_LOGITS_SIZE,)),
        "head/kernel": rng.normal(0, 0.5, (PRE_LOGITS_SIZE, classes)),
        "head/bias": rng.normal(0, 0.1, (classes,)),
    }
    extra = {k: v.astype(np.float32) for k, v in extra.items()}
    arrays = dict(weights)
    arrays.update(extra)
    fname = "vit_prelogits.npz"
    arrays = write_npz(fname, arrays)

    f = outputs["features"].astype(np.float64)
    rep = np.tanh(
        f @ extra["pre_logits/kernel"].astype(np.float64)
        + extra["pre_logits/bias"].astype(np.float64)
    )
    logits = rep @ extra["head/kernel"].astype(np.float64) + extra[
        "head/bias"
    ].astype(np.float64)

    # Proof that the backbone part is the original layout: timm's loader on
    # a headless fresh model (timm skips pre_logits/*, and the head since
    # the model has none) gives the same pooled feature.
    headless = dict(TIMM_CONFIGS["vit_token"], num_classes=0)
    fresh = new_timm(headless, seed=12345)
    fresh.load_pretrained(str(HERE / fname))
    fresh.eval()
    with torch.no_grad():
        d = max_diff(fresh(x), outputs["features"])
    check(d <= TOL, f"{fname}: pooled features differ by {d}")
    print(
        f"  proof ok: timm load_pretrained({fname}) on a headless model "
        f"reproduces the pooled feature (max diff {d:.1e})"
    )

    config = dict(
        TIMM_CONFIGS["vit_token"],
        representation_size=24,
        note="representation layer: Dense(24) then tanh, "
        "then the head Dense(5); timm has no such layer",
    )
    record(
        fname,
        "vit_token's weights (original layout) with pre_logits/"
        "kernel|bias (32, 24)|(24,) and head/kernel|bias (24, 5)|(5,) "
        "replaced by random seeded values",
        config,
        arrays,
    )
    fname = "vit_prelogits.expected.npz"
    arrays = write_npz(
        fname,
        dict(
            images=images,
            logits=logits,
            features=outputs["features"],
            pre_logits=rep,
        ),
        True,
    )
    record(
        fname,
        "images; logits = tanh(f @ pre_kernel + pre_bias) @ "
        "head_kernel + head_bias in float64 NumPy (stored float32), f = "
        "timm vit_token's pooled feature (features); pre_logits = the "
        "tanh output",
        config,
        arrays,
    )


def make_bigvision(model, outputs, images, x):
    config = TIMM_CONFIGS["vit_gap"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vit_bigvision_unstacked.npz"
        np.savez(path, **jax_layout(model, "big_vision"))
        prove_timm_loads(
            path,
            config,
            model,
            x,
            outputs["logits"],
            "big_vision unstacked (not kept)",
        )

    fname = "vit_bigvision.npz"
    weights = write_npz(fname, jax_layout(model, "big_vision_scan"))
    prove_timm_loads(HERE / fname, config, model, x, outputs["logits"], fname)
    record(
        fname,
        "vit_gap's weights in big_vision's layout, stacked (scan) "
        "blocks with a leading depth axis, params/ prefix; loaded by "
        "timm's VisionTransformer.load_pretrained",
        dict(config, class_name="timm.models.VisionTransformer"),
        weights,
    )
    fname = "vit_bigvision.expected.npz"
    arrays = write_npz(fname, dict(images=images, **outputs), True)
    record(fname, "same as vit_gap.expected.npz", config, arrays)


def make_hf(images, x):
    torch.manual_seed(SEEDS["hf"])
    model = ViTForImageClassification(ViTConfig(**HF_CONFIG)).eval()
    check_activations_and_norms(model, "hf")
    check(model.vit.pooler is None, "ViTForImageClassification.vit pooler")
    perturb_(model, SEEDS["hf"])
    with torch.no_grad():
        out = model.vit(pixel_values=x)
        tokens = to_numpy(out.last_hidden_state)
        logits = to_numpy(model(pixel_values=x).logits)
    check(float(np.std(logits)) > 0.1, "hf logits too flat")
    features = tokens[:, 0]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # save_pretrained writes the Hub's key names; in transformers 5 the
        # in-memory state_dict() uses other (renamed) ones.
        model.save_pretrained(tmp / "cls")
        model.vit.save_pretrained(tmp / "base")
        for sub, fname in (
            ("cls", "vit_token.hf.safetensors"),
            ("base", "vit_token.hf_base.safetensors"),
        ):
            shutil.copyfile(tmp / sub / "model.safetensors", HERE / fname)
        cfg = json.loads((tmp / "cls" / "config.json").read_text())
        cfg.pop("transformers_version", None)
        (HERE / "vit_token.hf.config.json").write_text(
            json.dumps(cfg, indent=2, sort_keys=True) + "\n"
        )

        # Proofs: transformers' own loader reproduces the outputs.
        loaded, info = ViTForImageClassification.from_pretrained(
            tmp / "cls", output_loading_info=True
        )
        check(not any(info.values()), f"hf loading info: {info}")
        base, info = ViTModel.from_pretrained(
            tmp / "base", add_pooling_layer=False, output_loading_info=True
        )
        check(not any(info.values()), f"hf base loading info: {info}")
        with torch.no_grad():
            d1 = max_diff(loaded.eval()(pixel_values=x).logits, logits)
            d2 = max_diff(base.eval()(pixel_values=x).last_hidden_state, tokens)
        check(d1 <= TOL and d2 <= TOL, f"hf reload differs: {d1} {d2}")
        print(
            f"  proof ok: from_pretrained reproduces the HF logits "
            f"({d1:.1e}) and the base model's tokens ({d2:.1e})"
        )

    cls_keys = load_safetensors(str(HERE / "vit_token.hf.safetensors"))
    base_keys = load_safetensors(str(HERE / "vit_token.hf_base.safetensors"))
    check(
        "vit.encoder.layer.0.attention.attention.query.weight" in cls_keys,
        "hf file does not use the Hub's key names",
    )
    check(
        set(base_keys)
        == {k[len("vit.") :] for k in cls_keys if k.startswith("vit.")},
        "hf base keys",
    )

    hf_config = dict(
        HF_CONFIG,
        class_name="transformers.ViTForImageClassification(ViTConfig(...))",
    )
    record(
        "vit_token.hf.safetensors",
        "Hugging Face ViTForImageClassification"
        " as save_pretrained writes model.safetensors (the Hub's key "
        "names)",
        hf_config,
        cls_keys,
    )
    record(
        "vit_token.hf.config.json",
        "the config.json save_pretrained wrote (transformers_version removed)",
        hf_config,
    )
    record(
        "vit_token.hf_base.safetensors",
        "its .vit submodule alone "
        "(ViTModel naming, no 'vit.' prefix, no pooler: "
        "ViTForImageClassification builds it with add_pooling_layer="
        "False)",
        hf_config,
        base_keys,
    )
    fname = "vit_token.hf.expected.npz"
    arrays = write_npz(
        fname, dict(images=images, logits=logits, features=features), True
    )
    record(
        fname,
        "images; logits = model(pixel_values=x).logits; features "
        "= model.vit(x).last_hidden_state[:, 0] (after the final "
        "LayerNorm)",
        hf_config,
        arrays,
    )
    fname = "vit_token.hf_base.expected.npz"
    arrays = write_npz(fname, dict(images=images, features=features), True)
    record(
        fname,
        "images; features of the base model, as in vit_token.hf.expected.npz",
        hf_config,
        arrays,
    )


def main():
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    images, x = make_images()

    print("timm vit_token")
    token_model, token_out, token_weights = make_timm("vit_token", images, x)
    print("timm vit_gap")
    gap_model, gap_out, _ = make_timm("vit_gap", images, x)
    # timm's gap model with fc_norm=False: final LayerNorm on every token,
    # then the mean (the original code's classifier='gap').
    with torch.no_grad():
        t = gap_model.blocks(gap_model._pos_embed(gap_model.patch_embed(x)))
        mean = gap_model.norm(t).mean(dim=1)
    check(max_diff(mean, gap_out["features"]) <= TOL, "gap != norm, mean")

    print("vit_prelogits")
    make_prelogits(token_model, token_out, token_weights, images, x)
    print("vit_bigvision")
    make_bigvision(gap_model, gap_out, images, x)
    print("Hugging Face vit_token")
    make_hf(images, x)

    manifest_out = {
        "about": "Tiny reference checkpoints made by make_checkpoints.py "
        "(developer-side, needs torch/timm/transformers).",
        "versions": VERSIONS,
        "inputs": "images: np.random.default_rng(0).integers(0, 256, "
        "(4, 32, 32, 3)) as float32; model input "
        "torch.from_numpy(images / 127.5 - 1).permute(0, 3, 1, 2)",
        "files": dict(sorted(manifest.items())),
    }
    text = json.dumps(manifest_out, indent=1)
    # One line per array: {"shape": [4, 5], "dtype": "float32"}.
    text = re.sub(
        r"\{\s+\"shape\": \[([\d,\s]*)\],\s+\"dtype\": "
        r"(\"\w+\")\s+\}",
        lambda m: (
            '{"shape": [%s], "dtype": %s}'
            % (", ".join(re.findall(r"\d+", m.group(1))), m.group(2))
        ),
        text,
    )
    (HERE / "manifest.json").write_text(text + "\n")

    total = 0
    for path in sorted(HERE.iterdir()):
        if path.name in manifest or path.name == "manifest.json":
            total += path.stat().st_size
            print(f"{path.stat().st_size:>8}  {path.name}")
    print(f"{total:>8}  total")
    check(total < 1_100_000, "golden files are too large")


if __name__ == "__main__":
    main()
