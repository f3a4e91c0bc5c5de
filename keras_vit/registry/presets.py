"""Named presets: the released ViT checkpoints, one record each.

Names: every preset has a unique name, `"<model>_<name>"`, where `<model>`
is its variant's model name (`keras_vit.registry.model_name`: `"B/16"` ->
`"vit_b16"`, `"R50+B/16"` -> `"vit_r50_b16"`) and `<name>` its short name
among its variant's presets, `[<recipe>_]<pre-training>[_ft_<fine-tuning>]
[_<resolution>]`: a recipe where there is one (`augreg`, `augreg2`, `sam`,
`hf`), the data sets as `in21k` / `in1k`, and `_384` for the 384 px ones:
`"vit_b16_augreg_in21k_ft_in1k"`. The short name is an alias that a
builder's `weights=` takes (`ViT_B16(weights="augreg_in21k_ft_in1k")`);
the unique name is taken everywhere, alone (`ViT.from_preset(unique)`,
`keras_vit.resolver.resolve_model(unique)`) or with its variant's builder.

Each record holds every fact about its checkpoint (`FIELDS`); `PRESETS`
writes only what is each one's own, `_preset` fills in the rest (the
defaults: `DEFAULTS`, the short name's `SHORT_NAMES`, timm's evaluation
resize for the resolution):

- `unique_name`, `name`, `variant`: the unique and the short name above,
  and the variant it fits.
- `source`, `description`: who released it (the reader is chosen by the
  file's extension), in words.
- `url`, `sha256`: where it is published, and its digest where the
  publisher gives one (none of these do; a downloaded file is still checked
  tensor by tensor when it is loaded).
- `image_size`, `num_classes`, `representation_size`: what it was trained
  for (resolution, classes or `None` for a checkpoint without a head, such
  as DINOv2's and SigLIP's features, its pre-logits layer's width or
  `None`).
- `params`: its parameter count as a keras_vit model (head, pre-logits and
  resolution included; e.g. B/16 at 384 px is timm's published 86.86M).
- `vit_arguments`: `keras_vit.ViT` arguments beyond the variant's numbers
  that the checkpoint needs (e.g. `{"class_token": False, "pooling":
  "gap"}`); a model built for it takes them unless told otherwise.
- `normalization`: how the checkpoint's inputs were normalised (timm's
  `pretrained_cfg` mean and std): `None` for the paper's `[-1, 1]`, else
  `{"mean": (r, g, b), "std": (r, g, b)}` on `[0, 1]` pixels. A model built
  for the preset takes it as its `normalization` argument (unless told
  otherwise), which `include_preprocessing=True` applies to [0, 255] pixels.
- `image_resize`: how its evaluation resized images (`keras_vit.ViT`'s
  `image_resize`), which a model built for the preset takes (unless told
  otherwise) for inference and evaluation: that of whoever measured its
  `top1`; where none is published, timm's, where timm lists the file or
  its copy of it; else its publisher's (for Hugging Face's `google/`
  files, the `ViTImageProcessor` published with them). timm's `pretrained_cfg`
  (`TIMM_CROP`, or `TIMM_FULL_CROP` for its 384 px ViTs, DeiT III and
  DINOv2; timm 1.0.31), google-research/vision_transformer's squash
  (`GOOGLE_SQUASH`) and Hugging Face's `ViTImageProcessor`'s
  (`HF_SQUASH`); each record holds its own copy.
- `license`: the licence of the weights as their publisher states it (an
  SPDX identifier), or `None` where it is not known.
- `top1`, `top1_source`: the checkpoint's ImageNet-1k top-1 accuracy (%)
  as published, and where: google-research/vision_transformer's README
  where it states a figure for this very file, else timm's
  `results/results-imagenet.csv` for timm's copy of the same file (the
  same URL in timm's pretrained configurations). `None` where nobody
  publishes one: the ImageNet-21k checkpoints (no ImageNet-1k head) and
  the checkpoints neither states a figure for.

URLs: google-research/vision_transformer's bucket (original, AugReg and SAM
`.npz`, Apache-2.0), and the Hugging Face Hub (timm's `augreg2` and
Google's `google/vit-*` `.safetensors`, whose model cards state
apache-2.0; timm's copies of DeiT, DeiT III, DINOv2 and SigLIP, whose
cards and publishers state Apache-2.0, and of OpenAI's CLIP, which OpenAI
releases under MIT). This module imports nothing heavy: downloading is
`keras_vit.weights.download.download`.
"""

