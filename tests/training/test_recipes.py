"""Named recipes: the paper's fine-tuning one is one switch away."""

import json
import warnings

import pytest

from keras_vit import cli
from keras_vit.cli import train as train_command
from keras_vit.training import TrainConfig
from keras_vit.training.config import RECIPES
from tests.helpers import TINY_BLOCK
from tests.training.test_class_names import CLASSES
from tests.training.test_class_names import _image_folder


def _train_args(*flags):
    return cli.build_parser().parse_args(["train", *flags])


def test_the_fine_tune_recipe_is_the_papers():
    config = TrainConfig.fine_tune(
        "ViT_B16", weights="augreg_in21k", dataset="folder:photos"
    )
    config.check()
    optimizer = config.optimizer
    # Appendix B.1.1: SGD, momentum 0.9, no weight decay, clipping at global
    # norm 1, cosine decay after a warm-up; a rate from {1, 3, 10, 30}e-3;
    # a higher resolution than pre-training's.
    assert (optimizer.name, optimizer.momentum, optimizer.weight_decay) == (
        "sgd",
        0.9,
        0.0,
    )
    assert (optimizer.clipnorm, optimizer.decay) == (1.0, "cosine")
    assert optimizer.learning_rate in (0.001, 0.003, 0.01, 0.03)
    assert config.model.image_size == 384
    assert (config.model.name, config.model.weights) == (
        "ViT_B16",
        "augreg_in21k",
    )
    assert config.data.dataset == "folder:photos"
    assert config.augmentation.mixup == config.augmentation.cutmix == 0
    assert config.objective.label_smoothing == 0
    # The defaults it does not set stay: the precision, the strategy.
    assert config.scale == TrainConfig().scale
    assert config.run.output == TrainConfig().run.output


def test_the_fine_tune_recipe_takes_overrides():
    config = TrainConfig.fine_tune(
        {"name": "Ti/16", "patch_size": 8},
        weights="ckpt.npz",
        dataset="digits",
        image_size=None,
        output="runs/x",
        optimizer={"learning_rate": 0.01},
        run={"epochs": 3},
    )
    assert (config.optimizer.name, config.optimizer.learning_rate) == (
        "sgd",
        0.01,
    )
    assert config.optimizer.weight_decay == 0.0  # the recipe's, kept
    assert (config.model.image_size, config.model.patch_size) == (None, 8)
    assert (config.run.epochs, config.run.output) == (3, "runs/x")
    # A preset is its own weights.
    preset = TrainConfig.fine_tune(
        "vit_ti16_augreg_in21k", dataset="digits", image_size=32
    )
    preset.check()
    assert (
        TrainConfig.from_recipe(
            "fine_tune", optimizer=None, model={"weights": "w.npz"}
        ).optimizer
        == TrainConfig.fine_tune(
            "ViT_Ti16", weights="w.npz", dataset="digits"
        ).optimizer
    )
    with pytest.raises(ValueError, match="weights=None"):
        TrainConfig.fine_tune("ViT_B16", dataset="digits")
    with pytest.raises(ValueError, match="recipe='finetune'"):
        TrainConfig.from_recipe("finetune")
    with pytest.raises(TypeError, match="'epochs'"):
        TrainConfig.from_recipe("pretrain", epochs=3)


def test_pretrain_is_the_defaults():
    assert RECIPES["pretrain"] == {}
    assert TrainConfig.from_recipe("pretrain") == TrainConfig()
    args = _train_args("--dataset", "digits", "--output", "o")
    assert args.recipe == "pretrain"
    assert train_command.config_from_args(args) == TrainConfig(
        data={"dataset": "digits"}, run={"output": "o"}
    )


