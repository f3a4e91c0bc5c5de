"""Make the tiny big_vision SigLIP two-tower `.npz` goldens.

DEVELOPER-SIDE ONLY, like make_checkpoints.py: it needs torch and timm,
which keras_vit does not depend on; it is not run by the test suite or by
CI. The tests (tests/weights/test_big_vision.py) only read the small files
it writes, which are committed. Run it from the repository root (no
network access is needed; no weights are downloaded):

    /work/timm-venv/bin/python tests/golden/make_bigvision_siglip.py

Last run with: torch 2.14.1 (CPU), timm 1.0.31, numpy, Python 3.11.
Deterministic (fixed seeds, one CPU thread); it writes next to itself.

SigLIP's own releases are big_vision two-tower files: the image tower under
`params/img/`, the text tower under `params/txt/`, the sigmoid loss's
temperature and bias as `params/t`, `params/b`. The image tower is
big_vision's `vit.py` with `pool_type="map"`: no class token, position
embeddings for the patches only, a `MAPHead_0` (probe, attention, LayerNorm,
MLP) and `head`, the projection to the shared embedding. The model here is
timm's own `VisionTransformer` of that structure (`class_token=False,
global_pool="map", act_layer="gelu_tanh"`: big_vision's flax `nn.gelu` is
tanh-approximated), tiny: 32x32 images, patch 8 (a 4x4 grid), width 32,
depth 2, 4 heads, MLP 64 (in the MAP head too), LayerNorm eps 1e-6, and a
16-wide `head` (the image embedding). Every parameter is moved away from
its initialisation (+ N(0, 0.1), N(0, 0.2) for norms), eval mode.

Its weights are written in big_vision's names and layouts (flax kernels
`(in, out)`, attention kernels `(D, heads, D / heads)`, the patch
embedding an HWIO conv kernel), with a small random text tower of
big_vision's names (its own `Transformer/encoderblock_*/
MultiHeadDotProductAttention_0/...`, so that a reader that does not select
the image tower finds two) and the two scalars. Each file is proven by
timm's own reader of these files (`vision_transformer._load_weights`,
prefix `params/img/`, its `MAPHead_0` block) loading it into a fresh model:
every tensor equal, and the same outputs.

Files:

* ``bigvision_siglip.npz``: one `Transformer/encoderblock_{i}/...` entry
  per block (text tower likewise).
* ``bigvision_siglip_scan.npz``: the same weights as big_vision's
  `nn.scan` writes them: `Transformer/encoderblock/...`, each tensor
  stacked on a leading depth axis (text tower likewise).
* ``bigvision_siglip.expected.npz`` (compressed): ``images`` (2, 32, 32,
  3) pixel values in [0, 255] (model input ``images / 127.5 - 1``, NCHW),
  ``features`` = ``forward_head(forward_features(x), pre_logits=True)``
  (the MAP head's output), ``logits`` = ``model(x)`` (``head``'s output:
  the image embedding, no activation).
* ``bigvision_siglip_manifest.json``: every file, its configuration and
  shapes, the library versions.
"""

import json
import sys
from pathlib import Path

import numpy as np
import timm
import torch
from timm.models.vision_transformer import VisionTransformer
from timm.models.vision_transformer import _load_weights

HERE = Path(__file__).resolve().parent
CONFIG = dict(
    img_size=32,
    patch_size=8,
    embed_dim=32,
    depth=2,
    num_heads=4,
    mlp_ratio=2,
    num_classes=16,
    class_token=False,
    global_pool="map",
    act_layer="gelu_tanh",
)
SEED = 71
MHA = "MultiHeadDotProductAttention_0"
VERSIONS = {
    "python": sys.version.split()[0],
    "torch": torch.__version__,
    "timm": timm.__version__,
    "numpy": np.__version__,
}


def check(ok, message):
    """Fails loudly (unlike `assert`, also under `python -O`)."""
    if not ok:
        raise SystemExit(f"make_bigvision_siglip.py: FAILED: {message}")


def max_diff(a, b):
    return float(np.max(np.abs(np.float64(a) - np.float64(b))))


def to_numpy(t):
    return t.detach().cpu().numpy().astype(np.float32)


def new_model(seed):
    torch.manual_seed(seed)
    return VisionTransformer(**CONFIG).eval()


def perturb_(model, seed):
    """Every parameter moved away from its initialisation, seeded."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if "norm" in name else 0.1
            p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))


def check_structure(model):
    """SigLIP's image tower: MAP head, no class token, tanh GELU."""
    sd = model.state_dict()
    check("attn_pool.latent" in sd and "cls_token" not in sd, "structure")
    check(model.pos_embed.shape[1] == 16, "pos_embed: the 16 patches only")
    x = torch.linspace(-4, 4, 11)
    want = torch.nn.functional.gelu(x, approximate="tanh")
    for act in (model.blocks[0].mlp.act, model.attn_pool.mlp.act):
        check(max_diff(act(x), want) < 1e-7, "activation is not tanh GELU")