import copy

from keras_vit.registry import variants

#: The keys of every preset record, in the order they are written.
FIELDS = (
    "unique_name",
    "name",
    "variant",
    "source",
    "description",
    "url",
    "sha256",
    "image_size",
    "num_classes",
    "representation_size",
    "params",
    "vit_arguments",
    "normalization",
    "image_resize",
    "license",
    "top1",
    "top1_source",
)

#: timm's evaluation of its ViTs at 224 px, DeiT, CLIP and SigLIP
#: (`crop_pct` 0.9, bicubic; PIL antialiases).
TIMM_CROP = {"crop_pct": 0.9, "interpolation": "bicubic", "antialias": True}
#: timm's evaluation of its 384 px ViTs, DeiT III and DINOv2: the shorter
#: side to the input size, the centre cut out.
TIMM_FULL_CROP = {
    "crop_pct": 1.0,
    "interpolation": "bicubic",
    "antialias": True,
}
#: google-research/vision_transformer's evaluation: the whole image
#: squashed with `tf.image.resize` (bilinear, not antialiased).
GOOGLE_SQUASH = {
    "crop_pct": None,
    "interpolation": "bilinear",
    "antialias": False,
}
#: Hugging Face's `ViTImageProcessor`: the whole image squashed with PIL's
#: bilinear (antialiased).
HF_SQUASH = {"crop_pct": None, "interpolation": "bilinear", "antialias": True}

#: ImageNet's per-channel mean and std (DeiT's, DeiT III's, DINOv2's).
IMAGENET_NORMALIZATION = {
    "mean": (0.485, 0.456, 0.406),
    "std": (0.229, 0.224, 0.225),
}

#: Where a `top1` is published (`top1_source`).
TIMM_RESULTS = (
    "timm results-imagenet.csv (timm's evaluation of this checkpoint)"
)
GOOGLE_README = "google-research/vision_transformer README"

#: What the records of a short name share unless they say otherwise: who
#: released them (`source`) and what they are (`description`).
SHORT_NAMES = {
    "in21k": (
        "original",
        "ImageNet-21k pre-training, with the pre-logits layer (paper, Table 2)",
    ),
    "in21k_ft_in1k": (
        "original",
        "ImageNet-21k, fine-tuned on ImageNet-1k at 224 px",
    ),
    "in21k_ft_in1k_384": (
        "original",
        "ImageNet-21k, fine-tuned on ImageNet-1k at 384 px",
    ),
    "sam_in1k": (
        "original",
        "Sharpness-aware minimisation, ImageNet-1k (arXiv 2106.01548)",
    ),
    "augreg_in21k": (
        "augreg",
        "AugReg ImageNet-21k pre-training (arXiv 2106.10270)",
    ),
    "augreg_in21k_ft_in1k": (
        "augreg",
        "AugReg ImageNet-21k, fine-tuned on ImageNet-1k at 224 px",
    ),
    "augreg_in21k_ft_in1k_384": (
        "augreg",
        "AugReg ImageNet-21k, fine-tuned on ImageNet-1k at 384 px",
    ),
    "augreg_in1k": ("augreg", "AugReg, ImageNet-1k only, at 224 px"),
    "augreg_in1k_384": ("augreg", "AugReg, ImageNet-1k only, at 384 px"),
    "augreg2_in21k_ft_in1k": (
        "timm",
        "AugReg ImageNet-21k, re-fine-tuned on ImageNet-1k by timm",
    ),
    "hf_in21k_ft_in1k": (
        "huggingface",
        "The original ImageNet-21k + ImageNet-1k weights as converted by "
        "Hugging Face transformers",
    ),
}

