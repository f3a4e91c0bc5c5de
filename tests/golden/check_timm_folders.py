"""Checks that timm loads keras_vit's timm folders (tests/golden/hub/
keras_to_timm_*/, written by make_timm_folders.py) with keras_vit's
outputs: `timm.create_model("local-dir:FOLDER")`, which reads the folder's
`config.json` (architecture, model_args, pretrained_cfg) and
`model.safetensors` as it reads a Hub repo's.

DEVELOPER-SIDE ONLY (timm, torch). Run from the repository root:
    /work/ref-venv/bin/python tests/golden/check_timm_folders.py

Last run: timm 1.0.31, torch 2.14.1 CPU: both folders within 1e-4
(printed below each run).
"""

import pathlib

import numpy as np
import timm
import torch

HERE = pathlib.Path(__file__).resolve().parent / "hub"


def main():
    torch.set_num_threads(1)
    for folder in sorted(HERE.glob("keras_to_timm_*")):
        model = timm.create_model(f"local-dir:{folder}", pretrained=True)
        model.eval()
        cfg = model.pretrained_cfg
        size = cfg["input_size"][1]
        pixels = np.random.default_rng(0).random((1, size, size, 3), "float32")
        x = (pixels - np.float32(cfg["mean"])) / np.float32(cfg["std"])
        with torch.no_grad():
            out = model(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()))
        expected = np.load(folder / "expected.npz")["output"]
        error = float(np.abs(out.numpy() - expected).max())
        print(folder.name, tuple(out.shape), f"max |diff| {error:.2e}")
        assert error < 1e-4, folder.name


if __name__ == "__main__":
    main()
