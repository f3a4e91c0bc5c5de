"""Check the presets' `image_resize` against timm's `pretrained_cfg`.

DEVELOPER-SIDE ONLY (not run by the suite). `make` (with timm) writes, for
every pretrained configuration timm lists, its file (URL or Hugging Face
hub id) and evaluation resize; `check` (with keras_vit) finds each
preset's file among them and compares the record: a preset whose `top1`
timm measured, or that has no `top1`, must have timm's setting where timm
lists its file (or a copy of it: `COPIES`); the rest are the original
repository's or Hugging Face's squash (`keras_vit.registry.presets`).

    /path/to/timm-venv/bin/python tests/golden/check_preset_resize.py make F
    PYTHONPATH=$PWD /path/to/keras-venv/bin/python \\
        tests/golden/check_preset_resize.py check F

Last run (3 December 2026, timm 1.0.31): every preset agrees.
"""

import json
import sys

#: Presets whose file timm lists under another address: its copy of the
#: original `.npz` release (timm converted them to its own format).
COPIES = {
    "vit_b16_in21k": "timm/vit_base_patch16_224.orig_in21k",
    "vit_b32_in21k": "timm/vit_base_patch32_224.orig_in21k",
    "vit_l16_in21k": "timm/vit_large_patch16_224.orig_in21k",
    "vit_l32_in21k": "timm/vit_large_patch32_224.orig_in21k",
    "vit_h14_in21k": "timm/vit_huge_patch14_224.orig_in21k",
    "vit_r50_b16_in21k": "timm/vit_base_r50_s16_224.orig_in21k",
    "vit_b16_in21k_ft_in1k_384": "timm/vit_base_patch16_384.orig_in21k_ft_in1k",
    "vit_l32_in21k_ft_in1k_384": (
        "timm/vit_large_patch32_384.orig_in21k_ft_in1k"
    ),
    "vit_r50_b16_in21k_ft_in1k_384": (
        "timm/vit_base_r50_s16_384.orig_in21k_ft_in1k"
    ),
}


def make(target):
    import timm

    found = {}
    for name in timm.list_pretrained():
        cfg = timm.models.get_pretrained_cfg(name).to_dict()
        setting = {
            "crop_pct": cfg["crop_pct"],
            "interpolation": cfg["interpolation"],
            "crop_mode": cfg.get("crop_mode", "center"),
        }
        for key in ("url", "hf_hub_id"):
            if cfg.get(key):
                found.setdefault(cfg[key], setting)
    with open(target, "w") as file:
        json.dump({"timm": timm.__version__, "files": found}, file)
    print(f"wrote {len(found)} files' settings to {target}")


def _timm_file(preset):
    """The address timm lists the preset's file under, or `None`."""
    if preset["unique_name"] in COPIES:
        return COPIES[preset["unique_name"]]
    url = preset["url"]
    if "huggingface.co/timm/" in url:
        return "timm/" + url.split("huggingface.co/timm/")[1].split("/")[0]
    return url


def check(source):
    from keras_vit.registry import PRESETS
    from keras_vit.registry import presets

    with open(source) as file:
        timm_files = json.load(file)["files"]
    wrong = []
    for preset in PRESETS:
        name, record = preset["unique_name"], preset["image_resize"]
        timm = timm_files.get(_timm_file(preset))
        google = "vision_transformer" in (preset["top1_source"] or "")
        if timm is not None and not google:
            assert timm["crop_mode"] == "center", (name, timm)
            want = {
                "crop_pct": timm["crop_pct"],
                "interpolation": timm["interpolation"],
                "antialias": True,  # PIL's resize
            }
        elif preset["source"] == "huggingface":
            want = presets.HF_SQUASH
        else:
            want = presets.GOOGLE_SQUASH
        if record != want:
            wrong.append(f"{name}: {record} != {want}")
    print("\n".join(wrong) or f"all {len(PRESETS)} presets agree")
    return 1 if wrong else 0


if __name__ == "__main__":
    mode, path = sys.argv[1:3]
    sys.exit(make(path) if mode == "make" else check(path))