#: The `ViT` arguments of timm's DINOv3 ViTs beyond their variant's
#: numbers (`vit_*_patch16_dinov3` in timm 1.0.31's eva.py; class-token
#: pooling, as Meta's DINOv3, where timm's Eva averages the patches). Their
#: evaluation: timm's 256 px, bicubic, crop 1.0 (`TIMM_FULL_CROP`); Meta
#: evaluates DINOv3 at 224 px, resizing to 256 px then centre-cropping.
#: (The registry imports nothing above it: the readers' own copy of the
#: first three is `keras_vit.weights.checkpoint.DINOV3_DEFAULTS`.)
DINOV3_ARGUMENTS = {
    "position_embedding": "rope",
    "rope_theta": 100.0,
    "layer_norm_epsilon": 1e-05,
    "num_register_tokens": 4,
    "layer_scale_init": 1e-05,
    "qkv_bias": False,
    "include_top": False,
}

#: What DINOv3's S/16 and B/16 presets are, after their names.
DINOV3_FEATURES = (
    "self-supervised features (LVD-1689M; Simeoni et al., 2025), no head: "
    "2-D RoPE, 4 registers, LayerScale, no q/k/v bias; timm's ungated copy "
    "(Meta's repos are gated)"
)

#: The DINOv3 License (Meta's own terms, not an SPDX licence; timm's cards
#: say `dinov3-license`), as an SPDX reference to a licence of its own.
DINOV3_LICENSE = "LicenseRef-DINOv3"

#: Every record's fields where it says nothing of them.
DEFAULTS = {
    "sha256": None,
    "representation_size": None,
    "vit_arguments": {},
    "normalization": None,
    "license": "Apache-2.0",
    "top1": None,
    "top1_source": None,
}


def _preset(variant, name, image_size, num_classes, params, url, **own):
    """A whole record (`FIELDS`, in order) from what is its own: the
    variant, short name, resolution, classes, parameters and URL, and any
    field that differs from the defaults (`DEFAULTS`; the short name's
    `source` and `description`, `SHORT_NAMES`; timm's evaluation resize for
    the resolution, `TIMM_CROP` at 224 px, else `TIMM_FULL_CROP`). Every
    value is the record's own copy."""
    unknown = sorted(set(own) - set(FIELDS))
    if unknown:
        raise ValueError(f"Unknown preset fields. Received: {unknown}")
    source, description = SHORT_NAMES.get(name, (None, None))
    record = {
        "unique_name": f"{variants.model_name(variant)}_{name}",
        "name": name,
        "variant": variant,
        "source": source,
        "description": description,
        "url": url,
        "image_size": image_size,
        "num_classes": num_classes,
        "params": params,
        "image_resize": TIMM_CROP if image_size == 224 else TIMM_FULL_CROP,
        **DEFAULTS,
        **own,
    }
    return {key: copy.deepcopy(record[key]) for key in FIELDS}


