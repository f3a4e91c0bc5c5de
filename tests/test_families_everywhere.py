"""The modern families' checkpoints through the whole package.

The tiny timm goldens of tests/weights/test_family_parity.py (DeiT
distilled, DeiT III, DINOv2 with and without registers, CLIP, SigLIP's MAP
head, QK-norm with average pooling), loaded as keras_vit models: saving,
attention maps and figures, few-shot features, fine-tuning at another
resolution, `keras-vit train --weights FILE`, the exports and Keras's JAX
backend.
"""

import functools
import importlib.util
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_vit
from keras_vit import evaluation
from keras_vit import visualize
from keras_vit.export import serving_signatures
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint
from tests import model_runs_on_jax
from tests.weights.test_family_parity import FAMILIES
from tests.weights.test_family_parity import build
from tests.weights.test_family_parity import files

NAMES = sorted(FAMILIES)


@pytest.fixture(scope="module")
def models():
    """Each family's model (16 px, 4x4 patches), built once."""
    return {name: build(name)[1:] for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_a_keras_file_reloads_in_safe_mode(models, name, tmp_path):
    model, expected = models[name]
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    images = expected["images"]
    # (Called, not `predict`: the file is the point, not a traced function.)
    np.testing.assert_array_equal(
        reloaded(images, training=False), model(images, training=False)
    )


@pytest.mark.parametrize("name", NAMES)
def test_attention_maps_count_every_token(models, name):
    model, expected = models[name]
    images = expected["images"]
    tokens = 16 + model.num_prefix_tokens  # 4x4 patches after the prefix
    outputs = model.intermediates_model()(images, training=False)
    assert len(outputs["attention_weights"]) == 2
    for weights in outputs["attention_weights"]:
        assert tuple(weights.shape) == (2, 2, tokens, tokens)
    result = visualize.attention_rollout(model, images)
    assert result.maps.shape == (2, 4, 4) and result.register_rollout is None
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2)), 1.0, atol=1e-6)
    assert result.class_attention.shape == (2, 2, 2, 4, 4)
    shown = visualize.attention_rollout(model, images, registers=True)
    np.testing.assert_allclose(shown.maps, result.maps)
    registers = shown.register_rollout
    assert registers.shape == (2, model.num_register_tokens)
    assert np.all(registers >= 0) and np.all(registers.sum(-1) < 1)
    distances = visualize.mean_attention_distance(model, images)
    assert distances.shape == (2, 2) and np.all(np.isfinite(distances))


def test_registers_are_left_out_of_the_maps(models):
    model, expected = models["dinov2_reg"]
    assert model.num_register_tokens == 4
    result = visualize.attention_rollout(
        model, expected["images"], registers=True
    )
    assert result.register_rollout.shape == (2, 4)
    assert np.all(result.register_rollout > 0)


@pytest.mark.parametrize("name", ["dinov2_reg", "siglip"])
def test_the_papers_figures_of_registers_and_a_map_head(models, name, tmp_path):
    pytest.importorskip("matplotlib")
    model, expected = models[name]
    written = visualize.inspect(model, expected["images"][:1], tmp_path)
    names = sorted(os.path.basename(path) for path in written)
    assert names == [
        "attention_distance.png",
        "class_attention_image0.png",
        "embedding_filters.png",
        "index.html",
        "position_similarity.png",
        "rollout_image0.png",
    ]
    assert all(os.path.getsize(path) > 0 for path in written)


@pytest.mark.parametrize("name", NAMES)
def test_few_shot_reads_one_feature_per_image(models, name):
    model, _ = models[name]
    images = np.random.default_rng(0).uniform(0, 255, (8, 16, 16, 3))
    labels = np.arange(8) % 2
    features = evaluation.representation_model(model).predict(images, verbose=0)
    assert features.shape == (8, 16) and np.all(np.isfinite(features))
    result = evaluation.linear_few_shot(
        features[:4], labels[:4], features[4:], labels[4:], 2, shots=(1, 2)
    )
    assert set(result.accuracy) == {1, 2} and result.num_test == 4


