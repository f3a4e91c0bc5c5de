"""Named presets: released ViT checkpoints, as data.

Each preset is a record: which variant it fits, the official URL, its
sha256 where the publisher gives one (none of these publishers do; a
downloaded file is still checked tensor by tensor when it is loaded), the
resolution and class count it was trained for, whether it has the
pre-logits layer, its parameter count as a keras_vit model, and its source.

URLs: google-research/vision_transformer's bucket (original and AugReg
`.npz`), and the Hugging Face Hub (timm's and Google's `.safetensors`).
"""

import hashlib
import os

_GCS = "https://storage.googleapis.com/vit_models"
_HUB = "https://huggingface.co/{repo}/resolve/main/model.safetensors"
_AUGREG = _GCS + "/augreg/{}.npz"

_AUGREG_I21K = {
    "Ti/16": "Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0",
    "S/32": "S_32-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0",
    "S/16": "S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0",
    "B/32": "B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0",
    "B/16": "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0",
    "B/8": "B_8-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0",
    "L/16": "L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1",
}
# The ImageNet-1k fine-tuning learning rate in each AugReg file name.
_AUGREG_FT_LR = {"Ti/16": "0.03", "S/32": "0.03", "S/16": "0.03", "B/32": "0.03",
                 "B/16": "0.01", "B/8": "0.01", "L/16": "0.01"}
_AUGREG_I1K = {
    "S/16": "S_16-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0",
    "B/32": "B_32-i1k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.1-sd_0.1",
    "B/16": "B_16-i1k-300ep-lr_0.001-aug_strong2-wd_0.1-do_0.1-sd_0.1",
}
_ORIGINAL = {"B/16": "B_16", "B/32": "B_32", "L/16": "L_16", "L/32": "L_32", "H/14": "H_14"}
_WIDTH = {"B": 768, "L": 1024, "H": 1280}


#: Parameters of each preset's model as keras_vit builds it (its head,
#: pre-logits layer and resolution included); e.g. B/16 at 384 px is timm's
#: published 86.86M, with the 21k head and pre-logits 103.19M.
_PARAMS = {
    ("B/16", "in21k"): 103_186_515,
    ("B/16", "in21k_ft_in1k_384"): 86_859_496,
    ("B/32", "in21k"): 104_843_091,
    ("B/32", "in21k_ft_in1k_384"): 88_297_192,
    ("L/16", "in21k"): 326_740_307,
    ("L/16", "in21k_ft_in1k_384"): 304_715_752,
    ("L/32", "in21k"): 328_949_075,
    ("L/32", "in21k_ft_in1k_384"): 306_632_680,
    ("H/14", "in21k"): 660_385_363,
    ("B/16", "in21k_ft_in1k"): 86_567_656,
    ("L/16", "in21k_ft_in1k"): 304_326_632,
    ("Ti/16", "augreg_in21k"): 9_740_115,
    ("Ti/16", "augreg_in21k_ft_in1k"): 5_717_416,
    ("Ti/16", "augreg_in21k_ft_in1k_384"): 5_790_376,
    ("S/32", "augreg_in21k"): 30_903_507,
    ("S/32", "augreg_in21k_ft_in1k"): 22_878_952,
    ("S/32", "augreg_in21k_ft_in1k_384"): 22_915_432,
    ("S/16", "augreg_in21k"): 30_075_219,
    ("S/16", "augreg_in21k_ft_in1k"): 22_050_664,
    ("S/16", "augreg_in21k_ft_in1k_384"): 22_196_584,
    ("B/32", "augreg_in21k"): 104_252_499,
    ("B/32", "augreg_in21k_ft_in1k"): 88_224_232,
    ("B/32", "augreg_in21k_ft_in1k_384"): 88_297_192,
    ("B/16", "augreg_in21k"): 102_595_923,
    ("B/16", "augreg_in21k_ft_in1k"): 86_567_656,
    ("B/16", "augreg_in21k_ft_in1k_384"): 86_859_496,
    ("B/8", "augreg_in21k"): 102_605_139,
    ("B/8", "augreg_in21k_ft_in1k"): 86_576_872,
    ("L/16", "augreg_in21k"): 325_690_707,
    ("L/16", "augreg_in21k_ft_in1k"): 304_326_632,
    ("L/16", "augreg_in21k_ft_in1k_384"): 304_715_752,
    ("S/16", "augreg_in1k"): 22_050_664,
    ("S/16", "augreg_in1k_384"): 22_196_584,
    ("B/32", "augreg_in1k"): 88_224_232,
    ("B/32", "augreg_in1k_384"): 88_297_192,
    ("B/16", "augreg_in1k"): 86_567_656,
    ("B/16", "augreg_in1k_384"): 86_859_496,
    ("B/16", "sam_in1k"): 86_567_656,
    ("B/32", "sam_in1k"): 88_224_232,
    ("B/16", "augreg2_in21k_ft_in1k"): 86_567_656,
    ("B/8", "augreg2_in21k_ft_in1k"): 86_576_872,
    ("B/16", "hf_in21k_ft_in1k"): 86_567_656,
    ("L/16", "hf_in21k_ft_in1k"): 304_326_632,
    ("R50+B/16", "in21k"): 115_277_971,
    ("R50+B/16", "in21k_ft_in1k_384"): 98_950_952,
    ("R26+S/32", "augreg_in21k"): 44_456_467,
    ("R26+S/32", "augreg_in21k_ft_in1k"): 36_431_912,
    ("R26+S/32", "augreg_in21k_ft_in1k_384"): 36_468_392,
    ("R50+L/32", "augreg_in21k"): 350_358_931,
    ("R50+L/32", "augreg_in21k_ft_in1k"): 328_994_856,
    ("R50+L/32", "augreg_in21k_ft_in1k_384"): 329_092_136,
}