# fmt: off
PRESETS = [
    _preset(
        "B/16", "in21k", 224, 21843, 103_186_515,
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-B_16.npz",
        representation_size=768,
    ),
    _preset(
        "B/16", "in21k_ft_in1k_384", 384, 1000, 86_859_496,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_16.npz",
        top1=84.212, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/32", "in21k", 224, 21843, 104_843_091,
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-B_32.npz",
        representation_size=768,
    ),
    _preset(
        "B/32", "in21k_ft_in1k_384", 384, 1000, 88_297_192,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_32.npz",
        image_resize=GOOGLE_SQUASH,
    ),
    _preset(
        "L/16", "in21k", 224, 21843, 326_740_307,
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-L_16.npz",
        representation_size=1024,
    ),
    _preset(
        "L/16", "in21k_ft_in1k_384", 384, 1000, 304_715_752,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_16.npz",
        image_resize=GOOGLE_SQUASH,
    ),
    _preset(
        "L/32", "in21k", 224, 21843, 328_949_075,
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-L_32.npz",
        representation_size=1024,
    ),
    _preset(
        "L/32", "in21k_ft_in1k_384", 384, 1000, 306_632_680,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_32.npz",
        top1=81.508, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "H/14", "in21k", 224, 21843, 660_385_363,
        "https://storage.googleapis.com/vit_models/imagenet21k/ViT-H_14.npz",
        representation_size=1280,
    ),
    _preset(
        "B/16", "in21k_ft_in1k", 224, 1000, 86_567_656,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-B_16-224.npz",
        image_resize=GOOGLE_SQUASH,
        top1=81.2, top1_source=GOOGLE_README,
    ),
    _preset(
        "L/16", "in21k_ft_in1k", 224, 1000, 304_326_632,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/ViT-L_16-224.npz",
        image_resize=GOOGLE_SQUASH,
        top1=82.7, top1_source=GOOGLE_README,
    ),
    _preset(
        "Ti/16", "augreg_in21k", 224, 21843, 9_740_115,
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "Ti/16", "augreg_in21k_ft_in1k", 224, 1000, 5_717_416,
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        top1=75.452, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "Ti/16", "augreg_in21k_ft_in1k_384", 384, 1000, 5_790_376,
        "https://storage.googleapis.com/vit_models/augreg/Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        image_resize=GOOGLE_SQUASH,
        top1=78.22, top1_source=GOOGLE_README,
    ),
    _preset(
        "S/32", "augreg_in21k", 224, 21843, 30_903_507,
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "S/32", "augreg_in21k_ft_in1k", 224, 1000, 22_878_952,
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        top1=76.01, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/32", "augreg_in21k_ft_in1k_384", 384, 1000, 22_915_432,
        "https://storage.googleapis.com/vit_models/augreg/S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        top1=80.476, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/16", "augreg_in21k", 224, 21843, 30_075_219,
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "S/16", "augreg_in21k_ft_in1k", 224, 1000, 22_050_664,
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        top1=81.402, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/16", "augreg_in21k_ft_in1k_384", 384, 1000, 22_196_584,
        "https://storage.googleapis.com/vit_models/augreg/S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        image_resize=GOOGLE_SQUASH,
        top1=83.73, top1_source=GOOGLE_README,
    ),
    _preset(
        "B/32", "augreg_in21k", 224, 21843, 104_252_499,
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "B/32", "augreg_in21k_ft_in1k", 224, 1000, 88_224_232,
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        top1=80.732, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/32", "augreg_in21k_ft_in1k_384", 384, 1000, 88_297_192,
        "https://storage.googleapis.com/vit_models/augreg/B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        top1=83.358, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "augreg_in21k", 224, 21843, 102_595_923,
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "B/16", "augreg_in21k_ft_in1k", 224, 1000, 86_567_656,
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=84.534, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "augreg_in21k_ft_in1k_384", 384, 1000, 86_859_496,
        "https://storage.googleapis.com/vit_models/augreg/B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=86.01, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/8", "augreg_in21k", 224, 21843, 102_605_139,
        "https://storage.googleapis.com/vit_models/augreg/B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "B/8", "augreg_in21k_ft_in1k", 224, 1000, 86_576_872,
        "https://storage.googleapis.com/vit_models/augreg/B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=85.838, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "L/16", "augreg_in21k", 224, 21843, 325_690_707,
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1.npz",
    ),
    _preset(
        "L/16", "augreg_in21k_ft_in1k", 224, 1000, 304_326_632,
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=85.856, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "L/16", "augreg_in21k_ft_in1k_384", 384, 1000, 304_715_752,
        "https://storage.googleapis.com/vit_models/augreg/L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=87.096, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/16", "augreg_in1k", 224, 1000, 22_050_664,
        "https://storage.googleapis.com/vit_models/augreg/S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=78.842, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/16", "augreg_in1k_384", 384, 1000, 22_196_584,
        "https://storage.googleapis.com/vit_models/augreg/S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=81.13, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/32", "augreg_in1k", 224, 1000, 88_224_232,
        "https://storage.googleapis.com/vit_models/augreg/B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=74.908, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/32", "augreg_in1k_384", 384, 1000, 88_297_192,
        "https://storage.googleapis.com/vit_models/augreg/B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=78.75, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "augreg_in1k", 224, 1000, 86_567_656,
        "https://storage.googleapis.com/vit_models/augreg/B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=79.154, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "augreg_in1k_384", 384, 1000, 86_859_496,
        "https://storage.googleapis.com/vit_models/augreg/B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=81.102, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "sam_in1k", 224, 1000, 86_567_656,
        "https://storage.googleapis.com/vit_models/sam/ViT-B_16.npz",
        top1=80.246, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/32", "sam_in1k", 224, 1000, 88_224_232,
        "https://storage.googleapis.com/vit_models/sam/ViT-B_32.npz",
        top1=73.704, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "R50+B/16", "in21k", 224, 21843, 115_277_971,
        "https://storage.googleapis.com/vit_models/imagenet21k/R50+ViT-B_16.npz",
        description=(
            "ImageNet-21k pre-training of the paper's R50+ViT-B/16, with the "
            "pre-logits layer"
        ),
        representation_size=768,
    ),
    _preset(
        "R50+B/16", "in21k_ft_in1k_384", 384, 1000, 98_950_952,
        "https://storage.googleapis.com/vit_models/imagenet21k+imagenet2012/R50+ViT-B_16.npz",
        top1=84.988, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "R26+S/32", "augreg_in21k", 224, 21843, 44_456_467,
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "R26+S/32", "augreg_in21k_ft_in1k", 224, 1000, 36_431_912,
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        top1=81.856, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "R26+S/32", "augreg_in21k_ft_in1k_384", 384, 1000, 36_468_392,
        "https://storage.googleapis.com/vit_models/augreg/R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_384.npz",
        top1=84.066, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "R50+L/32", "augreg_in21k", 224, 21843, 350_358_931,
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0.npz",
    ),
    _preset(
        "R50+L/32", "augreg_in21k_ft_in1k", 224, 1000, 328_994_856,
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224.npz",
        top1=84.434, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "R50+L/32", "augreg_in21k_ft_in1k_384", 384, 1000, 329_092_136,
        "https://storage.googleapis.com/vit_models/augreg/R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_384.npz",
        top1=86.188, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "augreg2_in21k_ft_in1k", 224, 1000, 86_567_656,
        "https://huggingface.co/timm/vit_base_patch16_224.augreg2_in21k_ft_in1k/resolve/main/model.safetensors",
        top1=85.108, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/8", "augreg2_in21k_ft_in1k", 224, 1000, 86_576_872,
        "https://huggingface.co/timm/vit_base_patch8_224.augreg2_in21k_ft_in1k/resolve/main/model.safetensors",
        top1=86.252, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "B/16", "hf_in21k_ft_in1k", 224, 1000, 86_567_656,
        "https://huggingface.co/google/vit-base-patch16-224/resolve/main/model.safetensors",
        image_resize=HF_SQUASH,
    ),
    _preset(
        "L/16", "hf_in21k_ft_in1k", 224, 1000, 304_326_632,
        "https://huggingface.co/google/vit-large-patch16-224/resolve/main/model.safetensors",
        image_resize=HF_SQUASH,
    ),
    _preset(
        "S/16", "deit_distilled_in1k", 224, 1000, 22_436_432,
        "https://huggingface.co/timm/deit_small_distilled_patch16_224.fb_in1k/resolve/main/model.safetensors",
        source="timm",
        description=(
            "DeiT-S distilled (a distillation token and head, a RegNetY "
            "teacher), ImageNet-1k only (Touvron et al., 2021)"
        ),
        vit_arguments={"distillation": True},
        normalization=IMAGENET_NORMALIZATION,
        top1=81.204, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/16", "deit3_in21k_ft_in1k", 224, 1000, 22_059_496,
        "https://huggingface.co/timm/deit3_small_patch16_224.fb_in22k_ft_in1k/resolve/main/model.safetensors",
        source="timm",
        description=(
            "DeiT III-S: LayerScale, position embeddings of the patches only; "
            "ImageNet-21k, fine-tuned on ImageNet-1k (Touvron et al., 2022)"
        ),
        vit_arguments={
            "layer_scale_init": 1e-06, "position_embedding_tokens": "patches",
        },
        normalization=IMAGENET_NORMALIZATION,
        image_resize=TIMM_FULL_CROP,
        top1=83.082, top1_source=TIMM_RESULTS,
    ),
    _preset(
        "S/14", "dinov2_lvd142m_518", 518, None, 22_056_192,
        "https://huggingface.co/timm/vit_small_patch14_dinov2.lvd142m/resolve/main/model.safetensors",
        source="timm",
        description=(
            "DINOv2 ViT-S/14 self-supervised features (LVD-142M), no head: "
            "LayerScale, a 37x37 grid at 518 px (Oquab et al., 2023)"
        ),
        vit_arguments={"layer_scale_init": 1e-05, "include_top": False},
        normalization=IMAGENET_NORMALIZATION,
    ),
    _preset(
        "S/14", "dinov2_reg4_lvd142m_518", 518, None, 22_057_344,
        "https://huggingface.co/timm/vit_small_patch14_reg4_dinov2.lvd142m/resolve/main/model.safetensors",
        source="timm",
        description=(
            "DINOv2 ViT-S/14 with 4 register tokens (Darcet et al., 2023), "
            "features, no head; position embeddings of the patches only"
        ),
        vit_arguments={
            "layer_scale_init": 1e-05, "include_top": False,
            "num_register_tokens": 4, "position_embedding_tokens": "patches",
        },
        normalization=IMAGENET_NORMALIZATION,
    ),
    _preset(
        "B/16", "clip_openai", 224, 512, 86_193_152,
        "https://huggingface.co/timm/vit_base_patch16_clip_224.openai/resolve/main/model.safetensors",
        source="timm",
        description=(
            "OpenAI CLIP ViT-B/16 image tower (Radford et al., 2021): "
            "norm_pre, quick GELU, LayerNorm eps 1e-5; the head is its "
            "512-wide image-text projection (timm's card states apache-2.0, "
            "OpenAI releases CLIP under MIT)"
        ),
        vit_arguments={
            "norm_pre": True, "patch_bias": False, "activation": "quick_gelu",
            "layer_norm_epsilon": 1e-05, "classifier_activation": None,
        },
        normalization={
            "mean": (0.48145466, 0.4578275, 0.40821073),
            "std": (0.26862954, 0.26130258, 0.27577711),
        },
        license="MIT",
    ),
    _preset(
        "B/16", "siglip_webli", 224, None, 92_884_224,
        "https://huggingface.co/timm/vit_base_patch16_siglip_224.webli/resolve/main/model.safetensors",
        source="timm",
        description=(
            "SigLIP ViT-B/16 image tower (WebLI; Zhai et al., 2023): no class "
            "token, the MAP attention-pooling head, tanh GELU, features"
        ),
        vit_arguments={
            "class_token": False, "pooling": "map", "activation": "gelu_tanh",
            "include_top": False,
        },
    ),
    _preset(
        "S/16", "dinov3_lvd1689m_256", 256, None, 21_586_944,
        "https://huggingface.co/timm/vit_small_patch16_dinov3.lvd1689m/resolve/main/model.safetensors",
        source="timm",
        description=f"DINOv3 ViT-S/16 {DINOV3_FEATURES}",
        vit_arguments=DINOV3_ARGUMENTS,
        normalization=IMAGENET_NORMALIZATION,
        license=DINOV3_LICENSE,
    ),
    _preset(
        "B/16", "dinov3_lvd1689m_256", 256, None, 85_641_216,
        "https://huggingface.co/timm/vit_base_patch16_dinov3.lvd1689m/resolve/main/model.safetensors",
        source="timm",
        description=f"DINOv3 ViT-B/16 {DINOV3_FEATURES}",
        vit_arguments=DINOV3_ARGUMENTS,
        normalization=IMAGENET_NORMALIZATION,
        license=DINOV3_LICENSE,
    ),
    _preset(
        "Ti/16", "eupe_lvd1689m_256", 256, None, 5_491_968,
        "https://huggingface.co/timm/vit_tiny_patch16_dinov3_qkvb.eupe_lvd1689m/resolve/main/model.safetensors",
        source="timm",
        description=(
            "EUPE ViT-Ti/16 features distilled from DINOv3 (LVD-1689M), no "
            "head: DINOv3's layout with the query and value biases (the "
            "key's is zero)"
        ),
        vit_arguments={**DINOV3_ARGUMENTS, "qkv_bias": True},
        normalization=IMAGENET_NORMALIZATION,
        license=DINOV3_LICENSE,
    ),
]

