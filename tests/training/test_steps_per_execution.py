"""Several steps per execution on mirrored replicas: refused up front,
because Keras itself fails there (keras-team/keras#19246)."""

import importlib
import json

import pytest

from tests.training.test_train import TINY
from tests.training.test_train import TWO_DEVICES
from tests.training.test_train import _run

#: The module (`keras_vit.training.train` is also the function's name).
train_lib = importlib.import_module("keras_vit.training.train")

SCRIPT = (
    TWO_DEVICES
    + """
    import os
    from keras_vit.training import TrainConfig, train
    from tests.training.test_train import TINY

    strategies = dict(STRATEGIES)
    result = {}
    # Keras alone: a plain model, two replicas, 2 steps per execution.
    with strategies["two"].scope():
        plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        plain.compile("sgd", "mse", steps_per_execution=2)
    data = tf.data.Dataset.from_tensor_slices(
        (np.zeros((8, 4), "float32"), np.zeros((8, 2), "float32"))).batch(4)
    try:
        plain.fit(data, epochs=1, verbose=0)
        result["keras"] = "trained"
    except Exception as error:
        result["keras"] = type(error).__name__
    output = os.path.join(OUT, "two")
    config = TrainConfig.from_dict(
        {**TINY, "epochs": 1, "steps_per_execution": 2, "output": output})
    try:
        train(config, strategy=strategies["two"])
        result["two"] = "trained"
    except ValueError as error:
        result["two"] = str(error)
    result["two_files"] = (
        sorted(os.listdir(output)) if os.path.isdir(output) else None)
    print(json.dumps(result))
"""
)


def test_several_steps_per_execution_on_mirrored_replicas_are_refused(
    tmp_path,
):
    script = SCRIPT.replace("OUT", repr(str(tmp_path)))
    completed = _run(script)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    # Keras's own failure, which the refusal stands in for: when a Keras
    # release fixes it, this fails, and the refusal can go.
    assert result["keras"] == "InvalidArgumentError"
    assert "keras-team/keras#19246" in result["two"]
    assert "Received: steps_per_execution=2" in result["two"]
    assert result["two_files"] is None  # refused before anything is written
    assert TINY["batch_size"] % 2 == 0  # the two replicas' split is whole


@pytest.mark.parametrize(
    "kind, replicas, refused",
    [
        ("mirrored", 2, True),
        ("multi_worker", 2, True),
        ("mirrored", 1, False),
        ("default", 1, False),
        ("tpu", 8, False),
    ],
)
def test_only_several_mirrored_replicas_are_refused(kind, replicas, refused):
    # One replica runs several steps per execution: a run of it to the
    # end, on the default strategy (what `OneDeviceStrategy` also is to
    # `train`), is test_train.py's test_xla_compiled_training_with_augmentation
    # (steps_per_execution=4).
    if refused:
        with pytest.raises(ValueError, match="keras-team/keras#19246"):
            train_lib._check_steps_per_execution(2, kind, replicas)
    else:
        train_lib._check_steps_per_execution(2, kind, replicas)
