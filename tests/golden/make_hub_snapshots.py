"""Make tiny Hub snapshot folders (tests/golden/hub/NAME/) of ten real
repos, in the layout each publisher's library writes, with the outputs
of that library on them.

DEVELOPER-SIDE ONLY: needs torch, timm and transformers (the reference
environment: torch 2.14.1 CPU, timm 1.0.31, transformers 5.25.0); the
tests read only the small files it writes. No network access; nothing is
downloaded. Run from the repository root:

    /work/ref-venv/bin/python tests/golden/make_hub_snapshots.py [NAME ...]

(NAMEs: only those folders; none: all.)

Each folder's `config.json` is what the publisher's library writes for
the real repo's configuration (its field values, from the repos named
below), and `preprocessor_config.json` the repo's own, with the model
shrunk: width 16, 2 layers, 2 heads, MLP 64 (and,
for the two-tower models, a text tower of 64 tokens). Every parameter is
moved away from its initialisation (+ N(0, 0.1); LayerScale N(0, 0.5));
eval mode, eager attention, one thread, fixed seeds.

* `timm_dinov2_reg4`: timm `vit_small_patch14_reg4_dinov2.lvd142m`,
  written by timm's own `save_for_hf` (518 px, ImageNet mean/std,
  crop_pct 1.0, bicubic; no head).
* `dinov2_small`: transformers `facebook/dinov2-small` (`Dinov2Model`,
  config image_size 518; `BitImageProcessor`: resize shortest edge 256,
  centre crop 224, bicubic, ImageNet mean/std). The expected outputs are
  on 224 px inputs, where transformers interpolates the position
  embeddings at run time.
* `clip_b16`: transformers `openai/clip-vit-base-patch16` (`CLIPModel`:
  quick GELU, eps 1e-5, projection_dim 512 shrunk to 8;
  `CLIPImageProcessor`: shortest edge 224, crop 224, bicubic, OpenAI's
  mean/std). Expected: the image embeddings (`visual_projection` of the
  pooled output).
* `siglip_b16`: transformers `google/siglip-base-patch16-224`
  (`SiglipModel`: gelu_pytorch_tanh, eps 1e-6, MAP head;
  `SiglipImageProcessor`: 224x224, bicubic, mean/std 0.5). Expected: the
  vision tower's `pooler_output`.
* `timm_dinov3_small`: timm `vit_small_patch16_dinov3.lvd1689m` (`Eva`:
  RoPE, no qkv bias, 4 registers), written by `save_for_hf` (256 px,
  ImageNet mean/std, crop_pct 1.0, bicubic; no head), built with
  `global_pool="token"` (recorded in its `model_args`), the class token
  as keras_vit pools DINOv3.
* `dinov3_vits16`: transformers `facebook/dinov3-vits16-pretrain-lvd1689m`
  (`DINOv3ViTModel`: RoPE theta 100, query and value biases, no key
  bias, 4 registers, eps 1e-5; `DINOv3ViTImageProcessorFast`: 224x224,
  bilinear, ImageNet mean/std). Expected: `pooler_output`.
* `timm_deit_distilled`: timm `deit_small_distilled_patch16_224.fb_in1k`
  (`VisionTransformerDistilled`: class and distillation tokens, two heads
  averaged at inference), by `save_for_hf` (224 px, ImageNet mean/std,
  crop_pct 0.875, bicubic), with a 4-class head and its `label_names`.
* `timm_deit3_small`: timm `deit3_small_patch16_224.fb_in1k`
  (`no_embed_class`, LayerScale), by `save_for_hf` (224 px, ImageNet
  mean/std, crop_pct 0.9, bicubic), with a 4-class head.
* `deit_small_distilled`: transformers
  `facebook/deit-small-distilled-patch16-224`
  (`DeiTForImageClassificationWithTeacher`, eps 1e-12, `id2label`;
  `DeiTFeatureExtractor`'s config: size 256, crop 224, bicubic, ImageNet
  mean/std), a 4-class head.
* `clip_laion_b16`: transformers `laion/CLIP-ViT-B-16-laion2B-s34B-b88K`
  (`CLIPModel` with `hidden_act: "gelu"`, as LAION's and DataComp's
  open_clip conversions write it, where OpenAI's is quick GELU; eps 1e-5;
  the processor config as `clip_b16`'s). Expected: the image embeddings.

For a classifier (the DeiTs), `expected.npz` also holds `logits`, and
`output` is their softmax (keras_vit's default `classifier_activation`).
* `timm_dinov3_splus`: timm `vit_small_plus_patch16_dinov3.lvd1689m`
  (`Eva` with a SwiGLU MLP, `swiglu_align_to=8`) as `timm_dinov3_small`,
  its `mlp_ratio` 4.3 (in `model_args`): `int(16 * 4.3) = 68` rounded up
  to 72 wide.
* `dinov3_vits16plus`: transformers `facebook/dinov3-vits16plus-pretrain-
  lvd1689m` as `dinov3_vits16`, with its `use_gated_mlp: true`,
  `hidden_act: "silu"` (intermediate_size 1536 in the repo, 72 here).

`expected.npz` in each: `output` (1, ...) for the input
`np.random.default_rng(0).random((1, S, S, 3), dtype=np.float32)`
([0, 1] pixels; S the size the model is fed), normalised with the
folder's mean and std before the model (NCHW for PyTorch).
"""

