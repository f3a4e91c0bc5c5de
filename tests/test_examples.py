"""The scripts in examples/ run, and ask for what their docstrings say.

Training examples that need a download, a TPU or several machines are run
up to the point where they hand their `TrainConfig` to `train`: the config
must pass `check()`, name presets that exist, and build its model at the
resolution the docstring promises. The offline examples run for real, with
small sizes. (`examples/tflite_inference.py` is run in
tests/export/test_cli.py; `examples/demo.py` is `make demo`: its config is
checked here and said the same way in its docstring and docs/index.md.)
"""

import dataclasses
import os
import re
import runpy
import sys

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.registry import find_preset
from keras_vit.training import TrainResult
from keras_vit.training.train import build_model
from keras_vit.training.train import make_run_optimizer
from tests.helpers import TINY_BLOCK
from tests.helpers import fewer_digits
from tests.helpers import randomize_weights

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples")


def _load(name):
    return runpy.run_path(os.path.join(EXAMPLES, name))


@pytest.fixture
def without_xla(monkeypatch):
    """Keras models compile without XLA here: an example's XLA compiles
    were most of its test's time on a CPU (tests/training cover XLA
    training); what it trains is the same."""
    compile_ = keras.Model.compile

    def compile_without_xla(self, *args, **kwargs):
        return compile_(self, *args, **{**kwargs, "jit_compile": False})

    monkeypatch.setattr(keras.Model, "compile", compile_without_xla)


@pytest.fixture
def captured(monkeypatch):
    """Replaces `keras_vit.training.train`; returns the configs it got."""
    configs = []

    def fake_train(config, *args, **kwargs):
        configs.append(config)
        return TrainResult(
            None, {}, {"accuracy": 0.5}, config.run.output, "default", 0
        )

    monkeypatch.setattr(keras_vit.training, "train", fake_train)
    return configs


def _run_main(name, argv, monkeypatch):
    module = _load(name)
    monkeypatch.setattr(sys, "argv", [name, *argv])
    module["main"]()


def _model_of(config, num_classes):
    # The model the run would train, without downloading its weights.
    model = dataclasses.replace(config.model, weights=None)
    return build_model(dataclasses.replace(config, model=model), num_classes)


def test_train_cifar10_asks_for_s16_on_8x8_patches(
    captured, monkeypatch, tmp_path
):
    _run_main(
        "train_cifar10.py",
        ["--output", str(tmp_path), "--epochs", "3"],
        monkeypatch,
    )
    (config,) = captured
    config.check()
    assert (config.data.dataset, config.run.epochs, config.run.output) == (
        "cifar10",
        3,
        str(tmp_path),
    )
    augmentation = config.augmentation
    assert augmentation.mixup and augmentation.cutmix
    assert augmentation.rand_augment
    model = _model_of(config, 10)
    assert (
        model.hidden_dim == 384 and model.num_layers == 12
    )  # S/16's width and depth
    assert tuple(model.image_size) == (64, 64) and tuple(model.grid_size) == (
        8,
        8,
    )


def test_train_multi_worker_lets_tf_config_choose(
    captured, monkeypatch, tmp_path
):
    _run_main("train_multi_worker.py", ["--output", str(tmp_path)], monkeypatch)
    (config,) = captured
    config.check()
    assert config.scale.strategy == "auto"
    assert config.data.dataset == "fashion_mnist"
    assert tuple(_model_of(config, 10).grid_size) == (4, 4)


def test_train_multi_worker_takes_the_global_batch_size(
    captured, monkeypatch, tmp_path
):
    # Its docstring documented a --batch-size that did not exist.
    argv = ["--output", str(tmp_path), "--batch-size", "512"]
    _run_main("train_multi_worker.py", argv, monkeypatch)
    (config,) = captured
    assert config.data.batch_size == 512


def test_train_cifar10_command_in_its_docstring_is_the_same_run(
    captured, monkeypatch, tmp_path
):
    # The audit: the "same run" from the command line held out no images
    # (validation_split 0.0, not 0.02) and chose its strategy ("auto").
    import shlex

    from keras_vit.cli import build_parser
    from keras_vit.cli.train import config_from_args
    from keras_vit.training.config import flatten

    module = _load("train_cifar10.py")
    doc = module["__doc__"]
    command = doc[doc.index("keras-vit train") :].replace("\\\n", " ")
    argv = shlex.split(command)[1:]
    output = argv[argv.index("--output") + 1]
    monkeypatch.setattr(sys, "argv", ["train_cifar10.py", "--output", output])
    module["main"]()
    (script,) = captured
    cli = config_from_args(build_parser().parse_args(argv))
    script, cli = (flatten(dataclasses.asdict(c)) for c in (script, cli))
    assert {
        k: (v, cli.get(k)) for k, v in script.items() if v != cli.get(k)
    } == {}
    assert (script["validation_split"], script["strategy"]) == (0.02, "default")