# fmt: on


def named_preset(name):
    """The preset record whose unique name is `name`, else `None`."""
    for preset in PRESETS:
        if preset["unique_name"] == name:
            return preset
    return None


def get_preset(name):
    """The preset record whose unique name is `name`.

    Raises:
        ValueError: naming the received value and listing the unique names.
    """
    preset = named_preset(name)
    if preset is not None:
        return preset
    raise ValueError(
        "Unknown preset. Expected a preset's unique name "
        f"({', '.join(p['unique_name'] for p in PRESETS)}). "
        f"Received: preset={name!r}"
    )


def head_arguments(preset):
    """What a model built for `preset` takes for its head unless told
    otherwise: `{"num_classes": n}` for a preset with an n-class head;
    `{}` for no preset or a features preset (it builds with
    `include_top=False`), where the model's own default stands."""
    if preset is None or preset["num_classes"] is None:
        return {}
    return {"num_classes": preset["num_classes"]}


def preset_names(variant):
    """The short names of `variant`'s presets."""
    return [p["name"] for p in PRESETS if p["variant"] == variant]


def find_preset(variant, name):
    """The preset of `variant` called `name` (its short or unique name).

    Returns:
        The record, or `None` if `name` is no preset's name at all.

    Raises:
        ValueError: if `name` names presets of other variants only.
    """
    for preset in PRESETS:
        if preset["variant"] == variant and name in (
            preset["name"],
            preset["unique_name"],
        ):
            return preset
    others = sorted(
        {p["variant"] for p in PRESETS if name in (p["name"], p["unique_name"])}
    )
    if others:
        raise ValueError(
            f"The preset {name!r} exists for variants {others}, not for "
            f"{variant}. Presets of {variant}: {preset_names(variant)}. "
            f"Received: weights={name!r}"
        )
    return None


