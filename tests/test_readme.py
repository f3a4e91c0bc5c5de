"""The README's Python snippets run, and do what their comments say.

Each snippet is found by a line it contains (so editing the README around
it does not break the test) and executed as written; the value of every
top-level expression is kept so the comments' claims can be checked. Only
downloads are left out (a preset is checked to exist instead).
"""

import ast
import os
import re
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import TINY
from tests.helpers import random_images

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")


def _snippet(containing):
    with open(README, encoding="utf-8") as file:
        blocks = re.findall(r"```python\n(.*?)```", file.read(), flags=re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, (
        f"{len(found)} README snippets contain {containing!r}"
    )
    return found[0]


def _run(source, namespace, skip=()):
    """Executes `source` in a copy of `namespace`; returns the values of its
    expression statements and the namespace it left.

    Statements containing any string of `skip` are left out."""
    tree = ast.parse(source)
    values = []
    body = []
    for node in tree.body:
        if any(s in ast.get_source_segment(source, node) for s in skip):
            continue
        if isinstance(node, ast.Expr):  # `expr` -> `_values.append(expr)`
            node = ast.Expr(
                ast.Call(
                    ast.Attribute(
                        ast.Name("_values", ast.Load()), "append", ast.Load()
                    ),
                    [node.value],
                    [],
                )
            )
        body.append(node)
    module = ast.fix_missing_locations(ast.Module(body, type_ignores=[]))
    namespace = {**namespace, "_values": values}
    exec(compile(module, README, "exec"), namespace)
    return values, namespace


@pytest.mark.slow
def test_quick_start():
    source = _snippet("model = keras_vit.ViT_B16(num_classes=10)")
    images = random_images((2, 224, 224, 3))
    labels = np.array([3, 7])
    # The last line downloads a release; its preset must exist.
    assert 'weights="augreg_in21k")' in source
    assert keras_vit.registry.find_preset("B/16", "augreg_in21k") is not None
    namespace = {"images": images, "labels": labels}
    _, after = _run(source, namespace, skip=('weights="augreg_in21k"',))
    model = after["model"]
    assert (
        model.output_shape == (None, 10) and model.count_params() == 85_806_346
    )
    assert model.optimizer.iterations.numpy() == 1  # one fit step on 2 images


def test_classifying_with_an_imagenet_release(tmp_path, monkeypatch):
    from keras.src.applications import imagenet_utils
    from PIL import Image

    source = _snippet("imagenet_utils.decode_predictions")
    assert 'weights="augreg_in21k_ft_in1k")' in source
    preset = keras_vit.registry.find_preset("B/16", "augreg_in21k_ft_in1k")
    assert preset["num_classes"] == 1000 and preset["image_size"] == 224
    # Offline: a small 1000-class model whose head favours class 281, and
    # Keras's class index in its real format ({"281": [wnid, name], ...}).
    model = keras_vit.ViT(**{**TINY, "num_classes": 1000})
    bias = np.zeros(1000, "float32")
    bias[281] = 5.0
    model.get_layer("head").bias.assign(bias)
    index = {str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}
    index["281"] = ["n02123045", "tabby"]
    monkeypatch.setattr(imagenet_utils, "CLASS_INDEX", index)
    Image.fromarray(random_images((1, 40, 50, 3))[0].astype("uint8")).save(
        tmp_path / "cat.jpg"
    )
    monkeypatch.chdir(tmp_path)
    values, after = _run(
        source,
        {"keras_vit": keras_vit, "keras": keras, "np": np, "model": model},
        skip=("weights=",),
    )
    assert after["probs"].shape == (1, 1000)
    ((top, *_),) = values[-1]
    assert top[:2] == ("n02123045", "tabby") and top[2] > 0.1


def test_keras_int8_weights(tmp_path, monkeypatch):
    source = _snippet('model.save("vit_int8.keras")')
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers without weights to quantize
        _run(source, {"model": model})
    loaded = keras.saving.load_model("vit_int8.keras")
    assert loaded.get_layer("head").quantization_mode == "int8"


def test_model_constructors():
    values, _ = _run(
        _snippet("keras_vit.ViT_B16(image_size=(224, 320))"),
        {"keras_vit": keras_vit},
    )
    s16_384, wide, features, tokens, gap, s8, custom = values
    assert tuple(s16_384.grid_size) == (24, 24) and s16_384.output_shape == (
        None,
        37,
    )
    assert tuple(wide.grid_size) == (14, 20)
    assert features.output_shape == (None, 768)
    assert tokens.output_shape == (None, 197, 768)
    assert gap.num_prefix_tokens == 0
    assert (s8.patch_size, s8.hidden_dim, s8.output_shape) == (
        8,
        384,
        (None, 10),
    )
    assert tuple(custom.grid_size) == (8, 8) and custom.num_layers == 6


def test_hybrids():
    values, _ = _run(
        _snippet("keras_vit.ViT_R50_B16(num_classes=10)"),
        {"keras_vit": keras_vit, "keras": keras},
    )
    r50, resnet_stem, keras_stem = values
    assert tuple(r50.grid_size) == (14, 14) and r50.output_shape == (None, 10)
    assert resnet_stem.stem is not None and resnet_stem.output_shape == (
        None,
        10,
    )
    assert tuple(keras_stem.grid_size) == (7, 7)  # ResNet50V2's 32x reduction


def test_mixed_precision():
    try:
        _run(
            _snippet('keras.config.set_dtype_policy("mixed_bfloat16")'),
            {"keras": keras},
        )
        model = keras_vit.ViT(**TINY)
        assert model.dtype_policy.compute_dtype == "bfloat16"
        out = model(random_images((2, 32, 32, 3)))
    finally:
        keras.config.set_dtype_policy("float32")
    assert (
        keras.backend.standardize_dtype(out.dtype) == "float32"
    )  # as the README says


def test_openvino_export(tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    images = random_images((1, *model.input_shape[1:]))
    _, namespace = _run(
        _snippet('openvino.export_openvino(model, "vit.xml")'),
        {"model": model, "images": images},
    )
    assert sorted(os.listdir(tmp_path)) == ["vit.bin", "vit.xml"]
    np.testing.assert_allclose(
        namespace["probabilities"], model.predict(images, verbose=0), atol=1e-5
    )


def test_intermediates():
    model = keras_vit.ViT(**TINY)
    images = random_images((2, 32, 32, 3))
    namespace = {"model": model, "images": images}
    (blocks, attentions, output), _ = _run(
        _snippet("inter = model.intermediates_model()"), namespace
    )
    assert len(blocks) == len(attentions) == TINY["num_layers"]
    assert tuple(blocks[0].shape) == (2, 17, TINY["hidden_dim"])
    weights = np.asarray(attentions[-1])
    assert weights.dtype == np.float32 and weights.shape == (
        2,
        TINY["num_heads"],
        17,
        17,
    )
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(
        np.asarray(output), np.asarray(model(images)), atol=1e-6
    )


def test_save_npz_and_visualize(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    _run(
        _snippet('keras_vit.weights.save_npz(model, "mine.npz")'),
        {"keras_vit": keras_vit, "model": model},
    )
    reloaded = keras_vit.ViT.from_preset("mine.npz", **TINY)
    for a, b in zip(model.weights, reloaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    images = random_images((2, 32, 32, 3))
    (figure, distances, similarity, filters, files), after = _run(
        _snippet("from keras_vit import visualize"),
        {"model": model, "images": images},
    )
    result = after["result"]
    assert result.maps.shape == (2, 4, 4)
    assert figure.__class__.__name__ == "Figure"
    figure.clf()
    assert distances.shape == (TINY["num_layers"], TINY["num_heads"])
    assert similarity.shape == (4, 4, 4, 4)
    assert filters.shape == (
        TINY["hidden_dim"],
        8,
        8,
        3,
    )  # n=28 > the 16 filters there are
    assert (tmp_path / "figures" / "index.html").exists() and len(files) >= 5


def test_masked_patch_prediction(tmp_path, monkeypatch):
    # The snippet as written, on a folder of 4 photos, with ViT_S16 shrunk
    # to a tiny ViT of the same resolution (the API path is what is tested).
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    (tmp_path / "photos").mkdir()
    for i, image in enumerate(random_images((4, 40, 50, 3)).astype("uint8")):
        Image.fromarray(image).save(tmp_path / "photos" / f"{i}.png")
    tiny = dict(
        patch_size=32, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=16
    )
    monkeypatch.setattr(
        keras_vit, "ViT_S16", lambda **kw: keras_vit.ViT(**tiny, **kw)
    )
    _, after = _run(
        _snippet("mpp = keras_vit.training.MaskedPatchPrediction("),
        {"keras": keras, "keras_vit": keras_vit},
    )
    history = after["mpp"].history.history
    assert (
        len(history["loss"]) == 100 and history["loss"][-1] < history["loss"][0]
    )
    model = after["model"]
    assert model.output_shape == (None, 10)
    np.testing.assert_array_equal(
        np.asarray(model.get_layer("block_0").weights[0]),
        np.asarray(after["mpp"].backbone.get_layer("block_0").weights[0]),
    )
