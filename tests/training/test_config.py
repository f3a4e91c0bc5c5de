"""`TrainConfig`'s sections, and the flat form of earlier versions."""

import dataclasses
import json
import re

import pytest

from keras_vit.data import Augmentation
from keras_vit.training import TrainConfig
from keras_vit.training.config import FLAT
from keras_vit.training.config import DataConfig
from keras_vit.training.config import ModelConfig
from keras_vit.training.config import ObjectiveConfig
from keras_vit.training.config import OptimizerConfig
from keras_vit.training.config import RunConfig
from keras_vit.training.config import ScaleConfig
from keras_vit.training.config import flatten
from keras_vit.training.strategy import resolve_kind

NESTED = TrainConfig(
    model=ModelConfig("S/16", image_size=32, patch_size=8),
    data=DataConfig("digits", batch_size=32),
    augmentation=Augmentation(crop_area=(0.5, 1.0), mixup=0.2),
    optimizer=OptimizerConfig("sgd", learning_rate=0.01),
    objective=ObjectiveConfig(label_smoothing=0.1),
    run=RunConfig(output="runs/x", epochs=3),
    scale=ScaleConfig(mixed_precision="off"),
)

#: `NESTED` by the flat names of earlier versions.
FLAT_NESTED = dict(
    model="S/16",
    image_size=32,
    patch_size=8,
    dataset="digits",
    batch_size=32,
    crop_area=(0.5, 1.0),
    mixup=0.2,
    optimizer="sgd",
    learning_rate=0.01,
    label_smoothing=0.1,
    output="runs/x",
    epochs=3,
    mixed_precision="off",
)


def test_the_config_is_its_sections():
    assert [f.name for f in dataclasses.fields(TrainConfig)] == [
        "model",
        "data",
        "augmentation",
        "optimizer",
        "objective",
        "run",
        "scale",
    ]
    assert NESTED.run.epochs == 3 and NESTED.model.name == "S/16"
    # Sections as dicts are the same config; replace works section-wise.
    assert NESTED == TrainConfig(
        **json.loads(json.dumps(dataclasses.asdict(NESTED)))
    )
    longer = dataclasses.replace(
        NESTED, run=dataclasses.replace(NESTED.run, epochs=5)
    )
    assert longer.run.epochs == 5 and longer.model == NESTED.model
    NESTED.check()


def test_from_dict_reads_the_flat_config_json_of_earlier_runs():
    # A run folder's config.json written before the sections, to rerun and
    # resume it.
    assert TrainConfig.from_dict(FLAT_NESTED) == NESTED
    assert TrainConfig.from_dict(dataclasses.asdict(NESTED)) == NESTED


def test_bad_sections_and_names_are_refused():
    with pytest.raises(ValueError, match="Received: data='digits'"):
        TrainConfig(data="digits")
    with pytest.raises(TypeError, match="'epoch'"):
        TrainConfig(epoch=3)
    # Settings go in their sections: the flat names are config.json's only.
    with pytest.raises(TypeError, match="'epochs'"):
        TrainConfig(epochs=3)
    with pytest.raises(ValueError, match="Received: model='S/16'"):
        TrainConfig(model="S/16")
    # Augmentation checks itself when made, and check() again after a change.
    with pytest.raises(ValueError, match="mixup=-1"):
        TrainConfig(augmentation={"mixup": -1})
    config = TrainConfig(**NESTED.__dict__)
    config.augmentation.cutmix = -2
    with pytest.raises(ValueError, match="cutmix=-2"):
        config.check()


def test_flatten_reads_either_form():
    nested = json.loads(json.dumps(dataclasses.asdict(NESTED)))
    flat = flatten(nested)
    assert set(flat) == set(FLAT)
    assert {k: flat[k] for k in FLAT_NESTED} == json.loads(
        json.dumps(FLAT_NESTED)
    )
    assert flatten(flat) == flat


@pytest.mark.parametrize(
    "key, value, where",
    [
        ("num_classes", 5, "the dataset's classes set it"),
        ("weights", "augreg_in21k", "use `model.weights`"),
        ("dtype", "float16", "use `scale.mixed_precision`"),
        ("include_top", False, "the objective sets it"),
        ("image_size", 64, "use `model.image_size`"),
        ("patch_size", 4, "use `model.patch_size`"),
    ],
)
def test_model_kwargs_the_run_sets_itself_are_refused(key, value, where):
    # train.build_model overwrote them without a word: kwargs num_classes=5
    # and dtype="float16" built a float32 model with the dataset's 2 classes.
    kwargs = {"hidden_dim": 32, key: value}
    config = dataclasses.replace(
        NESTED, model=dataclasses.replace(NESTED.model, kwargs=kwargs)
    )
    with pytest.raises(ValueError, match=re.escape(where)) as error:
        config.check()
    assert f"`{key}`" in str(error.value)
    assert f"Received: model_kwargs={kwargs!r}" in str(error.value)