def test_distilled_features_are_both_tokens_mean(models):
    """What the two heads read (and timm's pre-logits): the class and
    distillation tokens' mean, as the model without a head returns; not
    the class token alone."""
    model, expected = models["deit_distilled"]
    config = {**model.get_config(), "include_top": False}
    config.pop("name")
    backbone = keras_vit.ViT(**config)
    backbone.set_weights(
        [
            w.numpy()
            for w in model.weights
            if not w.path.startswith(("head", "head_dist"))
        ]
    )
    images = expected["images"]
    features = evaluation.representation_model(model).predict(images, verbose=0)
    np.testing.assert_allclose(
        features, backbone.predict(images, verbose=0), atol=1e-6
    )


def _fine_tuned(name, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = convert.model_for_checkpoint(
            read_checkpoint(files(name)[0]),
            num_heads=2,
            image_size=24,
            num_classes=3,
            include_top=True,
            **{**FAMILIES[name], **kwargs},
        )
    return model, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", NAMES)
def test_fine_tuning_at_another_resolution_with_a_new_head(name):
    model, notes = _fine_tuned(name)
    assert any("from a 4x4 to a 6x6 patch grid" in n for n in notes)
    assert model.output_shape == (None, 3)
    heads = [w for w in model.weights if w.path.startswith("head")]
    assert len(heads) == (4 if model.distillation else 2)
    assert all(not np.any(w.numpy()) for w in heads)  # new and zero
    # (Eagerly: the new head and grid are the point, not a traced step.)
    model.compile(
        optimizer="adam",
        loss="sparse_categorical_crossentropy",
        run_eagerly=True,
    )
    images = np.random.default_rng(1).uniform(0, 255, (4, 24, 24, 3))
    history = model.fit(images, np.arange(4) % 3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert any(np.any(w.numpy()) for w in heads)  # it trained


def _photos(root):
    from PIL import Image

    rng = np.random.default_rng(0)
    for label in ("cat", "dog"):
        (root / label).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 255, (16, 16, 3)).astype("uint8")
            Image.fromarray(pixels).save(root / label / f"{i}.png")
    return root


#: `keras-vit train` flags for the goldens' size (the file gives the rest).
TINY_FLAGS = [
    "--model=Ti/16",
    "--patch-size=4",
    "--hidden-dim=16",
    "--num-layers=2",
    "--num-heads=2",
    "--mlp-dim=32",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dinov2_reg", "siglip", "deit_distilled"])
def test_the_train_command_starts_from_a_family_file(name, tmp_path):
    from keras_vit import cli

    folder = _photos(tmp_path / "photos")
    output = tmp_path / "run"
    code = cli.main(
        [
            "train",
            *TINY_FLAGS,
            "--weights",
            files(name)[0],
            "--dataset",
            f"folder:{folder}",
            "--image-size=24",
            "--batch-size=4",
            "--epochs=1",
            "--mixed-precision=off",
            "--jit-compile=off",  # (XLA is not the point)
            "--output",
            str(output),
            "--verbose=0",
        ]
    )
    assert code == 0
    model = keras.saving.load_model(output / "model.keras", safe_mode=True)
    implied = convert.architecture(read_checkpoint(files(name)[0]))
    for key in ("num_register_tokens", "pooling", "distillation"):
        assert getattr(model, key) == implied.get(key, getattr(model, key))
    assert model.image_size == (24, 24) and model.output_shape == (None, 2)


@pytest.mark.slow
def test_a_map_head_exports_to_tflite_verified_in_float16(models, tmp_path):
    """SigLIP's MAP head in float16 (in float32: every family's test
    below): builtin ops, one XNNPACK partition, outputs as Keras's; the
    probe's query, folded by the converter, is no lost weight."""
    from keras_vit import export
    from keras_vit.export import graph as graph_lib

    model, _ = models["siglip"]
    result = export.export_tflite(
        model,
        str(tmp_path / "siglip_float16.tflite"),
        quantize="float16",
        num_verify_images=8,
    )
    assert result.report.passed and result.report.xnnpack_partitions == 1
    assert not graph_lib.read_graph(result.path).unsupported_ops()


JAX_SCRIPT = r"""
import json, sys
import numpy as np
import keras
import keras_vit

folder = sys.argv[1]
config = json.load(open(f"{folder}/config.json"))
inputs = np.load(f"{folder}/inputs.npz")
model = keras_vit.ViT(**config)
model.load_weights(f"{folder}/model.weights.h5")
np.save(f"{folder}/jax_outputs.npy", model.predict(inputs["images"], verbose=0))
maps = keras_vit.visualize.attention_rollout(model, inputs["images"]).maps
np.save(f"{folder}/jax_rollout.npy", maps)
model.compile(optimizer="adamw", loss="sparse_categorical_crossentropy")
history = model.fit(inputs["images"], inputs["labels"], epochs=1, verbose=0)
print(json.dumps({"backend": keras.backend.backend(),
                  "loss": history.history["loss"]}))
"""


#: The families `test_a_family_model_on_the_jax_backend` runs on JAX.
ON_JAX = ["dinov2_reg", "siglip"]


def jax_runs():
    """This module's runs in `model_runs_on_jax`'s one JAX process."""
    return {
        f"family_{name}": (
            JAX_SCRIPT,
            functools.partial(_prepare_for_jax, name),
        )
        for name in ON_JAX
    }


def _prepare_for_jax(name, folder):
    """`_fine_tuned(name)` with a random head, its weights, config and four
    images and labels in `folder`."""
    import json

    model, _ = _fine_tuned(name)
    randomize = np.random.default_rng(2)
    head = model.get_layer("head")
    head.kernel.assign(randomize.normal(0, 0.1, head.kernel.shape))
    model.save_weights(folder / "model.weights.h5")
    config = {**model.get_config()}
    config.pop("name", None)
    with open(folder / "config.json", "w") as file:
        json.dump(config, file)
    images = randomize.uniform(0, 255, (4, 24, 24, 3)).astype("float32")
    np.savez(folder / "inputs.npz", images=images, labels=np.arange(4) % 3)


@pytest.mark.slow
@pytest.mark.parametrize("name", ON_JAX)
def test_a_family_model_on_the_jax_backend(name, tmp_path_factory):
    """The golden's weights, fine-tuned to 24 px and 3 classes, compute the
    same outputs and rollout maps on JAX, and train there (in
    `model_runs_on_jax`'s one JAX process)."""
    pytest.importorskip("jax")
    folder, result = model_runs_on_jax.ran(tmp_path_factory, f"family_{name}")
    model, _ = _fine_tuned(name)
    model.load_weights(folder / "model.weights.h5")
    images = np.load(folder / "inputs.npz")["images"]
    assert result["backend"] == "jax" and np.isfinite(result["loss"][0])
    np.testing.assert_allclose(
        np.load(folder / "jax_outputs.npy"),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        np.load(folder / "jax_rollout.npy"),
        visualize.attention_rollout(model, images).maps,
        atol=1e-5,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_family_exports_to_tflite_verified(models, name, tmp_path):
    """In float32: builtin ops only, one XNNPACK partition, outputs as
    Keras's."""
    from keras_vit import export
    from keras_vit.export import graph as graph_lib

    model, _ = models[name]
    path = str(tmp_path / f"{name}.tflite")
    result = export.export_tflite(model, path, num_verify_images=8)
    assert result.report.passed and result.report.xnnpack_partitions == 1
    assert not graph_lib.read_graph(result.path).unsupported_ops()


#: The families' options on a ViT wide enough (64) that dynamic-range
#: quantization has kernels to quantize (the converter leaves tensors under
#: 1024 values in float32, all of the goldens' at width 16: their dynamic
#: export is refused as "quantization 'none', not 'dynamic'").
WIDE = {
    "map_registers": dict(
        pooling="map",
        class_token=False,
        num_register_tokens=2,
        layer_scale_init=1e-5,
        qk_norm=True,
    ),
    "distilled_clip": dict(distillation=True, norm_pre=True, patch_bias=False),
}


@pytest.mark.slow
@pytest.mark.parametrize("quantize", ["none", "float16", "dynamic"])
@pytest.mark.parametrize("options", sorted(WIDE))
def test_family_options_export_in_every_float_mode(options, quantize, tmp_path):
    from keras_vit import export
    from keras_vit.export import graph as graph_lib
    from tests.helpers import randomize_weights

    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=64,
        num_layers=1,
        num_heads=2,
        mlp_dim=128,
        num_classes=8,
        **WIDE[options],
    )
    randomize_weights(model, scale=0.1)
    result = export.export_tflite(
        model,
        str(tmp_path / f"{options}_{quantize}.tflite"),
        quantize=quantize,
        num_verify_images=8,
        min_top1_agreement=0.0 if quantize == "dynamic" else None,
    )
    assert result.report.passed and result.report.xnnpack_partitions == 1
    graph = graph_lib.read_graph(result.path)
    assert graph_lib.detect_quantization(graph) == quantize
    assert not graph.unsupported_ops()


#: The families whose graphs hold something of their own that SavedModel,
#: tf2onnx and OpenVINO convert: DeiT's second head (two token slices,
#: averaged), DINOv2's registers (tokens concatenated after the position
#: embeddings, sliced off before pooling), SigLIP's MAP head (cross-attention
#: from a learned query) and QK-norm (a LayerNorm per head inside attention)
#: with GAP. The other three add only what these and the plain ViTs of
#: tests/export already hold: a scale (DeiT III, DINOv2: one multiply), an
#: extra LayerNorm, a bias-free convolution and x * sigmoid(1.702 x) (CLIP).
#: Every family goes to TFLite above, where the op set is the point.
SERVING = ["deit_distilled", "dinov2_reg", "qknorm_gap", "siglip"]


def _assert_serves_as_keras(model, path):
    """Every serving signature of the SavedModel at `path`, loaded in this
    process, returns Keras's probabilities on images it takes (float
    pixels, uint8 pixels, PNG files), in a batch and alone."""
    pixels = np.round(np.random.default_rng(5).uniform(0, 255, (3, 16, 16, 3)))
    expected = model.predict(pixels.astype("float32"), verbose=0)
    inputs = {
        "float32": pixels.astype("float32"),
        "uint8": pixels.astype("uint8"),
        "string": np.array(
            [tf.io.encode_png(p).numpy() for p in pixels.astype("uint8")]
        ),
    }
    loaded = tf.saved_model.load(path)
    signatures = serving_signatures.saved_model_signatures(model)
    assert sorted(loaded.signatures.keys()) == sorted(signatures)
    for name, dtype in signatures.items():
        argument = (
            serving_signatures.BYTES_INPUT if dtype == "string" else "images"
        )
        function = loaded.signatures[name]
        for batch in (inputs[dtype], inputs[dtype][:1]):
            (output,) = function(**{argument: tf.constant(batch)}).values()
            np.testing.assert_allclose(
                output.numpy(), expected[: len(batch)], atol=1e-4, err_msg=name
            )


@pytest.mark.slow
@pytest.mark.parametrize("name", SERVING)
def test_the_families_own_graphs_export_for_serving_verified(
    models, name, tmp_path
):
    """SavedModel, ONNX and OpenVINO, each checked against Keras (the
    SavedModel loaded in this process; that its graph stands without
    keras_vit, in a fresh process, these families' graphs are no different
    in from a plain ViT's: tests/export/test_saved_model.py)."""
    from keras_vit import export

    model, _ = models[name]
    export.export_saved_model(model, str(tmp_path / "saved"), verify=False)
    _assert_serves_as_keras(model, str(tmp_path / "saved"))
    if importlib.util.find_spec("tf2onnx") is not None:
        export.export_onnx(model, str(tmp_path / f"{name}.onnx"))
        assert (tmp_path / f"{name}.onnx").is_file()
    if importlib.util.find_spec("openvino") is not None:
        # Not {name}.xml: its metadata, {name}.json, is the ONNX file's.
        export.export_openvino(model, str(tmp_path / f"{name}_ov.xml"))
        assert (tmp_path / f"{name}_ov.bin").is_file()


def test_the_distillation_pair_needs_a_target_for_each_head():
    """DeiT's training returns both heads: one label is a clear error
    (Keras's own named a loss path); a target for each trains. (Steps
    run eagerly: the targets are the point, not a traced step.)"""
    model, expected = build("deit_distilled")[1:]
    images = expected["images"]
    labels = np.arange(2)
    compile_ = functools.partial(
        model.compile,
        optimizer="adam",
        loss="sparse_categorical_crossentropy",
        run_eagerly=True,
    )
    compile_()
    model.distilled_training = True
    with pytest.raises(ValueError, match=r"y=\(labels, teacher_labels\)"):
        model.fit(images, labels, epochs=1, verbose=0)
    compile_()  # (a fresh compile: nothing of the failed step is reused)
    history = model.fit(images, (labels, labels[::-1]), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    model.distilled_training = False
    compile_()
    history = model.fit(images, labels, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
