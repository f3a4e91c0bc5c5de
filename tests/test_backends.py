"""The models on Keras's JAX and PyTorch backends (the same numbers as
TensorFlow's, `fit`, saving, dynamic sizes, hybrids) and its OpenVINO
backend (inference).

keras_vit's training command, data pipelines and exports are TensorFlow's;
the layers and models are Keras 3 and must work wherever Keras does. Each
run is a subprocess (a process has one Keras backend).
"""

import json

import numpy as np
import pytest

import keras_vit
from tests.helpers import TINY
from tests.helpers import TINY_HYBRID
from tests.helpers import made_once
from tests.helpers import random_images
from tests.helpers import randomize_weights
from tests.helpers import run_scripts
from tests.helpers import script_result

# Every backend's script starts here: the model of `_prepare`'s files,
# and its predictions saved as `<backend>_outputs.npy`.
PREDICT = r"""
import json, sys
import numpy as np
import keras
import keras_vit

folder = sys.argv[1]
config = json.load(open(f"{folder}/config.json"))
inputs = np.load(f"{folder}/inputs.npz")
model = keras_vit.ViT.from_preset(f"{folder}/model.weights.h5", **config)
np.save(f"{folder}/{keras.backend.backend()}_outputs.npy",
        model.predict(inputs["images"], verbose=0))
"""

SCRIPT = (
    PREDICT
    + r"""
from keras_vit.training.masked_patches import MaskedPatchPrediction

maps = keras_vit.visualize.attention_rollout(model, inputs["images"]).maps
np.save(f"{folder}/{keras.backend.backend()}_rollout.npy", maps)

# fit, save and reload, as a keras.applications model.
model.compile(optimizer=keras.optimizers.AdamW(1e-3),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(inputs["images"], inputs["labels"], epochs=2, batch_size=2,
                    verbose=0)
model.save(f"{folder}/trained.keras")
reloaded = keras.saving.load_model(f"{folder}/trained.keras")
difference = float(np.max(np.abs(reloaded.predict(inputs["images"], verbose=0)
                                 - model.predict(inputs["images"], verbose=0))))
backbone = keras_vit.ViT(**{**config, "include_top": False, "pooling": None})
pretraining = MaskedPatchPrediction(backbone)
pretraining.compile(optimizer="adamw")
mpp = pretraining.fit(inputs["images"], epochs=1, batch_size=2, verbose=0)
print(json.dumps({"backend": keras.backend.backend(),
                  "loss": history.history["loss"],
                  "reload_difference": difference,
                  "mpp_loss": mpp.history["loss"]}))
"""
)


def _prepare(config, folder):
    """A ViT of `config` with random weights (`model.weights.h5`) and
    four images and labels (`inputs.npz`) in `folder`; returns the model
    and images."""
    folder.mkdir(exist_ok=True)
    model = keras_vit.ViT(**config)
    randomize_weights(model, scale=0.1)
    model.save_weights(folder / "model.weights.h5")
    images = random_images((4, 32, 32, 3))
    np.savez(folder / "inputs.npz", images=images, labels=np.arange(4) % 5)
    with open(folder / "config.json", "w") as file:
        json.dump(config, file)
    return model, images


def _run_on_backend(backend, script, config, tmp_path):
    """Runs `script` on Keras's `backend` in a subprocess, on `_prepare`'s
    files in `tmp_path`; returns the model, the images and the JSON the
    script printed last."""
    model, images = _prepare(config, tmp_path)
    run_scripts(backend, [(script, tmp_path)])
    return model, images, script_result(tmp_path, backend)


@pytest.fixture(params=["jax", "torch"])
def backend(request):
    """A Keras backend that trains besides TensorFlow (each from the `dev`
    extra, its module named as the backend)."""
    pytest.importorskip(request.param)
    return request.param


