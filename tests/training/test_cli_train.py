"""`keras-vit train` and `few-shot` refuse what cannot be right, in one line."""

import os

import numpy as np
import pytest

from keras_vit import cli
from keras_vit.data import datasets

#: Flags a tiny, fast run needs.
TINY_FLAGS = [
    "--model",
    "Ti/16",
    "--image-size",
    "16",
    "--patch-size",
    "4",
    "--hidden-dim",
    "16",
    "--num-heads",
    "2",
    "--mlp-dim",
    "16",
    "--num-layers",
    "1",
    "--epochs",
    "1",
    "--mixed-precision",
    "off",
    "--verbose",
    "0",
]

BAD_TRAIN_FLAGS = [
    # flags, the error's "name=value"
    (["--learning-rate", "nan"], "learning_rate=nan"),
    (["--learning-rate", "inf"], "learning_rate=inf"),
    (["--learning-rate", "0"], "learning_rate=0.0"),
    (["--weight-decay", "nan"], "weight_decay=nan"),
    (["--weight-decay", "inf"], "weight_decay=inf"),
    (["--weight-decay", "-0.1"], "weight_decay=-0.1"),
    (["--clipnorm", "inf"], "clipnorm=inf"),
    (["--clipnorm", "nan"], "clipnorm=nan"),
    (["--label-smoothing", "nan"], "label_smoothing=nan"),
    (["--label-smoothing", "1"], "label_smoothing=1.0"),
    (["--validation-split", "nan"], "validation_split=nan"),
    (["--validation-split", "-0.5"], "validation_split=-0.5"),
    (["--validation-split", "1"], "validation_split=1.0"),
    (["--crop-min-area", "nan"], "crop_area=(nan, 1.0)"),
    (["--crop-min-area", "0"], "crop_area=(0.0, 1.0)"),
    (["--mixup", "nan"], "mixup=nan"),
    (["--mixup", "inf"], "mixup=inf"),
    (["--cutmix", "inf"], "cutmix=inf"),
    (["--cutmix", "-1"], "cutmix=-1.0"),
    (["--rand-augment", "-1"], "rand_augment=-1"),
    (["--epochs", "0"], "epochs=0"),
    (["--batch-size", "0"], "batch_size=0"),
    (["--warmup-steps", "-1"], "warmup_steps=-1"),
    (["--warmup-steps", "100000"], "warmup_steps=100000"),
    (["--seed", "-1"], "seed=-1"),
    (["--steps-per-execution", "0"], "steps_per_execution=0"),
    (["--image-size", "0"], "image_size=(0, 0)"),
    (["--patch-size", "0"], "patch_size=0"),
    (["--dropout", "nan"], "dropout_rate=nan"),
    (["--drop-path", "inf"], "drop_path_rate=inf"),
    (["--dropout", "1"], "dropout_rate=1.0"),
    (["--hidden-dim", "0"], "hidden_dim=0"),
    (["--num-layers", "0"], "num_layers=0"),
    (
        ["--objective", "masked-patches", "--corrupt-rate", "nan"],
        "corrupt_rate=nan",
    ),
    (["--objective", "masked-patches", "--mask-rate", "inf"], "mask_rate=inf"),
    (
        ["--objective", "masked-patches", "--replace-rate", "-0.1"],
        "replace_rate=-0.1",
    ),
    (["--objective", "masked-patches", "--color-bits", "0"], "bits=0"),
    # Settings the run would have ignored: it trained on the CPU.
    (
        ["--strategy", "default", "--tpu", "my-tpu"],
        "tpu='my-tpu', strategy='default'",
    ),
    (["--data-dir", "/my/tfds"], "data_dir='/my/tfds', dataset='digits'"),
    (
        ["--rand-augment-magnitude", "0.9"],
        "rand_augment_magnitude=0.9 with rand_augment=0",
    ),
    (
        ["--random-resized-crop", "off", "--crop-min-area", "0.9"],
        "crop_area=(0.9, 1.0) with random_resized_crop=False",
    ),
    (["--momentum", "0.5"], "momentum=0.5 with optimizer='adamw'"),
    # tensorflow_datasets' error listed its ~450 datasets (462 lines).
    (["--dataset", "cifar_10"], "dataset='cifar_10'"),
]


