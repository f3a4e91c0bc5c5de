"""Check the family presets' records against timm's full-size models.

DEVELOPER-SIDE ONLY (not run by the suite; nothing it writes is
committed). For each family preset, timm's own model of that name
(``timm.create_model(name, pretrained=False)``: its real configuration,
randomly initialised, every weight perturbed, LayerScale set to 0.3 so
the blocks count) is saved as ``.safetensors`` with one random input and
its output; then keras_vit builds the preset from that file (its record's
URL swapped for the local file) and must reproduce the output to 1e-4 and
the record's parameter count. This checks what the tiny goldens cannot:
the records' resolution, head, parameter count and ``vit_arguments`` for
the published architectures. No weights are downloaded.

    /path/to/timm-venv/bin/python tests/golden/check_family_presets.py make DIR
    PYTHONPATH=$PWD /path/to/keras-venv/bin/python \\
        tests/golden/check_family_presets.py check DIR

Last run (1 December 2026, timm 1.0.31): every preset within 4e-6, every
parameter count equal; the DINOv3 and EUPE presets (5 December 2026, timm
``global_pool="token"``): within 3.1e-6, counts equal (EUPE's keras_vit
count has the zero key biases timm keeps as a buffer: 2,304 more).
OpenAI's CLIP is checked against timm's
``vit_base_patch16_clip_quickgelu_224``: the same weights with the quick
GELU they were trained with (timm's ``vit_base_patch16_clip_224.openai``
runs them with the exact GELU, as its notes say). SigLIP is checked
against ``vit_base_patch16_siglip_224`` with ``act_layer='gelu_tanh'``
(``TIMM_ARGUMENTS``), the tanh GELU it was trained with: big_vision's
MlpBlock calls flax's ``nn.gelu`` (tanh-approximated by default),
transformers' SigLIP config says ``gelu_pytorch_tanh``, and timm's later
SigLIP models set it; that one model of timm's omits it, so against it
the record's missing activation passed (3 December 2026: SigLIP within
4e-6 with the tanh GELU; the exact GELU the record gave is off by 7e-4).
"""

import sys

import numpy as np

#: preset -> (timm model name, resolution, head width; 0: features)
CASES = {
    "vit_s16_deit_distilled_in1k": (
        "deit_small_distilled_patch16_224",
        224,
        1000,
    ),
    "vit_s16_deit3_in21k_ft_in1k": ("deit3_small_patch16_224", 224, 1000),
    "vit_s14_dinov2_lvd142m_518": ("vit_small_patch14_dinov2", 518, 0),
    "vit_s14_dinov2_reg4_lvd142m_518": (
        "vit_small_patch14_reg4_dinov2",
        518,
        0,
    ),
    "vit_b16_clip_openai": ("vit_base_patch16_clip_quickgelu_224", 224, 512),
    "vit_b16_siglip_webli": ("vit_base_patch16_siglip_224", 224, 0),
    "vit_s16_dinov3_lvd1689m_256": ("vit_small_patch16_dinov3", 256, 0),
    "vit_b16_dinov3_lvd1689m_256": ("vit_base_patch16_dinov3", 256, 0),
    "vit_ti16_eupe_lvd1689m_256": ("vit_tiny_patch16_dinov3_qkvb", 256, 0),
}

#: timm arguments beyond its model's own definition: what the checkpoint
#: was trained with where timm's definition omits it.
#: DINOv3's presets pool the class token, as Meta's DINOv3 does; timm's
#: `Eva` averages the patches unless told `global_pool="token"`.
TIMM_ARGUMENTS = {
    "vit_b16_siglip_webli": {"act_layer": "gelu_tanh"},
    "vit_s16_dinov3_lvd1689m_256": {"global_pool": "token"},
    "vit_b16_dinov3_lvd1689m_256": {"global_pool": "token"},
    "vit_ti16_eupe_lvd1689m_256": {"global_pool": "token"},
}


def make(folder):
    import timm
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    for preset, (name, size, classes) in CASES.items():
        model = timm.create_model(
            name,
            pretrained=False,
            num_classes=classes,
            **TIMM_ARGUMENTS.get(preset, {}),
        )
        model.eval()
        with torch.no_grad():
            for key, p in model.named_parameters():
                p.add_(0.02 * torch.randn(p.shape, generator=g))
                if key.split(".")[-1].startswith("gamma"):
                    p.fill_(0.3)
            x = torch.randn(1, 3, size, size, generator=g)
            y = model(x)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, f"{folder}/{preset}.safetensors")
        np.savez(
            f"{folder}/{preset}.npz",
            x=x.permute(0, 2, 3, 1).numpy(),
            y=y.numpy(),
        )
        print(preset, name, sum(p.numel() for p in model.parameters()))


def check(folder):
    from keras_vit import registry
    from keras_vit import resolver
    from keras_vit.registry import presets as records
    from keras_vit.weights import download

    download.CACHE_DIR = f"{folder}/cache"
    worst = 0.0
    for preset in CASES:
        record = registry.get_preset(preset)
        local = {**record, "url": f"file://{folder}/{preset}.safetensors"}
        records.PRESETS[records.PRESETS.index(record)] = local
        data = np.load(f"{folder}/{preset}.npz")
        x = data["x"]  # the normalised input timm took
        kwargs = {"include_preprocessing": False}
        if record["normalization"] is None:  # [-1, 1]: give it pixels
            x, kwargs = (x + 1) * 127.5, {}
        model = resolver.resolve_model(
            preset, classifier_activation=None, **kwargs
        )
        diff = float(np.max(np.abs(model.predict(x, verbose=0) - data["y"])))
        worst = max(worst, diff)
        params = model.count_params()
        print(preset, f"max diff {diff:.1e}", f"params {params:,}")
        assert params == record["params"], preset
    assert worst < 1e-4, worst


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