def test_a_vit_on_another_backend(backend, tmp_path_factory):
    model, images, result, folder = _ran(backend, "vit", tmp_path_factory)
    # The same weights compute the same outputs and attention maps.
    np.testing.assert_allclose(
        np.load(folder / f"{backend}_outputs.npy"),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        np.load(folder / f"{backend}_rollout.npy"),
        keras_vit.visualize.attention_rollout(model, images).maps,
        atol=1e-5,
    )
    # fit trains (the TensorFlow-only multi-worker step fixes stay out of
    # JAX's train_step(state, data) and PyTorch's), and a saved model
    # reloads as it was.
    assert all(np.isfinite(result["loss"])) and len(result["loss"]) == 2
    assert result["reload_difference"] == 0.0
    assert np.isfinite(result["mpp_loss"][0])


DYNAMIC_SCRIPT = (
    PREDICT
    + r"""
# Two more sizes, a non-square one, each with its own grid.
for size in ((24, 40), (48, 16)):
    images = np.random.default_rng(size[0]).uniform(0, 255, (2, *size, 3))
    np.save(f"{folder}/{keras.backend.backend()}_{size[0]}.npy",
            model.predict(images, verbose=0))
print(json.dumps({"backend": keras.backend.backend()}))
"""
)


@pytest.mark.parametrize("name", ["dynamic", "rope"])
def test_a_dynamic_image_size_vit_on_another_backend(
    backend, name, tmp_path_factory
):
    # The in-graph resampling (or rotary table) is keras.ops: on JAX
    # (static shapes at each trace) and PyTorch (eager) it computes what
    # TensorFlow does, at every size.
    model, images, _, folder = _ran(backend, name, tmp_path_factory)
    np.testing.assert_allclose(
        np.load(folder / f"{backend}_outputs.npy"),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
    for size in ((24, 40), (48, 16)):
        images = np.random.default_rng(size[0]).uniform(0, 255, (2, *size, 3))
        np.testing.assert_allclose(
            np.load(folder / f"{backend}_{size[0]}.npy"),
            model.predict(images, verbose=0),
            atol=1e-5,
        )


HYBRID_SCRIPT = (
    PREDICT
    + r"""
# A full-size model builds (random weights) and runs.
b16 = keras_vit.ViT_B16()
probabilities = b16.predict(np.zeros((1, 224, 224, 3)), verbose=0)
print(json.dumps({"backend": keras.backend.backend(),
                  "b16_params": b16.count_params(),
                  "b16_sum": float(probabilities.sum())}))
"""
)


def test_a_hybrid_vit_and_vit_b16_on_another_backend(backend, tmp_path_factory):
    # A ResNet stem (convolutions, group norms) computes what TensorFlow's
    # does, and ViT_B16 builds as it does on TensorFlow.
    model, images, result, folder = _ran(backend, "hybrid", tmp_path_factory)
    np.testing.assert_allclose(
        np.load(folder / f"{backend}_outputs.npy"),
        model.predict(images, verbose=0),
        atol=1e-5,
    )
    assert result["b16_params"] == 86_567_656  # timm's vit_base_patch16_224
    assert abs(result["b16_sum"] - 1) < 1e-4  # a softmax over 1000 classes


REMAT_SCRIPT = r"""
import json, sys
import numpy as np
import keras
import keras_vit

folder = sys.argv[1]
config = json.load(open(f"{folder}/config.json"))
inputs = np.load(f"{folder}/inputs.npz")
result = {"backend": keras.backend.backend()}
models = {}
for remat in (False, True):
    keras.utils.set_random_seed(7)  # the same dropout seeds
    model = keras_vit.ViT.from_preset(f"{folder}/model.weights.h5", **config)
    model.remat = remat
    model.compile(optimizer=keras.optimizers.SGD(0.1),  # default jit_compile
                  loss="sparse_categorical_crossentropy")
    history = model.fit(inputs["images"], inputs["labels"], epochs=2,
                        batch_size=4, shuffle=False, verbose=0)
    result[f"loss_remat_{remat}"] = history.history["loss"]
    models[remat] = model
result["weight_difference"] = max(
    float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    for a, b in zip(models[False].weights, models[True].weights))
print(json.dumps(result))
"""


@pytest.mark.slow
def test_remat_with_dropout_trains_on_jax_as_without(tmp_path_factory):
    # jax.checkpoint around a block whose dropout advanced its seed
    # generator inside crashed fit (UnexpectedTracerError).
    pytest.importorskip("jax")
    _, _, result, _ = _ran("jax", "remat", tmp_path_factory)
    np.testing.assert_allclose(
        result["loss_remat_True"], result["loss_remat_False"], rtol=1e-5
    )
    assert result["weight_difference"] < 1e-5
    assert (
        result["loss_remat_True"][1] != result["loss_remat_True"][0]
    )  # it trained


#: What each backend runs, by name: the script and the ViT it runs on
#: (`_prepare`); "remat" on JAX only.
RUNS = {
    "vit": (SCRIPT, {**TINY, "drop_path_rate": 0.1}),
    "dynamic": (DYNAMIC_SCRIPT, {**TINY, "dynamic_image_size": True}),
    # DINOv3's layout: the rotary table computed from each input's grid.
    "rope": (
        DYNAMIC_SCRIPT,
        {
            **TINY,
            "dynamic_image_size": True,
            "position_embedding": "rope",
            "num_register_tokens": 2,
            "qkv_bias": False,
            "layer_scale_init": 0.5,
        },
    ),
    "hybrid": (
        HYBRID_SCRIPT,
        TINY_HYBRID,
    ),
    "remat": (
        REMAT_SCRIPT,
        {
            **TINY,
            "dropout_rate": 0.2,
            "attention_dropout_rate": 0.2,
            "drop_path_rate": 0.3,
        },
    ),
}


def _run_all(backend, root):
    """Every run of `RUNS` for `backend`, in one subprocess (a backend's
    start is most of a small script's time), each in `root / name`."""
    names = [n for n in RUNS if backend == "jax" or n != "remat"]
    for name in names:
        _prepare(RUNS[name][1], root / name)
    run_scripts(backend, [(RUNS[n][0], root / n) for n in names])


def _ran(backend, name, tmp_path_factory):
    """Run `name` of `RUNS` on `backend` (all of that backend's runs made
    once for the test session): the model (its `model.weights.h5` loaded in this
    process, TensorFlow's), its images, the JSON the script printed last,
    and the run's folder."""
    root = made_once(
        tmp_path_factory,
        f"backend_{backend}",
        lambda root: _run_all(backend, root),
    )
    folder = root / name
    model = keras_vit.ViT.from_preset(
        str(folder / "model.weights.h5"), **RUNS[name][1]
    )
    result = script_result(folder, backend)
    return model, np.load(folder / "inputs.npz")["images"], result, folder


OPENVINO_SCRIPT = (
    PREDICT
    + r"""
print(json.dumps({"backend": keras.backend.backend()}))
"""
)


def test_a_vit_predicts_on_the_openvino_backend(tmp_path):
    # Keras's OpenVINO backend runs inference only. OpenVINO computes in
    # bfloat16 on CPUs that have it (Keras gives it no precision), so the
    # outputs are close there and equal to float32 rounding elsewhere.
    pytest.importorskip("openvino")
    from keras_vit.training import recipe

    model, images, _ = _run_on_backend(
        "openvino", OPENVINO_SCRIPT, TINY, tmp_path
    )
    atol = (
        2e-3 if recipe.cpu_has_bfloat16() else 1e-4
    )  # 1.1e-4 seen with bfloat16
    np.testing.assert_allclose(
        np.load(tmp_path / "openvino_outputs.npy"),
        model.predict(images, verbose=0),
        atol=atol,
    )
