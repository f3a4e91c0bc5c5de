"""Make the references of transformers' run-time position-embedding
resampling, `interpolate_pos_encoding`.

DEVELOPER-SIDE ONLY, like make_hf_family_checkpoints.py (whose models it
imports): it needs torch and transformers, which keras_vit does not depend
on; it is not run by the test suite or by CI. The tests
(tests/weights/test_transformers_resampling.py) only read the small files
it writes, which are committed. Run it from anywhere (no network access
is needed; no weights are downloaded; it writes next to itself):

    /path/to/venv/bin/python \
        tests/golden/make_transformers_resample_references.py

Last run with: torch 2.14.1+cu130 (CPU), transformers 5.25.0, safetensors
0.8.0, numpy 2.4.6, Python 3.11.7. Deterministic (fixed seeds, one CPU
thread); it writes next to itself.

In transformers 5.25 every class below resamples in
`<Class>Embeddings.interpolate_pos_encoding` (models/vit/modeling_vit.py,
deit/modeling_deit.py, dinov2/modeling_dinov2.py,
dinov2_with_registers/modeling_dinov2_with_registers.py,
clip/modeling_clip.py, siglip/modeling_siglip.py) with
`nn.functional.interpolate(grid, size=(height // patch, width // patch),
mode="bicubic", align_corners=False)`: to a size, never a scale factor,
and no offset; `Dinov2WithRegistersEmbeddings` adds `antialias=True`. The
prefix entries (DeiT's two, SigLIP's none) are kept; the source grid is
taken to be square.

* ``transformers_resample.expected.npz`` (compressed): for each
  MODEL_TYPE (the config's `model_type`: ``vit``, ``deit``, ``dinov2``,
  ``dinov2_with_registers``, ``clip_vision_model``,
  ``siglip_vision_model``) and CASE: ``MODEL_TYPE/CASE/posemb``, a normal
  random table (1, prefix + rows * cols, 4), and ``MODEL_TYPE/CASE/out``,
  the class's own ``interpolate_pos_encoding`` of it. CASES:
  ``8x8_to_12x12`` (larger), ``8x8_to_5x5`` (smaller: the antialiasing
  matters), ``8x8_to_3x6`` (a non-square target), ``4x4_to_2x8`` (the
  same count, another shape: transformers resamples).
* ``transformers_resample_family.expected.npz`` (compressed): the
  committed ``family_NAME.hf.safetensors`` (16 px, a 4x4 grid; NAME
  ``dinov2``, ``dinov2_reg`` (4 registers), ``clip``, ``siglip``) in its
  transformers class at 16 px, called with ``interpolate_pos_encoding=
  True`` on images of SIZE ``12`` (3x3) and ``8x12`` (2x3):
  ``NAME/images_SIZE`` (2, h, w, 3) in [0, 255] (model input ``images /
  127.5 - 1``, NCHW) and ``NAME/last_hidden_state_SIZE``,
  ``NAME/pooler_output_SIZE``. (The 24 px outputs of the same call are in
  ``family_NAME.hf.expected.npz`` as ``*_interpolated_24``.)
* ``transformers_resample_manifest.json``: the cases, shapes and versions.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_hf_family_checkpoints as hf  # noqa: E402

T = transformers
TINY = dict(hidden_size=4, num_attention_heads=2, patch_size=4)
#: model_type: (embeddings class, config class, prefix entries in the table)
EMBEDDINGS = {
    "vit": (
        T.models.vit.modeling_vit.ViTEmbeddings,
        T.ViTConfig,
        1,
    ),
    "deit": (
        T.models.deit.modeling_deit.DeiTEmbeddings,
        T.DeiTConfig,
        2,
    ),
    "dinov2": (
        T.models.dinov2.modeling_dinov2.Dinov2Embeddings,
        T.Dinov2Config,
        1,
    ),
    "dinov2_with_registers": (
        T.models.dinov2_with_registers.modeling_dinov2_with_registers.Dinov2WithRegistersEmbeddings,
        T.Dinov2WithRegistersConfig,
        1,
    ),
    "clip_vision_model": (
        T.models.clip.modeling_clip.CLIPVisionEmbeddings,
        T.CLIPVisionConfig,
        1,
    ),
    "siglip_vision_model": (
        T.models.siglip.modeling_siglip.SiglipVisionEmbeddings,
        T.SiglipVisionConfig,
        0,
    ),
}
#: name: (source grid side, target grid)
CASES = {
    "8x8_to_12x12": (8, (12, 12)),
    "8x8_to_5x5": (8, (5, 5)),
    "8x8_to_3x6": (8, (3, 6)),
    "4x4_to_2x8": (4, (2, 8)),
}
FAMILIES = ("dinov2", "dinov2_reg", "clip", "siglip")
SIZES = {"12": (12, 12), "8x12": (8, 12)}
check = hf.check


def table_of(module):
    """The module's position table as a (1, T, D) parameter."""
    if hasattr(module, "position_embeddings"):
        return module.position_embeddings
    return module.position_embedding.weight