def test_train_tpu_fine_tunes_b16_at_384(captured, monkeypatch, tmp_path):
    _run_main(
        "train_tpu.py",
        [
            "--data-dir",
            "gs://bucket/tfds",
            "--output",
            str(tmp_path),
            "--tpu",
            "my-tpu",
        ],
        monkeypatch,
    )
    (config,) = captured
    config.check()
    scale = config.scale
    assert (scale.strategy, scale.tpu, scale.mixed_precision) == (
        "tpu",
        "my-tpu",
        "bfloat16",
    )
    assert find_preset("B/16", config.model.weights)["image_size"] == 224
    # The docstring's --output was gs://, which the run wrote to ./gs:/.
    doc = _load("train_tpu.py")["__doc__"]
    command = doc[: doc.index("With a TPU node")]
    assert "--output runs/flowers" in command and "--output gs:" not in doc
    model = _model_of(config, 102)  # oxford_flowers102
    assert tuple(model.grid_size) == (24, 24) and model.hidden_dim == 768
    # Its schedule over oxford_flowers102's 1020 training images, as the
    # run builds it: 20 epochs were 20 steps, below the 100 of warm-up,
    # refused only once the TPU had connected.
    steps_per_epoch = 1020 // config.data.batch_size
    optimizer = make_run_optimizer(config, steps_per_epoch)
    schedule = optimizer._learning_rate  # the schedule, not its value
    assert schedule.total_steps == steps_per_epoch * config.run.epochs
    assert 500 <= schedule.total_steps <= 520 and schedule.warmup_steps == 100
    # Not one step an epoch (a backup of B/16 and its momentum after each).
    assert steps_per_epoch >= 4


def test_finetune_online_names_a_preset(captured, monkeypatch, tmp_path):
    _run_main(
        "finetune.py",
        [
            "--weights",
            "augreg_in21k",
            "--model",
            "ViT_Ti16",
            "--output",
            str(tmp_path),
        ],
        monkeypatch,
    )
    (config,) = captured
    config.check()
    optimizer = config.optimizer
    assert (optimizer.name, optimizer.decay, optimizer.clipnorm) == (
        "sgd",
        "cosine",
        1.0,
    )
    assert find_preset("Ti/16", config.model.weights) is not None
    assert tuple(_model_of(config, 102).grid_size) == (24, 24)  # 384 px


def test_finetune_needs_weights_or_offline(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        _run_main("finetune.py", [], monkeypatch)
    assert "--weights is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--model", "ViT_B16"),
        ("--weights", "augreg_in21k"),
        ("--dataset", "cifar10"),
        ("--image-size", "224"),
    ],
)
def test_finetune_offline_refuses_the_flags_it_cannot_use(
    flag, value, captured, monkeypatch, tmp_path, capsys
):
    # The audit: --offline ignored them without a word (a run "of ViT_B16
    # on cifar10 at 224 px" was Ti/16 on digits at 32 px).
    output = tmp_path / "run"
    with pytest.raises(SystemExit):
        _run_main(
            "finetune.py",
            ["--offline", "--output", str(output), flag, value],
            monkeypatch,
        )
    name = flag.removeprefix("--").replace("-", "_")
    err = capsys.readouterr().err
    assert f"{flag} does not apply to --offline" in err
    assert f"Received: {name}=" in err and value in err
    assert captured == [] and not output.exists()


def test_finetune_offline_takes_batch_size_and_learning_rate(
    captured, monkeypatch, tmp_path
):
    (tmp_path / "pretrained.npz").write_bytes(b"")  # no pre-training
    _run_main(
        "finetune.py",
        [
            "--offline",
            "--output",
            str(tmp_path),
            "--batch-size",
            "8",
            "--learning-rate",
            "0.5",
        ],
        monkeypatch,
    )
    tuned, scratch = captured
    assert tuned.model.weights == str(tmp_path / "pretrained.npz")
    assert scratch.model.weights is None
    for config in captured:
        assert (config.data.dataset, config.data.batch_size) == ("digits", 8)
        assert config.optimizer.learning_rate == 0.5