def _preset(variant, name, url, image_size, num_classes, source, description,
            representation_size=None, sha256=None):
    return {
        "variant": variant,
        "name": name,
        "url": url,
        "sha256": sha256,
        "image_size": image_size,
        "num_classes": num_classes,
        "representation_size": representation_size,
        "params": _PARAMS.get((variant, name)),
        "source": source,
        "description": description,
    }


def _table():
    table = []
    for variant, stem in _ORIGINAL.items():
        table.append(_preset(
            variant, "in21k", f"{_GCS}/imagenet21k/ViT-{stem}.npz", 224, 21843,
            "original", "ImageNet-21k pre-training, with the pre-logits layer "
            "(paper, Table 2)", representation_size=_WIDTH[variant[0]]))
        if variant != "H/14":
            table.append(_preset(
                variant, "in21k_ft_in1k_384",
                f"{_GCS}/imagenet21k+imagenet2012/ViT-{stem}.npz", 384, 1000,
                "original", "ImageNet-21k, fine-tuned on ImageNet-1k at 384 px"))
    for variant in ("B/16", "L/16"):
        stem = _ORIGINAL[variant]
        table.append(_preset(
            variant, "in21k_ft_in1k",
            f"{_GCS}/imagenet21k+imagenet2012/ViT-{stem}-224.npz", 224, 1000,
            "original", "ImageNet-21k, fine-tuned on ImageNet-1k at 224 px"))
    for variant, stem in _AUGREG_I21K.items():
        table.append(_preset(
            variant, "augreg_in21k", _AUGREG.format(stem), 224, 21843,
            "augreg", "AugReg ImageNet-21k pre-training (arXiv 2106.10270)"))
        lr = _AUGREG_FT_LR[variant]
        for res in (224, 384):
            if variant == "B/8" and res == 384:
                continue
            stem_ft = stem
            if variant == "B/32" and res == 384:  # released from another run
                stem_ft = "B_32-i21k-300ep-lr_0.001-aug_light1-wd_0.1-do_0.0-sd_0.0"
            table.append(_preset(
                variant, "augreg_in21k_ft_in1k" + ("" if res == 224 else "_384"),
                _AUGREG.format(
                    f"{stem_ft}--imagenet2012-steps_20k-lr_{lr}-res_{res}"
                ),
                res, 1000, "augreg",
                f"AugReg ImageNet-21k, fine-tuned on ImageNet-1k at {res} px"))
    for variant, stem in _AUGREG_I1K.items():
        for res in (224, 384):
            table.append(_preset(
                variant, "augreg_in1k" + ("" if res == 224 else "_384"),
                _AUGREG.format(f"{stem}--imagenet2012-steps_20k-lr_0.01-res_{res}"),
                res, 1000, "augreg",
                f"AugReg, ImageNet-1k only, at {res} px"))
    for variant, stem in (("B/16", "B_16"), ("B/32", "B_32")):
        table.append(_preset(
            variant, "sam_in1k", f"{_GCS}/sam/ViT-{stem}.npz", 224, 1000,
            "original", "Sharpness-aware minimisation, ImageNet-1k "
            "(arXiv 2106.01548)"))
    # Hybrids (ResNet stem + ViT), from the same two releases.
    table.append(_preset(
        "R50+B/16", "in21k", f"{_GCS}/imagenet21k/R50+ViT-B_16.npz", 224, 21843,
        "original", "ImageNet-21k pre-training of the paper's R50+ViT-B/16, "
        "with the pre-logits layer", representation_size=768))
    table.append(_preset(
        "R50+B/16", "in21k_ft_in1k_384",
        f"{_GCS}/imagenet21k+imagenet2012/R50+ViT-B_16.npz", 384, 1000,
        "original", "ImageNet-21k, fine-tuned on ImageNet-1k at 384 px"))
    for variant, stem, ft in (
        ("R26+S/32", "R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0",
         {224: "R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1"
               "--imagenet2012-steps_20k-lr_0.03-res_224",
          384: "R26_S_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.03-do_0.0-sd_0.0"
               "--imagenet2012-steps_20k-lr_0.03-res_384"}),
        ("R50+L/32", "R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0",
         {224: "R50_L_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1"
               "--imagenet2012-steps_20k-lr_0.01-res_224",
          384: "R50_L_32-i21k-300ep-lr_0.001-aug_medium2-wd_0.1-do_0.0-sd_0.0"
               "--imagenet2012-steps_20k-lr_0.01-res_384"}),
    ):
        table.append(_preset(
            variant, "augreg_in21k", _AUGREG.format(stem), 224, 21843, "augreg",
            "AugReg ImageNet-21k pre-training (arXiv 2106.10270)"))
        for res, name in ft.items():
            table.append(_preset(
                variant, "augreg_in21k_ft_in1k" + ("" if res == 224 else "_384"),
                _AUGREG.format(name), res, 1000, "augreg",
                f"AugReg ImageNet-21k, fine-tuned on ImageNet-1k at {res} px"))
    for variant, repo in (
        ("B/16", "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"),
        ("B/8", "timm/vit_base_patch8_224.augreg2_in21k_ft_in1k"),
    ):
        table.append(_preset(
            variant, "augreg2_in21k_ft_in1k", _HUB.format(repo=repo), 224, 1000,
            "timm", "AugReg ImageNet-21k, re-fine-tuned on ImageNet-1k by timm"))
    for variant, repo, name in (
        ("B/16", "google/vit-base-patch16-224", "hf_in21k_ft_in1k"),
        ("L/16", "google/vit-large-patch16-224", "hf_in21k_ft_in1k"),
    ):
        table.append(_preset(
            variant, name, _HUB.format(repo=repo), 224, 1000, "huggingface",
            "The original ImageNet-21k + ImageNet-1k weights as converted "
            "by Hugging Face transformers"))
    return table


