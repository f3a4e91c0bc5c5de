"""Evaluation with a TPU's static shapes counts every example, and its
metrics are the whole split's (on the CPU, with the TPU path's settings)."""

import importlib
import os

import numpy as np
import pytest

from keras_vit.training import train
from tests.helpers import fewer_digits
from tests.training import two_devices
from tests.training.test_train import TINY
from tests.training.test_train import tiny_config
from tests.training.two_devices import result

train_module = importlib.import_module("keras_vit.training.train")

#: digits: 1437 training and 360 test examples; 5% held out is 72. Neither
#: split is a whole number of batches of 32.
SPLITS = dict(batch_size=32, validation_split=0.05)


def static_and_dynamic(config, strategy=None):
    """`{split: (metrics of the TPU path's padded static batches, metrics
    of plain dynamic ones)}` of `config`'s model, trained a few steps, under
    `strategy` (default: TensorFlow's default one)."""
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    setups = {
        kind: train_module._Setup(
            strategy,
            kind,
            strategy.num_replicas_in_sync,
            True,
            "cpu",
            "float32",
        )
        for kind in ("tpu", "default")
    }
    data = train_module._load_data(config, setups["tpu"])
    model = train_module._build_and_compile(config, setups["tpu"], data)
    backup = train_module._Backup(False, {}, 0, None, None)
    pipelines = {
        kind: train_module._pipelines(config, setup, data, model, backup)
        for kind, setup in setups.items()
    }
    model.fit(pipelines["tpu"]["train"], steps_per_epoch=8, verbose=0)
    results = {}
    for split in ("validation", "test"):
        static, dynamic = (pipelines[k][split] for k in ("tpu", "default"))
        shapes = {s.shape[0] for s in static.element_spec}
        assert shapes == {config.data.batch_size}, shapes  # static
        results[split] = [
            model.evaluate(p, return_dict=True, verbose=0)
            for p in (static, dynamic)
        ]
    return {
        split: [{k: float(v) for k, v in m.items()} for m in metrics]
        for split, metrics in results.items()
    }


def assert_same_metrics(results):
    for split, (static, dynamic) in results.items():
        assert sorted(static) == sorted(dynamic) == ["accuracy", "loss"]
        for name in dynamic:
            np.testing.assert_allclose(
                static[name], dynamic[name], rtol=2e-6, err_msg=split
            )
        assert 0 < dynamic["accuracy"] < 1, split


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {
            "label_smoothing": 0.1,
            "model_kwargs": {
                **TINY["model_kwargs"],
                "include_preprocessing": False,
            },
        },
    ],
    ids=["plain", "smoothed-labels-normalised-inputs"],
)
def test_a_padded_static_evaluation_equals_a_dynamic_one(tmp_path, settings):
    # On a TPU the last partial batch of the validation and test splits was
    # dropped: 8 of 72 and 8 of 360 examples, and val_*, best.keras and the
    # test metrics were a subset's. Padded with examples of weight 0, the
    # loss (Keras averages it over every row, padding included) and the
    # accuracy must be the whole split's.
    config = tiny_config(tmp_path, **SPLITS, **settings)
    assert_same_metrics(static_and_dynamic(config))


#: `static_and_dynamic` under MirroredStrategy over two CPUs (the padding
#: of the last batch fills one replica's half alone, as on a TPU's 8
#: cores). One step a call: Keras's fit of several under MirroredStrategy
#: fails on the CPU ("You must feed a value for placeholder tensor").
two_devices.register(
    "tpu_evaluation",
    """
    from keras_vit.training import TrainConfig
    from tests.training.test_tpu_evaluation import SPLITS
    from tests.training.test_tpu_evaluation import static_and_dynamic
    from tests.training.test_train import TINY

    config = TrainConfig.from_dict(
        {**TINY, "output": sys.argv[1] + "/run", **SPLITS,
         "steps_per_execution": 1})
    print(json.dumps(static_and_dynamic(config, STRATEGIES[1][1])))
""",
)


@pytest.mark.slow
def test_a_padded_static_evaluation_over_two_replicas_equals_a_dynamic_one(
    two_devices,
):
    assert_same_metrics(result(two_devices, "tpu_evaluation"))


