"""Writes tests/golden/hub/keras_to_timm_*/: keras_vit models saved as
timm folders (`keras_vit.weights.timm_folder.save_timm`), with the
keras_vit model's outputs (`expected.npz`: `output` for the input of
make_hub_snapshots.py, `np.random.default_rng(0)` pixels in [0, 1] at the
model's size, fed as [0, 255]).

Run with keras_vit's environment, from the repository root:
    python tests/golden/make_timm_folders.py
then check them with timm (tests/golden/check_timm_folders.py).
"""

import pathlib
import shutil

import numpy as np

from keras_vit.weights import timm_folder
from tests.weights.test_hub import GOLDEN
from tests.weights.test_hub import TIMM_FOLDERS
from tests.weights.test_hub import timm_source_model


def main():
    for name in TIMM_FOLDERS:
        folder = pathlib.Path(GOLDEN) / name
        shutil.rmtree(folder, ignore_errors=True)
        model = timm_source_model(name)
        timm_folder.save_timm(model, folder)
        size = model.image_size[0]
        pixels = np.random.default_rng(0).random((1, size, size, 3), "float32")
        output = np.asarray(model(pixels * 255))
        np.savez_compressed(folder / "expected.npz", output=output)
        print(folder, output.shape)


if __name__ == "__main__":
    main()