def test_the_command_line_recipe_and_the_flags_over_it():
    required = ["--dataset", "folder:photos", "--output", "runs/x"]
    start = ["--model", "ViT_B16", "--weights", "augreg_in21k"]
    args = _train_args("--recipe", "fine-tune", *start, *required)
    assert train_command.config_from_args(args) == TrainConfig.fine_tune(
        "ViT_B16",
        weights="augreg_in21k",
        dataset="folder:photos",
        output="runs/x",
    )
    # A flag given wins, also when it is spelled as the field's default
    # (weight decay 0.1, AdamW): given is given.
    args = _train_args(
        "--recipe",
        "fine-tune",
        *start,
        *required,
        "--learning-rate",
        "0.01",
        "--weight-decay",
        "0.1",
        "--image-size",
        "224",
        "--optimizer",
        "adamw",
        "--flip",
        "off",
        "--hidden-dim",
        "64",
    )
    config = train_command.config_from_args(args)
    assert (
        config.optimizer.learning_rate,
        config.optimizer.weight_decay,
        config.optimizer.name,
        config.model.image_size,
        config.augmentation.flip,
        config.model.kwargs,
    ) == (0.01, 0.1, "adamw", 224, False, {"hidden_dim": 64})
    # What was not given is the recipe's.
    assert config.optimizer.momentum == 0.9
    assert config.data.batch_size == RECIPES["fine_tune"]["data"]["batch_size"]


def test_fine_tuning_from_nothing_is_refused_in_one_line(tmp_path, capsys):
    code = cli.main(
        [
            "train",
            "--recipe",
            "fine-tune",
            "--dataset",
            "digits",
            "--output",
            str(tmp_path / "run"),
        ]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("keras-vit: error: Fine-tuning starts from")
    assert not (tmp_path / "run").exists()


def _fine_tune_tiny(tmp_path, checkpoint, folder, tiny):
    """`keras-vit train --recipe fine-tune` of a tiny model, a few flags
    over the recipe."""
    return cli.main(
        [
            "train",
            "--recipe",
            "fine-tune",
            "--model",
            "Ti/16",
            "--weights",
            checkpoint,
            "--dataset",
            f"folder:{folder}",
            "--output",
            str(tmp_path / "run"),
            "--image-size",
            "32",
            "--patch-size",
            "4",
            *[f"--{k.replace('_', '-')}={v}" for k, v in tiny.items()],
            "--batch-size",
            "8",
            "--learning-rate",
            "0.01",
            "--epochs",
            "1",
            "--mixed-precision",
            "off",
            "--verbose",
            "0",
        ]
    )


@pytest.mark.slow
def test_the_recipe_fine_tunes_a_checkpoint_end_to_end(tmp_path, monkeypatch):
    import keras_vit
    from keras_vit import training
    from keras_vit.training import recipe

    # "Pre-trained": 16 px, 3 classes; fine-tuned at 32 px on 2 classes (the
    # position embeddings resampled, a new head).
    pretrained = keras_vit.ViT(
        image_size=16, patch_size=4, num_classes=3, **TINY_BLOCK
    )
    checkpoint = str(tmp_path / "pretrained.weights.h5")
    pretrained.save_weights(checkpoint)
    folder = _image_folder(tmp_path / "photos")
    runs = []
    real_train = training.train

    def kept_train(config):
        runs.append(real_train(config))
        return runs[-1]

    monkeypatch.setattr(training, "train", kept_train)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = _fine_tune_tiny(tmp_path, checkpoint, folder, TINY_BLOCK)
    assert code == 0
    # The held-out images are counted: Keras warned "Your input ran out of
    # data" after each validation of an image folder's hold-out.
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    (result,) = runs
    optimizer = result.model.optimizer  # as the run built it
    assert type(optimizer) is recipe.SGD
    assert optimizer.momentum == 0.9
    assert not optimizer.weight_decay  # None: no weight decay
    assert optimizer.global_clipnorm == 1.0
    schedule = optimizer._learning_rate  # the flag's peak, cosine
    assert (schedule.peak, schedule.decay) == (0.01, "cosine")
    assert result.model.image_size == (32, 32)
    assert result.model.output_shape == (None, len(CLASSES))
    # The recipe's hold-out (10%) validated every epoch.
    assert "val_accuracy" in result.history
    with open(tmp_path / "run" / "config.json") as file:
        written = json.load(file)
    assert written["optimizer"]["name"] == "sgd"
    assert written["data"]["validation_split"] == 0.1