def test_model_kwargs_of_the_architecture_are_taken():
    # The size in kwargs alone is used (nothing overwrites it), as are the
    # architecture's numbers (a width S/16's 6 heads divide: the model's
    # rules are checked too).
    model = dataclasses.replace(
        NESTED.model,
        image_size=None,
        kwargs={"image_size": 64, "hidden_dim": 48, "num_layers": 1},
    )
    dataclasses.replace(NESTED, model=model).check()
    with pytest.raises(ValueError, match="Received: model_kwargs=7"):
        dataclasses.replace(
            NESTED, model=dataclasses.replace(NESTED.model, kwargs=7)
        ).check()


def _with(config, **sections):
    """`config` with some fields of some sections replaced."""
    return dataclasses.replace(
        config,
        **{
            name: dataclasses.replace(getattr(config, name), **fields)
            for name, fields in sections.items()
        },
    )


@pytest.mark.parametrize("strategy", ["default", "mirrored", "multi_worker"])
def test_a_tpu_with_a_strategy_that_does_not_use_it_is_refused(strategy):
    # `--strategy default --tpu NAME` trained on the CPU, exit 0, and the
    # run's config.json named the TPU.
    config = _with(NESTED, scale=dict(strategy=strategy, tpu="my-tpu"))
    received = f"Received: tpu='my-tpu', strategy='{strategy}'"
    with pytest.raises(ValueError, match=re.escape(received)):
        config.check()
    with pytest.raises(ValueError, match=re.escape(received)):
        resolve_kind(strategy, "my-tpu", environ={}, num_gpus=0)
    for used in ("auto", "tpu"):
        _with(NESTED, scale=dict(strategy=used, tpu="my-tpu")).check()
        assert resolve_kind(used, "my-tpu", environ={}, num_gpus=0) == "tpu"
    _with(NESTED, scale=dict(strategy=strategy)).check()  # no TPU named


@pytest.mark.parametrize("dataset", ["digits", "fashion_mnist", "folder:x"])
def test_a_data_dir_with_a_dataset_that_never_reads_it_is_refused(dataset):
    # The run read the arrays or the image folder and ignored the folder
    # named; only tensorflow_datasets reads `data_dir`.
    config = _with(NESTED, data=dict(dataset=dataset, data_dir="/my/tfds"))
    received = f"Received: data_dir='/my/tfds', dataset={dataset!r}"
    with pytest.raises(ValueError, match=re.escape(received)):
        config.check()
    _with(NESTED, data=dict(dataset="cifar10", data_dir="/my/tfds")).check()


SWITCHED_OFF = [
    # a setting of a feature off, the switch that turns it on, the error's end
    (
        dict(augmentation=dict(rand_augment_magnitude=0.9)),
        dict(augmentation=dict(rand_augment=2)),
        "rand_augment_magnitude=0.9 with rand_augment=0",
    ),
    (
        dict(augmentation=dict(random_resized_crop=False, crop_area=[0.9, 1])),
        dict(augmentation=dict(random_resized_crop=True)),
        "crop_area=(0.9, 1) with random_resized_crop=False",
    ),
    (
        dict(optimizer=dict(name="adamw", momentum=0.5)),
        dict(optimizer=dict(name="sgd")),
        "momentum=0.5 with optimizer='adamw'",
    ),
]


@pytest.mark.parametrize(
    "setting, switched_on, received",
    SWITCHED_OFF,
    ids=[received for *_, received in SWITCHED_OFF],
)
def test_a_setting_of_a_feature_switched_off_is_refused(
    setting, switched_on, received
):
    # `--rand-augment-magnitude 0.9` (RandAugment off), `--crop-min-area`
    # without the crop and `--momentum` with AdamW were taken, written to
    # config.json and ignored, as `masked_patches` without its objective
    # was before it was refused.
    config = _with(NESTED, **setting)
    with pytest.raises(ValueError, match=re.escape(f"Received: {received}")):
        config.check()
    _with(config, **switched_on).check()  # the feature on uses it


def test_a_feature_switched_off_keeps_its_settings_defaults():
    # Only a value other than the default is refused: a config of earlier
    # runs (config.json, crop_area a list) and a recipe's still check.
    off = _with(
        NESTED,
        augmentation=dict(
            rand_augment=0, random_resized_crop=False, crop_area=[0.35, 1.0]
        ),
        optimizer=dict(name="adamw"),
    )
    off.check()
    TrainConfig.from_dict(
        json.loads(json.dumps(dataclasses.asdict(off)))
    ).check()
    TrainConfig.from_recipe(
        "fine_tune",
        model=dict(name="Ti/16", weights="vit.npz"),
        optimizer=dict(name="adamw"),
        data=dict(dataset="digits"),
    ).check()