@pytest.mark.parametrize(
    "flags, received",
    BAD_TRAIN_FLAGS,
    ids=[" ".join(f) for f, _ in BAD_TRAIN_FLAGS],
)
def test_train_refuses_a_number_that_cannot_be_right(
    tmp_path, capsys, flags, received
):
    # NaN and infinite values were taken: a NaN weight decay trained into a
    # traceback that advised a lower learning rate. A bad model size failed
    # after the run folder was made.
    output = tmp_path / "run"
    code = cli.main(
        [
            "train",
            "--dataset",
            "digits",
            "--output",
            str(output),
            *TINY_FLAGS,
            *flags,
        ]
    )
    error = capsys.readouterr().err
    assert code == 2, error[-2000:]
    assert error.startswith("keras-vit: error: ") and error.count("\n") == 1, (
        error
    )
    assert f"Received: {received}" in error or f" {received}" in error, error
    assert not output.exists()  # nothing was written


BAD_HEAD_FLAGS = [
    # flags, the error's "name=value" (Ti/16: hidden_dim 192, 3 heads)
    (["--num-heads", "0"], "num_heads=0"),
    (["--num-heads", "3", "--hidden-dim", "16"], "hidden_dim=16"),
    (["--num-heads", "5"], "hidden_dim=192 and num_heads=5"),
]


@pytest.mark.parametrize(
    "flags, received",
    BAD_HEAD_FLAGS,
    ids=[" ".join(f) for f, _ in BAD_HEAD_FLAGS],
)
@pytest.mark.parametrize("exists", [False, True], ids=["new", "existing"])
def test_train_refuses_heads_the_model_refuses_before_anything_runs(
    tmp_path, capsys, monkeypatch, flags, received, exists
):
    # `ViT` refused them only when the run built it: after the dataset was
    # loaded (a tensorflow_datasets download) and after a `.lock` file was
    # written into an existing output folder.
    def loaded(*args, **kwargs):
        raise AssertionError("the dataset was loaded")

    monkeypatch.setattr(datasets, "load", loaded)
    output = tmp_path / "run"
    if exists:
        output.mkdir()
    tiny = TINY_FLAGS[: TINY_FLAGS.index("--hidden-dim")]
    tiny += TINY_FLAGS[TINY_FLAGS.index("--mlp-dim") :]
    code = cli.main(
        ["train", "--dataset", "digits", "--output", str(output)] + tiny + flags
    )
    error = capsys.readouterr().err
    assert code == 2, error[-2000:]
    assert error.startswith("keras-vit: error: ") and error.count("\n") == 1
    assert f"Received: {received}" in error, error
    assert "model='Ti/16'" in error, error
    # Nothing was written: no folder, or the folder as it was.
    assert os.listdir(output) == [] if exists else not output.exists()


BAD_FEW_SHOT_FLAGS = [
    (["--l2-reg", "inf"], "l2_reg=inf"),
    (["--l2-reg", "nan"], "l2_reg=nan"),
    (["--l2-reg", "0"], "l2_reg=0.0"),
    (["--data-dir", "/my/tfds"], "data_dir='/my/tfds', dataset='digits'"),
]


@pytest.mark.parametrize(
    "flags, received",
    BAD_FEW_SHOT_FLAGS,
    ids=[" ".join(f) for f, _ in BAD_FEW_SHOT_FLAGS],
)
def test_few_shot_refuses_a_number_that_cannot_be_right(
    capsys, flags, received
):
    code = cli.main(["few-shot", "ViT_Ti16", "--dataset", "digits", *flags])
    error = capsys.readouterr().err
    assert code == 2, error[-2000:]
    assert (
        error.startswith("keras-vit: error: ")
        and f"Received: {received}" in error
    ), error


