"""Several steps per execution on mirrored replicas: refused up front,
because Keras itself fails there (keras-team/keras#19246)."""

import importlib

import pytest

from tests.training import two_devices as two_devices_scripts
from tests.training.test_train import TINY
from tests.training.two_devices import result

#: The module (`keras_vit.training.train` is also the function's name).
train_lib = importlib.import_module("keras_vit.training.train")

two_devices_scripts.register(
    "steps_per_execution",
    """
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
    output = os.path.join(sys.argv[1], "two")
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
""",
    last=True,  # Keras's own fit fails on the replicas
)


def test_several_steps_per_execution_on_mirrored_replicas_are_refused(
    two_devices,
):
    refused = result(two_devices, "steps_per_execution")
    # Keras's own failure, which the refusal stands in for: when a Keras
    # release fixes it, this fails, and the refusal can go.
    assert refused["keras"] == "InvalidArgumentError"
    assert "keras-team/keras#19246" in refused["two"]
    assert "Received: steps_per_execution=2" in refused["two"]
    assert refused["two_files"] is None  # refused before anything is written
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
