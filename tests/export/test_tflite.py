"""TFLite export: every quantization mode, builtin ops only, verified."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_vit import export
from keras_vit.export import graph as graph_lib
from keras_vit.export import runtime as runtime_lib
from keras_vit.export import tflite as tflite_lib
from keras_vit.export import verification as verify_lib

QUANTIZATIONS = export.QUANTIZATIONS


@pytest.fixture(scope="module")
def random_exports(random_model_path, tmp_path_factory):
    """Every variant of the perturbed tiny ViT, exported and verified.

    Random weights give near-tied classes on real images, where any
    rounding flips the top-1; the quantized variants' floors are held on
    the trained model below, so here the agreement is only reported.
    """
    folder = tmp_path_factory.mktemp("random_exports")
    model = keras.saving.load_model(random_model_path, compile=False)
    results = {}
    for q in QUANTIZATIONS:
        results[q] = export.export_tflite(
            model,
            folder / f"random_{q}.tflite",
            quantize=q,
            representative_data="digits",
            num_verify_images=50,
            min_top1_agreement=0.0
            if q in ("dynamic", "int8", "int16x8")
            else None,
        )
    return results


@pytest.mark.parametrize("quantize", QUANTIZATIONS)
def test_every_variant_matches_keras(random_exports, quantize):
    report = random_exports[quantize].report
    print(report.summary())
    assert report.passed
    # Three LiteRT runtimes on real images and on the representative data.
    runtimes = {c.runtime for c in report.comparisons}
    assert runtimes == set(runtime_lib.INTERPRETERS)
    assert len(report.comparisons) == 6
    # The slow reference kernels check a few images when the limit is on
    # max |Δ|; a top-1 floor (held here at 0 for the quantized files) needs
    # every image.
    counts = {(c.source, c.runtime): c.num_images for c in report.comparisons}
    for (source, runtime), n in counts.items():
        if runtime == "reference":
            full = counts[source, "xnnpack"]
            assert full > verify_lib.REFERENCE_KERNEL_IMAGES
            floor = quantize in ("dynamic", "int8", "int16x8")
            assert n == (full if floor else verify_lib.REFERENCE_KERNEL_IMAGES)
    for c in report.comparisons:
        assert np.isfinite(c.max_abs)
        if quantize == "none":
            assert c.max_abs <= 1e-4
        elif quantize == "float16":
            assert c.max_abs <= 1e-2


@pytest.mark.parametrize("quantize", QUANTIZATIONS)
def test_builtin_ops_only(random_exports, quantize):
    graph = graph_lib.read_graph(random_exports[quantize].path)
    assert not graph.unsupported_ops()
    assert graph_lib.detect_quantization(graph) == quantize
    histogram = graph.histogram()
    # Patches are a reshape/transpose, GELU is the builtin op.
    assert histogram["GELU"] == 2
    assert "CONV_2D" not in histogram


@pytest.mark.parametrize("quantize", ["none", "float16", "dynamic"])
def test_xnnpack_takes_the_whole_float_graph(random_exports, quantize):
    # One partition: no op falls back to the builtin kernels between
    # delegated pieces (`qkv[0]` and `tokens[:, 0]` once did, every block).
    report = random_exports[quantize].report
    assert report.xnnpack_partitions == 1
    assert (
        "XNNPACK delegate: 1 partition(s) (the whole graph)" in report.summary()
    )
    assert (
        runtime_lib.xnnpack_partitions(
            random_exports[quantize].path, num_threads=2
        )
        == 1
    )


@pytest.mark.parametrize("quantize", ["int8", "int16x8"])
def test_full_integer_graphs_compute_in_integers(random_exports, quantize):
    # keras_vit's LayerNorm quantizes cleanly: no float NEG (or any float
    # op) between the input QUANTIZE and the output DEQUANTIZE.
    graph = graph_lib.read_graph(random_exports[quantize].path)
    assert dict(graph.float_ops()) == {}
    histogram = graph.histogram()
    assert histogram["DEQUANTIZE"] == 1  # the output
    # Patches -> ... -> SOFTMAX: no SQUARED_DIFFERENCE (no int16 kernel).
    assert "SQUARED_DIFFERENCE" not in histogram and "NEG" not in histogram
    activation = "INT8" if quantize == "int8" else "INT16"
    fully_connected = [op for op in graph.ops if op.name == "FULLY_CONNECTED"]
    assert all(op.input_types == (activation,) for op in fully_connected)


@pytest.mark.parametrize(
    "quantize, low, high",
    [
        ("none", 3.9, 4.2),
        ("float16", 1.95, 2.2),
        ("dynamic", 0.95, 4.2),
        ("int8", 0.95, 1.5),
        ("int16x8", 0.95, 2.0),
    ],
)
def test_the_weights_are_in_the_file(random_exports, quantize, low, high):
    report = random_exports[quantize].report
    assert low <= report.bytes_per_parameter <= high
    assert report.file_bytes > report.weight_bytes


def test_sidecar_metadata(random_exports):
    result = random_exports["int8"]
    assert result.metadata_path.endswith("random_int8.json")
    with open(result.metadata_path) as file:
        meta = json.load(file)
    assert meta == result.metadata
    assert meta["format"] == "tflite"
    assert meta["quantization"] == "int8"
    assert meta["class_names"] == [f"class_{i}" for i in range(10)]
    assert meta["input"]["shape"] == [1, 32, 32, 3]
    assert meta["input"]["dtype"] == "float32"
    assert meta["input"]["pixel_range"] == [0, 255]
    assert meta["output"] == {
        "kind": "probabilities",
        "shape": [1, 10],
        "dtype": "float32",
    }
    assert meta["keras_vit_version"] == __import__("keras_vit").__version__
    umask = os.umask(0)
    os.umask(umask)
    for path in (result.path, result.metadata_path):
        assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_dynamic_batch(random_model, tmp_path):
    result = export.export_tflite(
        random_model,
        tmp_path / "dyn.tflite",
        batch_size=None,
        num_verify_images=10,
    )
    assert result.metadata["input"]["shape"] == [None, 32, 32, 3]
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (5, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        runtime_lib.run_tflite(result.path, images),
        random_model.predict(images, verbose=0),
        atol=1e-4,
    )


@keras.saving.register_keras_serializable(package="tests_export")
class TFExtractPatches(keras.layers.Layer):
    """Patches with `tf.image.extract_patches`: a Flex op in TFLite."""

    def call(self, images):
        patches = tf.image.extract_patches(
            images, [1, 8, 8, 1], [1, 8, 8, 1], [1, 1, 1, 1], "VALID"
        )
        return tf.reshape(patches, (-1, 16, 8 * 8 * 3))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 16, 8 * 8 * 3)


def test_flex_ops_are_refused_by_name(tmp_path):
    inputs = keras.Input((32, 32, 3))
    x = TFExtractPatches()(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(3, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="flex_model")
    with pytest.raises(
        ValueError, match=r"not LiteRT builtins: FlexExtractImagePatches \(x1\)"
    ):
        export.export_tflite(model, tmp_path / "flex.tflite")
    assert list(tmp_path.iterdir()) == []


def _keras_layer_norm_model():
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Reshape((64, 48))(inputs)
    x = keras.layers.Dense(16)(x)
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="keras_ln")(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(3, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="keras_layer_norm")


def test_keras_layer_normalization_would_not_quantize_cleanly(tmp_path):
    # Why keras_vit has its own LayerNorm: Keras's leaves a float NEG in a
    # "full int8" graph, refused by the conversion itself (not only by the
    # verification), and int16x8 fails; both name the layer.
    model = _keras_layer_norm_model()
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (16, 32, 32, 3))
        .astype("float32")
    )
    with pytest.raises(
        ValueError, match=r"left float ops .*NEG \(x1\)(.|\n)*keras_ln"
    ):
        tflite_lib.tflite_bytes(model, "int8", images)
    with pytest.raises(ValueError) as error:
        tflite_lib.tflite_bytes(model, "int16x8", images)
    text = str(error.value)
    assert "16x8-bit not yet supported for op: 'NEG'" in text
    assert "keras_ln (LayerNormalization)" in text
    lines = text.splitlines()
    assert len(lines) == len(set(lines))  # the converter's repeats dropped


def test_a_full_integer_file_with_float_ops_is_never_written(tmp_path):
    # verify=False skips the verification, not the graph's own check: the
    # file and a sidecar saying int8 were written.
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (16, 32, 32, 3))
        .astype("float32")
    )
    with pytest.raises(ValueError, match=r"float ops .*NEG"):
        export.export_tflite(
            _keras_layer_norm_model(),
            tmp_path / "ln.tflite",
            quantize="int8",
            representative_data=images,
            verify=False,
        )
    assert list(tmp_path.iterdir()) == []


def test_verify_checks_the_file_against_its_mode(random_exports, random_model):
    # A float32 file checked as int8: 4 bytes per parameter where about 1
    # is expected, and float ops in what should be an integer graph.
    report = verify_lib.verify_tflite(
        random_exports["none"].path,
        random_model,
        quantization="int8",
        num_images=4,
        raise_on_failure=False,
    )
    assert not report.passed
    text = "\n".join(report.failures)
    assert "bytes/parameter" in text
    assert "float ops inside a fully quantized graph" in text
    assert "tensor types say quantization 'none'" in text


def test_verification_threads_default_to_every_core(
    random_exports, random_model, monkeypatch
):
    seen = []
    real = runtime_lib.run_tflite

    def run_tflite(path, images, runtime="xnnpack", num_threads=None):
        seen.append(num_threads)
        return real(path, images, runtime, num_threads)

    monkeypatch.setattr(runtime_lib, "run_tflite", run_tflite)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    path = random_exports["none"].path
    assert verify_lib.verify_tflite(path, random_model, num_images=2).passed
    assert seen and set(seen) == {3}
    seen.clear()
    assert verify_lib.verify_tflite(
        path, random_model, num_images=2, num_threads=1
    ).passed
    assert seen and set(seen) == {1}


def test_a_file_without_its_weights_fails_verification(random_model, tmp_path):
    # A known trap (DESIGN.md section 5): converting a Keras 3 model's
    # concrete function writes variable handles, not the weights.
    function = tf.function(lambda x: random_model(x, training=False))
    concrete = function.get_concrete_function(
        tf.TensorSpec((1, 32, 32, 3), tf.float32)
    )
    data = tf.lite.TFLiteConverter.from_concrete_functions(
        [concrete], random_model
    ).convert()
    path = tmp_path / "weightless.tflite"
    path.write_bytes(data)
    report = verify_lib.verify_tflite(
        path,
        random_model,
        num_images=4,
        runtimes=("builtin",),
        raise_on_failure=False,
    )
    text = "\n".join(report.failures)
    assert "the weights are missing" in text
    assert "the weights were not frozen into the file" in text
    assert report.bytes_per_parameter < 0.1


@pytest.mark.parametrize("position_embedding", ["learned2d", "relative"])
def test_position_embedding_ablations_export_with_builtin_ops(
    tmp_path, position_embedding
):
    # The paper's 2D ablation builds its embedding from two tables, the
    # relative one skews per-offset logits in every block: the file must
    # still be builtin ops only and match Keras.
    import keras_vit
    from tests.export.helpers import TINY_EXPORT
    from tests.helpers import randomize_weights

    model = keras_vit.ViT(**TINY_EXPORT, position_embedding=position_embedding)
    randomize_weights(model, seed=4)
    result = export.export_tflite(
        model, tmp_path / "m.tflite", num_verify_images=10
    )
    assert result.report is not None and not result.report.failures  # verified
    ops = graph_lib.op_histogram(result.path)
    assert "CUSTOM" not in ops and "FLEX" not in " ".join(ops)
    # The relative logits are skewed with reshapes and slices, no GATHER
    # (which XNNPACK does not take).
    assert "GATHER" not in ops
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


def test_a_new_models_zero_head_is_refused_for_calibrated_quantization(
    tmp_path, monkeypatch
):
    # A new model's head is zero-initialised: its logits are constant, the
    # calibrated range is a single value, and LiteRT's reference kernels
    # abort the whole process on such a file (TF 2.21). Refused, nothing
    # written; a file made anyway is reported, not run.
    import keras_vit
    from tests.export.helpers import TINY_EXPORT

    model = keras_vit.ViT(**TINY_EXPORT)
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (8, 32, 32, 3))
        .astype("float32")
    )
    for quantize in ("int8", "int16x8"):
        with pytest.raises(
            ValueError,
            match=rf"quantize='{quantize}'.*single value.*head is all zeros",
        ):
            export.export_tflite(
                model,
                tmp_path / f"new_{quantize}.tflite",
                quantize=quantize,
                representative_data=images,
            )
    assert list(tmp_path.iterdir()) == []
    # Float exports of the same model are fine: nothing is quantized.
    assert export.export_tflite(
        model, tmp_path / "new.tflite", num_verify_images=4
    ).report.passed

    monkeypatch.setattr(graph_lib.Graph, "degenerate_ranges", lambda self: [])
    data = tflite_lib.tflite_bytes(model, "int8", images)
    monkeypatch.undo()
    graph = graph_lib.read_graph(data)
    assert any("head" in name for name in graph.degenerate_ranges())
    path = tmp_path / "forced_int8.tflite"
    path.write_bytes(data)
    report = verify_lib.verify_tflite(
        path, model, num_images=4, raise_on_failure=False
    )
    assert any("single value" in failure for failure in report.failures)
    assert {c.runtime for c in report.comparisons} == {"xnnpack", "builtin"}


def _mixed_and_float32(policy, **kwargs):
    """A tiny ViT under `policy` and the same model built in float32."""
    import keras_vit
    from tests.export.helpers import TINY_EXPORT
    from tests.helpers import randomize_weights

    mixed = keras_vit.ViT(**{**TINY_EXPORT, **kwargs}, dtype=policy)
    randomize_weights(mixed, seed=4, scale=0.1)
    reference = keras_vit.ViT(**{**TINY_EXPORT, **kwargs})
    reference.set_weights(mixed.get_weights())
    return mixed, reference


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_mixed_precision_model_exports_as_float32(tmp_path, policy):
    # A model trained on a TPU (mixed_bfloat16) or GPU (mixed_float16) used
    # to fail with Flex ops (bfloat16/float16 arithmetic is not builtin);
    # its file now holds the same weights computing in float32.
    mixed, reference = _mixed_and_float32(policy)
    result = export.export_tflite(
        mixed, tmp_path / "m.tflite", num_verify_images=10
    )
    assert result.report.passed
    assert graph_lib.read_graph(result.path).unsupported_ops() == {}
    images = (
        np.random.default_rng(0)
        .uniform(0, 255, (4, 32, 32, 3))
        .astype("float32")
    )
    np.testing.assert_allclose(
        runtime_lib.run_tflite(result.path, images),
        np.asarray(reference(images)),
        atol=1e-4,
    )
    # The user's model is left as it was, and verifies against the file.
    assert mixed.dtype_policy.name == policy
    assert verify_lib.verify_tflite(
        result.path, mixed, data="digits", num_images=10
    ).passed