@pytest.mark.parametrize("flag", ["--shots", "--seeds", "--batch-size"])
def test_few_shot_counts_are_positive_integers(capsys, flag):
    # The shared argument type refuses them while the command line is read.
    with pytest.raises(SystemExit) as stopped:
        cli.main(["few-shot", "ViT_Ti16", "--dataset", "digits", flag, "0"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {flag}: expected a positive integer, got '0'" in error


def _folder(tmp_path, cut):
    """Two classes of two PNGs each, the last one cut short if `cut`."""
    import io

    from PIL import Image

    folder = tmp_path / "images"
    for label in ("a", "b"):
        (folder / label).mkdir(parents=True)
        for i in range(2):
            pixels = np.random.default_rng(i).integers(
                0, 256, (16, 16, 3), dtype=np.uint8
            )
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format="PNG")
            data = buffer.getvalue()
            (folder / label / f"{i}.png").write_bytes(data)
    if cut:
        data = (folder / "b" / "1.png").read_bytes()
        (folder / "b" / "1.png").write_bytes(data[: len(data) // 2])
    return folder, folder / "b" / "1.png"


def test_a_cut_short_image_stops_train_and_few_shot_naming_it(tmp_path, capsys):
    # TensorFlow's "Invalid PNG data" named no file; the image passes the
    # check of its first bytes, and fails only when the pipeline decodes it.
    folder, bad = _folder(tmp_path, cut=True)
    code = cli.main(
        [
            "train",
            "--dataset",
            f"folder:{folder}",
            "--output",
            str(tmp_path / "run"),
            "--batch-size",
            "2",
            *TINY_FLAGS,
        ]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert error == f"keras-vit: error: {datasets.NOT_DECODABLE} {bad}\n"
    # few-shot reads it as a shot (held out: a/0, b/0; drawn: a/1, b/1).
    code = cli.main(
        [
            "few-shot",
            "ViT_Ti16",
            "--image-size",
            "32",
            "--dataset",
            f"folder:{folder}",
            "--test-fraction",
            "0.5",
            "--shots",
            "1",
            "--seeds",
            "1",
        ]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert error == f"keras-vit: error: {datasets.NOT_DECODABLE} {bad}\n"


def test_every_config_field_has_a_flag_whose_default_is_the_fields():
    # `--momentum` was missing, and `--verbose` defaulted to 1 where
    # `TrainConfig.verbose` defaults to "auto". The flags keep the flat
    # names of the config's fields, now in sections.
    from keras_vit.cli import train as train_command
    from keras_vit.training import TrainConfig
    from keras_vit.training.config import DataConfig
    from keras_vit.training.config import RunConfig
    from keras_vit.training.config import settings

    parser = cli.build_parser()
    required = ["--dataset", "digits", "--output", "runs/x"]
    train = parser._subparsers._group_actions[0].choices["train"]
    flags = {
        option for action in train._actions for option in action.option_strings
    }
    fields = settings()
    # The flat config's 36, RandAugment's factor and `remat`.
    assert len(fields) == 38
    for field in fields:
        options = field.metadata.get("options")
        names = (
            [flag for flag, *_ in options]
            if options
            else ["crop_min_area" if field.flat == "crop_area" else field.flat]
        )
        for name in names:
            assert "--" + name.replace("_", "-") in flags, field.name
    args = parser.parse_args(["train", *required])
    assert args.verbose == RunConfig.verbose
    assert train_command.config_from_args(args) == TrainConfig(
        data=DataConfig(dataset="digits"), run=RunConfig(output="runs/x")
    )
    # Each flag reaches its field.
    args = parser.parse_args(
        [
            "train",
            *required,
            "--momentum",
            "0.5",
            "--verbose",
            "2",
            "--optimizer",
            "sgd",
            "--flip",
            "off",
            "--jit-compile",
            "on",
            "--hidden-dim",
            "48",
            "--crop-min-area",
            "0.5",
            "--color-bits",
            "2",
            "--objective",
            "masked-patches",
            "--rand-augment-magnitude",
            "0.25",
            "--rand-augment",
            "2",
        ]
    )
    config = train_command.config_from_args(args)
    assert (
        config.optimizer.momentum,
        config.run.verbose,
        config.optimizer.name,
        config.augmentation.flip,
        config.scale.jit_compile,
        config.model.kwargs,
        config.augmentation.crop_area,
        config.objective.masked_patches,
        config.objective.name,
        config.augmentation.rand_augment_magnitude,
        config.augmentation.rand_augment,
    ) == (
        0.5,
        2,
        "sgd",
        False,
        True,
        {"hidden_dim": 48},
        (0.5, 1.0),
        {"bits": 2},
        "masked_patches",
        0.25,
        2,
    )
    config.check()