import json
import pathlib
import shutil
import sys

import numpy as np
import timm
import torch
import transformers
from timm.models._hub import save_for_hf

HERE = pathlib.Path(__file__).resolve().parent / "hub"
SMALL = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2)


def _perturb(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            scale = 0.5 if "gamma" in name or "lambda1" in name else 0.1
            param.add_(torch.randn(param.shape, generator=generator) * scale)
    return model.eval()


def _input(size, mean, std):
    pixels = np.random.default_rng(0).random((1, size, size, 3), np.float32)
    normalised = (pixels - np.float32(mean)) / np.float32(std)
    return torch.from_numpy(normalised.transpose(0, 3, 1, 2).copy())


def _save_expected(folder, out, classifier=False):
    """`output` (a classifier's softmax, with its `logits`)."""
    if not classifier:
        np.savez_compressed(folder / "expected.npz", output=out.numpy())
        return
    np.savez_compressed(
        folder / "expected.npz",
        output=out.softmax(-1).numpy(),
        logits=out.numpy(),
    )


def _write(folder, config, processor, output, classifier=False):
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if processor is not None:
        text = json.dumps(processor, indent=2) + "\n"
        (folder / "preprocessor_config.json").write_text(text)
    _save_expected(folder, output, classifier)


def _timm(name, pretrained, seed, size, labels=None, **model_args):
    """A `save_for_hf` folder of timm's `pretrained` shrunk (no head, or
    a head of `labels`)."""
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    model_args = {
        **dict(embed_dim=16, depth=2, num_heads=2, mlp_ratio=4.0),
        **model_args,
    }
    model = timm.create_model(
        pretrained,
        pretrained=False,
        num_classes=len(labels or ()),
        **model_args,
    )
    _perturb(model, seed)
    save_for_hf(
        model,
        folder,
        model_config=dict(label_names=labels) if labels else None,
        model_args=model_args,
        safe_serialization=True,
    )
    cfg = model.pretrained_cfg
    with torch.no_grad():
        out = model(_input(size, cfg["mean"], cfg["std"]))
    _save_expected(folder, out, classifier=bool(labels))
    for extra in folder.glob("*.bin"):
        extra.unlink()


def timm_dinov2_reg4():
    _timm("timm_dinov2_reg4", "vit_small_patch14_reg4_dinov2.lvd142m", 1, 518)


IMAGENET = dict(
    image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]
)