def dense(sd, name):
    """A torch Linear as flax's `{kernel (in, out), bias}`."""
    return {
        "kernel": sd[f"{name}.weight"].T,
        "bias": sd[f"{name}.bias"],
    }


def attention(weights, biases, proj, heads):
    """Separate (out, in) q/k/v torch weights (a dict by part) and the
    output projection as flax's `MultiHeadDotProductAttention`."""
    out = {}
    for part, weight in weights.items():
        dim = weight.shape[1]
        out[f"{part}/kernel"] = weight.T.reshape(dim, heads, -1)
        out[f"{part}/bias"] = biases[part].reshape(heads, -1)
    out["out/kernel"] = proj["kernel"].reshape(
        heads, -1, proj["kernel"].shape[1]
    )
    out["out/bias"] = proj["bias"]
    return out


def prefixed(prefix, arrays):
    return {f"{prefix}{k}": v for k, v in arrays.items()}


def block(sd, i, heads):
    """timm's block `i` as big_vision's `encoderblock_{i}` (names under
    it)."""
    b = f"blocks.{i}."
    qkv_w = np.split(sd[b + "attn.qkv.weight"], 3)
    qkv_b = np.split(sd[b + "attn.qkv.bias"], 3)
    parts = ("query", "key", "value")
    out = {
        "LayerNorm_0/scale": sd[b + "norm1.weight"],
        "LayerNorm_0/bias": sd[b + "norm1.bias"],
        "LayerNorm_1/scale": sd[b + "norm2.weight"],
        "LayerNorm_1/bias": sd[b + "norm2.bias"],
    }
    out.update(
        prefixed(
            f"{MHA}/",
            attention(
                dict(zip(parts, qkv_w)),
                dict(zip(parts, qkv_b)),
                dense(sd, b + "attn.proj"),
                heads,
            ),
        )
    )
    for r in range(2):
        mlp = dense(sd, f"{b}mlp.fc{r + 1}")
        out.update(prefixed(f"MlpBlock_0/Dense_{r}/", mlp))
    return out


def map_head(sd, heads):
    """timm's `attn_pool` as big_vision's `MAPHead_0` (names under it)."""
    key, value = np.split(sd["attn_pool.kv.weight"], 2)
    key_bias, value_bias = np.split(sd["attn_pool.kv.bias"], 2)
    out = {"probe": sd["attn_pool.latent"]}
    out.update(
        prefixed(
            f"{MHA}/",
            attention(
                {
                    "query": sd["attn_pool.q.weight"],
                    "key": key,
                    "value": value,
                },
                {
                    "query": sd["attn_pool.q.bias"],
                    "key": key_bias,
                    "value": value_bias,
                },
                dense(sd, "attn_pool.proj"),
                heads,
            ),
        )
    )
    out["LayerNorm_0/scale"] = sd["attn_pool.norm.weight"]
    out["LayerNorm_0/bias"] = sd["attn_pool.norm.bias"]
    for r in range(2):
        mlp = dense(sd, f"attn_pool.mlp.fc{r + 1}")
        out.update(prefixed(f"MlpBlock_0/Dense_{r}/", mlp))
    return out


def encoder(blocks, scan):
    """Blocks (each a dict of names under it) as `Transformer/...`: one
    `encoderblock_{i}` each, or stacked on depth under `encoderblock`
    (big_vision's `nn.scan`)."""
    if scan:
        return {
            f"Transformer/encoderblock/{k}": np.stack([b[k] for b in blocks])
            for k in blocks[0]
        }
    out = {}
    for i, b in enumerate(blocks):
        out.update(prefixed(f"Transformer/encoderblock_{i}/", b))
    return out


def image_tower(model, scan):
    """timm's ViT as big_vision's `vit.py` `pool_type="map"` image tower
    (names under `params/img/`)."""
    sd = {k: to_numpy(v) for k, v in model.state_dict().items()}
    heads = model.blocks[0].attn.num_heads
    out = {
        "embedding/kernel": sd["patch_embed.proj.weight"].transpose(2, 3, 1, 0),
        "embedding/bias": sd["patch_embed.proj.bias"],
        "pos_embedding": sd["pos_embed"],
        "Transformer/encoder_norm/scale": sd["norm.weight"],
        "Transformer/encoder_norm/bias": sd["norm.bias"],
        "head/kernel": sd["head.weight"].T,
        "head/bias": sd["head.bias"],
    }
    out.update(encoder([block(sd, i, heads) for i in range(2)], scan))
    out.update(prefixed("MAPHead_0/", map_head(sd, heads)))
    return out


