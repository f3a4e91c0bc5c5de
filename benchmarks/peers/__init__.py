"""The peers `benchmarks/suite.py` times keras_vit against (`--peers`).

- `keras_hub_peer`: keras-hub's `ViTBackbone`, in the measurement's own
  process, like keras_vit;
- `runtime_peers`: keras_vit's model exported and run by ONNX Runtime or
  OpenVINO Runtime (inference only);
- `timm_peer.py`: a program that times a timm ViT, run by its path in the
  interpreter `--timm-python` names (torch and timm, maybe no TensorFlow),
  by `timm_runner`. It imports nothing of keras_vit but its timing rule,
  `keras_vit/timing.py`, which it loads by path.

No file here may be named after a module a program here imports (`timm`,
`torch`, ...): a program run by path has this folder first on `sys.path`.
"""