@torch.no_grad()
def table_cases():
    rng = np.random.default_rng(11)
    arrays = {}
    for model_type, (cls, config_cls, prefix) in EMBEDDINGS.items():
        check(config_cls.model_type == model_type, model_type)
        for case, (side, (rows, cols)) in CASES.items():
            config = config_cls(image_size=4 * side, **TINY)
            module = cls(config).eval()
            posemb = rng.normal(size=(1, prefix + side * side, 4))
            posemb = posemb.astype(np.float32)
            table = table_of(module)
            table.copy_(torch.from_numpy(posemb).reshape(table.shape))
            tokens = torch.zeros(1, prefix + rows * cols, 4)
            out = module.interpolate_pos_encoding(tokens, 4 * rows, 4 * cols)
            check(out.shape == (1, prefix + rows * cols, 4), case)
            arrays[f"{model_type}/{case}/posemb"] = posemb
            arrays[f"{model_type}/{case}/out"] = hf.to_numpy(out)
    return arrays


def load(name):
    """The committed `family_NAME.hf.safetensors` in its class at 16 px,
    read by `from_pretrained` (transformers' own renaming, if any)."""
    model = hf.new_model(name, 16)
    with tempfile.TemporaryDirectory() as tmp:
        model.config.save_pretrained(tmp)
        weights = (HERE / f"family_{name}.hf.safetensors").read_bytes()
        (Path(tmp) / "model.safetensors").write_bytes(weights)
        model = type(model).from_pretrained(tmp, attn_implementation="eager")
    return model.eval()


@torch.no_grad()
def family_outputs(name, seed):
    model = load(name)
    with np.load(HERE / f"family_{name}.hf.expected.npz") as recorded:
        _, x = hf.images(16, hf_seed(name))
        same = hf.outputs(model, x)["pooler_output"]
        diff = np.abs(same - recorded["pooler_output"]).max()
        check(diff < 1e-5, f"{name}: not the recorded model")
    # DINOv2's forward takes no interpolate_pos_encoding: it always does.
    dinov2 = name.startswith("dinov2")
    interpolate = {} if dinov2 else {"interpolate_pos_encoding": True}
    arrays = {}
    rng = np.random.default_rng(seed)
    for size, (h, w) in SIZES.items():
        pixels = rng.integers(0, 256, size=(2, h, w, 3)).astype(np.float32)
        x = torch.from_numpy(pixels / 127.5 - 1).permute(0, 3, 1, 2)
        result = hf.outputs(model, x.contiguous(), f"_{size}", **interpolate)
        arrays[f"{name}/images_{size}"] = pixels
        for key in ("last_hidden_state", "pooler_output"):
            arrays[f"{name}/{key}_{size}"] = result[f"{key}_{size}"]
    return arrays


def hf_seed(name):
    """The seed make_hf_family_checkpoints.py made NAME's images with."""
    return list(hf.FAMILIES).index(name) + 61


def write(filename, arrays):
    arrays = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
    with open(HERE / filename, "wb") as f:
        np.savez_compressed(f, **arrays)
    return {k: list(v.shape) for k, v in arrays.items()}


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    files = {
        "transformers_resample.expected.npz": dict(
            description="MODEL_TYPE/CASE/posemb and MODEL_TYPE/CASE/out: "
            "the class's own interpolate_pos_encoding of it; CASE: (source "
            "grid side, target grid)",
            cases={k: [v[0], list(v[1])] for k, v in CASES.items()},
            prefix={k: v[2] for k, v in EMBEDDINGS.items()},
            arrays=write("transformers_resample.expected.npz", table_cases()),
        )
    }
    outputs = {}
    for seed, name in enumerate(FAMILIES, start=81):
        outputs.update(family_outputs(name, seed))
    fname = "transformers_resample_family.expected.npz"
    files[fname] = dict(
        description="family_NAME.hf.safetensors at 16 px called with "
        "interpolate_pos_encoding=True on NAME/images_SIZE",
        arrays=write(fname, outputs),
    )
    out = {
        "about": "transformers' interpolate_pos_encoding, recorded by "
        "make_transformers_resample_references.py (developer-side).",
        "versions": hf.VERSIONS,
        "files": files,
    }
    path = HERE / "transformers_resample_manifest.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    total = sum((HERE / f).stat().st_size for f in files)
    print(f"{total:>8}  total")
    check(total < 200_000, "golden files are too large")


if __name__ == "__main__":
    main()
