"""Make the reference checkpoints of the gated (SwiGLU) MLPs and SigLIP 2.

DEVELOPER-SIDE ONLY: it needs torch, timm and transformers, which
keras_vit does not depend on; the test suite (tests/weights/
test_swiglu_parity.py) reads only the small files it writes, which are
committed. Run from the repository root (no network; nothing is
downloaded):

    /path/to/venv/bin/python tests/golden/make_swiglu_checkpoints.py
    /path/to/venv/bin/python tests/golden/make_swiglu_checkpoints.py \
        --full DIR    # the full-width architectures, into DIR

Last run with torch 2.14.1 (CPU), timm 1.0.31, transformers 5.25.0.
Deterministic (fixed seeds, one CPU thread).

Each model is the library's own class with a published model's arguments,
every parameter moved away from its initialisation (+ N(0, 0.1), N(0,
0.2) for norms), in eval mode, without a head (features):

* ``timm_giant``: timm's ``vit_giant_patch14_dinov2`` (``SwiGLUPacked``:
  one ``mlp.fc1``, the gate first; SiLU; LayerScale).
* ``timm_swiglu``: timm's ``VisionTransformer`` with
  ``mlp_layer=SwiGLU`` (``mlp.fc1_g``, ``mlp.fc1_x``) and SiLU, LayerScale
  1e-5, the options of ``vit_giant_patch14_dinov2`` otherwise.
* ``hf_giant``: transformers' ``Dinov2Model`` with
  ``facebook/dinov2-giant``'s config (``use_swiglu_ffn=True``,
  ``mlp_ratio=4``: ``Dinov2SwiGLUFFN``), written by ``save_pretrained``
  (the Hub's names: ``mlp.weights_in``, ``mlp.weights_out``).
* ``timm_siglip2``: timm's ``vit_base_patch16_siglip_224``, the
  architecture of its ``.v2_webli`` (SigLIP 2) weights (no class token,
  the MAP head ``attn_pool``).

Tiny (shipped): patch 4, 16 px (a 4x4 grid), depth 2, 2 heads, width 24
(SigLIP 2: 32); each model's own MLP rule on that width (timm giant:
``mlp_ratio`` 2.66667 * 2, fc1 128 wide, H = 64; transformers: 2/3 of 4 *
24 rounded up to a multiple of 8, H = 64; timm SwiGLU: H = 2 * 24).
With ``--full DIR``: the published widths, heads, patch sizes and image
sizes (giant: 1536 wide, 24 heads, H = 4096, patch 14, 518 px; SigLIP 2
B/16: 768, 224 px), the giants with 2 blocks instead of 40 (each block
the giant's; 40 would be 4.4 GB and minutes a call here), batch 1, run
in float64 (at these widths the perturbed weights give features up to 54
whose float32 rounding alone is 3e-4), for
``tests/golden/check_swiglu_full.py``, which builds keras_vit's models in
float64 too (not shipped).

Files, for each NAME:

* ``swiglu_NAME.safetensors``: the state dict (transformers: its
  ``save_pretrained`` file).
* ``swiglu_NAME.expected.npz``: ``images`` (B, S, S, 3) in [0, 255] (the
  model input is ``(images / 255 - mean) / std``, ImageNet's);
  ``tokens``: timm's ``forward_features`` / transformers'
  ``last_hidden_state``; ``pooled``: timm's
  ``forward_head(pre_logits=True)`` / transformers' ``pooler_output``.
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import timm
import torch
import transformers
from safetensors.torch import save_file
from timm.layers import SwiGLU
from timm.models.vision_transformer import VisionTransformer

HERE = Path(__file__).resolve().parent
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
TINY = dict(patch_size=4, embed_dim=24, depth=2, num_heads=2)
#: facebook/dinov2-giant's config.json, but for its 40 layers.
HF_GIANT = dict(
    hidden_size=1536,
    num_attention_heads=24,
    mlp_ratio=4,
    use_swiglu_ffn=True,
    patch_size=14,
    image_size=518,
    layerscale_value=1.0,
)


def check(ok, message):
    if not ok:  # unlike assert, also under python -O
        raise SystemExit(f"make_swiglu_checkpoints.py: FAILED: {message}")


def perturb_(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if "norm" in name else 0.1
            p.add_(std * torch.randn(p.shape, generator=generator))


def timm_giant(tiny):
    extra = dict(TINY, img_size=16) if tiny else dict(depth=2)
    return timm.create_model(
        "vit_giant_patch14_dinov2", pretrained=False, num_classes=0, **extra
    )


def timm_swiglu(tiny):
    dims = (
        dict(TINY, img_size=16, mlp_ratio=2)
        if tiny
        else dict(
            patch_size=14, embed_dim=1536, depth=2, num_heads=24, img_size=518
        )
    )
    return VisionTransformer(
        **dims,
        init_values=1e-5,
        mlp_layer=SwiGLU,
        act_layer=torch.nn.SiLU,
        num_classes=0,
    )


def timm_siglip2(tiny):
    extra = dict(TINY, embed_dim=32, img_size=16) if tiny else {}
    return timm.create_model(
        "vit_base_patch16_siglip_224", pretrained=False, num_classes=0, **extra
    )


def hf_giant(tiny):
    if tiny:
        config = dict(HF_GIANT, hidden_size=24, num_attention_heads=2)
        config.update(patch_size=4, image_size=16)
    else:
        config = dict(HF_GIANT)
    config = transformers.Dinov2Config(num_hidden_layers=2, **config)
    return transformers.Dinov2Model(config)


MODELS = {
    "timm_giant": timm_giant,
    "timm_swiglu": timm_swiglu,
    "hf_giant": hf_giant,
    "timm_siglip2": timm_siglip2,
}


def outputs(model, images):
    dtype = next(model.parameters()).dtype  # float64 with --full
    x = (images.astype(np.float64) / 255 - MEAN) / STD
    x = torch.from_numpy(x.transpose(0, 3, 1, 2)).to(dtype)
    with torch.no_grad():
        if isinstance(model, transformers.PreTrainedModel):
            out = model(pixel_values=x)
            return out.last_hidden_state.numpy(), out.pooler_output.numpy()
        tokens = model.forward_features(x)
        return tokens.numpy(), model.forward_head(tokens, True).numpy()


def write_weights(model, path):
    if not isinstance(model, transformers.PreTrainedModel):
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(path))
        return
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        shutil.copy(Path(folder) / "model.safetensors", path)


def write(directory, name, tiny):
    torch.manual_seed(0)
    model = MODELS[name](tiny)
    perturb_(model, 1)
    model.eval()
    size = 16 if tiny else model_size(model)
    rng = np.random.default_rng(2)
    images = rng.uniform(0, 255, (2 if tiny else 1, size, size, 3))
    images = images.astype(np.float32)
    if not tiny:
        model.double()
    tokens, pooled = outputs(model, images)
    check(np.isfinite(tokens).all(), f"{name}: outputs not finite")
    write_weights(model, directory / f"swiglu_{name}.safetensors")
    np.savez_compressed(
        directory / f"swiglu_{name}.expected.npz",
        images=images,
        tokens=tokens,
        pooled=pooled,
    )
    print(name, tokens.shape, pooled.shape)


def model_size(model):
    if isinstance(model, transformers.PreTrainedModel):
        return model.config.image_size
    return model.patch_embed.img_size[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    directory = args.full or HERE
    directory.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        write(directory, name, tiny=args.full is None)


if __name__ == "__main__":
    sys.exit(main())
