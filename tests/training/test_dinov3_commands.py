"""`keras-vit train --weights` and `keras-vit few-shot` on DINOv3 files
(the tiny goldens of tests/weights/test_dinov3_parity.py and the Hub
snapshot folders of tests/weights/test_hub.py): a RoPE model fine-tuned
at another size with a new head, and its features read for few-shot."""

import pathlib

import keras
import numpy as np
import pytest

from keras_vit import cli
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint
from tests.weights.test_dinov3_parity import files

HUB = pathlib.Path(__file__).resolve().parents[1] / "golden" / "hub"


def _photos(root, size=16):
    from PIL import Image

    rng = np.random.default_rng(0)
    for label in ("cat", "dog"):
        (root / label).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 255, (size, size, 3)).astype("uint8")
            Image.fromarray(pixels).save(root / label / f"{i}.png")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", ["timm_splus", "hf"])
def test_train_starts_from_a_dinov3_file(name, tmp_path):
    """At 24 px (a 6x6 grid, the file's model ran at 4x4: nothing to
    resample) with a 2-class head; the S+ file's SwiGLU too."""
    path = files(name)[0]
    implied = convert.architecture(read_checkpoint(path))
    mlp_dim = 80 if name == "timm_splus" else 64
    output = tmp_path / "run"
    code = cli.main(
        ["train", "--model=Ti/16", "--patch-size=4", "--hidden-dim=32"]
        + ["--num-layers=2", "--num-heads=2", f"--mlp-dim={mlp_dim}"]
        + ["--weights", path, "--dataset", f"folder:{_photos(tmp_path / 'p')}"]
        + ["--image-size=24", "--batch-size=4", "--epochs=1"]
        + ["--mixed-precision=off", "--output", str(output), "--verbose=0"]
    )
    assert code == 0
    model = keras.saving.load_model(output / "model.keras", safe_mode=True)
    assert model.position_embedding == "rope"
    assert model.use_gated_mlp == implied.get("use_gated_mlp", False)
    assert model.num_register_tokens == 4 and model.pooling == "token"
    assert model.image_size == (24, 24) and model.output_shape == (None, 2)
    # The backbone came from the file: its first block's norm is the file's.
    loaded = read_checkpoint(path).tensors["block_0/norm1/gamma"]
    gamma = model.get_layer("block_0").norm1.gamma
    assert np.abs(keras.ops.convert_to_numpy(gamma) - loaded).max() < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["timm_dinov3_splus", "dinov3_vits16"])
def test_few_shot_on_a_dinov3_snapshot(folder, tmp_path, capsys):
    photos = _photos(tmp_path / "photos")
    code = cli.main(
        ["few-shot", str(HUB / folder), "--dataset", f"folder:{photos}"]
        + ["--test-fraction", "0.5", "--shots", "1", "2", "--quiet"]
        + ["--seeds", "2"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "2 classes, 6 test images" in out
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [row[0] for row in rows] == ["1", "2"]
    assert all(0 <= float(row[1]) <= 1 for row in rows)
