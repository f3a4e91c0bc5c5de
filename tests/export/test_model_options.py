"""The architecture options of issue 25 export to TFLite with builtin ops
only, in one XNNPACK partition, and match Keras."""

import numpy as np
import pytest

import keras_vit
from keras_vit import export
from keras_vit.export import graph as graph_lib
from keras_vit.export import runtime as runtime_lib
from tests.export.helpers import TINY_EXPORT
from tests.helpers import randomize_weights

#: Every option on, in the three heads they go with.
MODELS = {
    "token-distilled": dict(
        activation="quick_gelu",
        layer_scale_init=0.1,
        qk_norm=True,
        patch_bias=False,
        norm_pre=True,
        position_embedding_tokens="patches",
        num_register_tokens=2,
        distillation=True,
    ),
    "map": dict(
        pooling="map",
        activation="gelu_tanh",
        num_register_tokens=1,
        layer_scale_init=0.1,
        qk_norm=True,
    ),
    "gap-fc_norm": dict(pooling="gap", fc_norm=True, norm_pre=True),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_options_export_with_builtin_ops_in_one_partition(tmp_path, name):
    model = keras_vit.ViT(**TINY_EXPORT, **MODELS[name])
    randomize_weights(model, seed=4, scale=0.1)
    result = export.export_tflite(
        model, tmp_path / "m.tflite", num_verify_images=10
    )
    assert result.report is not None and not result.report.failures
    assert result.report.xnnpack_partitions == 1
    graph = graph_lib.read_graph(result.path)
    assert not graph.unsupported_ops()
    ops = graph.histogram()
    assert "CUSTOM" not in ops and "GATHER" not in ops
    images = (
        np.random.default_rng(1)
        .uniform(0, 255, (3, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        np.concatenate(
            [
                runtime_lib.run_tflite(result.path, images[i : i + 1])
                for i in range(3)
            ]
        ),
        model.predict(images, verbose=0),
        atol=1e-4,
    )