def text_tower(scan, seed=SEED + 1):
    """A small random text tower in big_vision's `text_transformer.py`
    names (width 8, 2 heads, 2 blocks, 10 tokens, 16-wide head): its own
    attention blocks, which are not the image model's."""
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.normal(0, 0.1, shape).astype(np.float32)

    blocks = []
    for _ in range(2):
        b = {"LayerNorm_0/scale": r(8), "LayerNorm_0/bias": r(8)}
        for part in ("query", "key", "value"):
            b[f"{MHA}/{part}/kernel"] = r(8, 2, 4)
            b[f"{MHA}/{part}/bias"] = r(2, 4)
        b[f"{MHA}/out/kernel"], b[f"{MHA}/out/bias"] = r(2, 4, 8), r(8)
        b["MlpBlock_0/Dense_0/kernel"] = r(8, 16)
        b["MlpBlock_0/Dense_0/bias"] = r(16)
        b["MlpBlock_0/Dense_1/kernel"] = r(16, 8)
        b["MlpBlock_0/Dense_1/bias"] = r(8)
        blocks.append(b)
    out = {"Embed_0/embedding": r(10, 8), "pos_embedding": r(1, 4, 8)}
    out.update(encoder(blocks, scan))
    out["Transformer/encoder_norm/scale"] = r(8)
    out["Transformer/encoder_norm/bias"] = r(8)
    out["head/kernel"], out["head/bias"] = r(8, 16), r(16)
    return out


def two_tower(model, scan):
    """The whole two-tower file: image tower, text tower, `t` and `b`."""
    out = prefixed("params/img/", image_tower(model, scan))
    out.update(prefixed("params/txt/", text_tower(scan)))
    out["params/t"] = np.array([np.log(10.0)], np.float32)
    out["params/b"] = np.array([-10.0], np.float32)
    return {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}


@torch.no_grad()
def outputs(model, x):
    tokens = model.forward_features(x)
    features = model.forward_head(tokens, pre_logits=True)
    logits = model.forward_head(tokens)
    check(max_diff(logits, model(x)) == 0.0, "forward_head != forward")
    return {"features": to_numpy(features), "logits": to_numpy(logits)}


@torch.no_grad()
def prove(path, model, x, expected):
    """timm's own big_vision reader loads the file into a fresh model:
    every tensor equal, the same outputs."""
    fresh = new_model(seed=12345)
    _load_weights(fresh, str(path))
    fresh.eval()
    reference = model.state_dict()
    for k, v in fresh.state_dict().items():
        check(torch.equal(v, reference[k]), f"{path.name}: {k} differs")
    got = outputs(fresh, x)
    for k, v in expected.items():
        d = max_diff(got[k], v)
        check(d == 0.0, f"{path.name}: {k} differs by {d}")
    print(f"  proof ok: timm _load_weights({path.name}) reproduces the model")


def write_npz(filename, arrays, compressed=False):
    with open(HERE / filename, "wb") as f:  # exact name, no added suffix
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
    return {k: str(np.shape(v)) for k, v in arrays.items()}


def images(seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(2, 32, 32, 3)).astype(np.float32)
    x = torch.from_numpy(pixels / 127.5 - 1).permute(0, 3, 1, 2).contiguous()
    return pixels, x


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = new_model(SEED)
    check_structure(model)
    perturb_(model, SEED)
    pixels, x = images(SEED)
    expected = outputs(model, x)
    check(float(expected["logits"].std()) > 0.1, "outputs too flat")
    config = {**CONFIG, "class_name": "timm.models.VisionTransformer"}
    manifest = {}
    for fname, scan in (
        ("bigvision_siglip.npz", False),
        ("bigvision_siglip_scan.npz", True),
    ):
        arrays = two_tower(model, scan)
        manifest[fname] = dict(
            description="big_vision SigLIP two-tower .npz (params/img/, "
            "params/txt/, params/t, params/b), "
            + ("scanned (stacked) blocks" if scan else "one entry a block")
            + "; read back by timm's _load_weights",
            config=config,
            arrays=write_npz(fname, arrays),
        )
        prove(HERE / fname, model, x, expected)
    fname = "bigvision_siglip.expected.npz"
    manifest[fname] = dict(
        description="images in [0, 255] NHWC (input images / 127.5 - 1, "
        "NCHW); features: the MAP head's output (forward_head(..., "
        "pre_logits=True)); logits: model(x), the head's (no activation)",
        arrays=write_npz(fname, dict(images=pixels, **expected), True),
    )
    out = {"versions": VERSIONS, "files": manifest}
    path = HERE / "bigvision_siglip_manifest.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    total = sum((HERE / f).stat().st_size for f in manifest)
    print(f"{total:>8}  total bytes")
    check(total < 400_000, "golden files are too large")


if __name__ == "__main__":
    main()
