"""End-to-end training runs on tiny models (scikit-learn digits)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from keras_vit import cli
from keras_vit.training import NonFiniteLossError
from keras_vit.training import TrainConfig
from keras_vit.training import train
from tests.helpers import fewer_digits
from tests.training import two_devices
from tests.training.two_devices import result

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

TINY = dict(
    model="Ti/16",
    dataset="digits",
    image_size=16,
    patch_size=4,
    model_kwargs={
        "hidden_dim": 32,
        "num_heads": 2,
        "mlp_dim": 64,
        "num_layers": 2,
    },
    batch_size=32,
    learning_rate=3e-3,
    weight_decay=0.01,
    flip=False,
    random_resized_crop=False,
    mixed_precision="off",
    # XLA's compiling costs a tiny run ~10 s of ~14 on a CPU: off unless
    # the test is about the default ("auto": on) or about XLA.
    jit_compile=False,
    verbose=0,
)


def tiny_config(tmp_path, **kwargs):
    # TINY and the overrides by their flat names (`TrainConfig.from_dict`).
    return TrainConfig.from_dict(
        {**TINY, "output": str(tmp_path / "run"), **kwargs}
    )


def test_a_tiny_vit_learns_digits(tmp_path):
    # The default path, as a user's run takes it: XLA on. The digits at
    # their own 8 px (2x2 patches) learn in fewer epochs than upsampled.
    epochs = 4
    config = tiny_config(
        tmp_path,
        epochs=epochs,
        validation_split=0.1,
        jit_compile="auto",
        image_size=8,
    )
    result = train(config)
    # Chance is 0.1.
    assert result.test_metrics["accuracy"] > 0.6
    assert result.history["loss"][-1] < result.history["loss"][0]
    out = config.run.output
    for name in (
        "model.keras",
        "best.keras",
        "config.json",
        "history.json",
        "log.csv",
        "curves.png",
        "backup/state.json",
    ):
        assert os.path.isfile(os.path.join(out, name)), name
    assert os.listdir(os.path.join(out, "logs"))  # TensorBoard
    with open(os.path.join(out, "curves.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(out, "history.json")) as f:
        saved = json.load(f)
    assert len(saved["history"]["val_accuracy"]) == epochs
    assert saved["test"]["accuracy"] == pytest.approx(
        result.test_metrics["accuracy"]
    )
    with open(os.path.join(out, "config.json")) as f:
        run_config = json.load(f)
    assert run_config["resolved"]["strategy"] == "default"
    assert run_config["resolved"]["jit_compile"] is True
    # The nested form, section by section.
    assert run_config["run"]["epochs"] == epochs
    assert "epochs" not in run_config
    assert run_config["model"]["name"] == "Ti/16"
    assert run_config["augmentation"]["crop_area"] == [0.35, 1.0]
    assert run_config["resolved"]["model"]["hidden_dim"] == 32
    # The saved model is the trained one.
    model = keras.saving.load_model(
        os.path.join(out, "model.keras"), safe_mode=True
    )
    np.testing.assert_allclose(
        model.get_layer("head").kernel.numpy(),
        result.model.get_layer("head").kernel.numpy(),
    )
    # It loads in a fresh process that imports nothing but keras_vit (its
    # optimizer and learning-rate schedule are keras_vit's).
    check = _run(f"""
        import keras, keras_vit
        model = keras.saving.load_model({os.path.join(out, "model.keras")!r})
        print(type(model.optimizer).__name__, model.count_params())
    """)
    assert check.returncode == 0, check.stderr[-2000:]
    assert "AdamW" in check.stdout
    # A rerun of a finished run resumes after its last epoch: no training.
    again = train(config)
    assert again.initial_epoch == epochs
    assert again.test_metrics["accuracy"] == pytest.approx(
        result.test_metrics["accuracy"]
    )


def test_masked_patch_prediction_runs_resumes_and_hands_on_its_backbone(
    tmp_path, monkeypatch
):
    from keras_vit.models.vit import ViT
    from keras_vit.training import MaskedPatchPrediction
    from keras_vit.training.train import build_model

    fewer_digits(monkeypatch)  # epochs of a few steps
    config = tiny_config(tmp_path, epochs=2, objective="masked_patches")
    result = train(config)
    assert isinstance(result.model, MaskedPatchPrediction)
    history = result.history["patch_accuracy"]
    assert len(history) == 2 and history[-1] > history[0]
    assert result.history["loss"][-1] < result.history["loss"][0]
    assert set(result.test_metrics) == {"loss", "patch_accuracy"}
    out = config.run.output
    for name in ("model.keras", "best.keras", "backbone.keras", "curves.png"):
        assert os.path.isfile(os.path.join(out, name)), name
    saved = keras.saving.load_model(
        os.path.join(out, "model.keras"), safe_mode=True
    )
    assert isinstance(saved, MaskedPatchPrediction)
    backbone = keras.saving.load_model(
        os.path.join(out, "backbone.keras"), safe_mode=True
    )
    assert isinstance(backbone, ViT) and not backbone.include_top
    trained = {w.path: w.numpy() for w in result.model.backbone.weights}
    for w in backbone.weights:
        np.testing.assert_array_equal(w.numpy(), trained[w.path])
    # A rerun with another objective or model cannot resume this backup:
    # refused, naming what differs, before anything runs or is written.
    written = {
        name: os.path.getmtime(os.path.join(out, name))
        for name in ("config.json", "backup/state.json")
    }
    with pytest.raises(
        ValueError,
        match="objective='masked_patches' there, "
        "'classification' here.*output=",
    ):
        train(tiny_config(tmp_path, epochs=3))
    with pytest.raises(
        ValueError,
        match="model_kwargs=.*'hidden_dim': 32.*there, "
        ".*'hidden_dim': 48.*here",
    ):
        train(
            tiny_config(
                tmp_path,
                epochs=3,
                objective="masked_patches",
                model_kwargs={**TINY["model_kwargs"], "hidden_dim": 48},
            )
        )
    # Nor one that holds out other images (or draws them with another seed):
    # it would train on images it validated on.
    with pytest.raises(
        ValueError, match="validation_split=0.0 there, 0.2 here"
    ):
        train(
            tiny_config(
                tmp_path,
                epochs=3,
                objective="masked_patches",
                validation_split=0.2,
            )
        )
    with pytest.raises(ValueError, match="seed=0 there, 1 here"):
        train(
            tiny_config(tmp_path, epochs=3, objective="masked_patches", seed=1)
        )
    assert written == {
        name: os.path.getmtime(os.path.join(out, name)) for name in written
    }
    # A longer rerun resumes after the second epoch.
    longer = train(tiny_config(tmp_path, epochs=3, objective="masked_patches"))
    assert (
        longer.initial_epoch == 2 and len(longer.history["patch_accuracy"]) == 3
    )
    # A rerun of the finished run scores the same test patches the same way
    # (the corruption's draws no longer depend on what the process drew).
    again = train(tiny_config(tmp_path, epochs=3, objective="masked_patches"))
    assert again.initial_epoch == 3
    assert again.test_metrics == pytest.approx(longer.test_metrics, rel=1e-6)
    # Fine-tuning starts from the pre-trained backbone; the head is new.
    tune = tiny_config(
        tmp_path,
        output=str(tmp_path / "tune"),
        weights=os.path.join(out, "backbone.keras"),
    )
    with pytest.warns(
        UserWarning, match="no classification head.*zero-initialised"
    ):
        model = build_model(tune, 10)
    final = {w.path: w.numpy() for w in longer.model.backbone.weights}
    for w in model.weights:
        if w.path.startswith("head/"):
            assert not np.any(w.numpy())
        else:
            np.testing.assert_array_equal(w.numpy(), final[w.path])


def test_masked_patch_prediction_from_an_unlabelled_folder(tmp_path):
    from PIL import Image

    from keras_vit.data.datasets import digits_arrays

    (x, _), _ = digits_arrays()
    folder = tmp_path / "photos"
    (folder / "more").mkdir(parents=True)
    for i, image in enumerate(x[:64]):
        where = folder / "more" if i % 2 else folder
        Image.fromarray(image.astype("uint8")).save(where / f"{i}.png")
    config = tiny_config(
        tmp_path,
        dataset=f"folder:{folder}",
        epochs=1,
        objective="masked_patches",
        batch_size=16,
        masked_patches={"corrupt_rate": 0.25, "bits": 2},
    )
    result = train(config)
    assert np.isfinite(result.history["loss"]).all()
    # The options reach the model, and its saved file.
    saved = keras.saving.load_model(tmp_path / "run" / "model.keras")
    for model in (result.model, saved):
        assert (model.corrupt_rate, model.mask_rate, model.bits) == (
            0.25,
            0.8,
            2,
        )
        assert model.color_head.units == 4**3
    assert result.test_metrics == {}  # a folder has no test split
    with pytest.raises(ValueError, match="at least two class sub-folders"):
        train(
            tiny_config(
                tmp_path,
                dataset=f"folder:{folder}",
                epochs=1,
                output=str(tmp_path / "labelled"),
            )
        )


def test_a_model_without_preprocessing_trains_on_normalised_inputs(tmp_path):
    # The pipelines give [0, 255] pixels, which a model built with
    # include_preprocessing=False took as normalised inputs: masked patch
    # prediction's targets were all the top class (511). Every pipeline
    # (train, validation, test) now gives what the model's rescaling layer
    # would: the same multiply-add, bit for bit.
    import importlib
    import types

    from keras_vit.training.masked_patches import mean_color_classes

    train_module = importlib.import_module("keras_vit.training.train")

    norm = {"mean": (0.5, 0.4, 0.3), "std": (0.2, 0.3, 0.25)}
    batches, models = {}, {}
    for include in (True, False):
        config = tiny_config(
            tmp_path,
            objective="masked_patches",
            validation_split=0.1,
            deterministic=True,  # the pipelines' order (no global switch)
            random_resized_crop=True,
            flip=True,
            model_kwargs={
                **TINY["model_kwargs"],
                "normalization": norm,
                "include_preprocessing": include,
            },
        )
        setup = types.SimpleNamespace(kind="default")
        data = train_module._load_data(config, setup)
        model = train_module.build_model(config, data.num_classes)
        pipelines = train_module._pipelines(
            config,
            setup,
            data,
            model,
            types.SimpleNamespace(initial_epoch=0),
        )
        batches[include] = {
            name: next(iter(pipelines[name]))[0].numpy()
            for name in ("train", "validation", "test")
        }
        models[include] = model
    scale = 1 / (255 * np.array(norm["std"], "float32"))
    offset = -np.array(norm["mean"], "float32") / norm["std"]
    for name, pixels in batches[True].items():
        assert pixels.min() >= 0 and pixels.max() > 200, name
        np.testing.assert_allclose(
            batches[False][name], pixels * scale + offset, atol=1e-5
        )
    # The masked patches' colour targets are the pixels' (a tile whose mean
    # sits on a quantisation boundary may round either way).
    pixels = batches[True]["train"]
    targets = models[False](batches[False]["train"])["targets"].numpy()
    expected = mean_color_classes(pixels, 4).numpy()
    assert len(np.unique(expected)) >= 6  # gray digits: 8 levels
    assert np.mean(targets == expected) > 0.99


def test_xla_compiled_training_with_augmentation(tmp_path, monkeypatch):
    # Every augmentation reaches the pipeline, and the steps are XLA's (a
    # quiet fallback to no XLA, or augmentation dropped, would also train).
    from keras_vit.data import pipeline as data_pipeline
    from tests.helpers import record_step_xla

    seen_xla = record_step_xla(monkeypatch)
    augmentations = []
    real_pipeline = data_pipeline.train_pipeline

    def pipeline(*args, **kwargs):
        augmentations.append(kwargs.get("augmentation"))
        return real_pipeline(*args, **kwargs)

    monkeypatch.setattr(data_pipeline, "train_pipeline", pipeline)
    fewer_digits(monkeypatch)  # an epoch of a few steps
    config = tiny_config(
        tmp_path,
        epochs=1,
        jit_compile=True,
        random_resized_crop=True,
        flip=True,
        mixup=0.2,
        cutmix=1.0,
        steps_per_execution=4,
        label_smoothing=0.1,
    )
    result = train(config)
    assert np.isfinite(result.history["loss"]).all()
    (augmentation,) = augmentations
    assert augmentation.random_resized_crop and augmentation.flip
    assert (augmentation.mixup, augmentation.cutmix) == (0.2, 1.0)
    assert seen_xla and set(seen_xla) == {True}
    with open(os.path.join(config.run.output, "config.json")) as f:
        assert json.load(f)["resolved"]["jit_compile"] is True


def test_bfloat16_training_on_a_cpu_runs_without_xla(tmp_path, monkeypatch):
    # TensorFlow's oneDNN bfloat16 kernels are faster than XLA's on a CPU
    # (recipe.auto_jit_compile), so "auto" leaves XLA off there. (A fifth
    # of the digits: bfloat16 is emulated where the CPU lacks it.)
    fewer_digits(monkeypatch)
    config = tiny_config(
        tmp_path, epochs=1, mixed_precision="bfloat16", jit_compile="auto"
    )
    result = train(config)
    assert np.isfinite(result.history["loss"]).all()
    with open(os.path.join(config.run.output, "config.json")) as f:
        resolved = json.load(f)["resolved"]
    assert resolved["dtype_policy"] == "mixed_bfloat16"
    assert resolved["jit_compile"] is False


class StopAfter(keras.callbacks.Callback):
    """Ends training after `batches` steps of the first epoch (the epoch's
    validation, the test and the files follow as after a whole epoch)."""

    def __init__(self, batches):
        super().__init__()
        self.batches = batches

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 >= self.batches:
            self.model.stop_training = True


@pytest.mark.parametrize("objective", ["classification", "masked_patches"])
def test_float32_training_of_long_sequences_on_a_cpu_runs_without_xla(
    tmp_path, objective, monkeypatch
):
    # XLA's batched attention matmuls lose to oneDNN's on long sequences
    # (recipe.auto_jit_compile): 96 px in 4 px patches, 577 tokens. Two
    # steps show the setting (a whole epoch took 25-48 s), and a few test
    # images the evaluation after them (the 360 of the digits: seconds).
    fewer_digits(monkeypatch, test=32)
    config = tiny_config(
        tmp_path,
        epochs=1,
        image_size=96,
        jit_compile="auto",
        objective=objective,
    )
    result = train(config, callbacks=[StopAfter(2)])
    assert len(result.history["loss"]) == 1
    assert np.isfinite(result.history["loss"]).all()
    with open(os.path.join(config.run.output, "config.json")) as f:
        assert json.load(f)["resolved"]["jit_compile"] is False


def test_bad_input_is_refused_before_training(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="model='ViT_X'"):
        train(tiny_config(tmp_path, model="ViT_X"))
    with pytest.raises(ValueError, match="strategy='horovod'"):
        train(tiny_config(tmp_path, strategy="horovod"))
    with pytest.raises(
        ValueError, match="Unknown dataset.*'no_such_dataset_xyz'"
    ):
        train(tiny_config(tmp_path, dataset="no_such_dataset_xyz"))
    with pytest.raises(ValueError, match="image folder does not exist"):
        train(tiny_config(tmp_path, dataset="folder:/no/such/folder"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="output folder is an existing file"):
        train(tiny_config(tmp_path, output=str(a_file)))
    # A URL was written to the local disk, under ./gs:/bucket/run.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ValueError, match="local folder.*gcsfuse.*output='gs://bucket/run'"
    ):
        train(tiny_config(tmp_path, output="gs://bucket/run"))
    assert not os.path.exists(tmp_path / "gs:")
    with pytest.raises(ValueError, match="batch_size=5000"):
        train(tiny_config(tmp_path, batch_size=5000))
    with pytest.raises(ValueError, match="mixup=-1"):
        train(tiny_config(tmp_path, mixup=-1))
    with pytest.raises(ValueError, match="objective='contrastive'"):
        train(tiny_config(tmp_path, objective="contrastive"))
    with pytest.raises(
        ValueError, match="mixup=0.2 with objective='masked_patches'"
    ):
        train(tiny_config(tmp_path, objective="masked_patches", mixup=0.2))
    with pytest.raises(
        ValueError, match="masked_patches=.*objective='classification'"
    ):
        train(tiny_config(tmp_path, masked_patches={"bits": 2}))
    with pytest.raises(
        ValueError, match="option 'mask_ratio'.*masked_patches="
    ):
        train(
            tiny_config(
                tmp_path,
                objective="masked_patches",
                masked_patches={"mask_ratio": 0.5},
            )
        )
    with pytest.raises(ValueError, match="mask_rate=0.95 and replace_rate=0.1"):
        train(
            tiny_config(
                tmp_path,
                objective="masked_patches",
                masked_patches={"mask_rate": 0.95},
            )
        )
    with pytest.raises(ValueError, match="bits=9"):
        train(
            tiny_config(
                tmp_path, objective="masked_patches", masked_patches={"bits": 9}
            )
        )

    # Numbers that cannot be right, each named (NaN and inf were taken), and
    # settings found bad only when the model or the schedule is made: all
    # before anything is written.
    nan, inf = float("nan"), float("inf")
    for bad, received in (
        (dict(learning_rate=inf), "learning_rate=inf"),
        (dict(weight_decay=nan), "weight_decay=nan"),
        (dict(clipnorm=inf), "clipnorm=inf"),
        (dict(momentum=nan, optimizer="sgd"), "momentum=nan"),
        (dict(mixup=inf), "mixup=inf"),
        (dict(crop_area=(0.5, nan)), "crop_area=(0.5, nan)"),
        (dict(crop_area="big"), "crop_area='big'"),
        (dict(validation_split=nan), "validation_split=nan"),
        (dict(validation_split="0.1"), "validation_split='0.1'"),
        (dict(seed=-1), "seed=-1"),
        (dict(seed=1.5), "seed=1.5"),
        (dict(seed=2**32), "seed=4294967296"),  # was NumPy's unnamed error
        (dict(shuffle="yes"), "shuffle='yes'"),
        (dict(deterministic=1), "deterministic=1"),
        (dict(verbose=3), "verbose=3"),
        (dict(warmup_steps=-5), "warmup_steps=-5"),
        (dict(warmup_steps=10**6), "warmup_steps=1000000"),
        (
            dict(model_kwargs={**TINY["model_kwargs"], "dropout_rate": nan}),
            "dropout_rate=nan",
        ),
    ):
        with pytest.raises(ValueError, match=re.escape(received)):
            train(tiny_config(tmp_path, **bad))

    class ThreeReplicas:
        num_replicas_in_sync = 3

    with pytest.raises(
        ValueError, match="divisible by the 3 replicas.*batch_size=32"
    ):
        train(tiny_config(tmp_path), strategy=ThreeReplicas())
    assert not os.path.exists(tmp_path / "run")  # nothing was written


def test_non_finite_loss_stops_with_a_clear_message_and_keeps_the_backup(
    tmp_path, monkeypatch
):
    fewer_digits(monkeypatch)  # three epochs of a few steps

    class Poison(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                kernel = self.model.get_layer("head").kernel
                kernel.assign(np.full(kernel.shape, np.nan, "float32"))

    config = tiny_config(tmp_path, epochs=3)
    with pytest.raises(NonFiniteLossError, match="epoch 2.*backup"):
        train(config, callbacks=[Poison()])
    with open(os.path.join(config.run.output, "backup", "state.json")) as f:
        assert json.load(f)["epoch"] == 1


def _run(script, env_extra=None, **kwargs):
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": REPO,
        **(env_extra or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        **kwargs,
    )


#: A run for `_run` that trains `TINY` on digits for `epochs`, with
#: shuffling, augmentation, dropout and stochastic depth on and
#: `deterministic=True`, killing itself with SIGKILL where `KERAS_VIT_KILL`
#: says ("EPOCH" at the end of that epoch, "backup:EPOCH" right after its
#: backup is written, "EPOCH:BATCH" in the middle of an epoch, all 1-based),
#: and saving its final weights to `weights`.
RUN = """
    import os, signal, sys
    import keras, numpy as np
    from keras_vit.training import TrainConfig, train
    from tests.helpers import fewer_digits
    from tests.training.test_train import TINY

    # A fifth of the digits: 9 steps an epoch instead of 41 (what is drawn
    # where is the claim, not the data).
    fewer_digits()

    class Kill(keras.callbacks.Callback):
        # Runs after keras_vit's callbacks: an epoch's backup is written.
        def __init__(self, where):
            super().__init__()
            epoch, _, batch = where.partition(":")
            self.epoch, self.batch = int(epoch), int(batch or 0)
            self.current = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.current = epoch + 1

        def on_train_batch_end(self, batch, logs=None):
            if (self.current, batch + 1) == (self.epoch, self.batch):
                os.kill(os.getpid(), signal.SIGKILL)

        def on_epoch_end(self, epoch, logs=None):
            if not self.batch and epoch + 1 == self.epoch:
                os.kill(os.getpid(), signal.SIGKILL)

    where = os.environ.get("KERAS_VIT_KILL")
    if where and where.startswith("backup:"):  # right after the backup
        from keras_vit.training import callbacks

        back_up = callbacks.Backup.on_epoch_end
        kill_at = int(where[len("backup:"):])

        def on_epoch_end(self, epoch, logs=None):
            back_up(self, epoch, logs)
            if epoch + 1 == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        callbacks.Backup.on_epoch_end = on_epoch_end
        where = None
    config = TrainConfig.from_dict(
        {{**TINY, **{settings!r}, "output": {output!r}}})
    result = train(config, callbacks=[Kill(where)] if where else [])
    np.save({weights!r},
            np.concatenate([w.numpy().ravel() for w in result.model.weights]))
    print("initial_epoch", result.initial_epoch)