def dinov2_small():
    folder = HERE / "dinov2_small"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # facebook/dinov2-small config.json, shrunk (hidden_size 384,
    # num_attention_heads 6, num_hidden_layers 12 in the repo).
    config = {
        "architectures": ["Dinov2Model"],
        "attention_probs_dropout_prob": 0.0,
        "drop_path_rate": 0.0,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": 16,
        "image_size": 518,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-06,
        "layerscale_value": 1.0,
        "mlp_ratio": 4,
        "model_type": "dinov2",
        "num_attention_heads": 2,
        "num_channels": 3,
        "num_hidden_layers": 2,
        "patch_size": 14,
        "qkv_bias": True,
        "torch_dtype": "float32",
        "transformers_version": "4.31.0.dev0",
        "use_swiglu_ffn": False,
    }
    processor = {
        "crop_size": {"height": 224, "width": 224},
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        **IMAGENET,
        "image_processor_type": "BitImageProcessor",
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 256},
    }
    model = transformers.Dinov2Model(transformers.Dinov2Config(**config))
    _perturb(model, 2).save_pretrained(folder)
    with torch.no_grad():
        x = _input(224, IMAGENET["image_mean"], IMAGENET["image_std"])
        out = model(pixel_values=x).pooler_output
    _write(folder, config, processor, out)


def _two_tower(name, kind, vision, text, processor, seed, **shared):
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    config_class = getattr(transformers, f"{kind}Config")
    config = config_class(text_config=text, vision_config=vision, **shared)
    model = getattr(transformers, f"{kind}Model")(config)
    _perturb(model, seed).save_pretrained(folder)
    x = _input(224, processor["image_mean"], processor["image_std"])
    with torch.no_grad():
        pooled = model.vision_model(pixel_values=x).pooler_output
        if kind == "CLIP":
            pooled = model.visual_projection(pooled)
    written = json.loads((folder / "config.json").read_text())
    _write(folder, written, processor, pooled)


CLIP_PROCESSOR = {
    "crop_size": 224,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor",
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "size": 224,
}


def clip_b16():
    # openai/clip-vit-base-patch16: vision hidden_size 768, 12 heads, 12
    # layers, intermediate 3072, patch 16, image 224, projection_dim 512,
    # hidden_act quick_gelu (CLIPVisionConfig's default, written there).
    vision = dict(
        SMALL, intermediate_size=64, patch_size=16, image_size=224,
        hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=8,
    )  # fmt: skip
    text = dict(SMALL, intermediate_size=64, vocab_size=64, projection_dim=8)
    _two_tower("clip_b16", "CLIP", vision, text, CLIP_PROCESSOR, 3)


def siglip_b16():
    # google/siglip-base-patch16-224: vision hidden_size 768, 12 heads,
    # 12 layers, intermediate 3072, patch 16, image 224 (its
    # vision_config omits most of these, left at SiglipVisionConfig's
    # defaults; save_pretrained here writes every field, and the
    # reader's defaults are tested apart in tests/weights/test_hub.py).
    vision = dict(SMALL, intermediate_size=64, patch_size=16, image_size=224)
    text = dict(SMALL, intermediate_size=64, vocab_size=64)
    processor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "SiglipImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "SiglipProcessor",
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 224, "width": 224},
    }
    _two_tower("siglip_b16", "Siglip", vision, text, processor, 4)


def timm_dinov3_small():
    _timm(
        "timm_dinov3_small",
        "vit_small_patch16_dinov3.lvd1689m",
        5,
        256,
        global_pool="token",
    )


def timm_dinov3_splus():
    _timm(
        "timm_dinov3_splus",
        "vit_small_plus_patch16_dinov3.lvd1689m",
        7,
        256,
        global_pool="token",
        mlp_ratio=4.3,
    )


def dinov3_vits16plus():
    dinov3_vits16(
        "dinov3_vits16plus",
        use_gated_mlp=True,
        hidden_act="silu",
        intermediate_size=72,
    )


