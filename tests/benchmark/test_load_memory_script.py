"""benchmarks/load_memory.py measures a load in a process of its own."""

import sys

import pytest

import keras_vit
from tests.benchmark import script as benchmark_script
from tests.helpers import TINY


@pytest.mark.skipif(sys.platform == "win32", reason="resource.getrusage")
def test_a_load_is_measured_in_its_own_process(tmp_path):
    script = benchmark_script("load_memory")
    model = keras_vit.ViT(**TINY)
    weights, keras_file = script.saved_files(model, str(tmp_path))
    assert weights.endswith(".weights.h5") and keras_file.endswith(".keras")
    config = model.get_config()
    result = script.measure(config, keras_file, "ViT.load_weights")
    assert result["added_mb"] >= 0 and result["seconds"] > 0
    # A load that fails is an error naming the loader and the file.
    with pytest.raises(RuntimeError, match="keras_vit.load_weights on .*x"):
        script.measure(
            config, str(tmp_path / "x.npz"), "keras_vit.load_weights"
        )