"""

#: Every source of randomness of a run on.
RANDOM = dict(
    epochs=3,
    image_size=8,
    shuffle=True,
    random_resized_crop=True,
    flip=True,
    mixup=0.2,
    cutmix=1.0,
    rand_augment=1,
    deterministic=True,
    validation_split=0.1,
    model_kwargs={
        **TINY["model_kwargs"],
        "dropout_rate": 0.1,
        "drop_path_rate": 0.1,
    },
    # The default (XLA for float32): resuming must be bitwise under it too.
    jit_compile="auto",
)


def _run_until(output, weights, kills=(), **settings):
    """Runs `RUN` into `output`, killed at each of `kills` in turn, then to
    the end; returns the final run's stdout."""
    script = RUN.format(
        settings={**RANDOM, **settings},
        output=str(output),
        weights=str(weights),
    )
    for kill in kills:
        killed = _run(script, env_extra={"KERAS_VIT_KILL": kill})
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    done = _run(script)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_a_killed_and_resumed_run_equals_an_uninterrupted_one_bitwise(
    tmp_path, monkeypatch
):
    # Shuffling, augmentation (crop, flip, RandAugment, MixUp / CutMix),
    # dropout and stochastic depth: a resumed run must draw what the
    # uninterrupted one drew in the same epochs, however often and wherever
    # it was stopped (after an epoch's backup, or halfway through an epoch).
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    # The uninterrupted run, in this process (as `RUN` trains it: the
    # claim is about the killed processes, not this one's).
    fewer_digits(monkeypatch)
    config = TrainConfig.from_dict({**TINY, **RANDOM, "output": str(straight)})
    weights = train(config).model.weights
    # One chain of kills: halfway through epoch 2 (epoch 1 done and backed
    # up); then, in the run resumed from epoch 1, right after epoch 2's
    # backup; then the run resumed from epoch 2 goes to the end. After the
    # second kill best.keras must hold epoch 2's model if it was the best,
    # as it was here (it used to be written after the backup, so the
    # resumed run knew epoch 2's score from the backup and kept epoch 1's
    # model). A kill at an epoch's end leaves what the first kill leaves:
    # the epoch's files, nothing of the next epoch.
    out = _run_until(resumed, tmp_path / "resumed.npy", ["2:5", "backup:2"])
    assert "initial_epoch 2" in out
    np.testing.assert_array_equal(
        np.load(tmp_path / "resumed.npy"),
        np.concatenate([w.numpy().ravel() for w in weights]),
    )
    # The log holds every epoch once, as the uninterrupted run's does.
    log = (resumed / "log.csv").read_text()
    assert log == (straight / "log.csv").read_text()
    with open(resumed / "history.json") as f:
        assert len(json.load(f)["history"]["loss"]) == 3
    best, straight_best = (
        keras.saving.load_model(run / "best.keras")
        for run in (resumed, straight)
    )
    for got, want in zip(best.weights, straight_best.weights, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # No temporary file is left behind.
    for folder in (resumed, resumed / "backup"):
        hidden = [f for f in os.listdir(folder) if f.startswith(".")]
        assert hidden == [".lock"] * (folder == resumed)


def test_a_kill_during_a_backup_write_leaves_the_last_backup(tmp_path):
    from keras_vit.training import callbacks

    path = tmp_path / "state.json"
    callbacks.write_json(str(path), {"epoch": 1})

    def dies_halfway(temporary):
        with open(temporary, "w") as f:
            f.write('{"epoch": 2, "wei')
        raise KeyboardInterrupt  # the process is stopped mid-write

    with pytest.raises(KeyboardInterrupt):
        callbacks.atomic_write(str(path), dies_halfway)
    assert json.loads(path.read_text()) == {"epoch": 1}
    assert os.listdir(tmp_path) == ["state.json"]


two_devices.register(
    "mirrored",
    """
    from keras_vit.training import recipe
    from tests.helpers import TINY_BLOCK

    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (16, 16, 16, 3)).astype("float32")
    labels = keras.utils.to_categorical(rng.integers(0, 5, 16), 5)
    losses = {}
    for name, strategy in STRATEGIES:
        keras.utils.set_random_seed(1)
        with strategy.scope():
            model = keras_vit.ViT(image_size=16, patch_size=4, num_classes=5,
                                  **TINY_BLOCK)
            model.compile(recipe.make_optimizer("adamw", 1e-2, total_steps=4),
                          keras.losses.CategoricalCrossentropy())
        ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(16)
        history = model.fit(ds, epochs=3, verbose=0)
        losses[name] = [strategy.num_replicas_in_sync, history.history["loss"]]
    print(json.dumps(losses))
""",
)


def assert_two_devices_match_one(losses, rtol=1e-5):
    """`losses`, what a `two_devices` script printed, `{name: [replicas,
    losses]}` per strategy: the same global batch must give the same
    losses, to float32 summation-order error, and they must fall."""
    assert losses["two"][0] == 2 and losses["one"][0] == 1
    np.testing.assert_allclose(losses["two"][1], losses["one"][1], rtol=rtol)
    assert losses["one"][1][-1] < losses["one"][1][0]


def test_mirrored_strategy_over_two_devices_matches_one_device(two_devices):
    assert_two_devices_match_one(result(two_devices, "mirrored"))


#: `keras-vit train` on digits at their own 8 px, a tiny model, 2 epochs
#: (add `--output`).
TRAIN_COMMAND = [
    sys.executable,
    "-m",
    "keras_vit.cli",
    "train",
    "--dataset",
    "digits",
    "--model",
    "Ti/16",
    "--image-size",
    "8",
    "--patch-size",
    "4",
    "--hidden-dim",
    "32",
    "--num-heads",
    "2",
    "--mlp-dim",
    "64",
    "--num-layers",
    "1",
    "--epochs",
    "2",
    "--batch-size",
    "32",
    "--mixed-precision",
    "off",
    "--verbose",
    "0",
]


#: `python -m keras_vit.cli` on a fifth of the digits (`fewer_digits`),
#: for `TRAIN_COMMAND[3:]`: a run whose claim is not about the data.
FEWER_DIGITS_CLI = [
    sys.executable,
    "-c",
    "import sys\n"
    "from tests.helpers import fewer_digits\n"
    "fewer_digits()\n"
    "from keras_vit.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n",
]


def _start_workers(commands, **variables):
    """Starts `commands[i]` as worker `i` of a localhost cluster (with the
    environment `variables` too)."""
    cluster = _localhost_cluster(len(commands))
    procs = []
    for index, command in enumerate(commands):
        tf_config = json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}
        )
        env = {
            **os.environ,
            "TF_CONFIG": tf_config,
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": REPO,
            **variables,
        }
        procs.append(
            subprocess.Popen(
                command,
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def _outputs(procs, timeout=300):
    """Each worker's `(stdout, stderr)`; any still running after `timeout`
    seconds (one waiting for a peer that stopped) is killed."""
    try:
        return [p.communicate(timeout=timeout) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["classification", "masked-patches"])
def test_multi_worker_training_on_localhost(tmp_path, objective):
    output = str(tmp_path / "mw")
    command = [
        *FEWER_DIGITS_CLI,
        *TRAIN_COMMAND[3:],
        "--strategy",
        "multi_worker",
        "--output",
        output,
        "--objective",
        objective,
    ]
    # Folders another run left (killed, or running beside this one) are
    # not this run's: only those it added count.
    before = set(os.listdir(tempfile_dir()))
    procs = _start_workers([command] * 2)
    outs = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
    metric = "patch_accuracy" if objective == "masked-patches" else "accuracy"
    assert f"test {metric}" in outs[0][0]
    with open(os.path.join(output, "config.json")) as f:
        resolved = json.load(f)["resolved"]
    assert resolved["strategy"] == "multi_worker" and resolved["replicas"] == 2
    assert os.path.isfile(os.path.join(output, "model.keras"))
    # Only the chief wrote into the run folder; the worker's temporary
    # folder is gone.
    leftovers = [
        d
        for d in set(os.listdir(tempfile_dir())) - before
        if d.startswith("keras_vit_worker_")
    ]
    assert leftovers == []


@pytest.mark.slow
def test_workers_that_would_resume_at_different_epochs_are_refused(tmp_path):
    # Storage the workers do not share: each reads the backup in its own
    # copy of the output path (here, two folders), the chief's from an
    # epoch-1 run, the other none. They resumed at epochs 1 and 0 and ran
    # out of step (an obscure collective error, or a hang); both must stop
    # before training, naming the epochs.
    chief, other = str(tmp_path / "chief"), str(tmp_path / "other")
    # The chief's epoch-1 run, in this process (`python -m keras_vit.cli`).
    assert (
        cli.main([*TRAIN_COMMAND[3:], "--epochs", "1", "--output", chief]) == 0
    )
    procs = _start_workers(
        [
            [*TRAIN_COMMAND, "--strategy", "multi_worker", "--output", out]
            for out in (chief, other)
        ]
    )
    outs = _outputs(procs)
    for proc, (_, err), out in zip(procs, outs, (chief, other)):
        assert proc.returncode == 2, err[-3000:]
        assert (
            "The workers would resume from different epochs (0, 1; 0: no "
            "backup)" in err
        ), err[-3000:]
        assert "storage all workers share" in err
        assert f"Received: output={out!r}" in err
    # The chief's run was left as it was: epoch 1's backup, no final model.
    with open(os.path.join(chief, "backup", "state.json")) as f:
        assert json.load(f)["epoch"] == 1
    assert not os.path.exists(other)


@pytest.mark.slow
def test_a_chief_that_refuses_the_folder_stops_every_worker(tmp_path):
    # Only the chief claims the run folder once the workers have met: a
    # refusal (here, another run holding its lock) stopped it alone, and
    # the other worker failed in the next collective with TensorFlow's
    # traceback (or waited), its temporary folder left behind.
    from keras_vit.training.train import RunLock

    output = str(tmp_path / "shared")
    os.makedirs(output)
    command = [*TRAIN_COMMAND, "--strategy", "multi_worker", "--output", output]
    scratch = tmp_path / "tmp"  # the non-chief worker's temporary folder
    scratch.mkdir()
    lock = RunLock(output).acquire()  # another run, writing there
    try:
        procs = _start_workers([command] * 2, TMPDIR=str(scratch))
        outs = _outputs(procs)
    finally:
        lock.release()
    (_, chief_err), (_, other_err) = outs
    assert [p.returncode for p in procs] == [2, 2], other_err[-3000:]
    assert "Another run is writing into the output folder" in chief_err
    assert "Another worker of the run stopped before training" in other_err
    assert f"Received: output={output!r}" in other_err
    assert os.listdir(scratch) == []  # its temporary folder was removed


def tempfile_dir():
    import tempfile

    return tempfile.gettempdir()


@pytest.mark.slow
def test_a_float16_run_resumes_its_optimizer_state(tmp_path, monkeypatch):
    # Under mixed_float16 (what "auto" picks on a GPU) Keras wraps the
    # optimizer in a LossScaleOptimizer; its state was skipped on resuming
    # (a warning), so the step count, the schedule and the moments restarted.
    import warnings

    fewer_digits(monkeypatch, train=320, test=32)  # 10 steps an epoch

    def step(result):
        return int(result.model.optimizer.iterations.numpy())

    def run(epochs, mixed_precision):
        # The digits at their own 8 px (4 patches): float16 arithmetic is
        # emulated on most CPUs, its cost grows with the tokens.
        config = tiny_config(
            tmp_path,
            epochs=epochs,
            mixed_precision=mixed_precision,
            image_size=8,
        )
        return train(config)

    steps = 320 // 32
    first = run(1, "float16")
    assert type(first.model.optimizer).__name__ == "LossScaleOptimizer"
    # (A step whose scaled gradients overflow is skipped and not counted.)
    assert steps - 5 < step(first) <= steps
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error", UserWarning
        )  # no "Skipping variable loading"
        resumed = run(2, "float16")
    assert resumed.initial_epoch == 1
    assert steps < step(resumed) <= step(first) + steps  # not restarted at 0
    # On other hardware (float32 here), the step and moments carry on too.
    again = run(3, "off")
    assert step(again) == step(resumed) + steps


def _compiled(policy, optimizer="adamw", steps=3):
    from keras_vit.training import recipe

    keras.config.set_dtype_policy(policy)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(recipe.make_optimizer(optimizer, 1e-2, total_steps=10), "mse")
    model.optimizer.build(model.trainable_variables)
    if steps:
        rng = np.random.default_rng(0)
        model.fit(
            rng.normal(size=(8 * steps, 4)),
            rng.normal(size=(8 * steps, 3)),
            batch_size=8,
            verbose=0,
        )
    return model


@pytest.mark.parametrize(
    "saved, resumed",
    [
        ("mixed_float16", "float32"),
        ("float32", "mixed_float16"),
        ("mixed_float16", "mixed_float16"),
    ],
)
def test_a_backup_restores_the_optimizer_across_the_loss_scale_wrapper(
    tmp_path, saved, resumed
):
    from keras_vit.training.callbacks import load_backup

    def inner(model):
        return getattr(model.optimizer, "inner_optimizer", model.optimizer)

    source = _compiled(saved)
    path = str(tmp_path / "backup.weights.h5")
    source.save_weights(path)
    target = _compiled(resumed, steps=0)
    load_backup(target, path)
    assert int(target.optimizer.iterations.numpy()) == 3
    for got, want in zip(
        inner(target).variables, inner(source).variables, strict=True
    ):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in zip(target.weights, source.weights, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    if resumed == saved == "mixed_float16":  # the loss scale too
        assert float(target.optimizer.dynamic_scale.numpy()) == float(
            source.optimizer.dynamic_scale.numpy()
        )
    # A backup whose optimizer state cannot fit is refused, not skipped.
    with pytest.raises(
        ValueError, match="optimizer state does not fit.*backup="
    ):
        load_backup(_compiled(resumed, optimizer="sgd", steps=0), path)


def test_every_random_draw_of_a_model_is_seeded_by_the_epoch(tmp_path):
    # Dropout, stochastic depth and the masked patch draws keep their state
    # in SeedGenerator variables that a backup does not hold: a resumed run
    # drew the first epoch's masks again.
    from keras_vit.training.callbacks import seed_model
    from keras_vit.training.callbacks import seed_state_variables
    from keras_vit.training.train import build_model

    config = tiny_config(
        tmp_path,
        objective="masked_patches",
        model_kwargs={
            **TINY["model_kwargs"],
            "dropout_rate": 0.1,
            "drop_path_rate": 0.1,
        },
    )
    model = build_model(config, 1)
    states = seed_state_variables(model)
    assert any(v is model._seed_generator.state for v in states)
    assert len(states) > 4  # the blocks' dropouts, the masked patches'

    def seeded(seed, epoch):
        seed_model(model, seed, epoch)
        return [tuple(v.numpy()) for v in states]

    first = seeded(0, 1)
    assert len({s[0] for s in first}) == len(first)  # every generator its own
    assert seeded(0, 2) != first and seeded(1, 1) != first
    model(np.zeros((2, 16, 16, 3), "float32"), training=True)  # draws advance
    assert seeded(0, 1) == first


#: A worker of a user's own `fit` / `evaluate` of a `keras_vit.ViT` under
#: MultiWorkerMirroredStrategy (no `keras_vit.training.train`); `TF_CONFIG`
#: says which worker. Prints the losses.
OWN_FIT = """
    import json, numpy as np, tensorflow as tf
    import keras, keras_vit
    from tests.helpers import TINY_BLOCK

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (32, 16, 16, 3)).astype("float32")
    labels = rng.integers(0, 5, 32)
    keras.utils.set_random_seed(1)
    with strategy.scope():
        model = keras_vit.ViT(image_size=16, patch_size=4, num_classes=5,
                              **TINY_BLOCK)
        model.compile("adam", "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(16)
    history = model.fit(ds, epochs=2, verbose=0)
    loss, accuracy = model.evaluate(ds, verbose=0)
    print(json.dumps({"fit": history.history["loss"], "evaluate": loss}))
"""


def _localhost_cluster(workers=2):
    import socket

    ports = []
    for _ in range(workers):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return {"worker": [f"127.0.0.1:{p}" for p in ports]}


@pytest.mark.slow
def test_a_users_own_fit_of_a_vit_under_multi_worker_mirrored_strategy():
    # Keras 3.15 fails a plain model's fit under this strategy twice over
    # (the symbolic build's cross-replica reduce of a batch, the scalar
    # step logs' reduce along axis 0): keras_vit.training.distributed's
    # fixes reach the ViT class itself, so the user's own fit runs too.
    cluster = _localhost_cluster()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(OWN_FIT)],
            env={
                **env,
                "TF_CONFIG": json.dumps(
                    {
                        "cluster": cluster,
                        "task": {"type": "worker", "index": index},
                    }
                ),
            },
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
    losses = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert losses[0] == losses[1]  # one model, trained in step
    assert len(losses[0]["fit"]) == 2 and np.isfinite(losses[0]["evaluate"])


def test_check_resumable_names_what_a_rerun_may_change():
    # It said "the recipe's numbers" may change; the batch size may not
    # (since a0dd087), only the optimizer's numbers, as the docs say.
    import importlib

    train_module = importlib.import_module("keras_vit.training.train")
    doc = " ".join(train_module._check_resumable.__doc__.split())
    assert "recipe's numbers" not in doc
    assert (
        "the optimizer's numbers (learning rate, weight decay, warm-up, "
        "decay, clipping, momentum)" in doc
    )
    assert "with another batch size" in doc
    assert "batch_size" in train_module.RESUME_SETTINGS


def test_a_run_shuffles_an_image_folder_whole(tmp_path):
    # A run read an image folder's files class by class through a buffer of
    # 10,000 decoded images: past that many files, every batch held a few
    # neighbouring classes. Its training part is now read by index, each
    # epoch a shuffle of it all, and holds out what the hold-out says.
    import importlib
    import types

    from PIL import Image

    from keras_vit.data.pipeline import Indexed

    train_module = importlib.import_module("keras_vit.training.train")
    folder = tmp_path / "images"
    for c in range(4):
        (folder / f"c{c}").mkdir(parents=True)
        for i in range(16):
            Image.new("L", (4, 4), 16 * c + i).save(
                folder / f"c{c}" / f"{i}.png"
            )
    config = tiny_config(
        tmp_path,
        dataset=f"folder:{folder}",
        validation_split=0.25,
        batch_size=16,
        deterministic=True,
    )
    setup = types.SimpleNamespace(kind="default")
    data = train_module._load_data(config, setup)
    assert isinstance(data.train, Indexed)
    assert data.train.size == data.num_train == 48
    model = train_module.build_model(config, data.num_classes)
    pipelines = train_module._pipelines(
        config, setup, data, model, types.SimpleNamespace(initial_epoch=0)
    )
    # A 16 px image of one grey value, each label its image's.
    seen = []
    for images, labels in pipelines["train"].take(3):
        values = np.round(images.numpy()[:, 0, 0, 0]).astype(int)
        np.testing.assert_array_equal(labels.numpy().argmax(1), values // 16)
        seen.append(values)
    held = {
        int(round(v))
        for images, _ in pipelines["validation"]
        for v in images.numpy()[:, 0, 0, 0]
    }
    assert len(held) == 16
    assert sorted(np.concatenate(seen)) == sorted(set(range(64)) - held)
    assert np.mean([len(set(v // 16)) for v in seen]) >= 3