def dinov3_vits16(name="dinov3_vits16", **changes):
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # facebook/dinov3-vits16-pretrain-lvd1689m config.json's fields,
    # shrunk (hidden_size 384, intermediate_size 1536, 6 heads, 12 layers
    # in the repo).
    config = transformers.DINOv3ViTConfig(
        hidden_size=16,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_register_tokens=4,
        layerscale_value=1.0,
        query_bias=True,
        key_bias=False,
        value_bias=True,
        rope_theta=100.0,
        image_size=224,
        patch_size=16,
        layer_norm_eps=1e-5,
    )
    for key, value in changes.items():
        setattr(config, key, value)
    processor = {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        **IMAGENET,
        "image_processor_type": "DINOv3ViTImageProcessorFast",
        "resample": 2,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 224, "width": 224},
    }
    model = transformers.DINOv3ViTModel(config)
    _perturb(model, 6).save_pretrained(folder)
    with torch.no_grad():
        x = _input(224, IMAGENET["image_mean"], IMAGENET["image_std"])
        out = model(pixel_values=x).pooler_output
    written = json.loads((folder / "config.json").read_text())
    _write(folder, written, processor, out)


LABELS = ["ant", "bee", "cat", "dog"]


def timm_deit_distilled():
    _timm(
        "timm_deit_distilled",
        "deit_small_distilled_patch16_224.fb_in1k",
        7,
        224,
        labels=LABELS,
    )


def timm_deit3_small():
    _timm("timm_deit3_small", "deit3_small_patch16_224.fb_in1k", 8, 224, LABELS)


def deit_small_distilled():
    folder = HERE / "deit_small_distilled"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # facebook/deit-small-distilled-patch16-224 config.json, shrunk
    # (hidden_size 384, 6 heads, 12 layers, intermediate 1536, the 1000
    # ImageNet classes in id2label in the repo).
    config = transformers.DeiTConfig(
        **SMALL,
        intermediate_size=64,
        image_size=224,
        patch_size=16,
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
        architectures=["DeiTForImageClassificationWithTeacher"],
    )
    processor = {
        "crop_size": 224,
        "do_center_crop": True,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "DeiTFeatureExtractor",
        **IMAGENET,
        "resample": 3,
        "size": 256,
    }
    model = transformers.DeiTForImageClassificationWithTeacher(config)
    _perturb(model, 9).save_pretrained(folder)
    with torch.no_grad():
        x = _input(224, IMAGENET["image_mean"], IMAGENET["image_std"])
        out = model(pixel_values=x).logits
    written = json.loads((folder / "config.json").read_text())
    _write(folder, written, processor, out, classifier=True)


def clip_laion_b16():
    # laion/CLIP-ViT-B-16-laion2B-s34B-b88K: vision hidden_size 768, 12
    # heads, 12 layers, intermediate 3072, patch 16, image 224,
    # projection_dim 512, hidden_act "gelu" (written: not
    # CLIPVisionConfig's default quick_gelu).
    vision = dict(
        SMALL, intermediate_size=64, patch_size=16, image_size=224,
        hidden_act="gelu", layer_norm_eps=1e-5, projection_dim=8,
    )  # fmt: skip
    text = dict(
        SMALL, intermediate_size=64, vocab_size=32, projection_dim=8,
        max_position_embeddings=8, hidden_act="gelu",
    )  # fmt: skip
    _two_tower(
        "clip_laion_b16", "CLIP", vision, text, CLIP_PROCESSOR, 10,
        projection_dim=8,
    )  # fmt: skip


MAKERS = {
    "timm_dinov2_reg4": timm_dinov2_reg4,
    "dinov2_small": dinov2_small,
    "clip_b16": clip_b16,
    "siglip_b16": siglip_b16,
    "timm_dinov3_small": timm_dinov3_small,
    "dinov3_vits16": dinov3_vits16,
    "timm_deit_distilled": timm_deit_distilled,
    "timm_deit3_small": timm_deit3_small,
    "deit_small_distilled": deit_small_distilled,
    "clip_laion_b16": clip_laion_b16,
    "timm_dinov3_splus": timm_dinov3_splus,
    "dinov3_vits16plus": dinov3_vits16plus,
}


def main(names):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name in names or MAKERS:
        MAKERS[name]()
    for path in sorted(HERE.rglob("*")):
        if path.is_file():
            print(path.relative_to(HERE), path.stat().st_size)


if __name__ == "__main__":
    main(sys.argv[1:])
