"""Make the tiny reference checkpoints of DINOv3 (timm and transformers).

DEVELOPER-SIDE ONLY, like make_family_checkpoints.py: it needs torch, timm
and transformers, which keras_vit does not depend on; the test suite
(tests/weights/test_dinov3_parity.py) reads only the small files it
writes, which are committed. Run from the repository root (no network;
nothing is downloaded):

    /path/to/venv/bin/python tests/golden/make_dinov3_checkpoints.py
    /path/to/venv/bin/python tests/golden/make_dinov3_checkpoints.py \
        --full DIR        # the full-size architectures, into DIR
    ... make_dinov3_checkpoints.py [--full DIR] NAME ...  # only these

Last run with torch 2.14.1 (CPU), timm 1.0.31, transformers 5.25.0.
Deterministic (fixed seeds, one CPU thread).

Each model is the library's own class with the published models'
arguments (timm's `vit_small_patch16_dinov3`, `..._qkvb`,
`vit_base_patch16_dinov3`, the SwiGLU `vit_small_plus_patch16_dinov3`;
transformers' `DINOv3ViTConfig` defaults: query and value biases, no key
bias, and with its gated MLP, `hf_gated`), every parameter moved away from its
initialisation (+ N(0, 0.1), N(0, 0.2) for norms; LayerScale + N(0, 0.1)
on its 1e-5), in eval mode (no coordinate augmentation), timm with
`global_pool="token"` (upstream DINOv3's class-token pooling).
Tiny: patch 4, width 32, depth 2, 2 heads (head width 16), MLP 64, 4
registers, 16 px.

Files, for each NAME (`timm_s`, `timm_s_qkvb`, `hf`, `timm_splus`,
`hf_gated`; `MODELS` says each one's arguments):

* ``dinov3_NAME.safetensors``: ``model.state_dict()`` (transformers:
  without the non-persistent buffers, as `save_pretrained`).
* ``dinov3_NAME.expected.npz``: ``images`` (2, 16, 16, 3) in [0, 255]
  (the model input is ``(images / 255 - mean) / std``, ImageNet's);
  ``tokens`` = the normalised tokens (timm's ``forward_features``,
  transformers' ``last_hidden_state``), ``pooled`` (timm's
  ``forward_head(pre_logits=True)``, transformers' ``pooler_output``);
  and the same at a non-square size, ``images_wide`` (2, 12, 20, 3),
  ``tokens_wide``, ``pooled_wide`` (a 3x5 grid: the rotary table is
  computed from the grid, nothing is resampled).

With ``--full DIR`` the full-size S/16, B/16, L/16, S+/16 and H+/16 (2
of its 32 blocks) of timm, and S/16, S+/16 and H+/16 (2 blocks) of
transformers are written there instead, at 256 px and 192x320, batch 1,
for `tests/golden/check_dinov3_full.py` (not shipped: 88 MB-1.2 GB);
``--float64`` builds and runs them in float64 (for L/16, whose 24 blocks'
float32 rounding in PyTorch alone is about 1.6e-4).
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import timm
import torch
import transformers
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
TINY_TIMM = dict(patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2)
TINY_HF = dict(
    patch_size=4,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
)


def check(ok, message):
    if not ok:  # unlike assert, also under python -O
        raise SystemExit(f"make_dinov3_checkpoints.py: FAILED: {message}")


def perturb_(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if "norm" in name else 0.1
            p.add_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))


def images(seed, height, width, batch):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 255, (batch, height, width, 3)).astype(np.float32)


def to_input(x):
    x = torch.from_numpy(((x / 255 - MEAN) / STD).transpose(0, 3, 1, 2))
    return x.to(torch.get_default_dtype())


def new_timm(name, img_size, tiny, **kwargs):
    torch.manual_seed(0)
    extra = {**(TINY_TIMM if tiny else {}), **kwargs}
    model = timm.create_model(
        name, pretrained=False, img_size=img_size, global_pool="token", **extra
    )
    perturb_(model, 1)
    return model.eval()


def timm_outputs(model, x):
    with torch.no_grad():
        tokens = model.forward_features(to_input(x))
        pooled = model.forward_head(tokens, pre_logits=True)
    return tokens.numpy(), pooled.numpy()


def new_hf(img_size, tiny, **kwargs):
    torch.manual_seed(0)
    config = transformers.DINOv3ViTConfig(
        image_size=img_size,
        num_register_tokens=4,
        **{**(TINY_HF if tiny else {}), **kwargs},
    )
    model = transformers.DINOv3ViTModel(config)
    perturb_(model, 2)
    return model.eval()


def hf_outputs(model, x):
    with torch.no_grad():
        out = model(pixel_values=to_input(x))
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


#: transformers' gated DINOv3s (`facebook/dinov3-vits16plus-*`,
#: `-vith16plus-*` config.json: SiLU, `intermediate_size` as is).
HF_GATED = dict(use_gated_mlp=True, hidden_act="silu")
#: H+ at full width, 2 of its 32 blocks (the file would be 3.4 GB).
H_PLUS = dict(
    hidden_size=1280,
    num_attention_heads=20,
    intermediate_size=5120,
    num_hidden_layers=2,
)

#: name -> (kind, architecture, tiny-only arguments, full-only arguments).
#: The tiny S+ has MLP ratio 2.3: `int(32 * 2.3) = 73`, which timm's
#: `swiglu_align_to=8` rounds up to 80 (the full S+ and H+ are multiples
#: of 8 already); the tiny gated transformers model 72 (its
#: `intermediate_size` is taken as is).
MODELS = {
    "timm_s": ("timm", "vit_small_patch16_dinov3", {}, {}),
    "timm_s_qkvb": ("timm", "vit_small_patch16_dinov3_qkvb", {}, {}),
    "timm_b": ("timm", "vit_base_patch16_dinov3", {}, {}),
    "timm_l": ("timm", "vit_large_patch16_dinov3", {}, {}),
    "timm_splus": (
        "timm",
        "vit_small_plus_patch16_dinov3",
        {"mlp_ratio": 2.3},
        {},
    ),
    "timm_hplus_qkvb": (
        "timm",
        "vit_huge_plus_patch16_dinov3_qkvb",
        {},
        {"depth": 2},
    ),
    "hf": ("hf", None, {}, {}),
    "hf_gated": ("hf", None, {**HF_GATED, "intermediate_size": 72}, {}),
    "hf_splus": ("hf", None, {}, {**HF_GATED, "intermediate_size": 1536}),
    "hf_hplus": ("hf", None, {}, {**HF_GATED, **H_PLUS}),
}


def write(directory, name, size, wide, tiny):
    kind, arch, tiny_args, full_args = MODELS[name]
    extra = tiny_args if tiny else full_args
    if kind == "timm":
        model = new_timm(arch, size, tiny, **extra)
    else:
        model = new_hf(size, tiny, **extra)
    outputs = timm_outputs if kind == "timm" else hf_outputs
    arrays = {"images": images(3, size, size, 2 if tiny else 1)}
    arrays["images_wide"] = images(4, *wide, 2 if tiny else 1)
    arrays["tokens"], arrays["pooled"] = outputs(model, arrays["images"])
    arrays["tokens_wide"], arrays["pooled_wide"] = outputs(
        model, arrays["images_wide"]
    )
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    check(
        "pos_embed" not in state and "rope.periods" not in state,
        f"{name}: no position table in the file",
    )
    save_file(state, str(directory / f"dinov3_{name}.safetensors"))
    np.savez_compressed(directory / f"dinov3_{name}.expected.npz", **arrays)
    print(name, {k: v.shape for k, v in arrays.items()})


TINY = ("timm_s", "timm_s_qkvb", "hf", "timm_splus", "hf_gated")
FULL = (
    "timm_s",
    "timm_b",
    "timm_s_qkvb",
    "hf",
    "timm_l",
    "timm_splus",
    "timm_hplus_qkvb",
    "hf_splus",
    "hf_hplus",
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", type=Path)
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("names", nargs="*", help="default: all of them")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.float64:  # weights and outputs (the images stay float32)
        torch.set_default_dtype(torch.float64)
    if args.full is None:
        for name in args.names or TINY:
            write(HERE, name, 16, (12, 20), tiny=True)
    else:
        for name in args.names or FULL:
            write(args.full, name, 256, (192, 320), tiny=False)
    print("versions:", sys.version.split()[0], torch.__version__)


if __name__ == "__main__":
    main()