def list_presets(model=None):
    """Lists the named pretrained weights.

    Args:
        model: a builder name (`"ViT_B16"`), a variant (`"B/16"`) or a
            preset's unique name, to list only those presets. Defaults to
            `None`: all.

    Returns:
        A list of dicts: `builder` and every field of the record (`FIELDS`:
        `unique_name`; `name`, the short name a builder's `weights=` also
        takes; `variant`, `image_size`, `num_classes`,
        `representation_size`, `params`, `source`, `description`, `url`,
        `sha256`, `vit_arguments`, `normalization`, `image_resize`,
        `license`).

    Example:

    >>> [p["name"] for p in keras_vit.list_presets("ViT_Ti16")]
    ['augreg_in21k', 'augreg_in21k_ft_in1k', 'augreg_in21k_ft_in1k_384']
    """
    out = []
    for preset in PRESETS:
        builder = variants.BUILDER_OF.get(preset["variant"])
        if model is None or model in (
            builder,
            preset["variant"],
            preset["unique_name"],
        ):
            out.append({"builder": builder, **preset})
    if model is not None and not out:
        raise ValueError(
            "No presets for this model. Expected a builder name "
            f"({', '.join(variants.BUILDERS)}), a variant with presets or a "
            f"preset's unique name. Received: model={model!r}"
        )
    return out