def test_finetune_offline_checks_its_flags_before_pre_training(
    captured, monkeypatch, tmp_path
):
    output = tmp_path / "run"
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        _run_main(
            "finetune.py",
            ["--offline", "--output", str(output), "--batch-size", "0"],
            monkeypatch,
        )
    assert captured == [] and not output.exists()


@pytest.mark.slow
# pytest.warns below records every warning raised inside it and re-emits the
# others from this file, past pyproject's filters: Keras's own NumPy 2
# DeprecationWarnings would be listed hundreds of times.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_finetune_offline_runs_end_to_end(monkeypatch, tmp_path, capsys):
    # A small stand-in for Fashion-MNIST (the real one may not be on the
    # machine); the digits part is the real scikit-learn data.
    rng = np.random.default_rng(0)
    fake = (
        (
            rng.integers(0, 256, (256, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, 256),
        ),
        (
            rng.integers(0, 256, (16, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, 16),
        ),
    )
    monkeypatch.setattr(
        keras_vit.data.datasets, "fashion_mnist_arrays", lambda: fake
    )
    # A fifth of the digits for its two digits runs.
    fewer_digits(monkeypatch)
    # Its three runs without XLA, whose compiles were most of their time on a
    # CPU (tests/training cover XLA training); what they train is the same.
    train = keras_vit.training.train

    def without_xla(config, *args, **kwargs):
        config.scale.jit_compile = False
        return train(config, *args, **kwargs)

    monkeypatch.setattr(keras_vit.training, "train", without_xla)
    # Its three models of one block, TINY's width (four of 64 in the
    # example): the same pre-training, checkpoint and fine-tuning path.
    example = _load("finetune.py")
    example["SMALL"].update(TINY_BLOCK)
    argv = ["--offline", "--epochs", "1", "--output", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["finetune.py", *argv])
    # The fine-tuned run starts from the checkpoint: 16 px (4x4 patches) ->
    # 32 px.
    with pytest.warns(
        UserWarning, match="resampled from a 4x4 to a 8x8 patch grid"
    ):
        example["main"]()
    out = capsys.readouterr().out
    checkpoint = tmp_path / "pretrained.npz"
    with np.load(checkpoint) as npz:  # the original google-research layout
        assert (
            "embedding/kernel" in npz.files
            and npz["head/kernel"].shape[-1] == 40
        )
    accuracies = re.findall(r"digits test accuracy, .*?:\s+([0-9.]+)", out)
    assert len(accuracies) == 2 and all(0 <= float(a) <= 1 for a in accuracies)
    assert (tmp_path / "tuned" / "model.keras").exists()
    assert (tmp_path / "scratch" / "model.keras").exists()


# === examples/attention_maps.py ===


def test_pointing_game_hits_and_chance():
    game = _load("attention_maps.py")
    maps = np.zeros((3, 6, 6))
    maps[0, 1, 1] = 1  # box at (0, 0) covers patch rows/cols 0-1: hit
    maps[1, 5, 5] = 1  # box at (0, 0): miss
    maps[2, 3, 2] = 1  # box at (20, 12) covers rows 2-4, cols 1-3: hit
    boxes = np.array([[0, 0], [0, 0], [20, 12]])
    hits, chance = game["pointing_game"](maps, boxes)
    assert hits.tolist() == [True, False, True]
    np.testing.assert_allclose(chance, [4 / 36, 4 / 36, 9 / 36])


def test_digits_in_noise_places_the_digit_in_its_box():
    game = _load("attention_maps.py")
    digits = np.full((2, 8, 8), 16.0)
    digits[1] = 0.0
    images, labels, boxes = game["digits_in_noise"](
        digits, np.array([3, 7]), 20, seed=0
    )
    assert images.shape == (20, 48, 48, 3) and images.dtype == np.float32
    assert set(labels.tolist()) <= {3, 7}
    assert boxes.min() >= 0 and boxes.max() <= 48 - 16
    for image, label, (top, left) in zip(images, labels, boxes):
        box = image[top : top + 16, left : left + 16, 0]
        assert np.all(box == (255.0 if label == 3 else 0.0))
        outside = np.ones((48, 48), bool)
        outside[top : top + 16, left : left + 16] = False
        noise = image[..., 0][outside]
        assert (
            0 <= noise.min()
            and noise.max() <= 255
            and 0.2 < noise.std() / 255 < 0.4
        )


@pytest.mark.slow
def test_attention_maps_example_runs(tmp_path, capsys):
    game = _load("attention_maps.py")
    game["main"](
        [
            "--output",
            str(tmp_path),
            "--epochs",
            "1",
            "--train-size",
            "256",
            "--test-size",
            "16",
        ]
    )
    out = capsys.readouterr().out
    rows = re.findall(
        r"^  (last layer, raw|rollout, [a-z0-9%, ]+?)\s+(\d+)%\s+(\d+)%$",
        out,
        flags=re.M,
    )
    assert len(rows) == 7  # raw attention + 3 head fusions x 2 discard ratios
    assert all(0 <= int(a) <= 100 and 0 <= int(b) <= 100 for _, a, b in rows)
    assert re.search(r"chance \d+%", out)
    for name in (
        "pointing.png",
        "model.keras",
        "figures/index.html",
        "figures/attention_distance.png",
    ):
        assert (tmp_path / name).stat().st_size > 0, name


@pytest.mark.slow
@pytest.mark.parametrize("test_size", [1, 2])
def test_attention_maps_example_with_fewer_than_3_test_images(
    test_size, monkeypatch, tmp_path
):
    # The audit: --test-size 1 or 2 trained, then failed on the figures of
    # 3 test images (3 names for fewer), and model.keras was never saved.
    game = _load("attention_maps.py")
    monkeypatch.setitem(
        game["main"].__globals__,
        "MODEL",
        dict(TINY_BLOCK),
    )
    game["main"](
        [
            "--output",
            str(tmp_path),
            "--epochs",
            "1",
            "--train-size",
            "16",
            "--test-size",
            str(test_size),
        ]
    )
    saved = keras.saving.load_model(tmp_path / "model.keras")
    assert (
        isinstance(saved, keras_vit.ViT)
        and saved.hidden_dim == TINY_BLOCK["hidden_dim"]
    )
    html = (tmp_path / "figures" / "index.html").read_text()
    assert [f"test{i}" in html for i in range(3)] == [
        i < test_size for i in range(3)
    ]


def test_attention_maps_example_rejects_empty_sizes(capsys):
    game = _load("attention_maps.py")
    with pytest.raises(SystemExit):
        game["main"](["--train-size", "0"])
    assert (
        "--train-size must be at least 1. Received: 0"
        in capsys.readouterr().err
    )


# === examples/masked_patch_prediction.py ===


def _fake_fashion_mnist(monkeypatch):
    """256 random training images (25 or 26 per class) and 32 test ones."""
    rng = np.random.default_rng(0)
    fake = (
        (
            rng.integers(0, 256, (256, 28, 28), dtype=np.uint8),
            np.arange(256) % 10,
        ),
        (
            rng.integers(0, 256, (32, 28, 28), dtype=np.uint8),
            np.arange(32) % 10,
        ),
    )
    monkeypatch.setattr(
        keras_vit.data.datasets, "fashion_mnist_arrays", lambda: fake
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--unlabelled", "-250", "--labels-per-class", "3"],
            "--unlabelled must be at least 1. Received: unlabelled=-250",
        ),
        (
            ["--unlabelled", "0", "--labels-per-class", "3"],
            "--unlabelled must be at least 1. Received: unlabelled=0",
        ),
        (
            ["--unlabelled", "257", "--labels-per-class", "3"],
            "--unlabelled must be at most the 256 training images. "
            "Received: unlabelled=257",
        ),
        (
            ["--labels-per-class", "26"],
            "--labels-per-class must be at most 25, the training images of "
            "the smallest class. Received: labels_per_class=26",
        ),
    ],
)
def test_masked_patch_prediction_refuses_sizes_out_of_range(
    argv, message, monkeypatch, tmp_path, capsys
):
    # The audit: --unlabelled -250 pre-trained on the first 6 images, 0
    # failed in the optimizer's schedule, and --labels-per-class over a
    # class's count failed in NumPy's words.
    _fake_fashion_mnist(monkeypatch)
    example = _load("masked_patch_prediction.py")
    output = tmp_path / "run"
    with pytest.raises(SystemExit):
        example["main"](["--output", str(output), *argv])
    assert message in capsys.readouterr().err
    assert not output.exists()