PRESETS = _table()

#: Where downloads are cached when no `cache_dir` is given: `None` means
#: Keras's cache folder (`~/.keras`, or `$KERAS_HOME`), under
#: `models/keras_vit/`.
CACHE_DIR = None


def _builder_of(variant):
    from keras_vit.builders import BUILDERS

    for builder, v in BUILDERS.items():
        if v == variant:
            return builder
    return None


def list_presets(model=None):
    """Lists the named pretrained weights.

    Args:
        model: a builder name (`"ViT_B16"`) or variant (`"B/16"`) to list
            only its presets. Defaults to `None`: all.

    Returns:
        A list of dicts with `builder`, `variant`, `name`, `image_size`,
        `num_classes`, `representation_size`, `params`, `source`,
        `description`, `url` and `sha256`.

    Example:

    >>> [p["name"] for p in keras_vit.list_presets("ViT_Ti16")]
    ['augreg_in21k', 'augreg_in21k_ft_in1k', 'augreg_in21k_ft_in1k_384']
    """
    out = []
    for preset in PRESETS:
        builder = _builder_of(preset["variant"])
        if model is None or model in (builder, preset["variant"]):
            out.append({"builder": builder, **preset})
    if model is not None and not out:
        raise ValueError(
            f"No presets for this model. Received: model={model!r}"
        )
    return out


def preset_names(variant):
    return [p["name"] for p in PRESETS if p["variant"] == variant]


def find_preset(variant, name):
    """The preset `name` of `variant`, or `None` if `name` is not a preset
    name at all. Raises if it is a preset of other variants only."""
    for preset in PRESETS:
        if preset["variant"] == variant and preset["name"] == name:
            return preset
    others = sorted({p["variant"] for p in PRESETS if p["name"] == name})
    if others:
        raise ValueError(
            f"The preset {name!r} exists for variants {others}, not for "
            f"{variant}. Presets of {variant}: {preset_names(variant)}. "
            f"Received: weights={name!r}"
        )
    return None


def download(preset, cache_dir=None):
    """Downloads a preset's file once into the Keras cache; returns its path.

    Uses `keras.utils.get_file` (progress bar, cache). A download that
    fails, or whose sha256 differs from the preset's, is removed: nothing
    half-written stays in the cache.
    """
    import keras

    extension = ".npz" if preset["url"].endswith(".npz") else ".safetensors"
    builder = _builder_of(preset["variant"]) or preset["variant"].replace("/", "")
    fname = f"{builder}-{preset['name']}{extension}"
    cache_dir = cache_dir or CACHE_DIR
    if cache_dir is not None:
        # keras.utils.get_file falls back to /tmp for a folder that does not
        # exist yet; create it so the file lands where it was asked to.
        os.makedirs(cache_dir, exist_ok=True)
    try:
        path = keras.utils.get_file(
            fname=fname,
            origin=preset["url"],
            cache_subdir=os.path.join("models", "keras_vit"),
            cache_dir=cache_dir,
        )
    except Exception as error:  # get_file removes a partial download
        raise ValueError(
            f"Could not download preset {preset['name']!r} for "
            f"{preset['variant']} from {preset['url']}: {error}"
        ) from None
    if preset["sha256"] is not None:
        digest = _sha256(path)
        if digest != preset["sha256"]:
            os.remove(path)
            raise ValueError(
                f"The file of preset {preset['name']!r} from {preset['url']} "
                f"has sha256 {digest}, expected {preset['sha256']}: it was "
                "deleted from the cache. Try again; if it persists, the "
                "published file changed."
            )
    return path


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
