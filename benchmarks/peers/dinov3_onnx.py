"""timm's DINOv3-S/16 exported to ONNX by PyTorch, for
`benchmarks/dinov3_phone.py` (run in an interpreter with torch, timm,
onnx and onnxscript; nothing of keras_vit is imported).

Writes into FOLDER: `model.safetensors` (timm's
`vit_small_patch16_dinov3`, class-token pooling, no head, every weight
perturbed by N(0, 0.02): nothing downloaded), `timm.onnx` (batch 1, 256
px, `torch.onnx.export`; opset 18) and `timm.json` (`exported`, or the
error that stopped the export, and `features`: timm's output for the
fixed input `images.npy`, to check the files against each other).

    /path/to/torch/python benchmarks/peers/dinov3_onnx.py FOLDER
"""

import json
import sys
import traceback
from pathlib import Path

import numpy as np
import timm
import torch
from safetensors.torch import save_file

SIZE = 256
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def main(folder):
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_small_patch16_dinov3",
        pretrained=False,
        img_size=SIZE,
        num_classes=0,
        global_pool="token",
    ).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    pixels = np.random.default_rng(0).uniform(0, 255, (1, SIZE, SIZE, 3))
    pixels = pixels.astype(np.float32)
    np.save(folder / "images.npy", pixels)
    x = torch.from_numpy(((pixels / 255 - MEAN) / STD).transpose(0, 3, 1, 2))
    with torch.no_grad():
        features = model(x).numpy()
    report = {"features": features.tolist(), "torch": torch.__version__}
    try:
        torch.onnx.export(
            model, (x,), str(folder / "timm.onnx"), opset_version=18
        )
        report["exported"] = True
    except Exception:  # noqa: BLE001 - the report says what failed
        report["exported"] = False
        report["error"] = traceback.format_exc(limit=3)[-2000:]
    (folder / "timm.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