def test_masked_patch_prediction_takes_the_unlabelled_images_asked_for(
    monkeypatch, tmp_path
):
    _fake_fashion_mnist(monkeypatch)
    example = _load("masked_patch_prediction.py")
    seen = {}
    example["main"].__globals__.update(
        pretrain=lambda images, *a, **k: seen.update(n=len(images)) or 0.0,
        classify=lambda x, *a, **k: seen.setdefault("labelled", len(x)),
    )
    argv = ["--output", str(tmp_path), "--labels-per-class", "25"]
    example["main"]([*argv, "--unlabelled", "256"])
    assert seen == {"n": 256, "labelled": 250}


def test_masked_patch_prediction_fine_tunes_through_from_preset(
    monkeypatch, tmp_path, without_xla
):
    example = _load("masked_patch_prediction.py")
    example["MODEL"].update(TINY_BLOCK)
    backbone = keras_vit.ViT(**example["MODEL"], include_top=False)
    randomize_weights(backbone, seed=4)
    path = str(tmp_path / "mpp.npz")
    keras_vit.weights.save_npz(backbone, path)
    loaded = []
    real = keras_vit.ViT.from_preset.__func__

    def from_preset(cls, preset, **kwargs):
        model = real(cls, preset, **kwargs)
        loaded.append(model.get_layer("block_0").get_weights())
        return model

    monkeypatch.setattr(keras_vit.ViT, "from_preset", classmethod(from_preset))
    x = np.random.default_rng(0).uniform(0, 255, (4, 28, 28, 3))
    example["classify"](x, np.arange(4), x, np.arange(4), 1, path)
    (weights,) = loaded
    for got, saved in zip(weights, backbone.get_layer("block_0").weights):
        np.testing.assert_array_equal(got, np.asarray(saved))