#: The columns of `presets_table`.
TABLE_HEADER = (
    "preset",
    "resolution",
    "parameters",
    "file size (≈ parameters × 4 B)",
    "ImageNet-1k top-1, as published",
    "weights' licence",
)


def _top1_cell(preset):
    if preset["top1"] is None:
        return "—"
    source = (
        "Google" if "vision_transformer" in preset["top1_source"] else "timm"
    )
    return f"{preset['top1']:.2f}% ({source})"


def presets_table(num_classes=None):
    """The presets as a Markdown table (the README's is this one).

    Args:
        num_classes: only the presets with this many classes (`1000`: the
            ImageNet-1k classifiers). Defaults to `None`: all.

    Returns:
        The table's lines, header first: `TABLE_HEADER`'s columns; the
        file size is the float32 estimate (parameters × 4 bytes, not the
        published file's size), the top-1 the record's `top1` with who
        reports it (`top1_source`: Google's README or timm's evaluation),
        `—` where none is published.
    """
    lines = [
        "| " + " | ".join(TABLE_HEADER) + " |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in PRESETS:
        if num_classes is not None and p["num_classes"] != num_classes:
            continue
        cells = (
            f"`{p['unique_name']}`",
            f"{p['image_size']} px",
            f"{p['params'] / 1e6:.1f}M",
            f"{p['params'] * 4 / 1e6:,.0f} MB",
            _top1_cell(p),
            p["license"] or "—",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return lines