def test_a_tpu_run_validates_and_tests_on_every_example(tmp_path, monkeypatch):
    # Splits smaller than the batch vanished on a TPU (then were refused);
    # larger ones lost their last partial batch. The TPU path's settings,
    # on the CPU: a batch of 128, 16 validation and 160 test examples (of
    # 320 training and 160 test digits: `fewer_digits`).
    import tensorflow as tf

    from keras_vit.training import strategy as run_strategy

    fewer_digits(monkeypatch, train=320, test=160)
    monkeypatch.setattr(run_strategy, "kind_of", lambda strategy: "tpu")
    config = tiny_config(tmp_path, batch_size=128, validation_split=0.05)
    result = train(config, strategy=tf.distribute.get_strategy())
    assert result.strategy_kind == "tpu"
    default = train_module._Setup(
        tf.distribute.get_strategy(), "default", 1, True, "cpu", "float32"
    )
    data = train_module._load_data(config, default)
    backup = train_module._Backup(False, {}, 0, None, None)
    pipelines = train_module._pipelines(
        config, default, data, result.model, backup
    )
    for split, metrics in (
        (
            "validation",
            {k[4:]: v[-1] for k, v in result.history.items() if "val_" in k},
        ),
        ("test", result.test_metrics),
    ):
        want = result.model.evaluate(
            pipelines[split], return_dict=True, verbose=0
        )
        assert sorted(metrics) == sorted(want) == ["accuracy", "loss"], split
        for name in want:
            np.testing.assert_allclose(
                metrics[name], want[name], rtol=2e-6, err_msg=split
            )


def test_masked_patch_prediction_on_a_tpu_needs_whole_batches(
    tmp_path, monkeypatch
):
    # Its loss is each batch's mean, weighted by the batch's rows, padding
    # included, and its corruption draws patches from the whole batch: a
    # padded split's metrics would not be the split's. A split that is not
    # a whole number of batches lost its last partial batch, without a
    # word; it is refused, with what would fit.
    import tensorflow as tf

    from keras_vit.training import strategy as run_strategy

    monkeypatch.setattr(run_strategy, "kind_of", lambda strategy: "tpu")
    cpu = tf.distribute.get_strategy()
    config = tiny_config(tmp_path, objective="masked_patches", **SPLITS)
    with pytest.raises(
        ValueError,
        match=r"validation split's 72 examples are not a whole number of "
        r"batches.*8 examples would not be evaluated.*a batch_size that "
        r"divides 72, or validation_split=0\.0445372 \(64 examples\)\. "
        r"Received: batch_size=32 for 72 validation examples",
    ):
        train(config, strategy=cpu)
    config = tiny_config(tmp_path, objective="masked_patches", batch_size=128)
    with pytest.raises(
        ValueError,
        match=r"test split's 360 examples.*Use a batch_size that divides "
        r"360\. Received: batch_size=128 for 360 test examples",
    ):
        train(config, strategy=cpu)
    assert not os.path.exists(config.run.output)  # refused before writing
    # The suggested split holds out 64 examples, 2 batches of 32; whole
    # batches pass.
    from keras_vit.data.pipeline import holdout_indices

    assert len(holdout_indices(1437, 0.0445372)[1]) == 64
    for batch_size, held, tested in ((32, 64, 352), (8, 72, 360)):
        config = tiny_config(
            tmp_path, objective="masked_patches", batch_size=batch_size
        )
        train_module._check_whole_batches(config, 1437, held, tested)


def test_the_guide_and_the_module_say_how_a_tpu_evaluates():
    """docs/training-at-scale.md said shapes were static by
    `drop_remainder`, which dropped evaluation examples before 9839f35;
    the guide and `train`'s module docstring say what the code does:
    padding of weight 0, whole-batch splits for masked patch prediction,
    and (99889cf) the multi-worker check that every worker resumes from
    the same epoch."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    with open(os.path.join(root, "docs", "training-at-scale.md")) as file:
        guide = " ".join(file.read().split())
    module = " ".join(train_module.__doc__.split())
    assert "drop_remainder" not in guide
    for text in (guide, module):
        assert "examples of weight 0" in text
        assert "masked patch prediction" in text
        assert "whole batches" in text
        assert "resume from the same epoch" in text or (
            "resumes from the same epoch" in text
        )