@pytest.mark.slow
def test_masked_patch_prediction_example_runs(
    monkeypatch, tmp_path, capsys, without_xla
):
    _fake_fashion_mnist(monkeypatch)
    example = _load("masked_patch_prediction.py")
    # A smaller model of the same geometry.
    monkeypatch.setitem(
        example["main"].__globals__,
        "MODEL",
        dict(example["MODEL"], **TINY_BLOCK),
    )
    example["main"](
        [
            "--output",
            str(tmp_path),
            "--pretrain-epochs",
            "1",
            "--labels-per-class",
            "3",
            "--epochs",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert re.search(r"patch accuracy 0\.\d{3}", out)
    accuracies = re.findall(
        r"test accuracy with 30 labels, .*?:\s+([0-9.]+)", out
    )
    assert len(accuracies) == 2 and all(0 <= float(a) <= 1 for a in accuracies)
    with np.load(
        tmp_path / "mpp.npz"
    ) as npz:  # the backbone, original layout, no head
        assert (
            "embedding/kernel" in npz.files and "head/kernel" not in npz.files
        )


def test_tflite_inference_names_a_bad_path_in_one_line(
    tmp_path, capsys, random_tflite_path
):
    # A missing .tflite was reported as missing metadata, a missing image
    # and a file that is no image as tracebacks (FileNotFoundError,
    # PIL.UnidentifiedImageError).
    exported = str(random_tflite_path)
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    missing = str(tmp_path / "missing.png")
    main = _load("tflite_inference.py")["main"]
    for argv, why, received in (
        (["nosuch.tflite", missing], "not exist", "model='nosuch.tflite'"),
        ([exported, missing], "not exist", f"image={missing!r}"),
        ([exported, str(tmp_path)], "a folder", f"image={str(tmp_path)!r}"),
        ([exported, str(text)], "read the image", f"image={str(text)!r}"),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        (*_, line) = capsys.readouterr().err.rstrip().splitlines()
        assert why in line and line.endswith(f"Received: {received}")


def _demo_description(config):
    # What examples/demo.py's docstring and docs/index.md say of the demo.
    kwargs = config.model.kwargs
    return (
        f"{kwargs['num_layers']}-block ViT of width {kwargs['hidden_dim']}",
        f"{config.run.epochs} epochs",
    )


def test_the_demo_is_what_its_docstring_and_the_docs_say():
    module = _load("demo.py")
    config = module["DEMO"]
    config.check()
    model = _model_of(config, num_classes=10)
    assert model.grid_size == (4, 4)  # "16 tokens + the class token"
    root = os.path.dirname(EXAMPLES)
    with open(os.path.join(root, "docs", "index.md"), encoding="utf-8") as f:
        index = " ".join(f.read().split())
    docstring = " ".join(module["__doc__"].split())
    for phrase in _demo_description(config):
        assert phrase in docstring and phrase in index, phrase
    assert f"batches of {config.data.batch_size}" in docstring
    old = dataclasses.replace(
        config, run=dataclasses.replace(config.run, epochs=9)
    )
    assert "9 epochs" not in index  # the check can fail
    assert _demo_description(old)[1] not in docstring
