"""Helpers of the export tests."""

import json
import os
import subprocess

import numpy as np

from keras_vit.export import latency
from tests.helpers import TINY

#: The tiny ViT of the export tests: `TINY` (16 patches of 8x8 pixels)
#: twice as wide, so that its MLP kernels (32 x 64) hold the 1,024 values
#: below which the TFLite converter leaves a tensor unquantized; 10
#: classes, as the digits that exports verify on have.
TINY_EXPORT = dict(TINY, hidden_dim=32, mlp_dim=64, num_classes=10)


def listing(folder):
    """Every file under `folder` (to check nothing was left behind)."""
    return sorted(
        os.path.relpath(os.path.join(root, f), folder)
        for root, _, names in os.walk(folder)
        for f in names
    )


def digits_npz(path, image_size=32, n=20):
    from keras_vit.export import load_images

    images = load_images("digits", (image_size, image_size), limit=n)
    np.savez(path, images=images.images, labels=images.labels)
    return str(path)


def tf_latency_stand_in(monkeypatch):
    """Stands in for the process of `keras_vit.export.tf_latency` that
    `benchmark_export` starts to time Keras and the SavedModel (a fresh
    TensorFlow, seconds; test_latency.py runs the real one), for a test
    whose claim is elsewhere: it checks the `.keras` copy and the SavedModel
    it is given exist, and reports two calls of 1 and 2 ms each."""

    def run(argv, **kwargs):
        assert argv[1:3] == ["-m", "keras_vit.export.tf_latency"], argv
        keras_path, saved_path = argv[4:6]
        assert os.path.isfile(keras_path) and os.path.isdir(saved_path)
        times = json.dumps({"keras": [1.0, 2.0], "saved_model": [1.0, 2.0]})
        return subprocess.CompletedProcess(argv, 0, f"{times}\n", "")

    monkeypatch.setattr(latency.subprocess, "run", run)
