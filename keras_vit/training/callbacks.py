"""Callbacks that make a run survive: atomic backups (and their
restoring), the model's random state seeded per epoch, a non-finite loss
stop, a best-so-far checkpoint."""

import csv
import io
import json
import math
import os
import warnings

import keras
import numpy as np

from keras_vit import files

STATE_FILE = "state.json"


# `atomic_write` is `keras_vit.files`'s (it was defined here first).
atomic_write = files.atomic_write


def write_json(path, data):
    def write(temporary):
        with open(temporary, "w") as file:
            json.dump(data, file, indent=2, default=str)

    atomic_write(path, write)


def write_csv(path, history):
    """Writes `history` (`{metric: [value per epoch]}`) to `path` as CSV,
    atomically: a column `epoch` (0-based, as Keras's `CSVLogger` writes
    it), then the metrics in alphabetical order."""
    keys = sorted(history)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["epoch", *keys])
    for epoch in range(max((len(v) for v in history.values()), default=0)):
        writer.writerow(
            [
                epoch,
                *(
                    history[k][epoch] if epoch < len(history[k]) else "NA"
                    for k in keys
                ),
            ]
        )
    files.write_text(path, text.getvalue())


def read_backup(directory):
    """The last backup in `directory`: `(state, weights_path)` or `None`.

    `state` holds `epoch` (epochs completed) and `history` (the logs so
    far). Only a state file that names an existing weights file counts.

    Raises:
        ValueError: if the state file is damaged (not the JSON `Backup`
            writes), naming it and how to start over: it failed with a bare
            `JSONDecodeError` or `KeyError`, and on every rerun.
    """
    path = os.path.join(directory, STATE_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as file:
            state = json.load(file)
        weights = state["weights"]
        if not (
            isinstance(weights, str)
            and weights == os.path.basename(weights)
            and isinstance(state["epoch"], int)
            and not isinstance(state["epoch"], bool)
            and state["epoch"] >= 0
            and isinstance(state["history"], dict)
        ):
            raise ValueError(f"unexpected entries: {state!r:.200}")
    except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError too
        output = os.path.dirname(directory.rstrip("/\\")) or directory
        raise ValueError(
            f"The run's backup state file {path} is damaged ({error!r:.300}), "
            "so the run cannot resume from it. Remove the backup folder "
            f"({directory}) to train the run over from its first epoch, or "
            f"use another `output`. Received: output={output!r}"
        ) from None
    weights = os.path.join(directory, weights)
    if not os.path.isfile(weights):
        return None
    return state, weights


class Backup(keras.callbacks.Callback):
    """Backs up the model and optimizer after every epoch, atomically.

    Each epoch writes `epoch-NNNN.weights.h5` (model and optimizer
    variables) through a temporary file, then `state.json` naming it (also
    through a temporary file), then removes older weights. A kill at any
    moment leaves a `state.json` that names a complete weights file.
    Unlike `keras.callbacks.BackupAndRestore`, the backup is kept when
    training ends (a rerun of a finished run trains no more) and it holds
    the history so far.

    With `log`, the history is also written there as CSV (`write_csv`)
    after each backup, whole and atomically: the log holds exactly the
    epochs the backup does (Keras's `CSVLogger` appends a row that a kill
    after the backup loses, or one before it repeats after resuming).

    Args:
        directory: the backup folder.
        history: logs of epochs completed before this run (resuming).
        log: the CSV file, or `None`. Defaults to `None`.
    """

    def __init__(self, directory, history=None, log=None):
        super().__init__()
        self.directory = directory
        self.history = {k: list(v) for k, v in (history or {}).items()}
        self.log = log

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        name = f"epoch-{epoch + 1:04d}.weights.h5"
        path = os.path.join(self.directory, name)
        atomic_write(path, lambda p: self.model.save_weights(p, overwrite=True))
        write_json(
            os.path.join(self.directory, STATE_FILE),
            {"epoch": epoch + 1, "weights": name, "history": self.history},
        )
        if self.log:
            write_csv(self.log, self.history)
        for old in os.listdir(self.directory):
            if old.startswith("epoch-") and old != name:
                os.remove(os.path.join(self.directory, old))


def _saved_variables(path, group):
    """The arrays Keras saved under `group` of a `.weights.h5` file, in
    order, or `None` if it has no such group."""
    import h5py

    with h5py.File(path, "r") as file:
        if group not in file:
            return None
        saved = file[group]
        return [np.asarray(saved[str(i)]) for i in range(len(saved))]


def load_backup(model, path):
    """Loads a backup's weights into `model`, and its optimizer's state into
    `model.optimizer`, whether or not either is a `LossScaleOptimizer`.

    Keras wraps the optimizer of a `mixed_float16` model in a
    `LossScaleOptimizer`, whose variables (its loss scale, then the inner
    optimizer's) do not match a plain optimizer's: `load_weights` skips
    them with a warning, and the run starts its learning-rate schedule,
    step count and moments over. Here the inner optimizer's state is
    restored across the wrapper (a run resumed with another precision, on
    other hardware, keeps its step and moments; a new wrapper's loss scale
    starts at its initial value), and a backup whose optimizer state does
    not fit is refused, never dropped.

    The model's optimizer must be built (`model.optimizer.build`).
    """
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", None)
    saved_all = _saved_variables(path, "optimizer/vars")
    saved_inner = _saved_variables(path, "optimizer/inner_optimizer/vars")
    if (inner is None) == (saved_inner is None):  # both wrapped, or neither
        pairs = list(zip(optimizer.variables, saved_all or []))
        fits = saved_all is not None and len(saved_all) == len(
            optimizer.variables
        )
    else:  # the inner optimizer's state only
        target = optimizer if inner is None else inner
        source = saved_inner if saved_inner is not None else saved_all
        pairs = list(zip(target.variables, source or []))
        fits = source is not None and len(source) == len(target.variables)
    fits = fits and all(tuple(v.shape) == s.shape for v, s in pairs)
    if not fits:
        raise ValueError(
            "The backup's optimizer state does not fit this run's optimizer "
            f"({type(optimizer).__name__} with {len(optimizer.variables)} "
            f"variables; the backup holds {len(saved_all or [])}). Resume with "
            "the settings the backup was made with, or use another `output`. "
            f"Received: backup={path!r}"
        )
    with warnings.catch_warnings():
        # The optimizer's part is restored below, across the wrapper.
        warnings.filterwarnings(
            "ignore", "Skipping variable loading for optimizer"
        )
        model.load_weights(path)
    for variable, value in pairs:
        variable.assign(value)


def seed_state_variables(model):
    """The state variables of the `keras.random.SeedGenerator`s of `model`
    (its dropout, stochastic depth, masked patch draws), in a fixed order."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def seed_model(model, seed, epoch):
    """Sets every `SeedGenerator` of `model` to a state that is a function
    of `(seed, epoch, its place in the model)` alone.

    A generator's state is a variable that backups do not hold; without
    this a resumed run would draw the first epoch's dropout masks again.
    """
    for index, variable in enumerate(seed_state_variables(model)):
        entropy = np.random.SeedSequence([seed, epoch, index]).generate_state(
            1
        )[0]
        # Keras folds seeds into int32 (`keras.random`): keep it positive
        # and below that bound, so that it is used as it is.
        value = int(entropy) % (2**31 - 2) + 1
        variable.assign(np.array([value, 0], dtype=variable.dtype))


class EpochSeeds(keras.callbacks.Callback):
    """Seeds the model's random draws (dropout, stochastic depth, masked
    patches) from `(seed, epoch)` at the start of every epoch
    (`seed_model`), so that a resumed epoch draws what it drew the first
    time.

    Args:
        seed: int, the run's seed.
    """

    def __init__(self, seed):
        super().__init__()
        self.seed = seed

    def on_epoch_begin(self, epoch, logs=None):
        seed_model(self.model, self.seed, epoch)


class NonFiniteLossError(RuntimeError):
    """Raised when the training loss becomes NaN or infinite."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops training with a clear error when the loss is not finite.

    The exception ends `fit` before `on_train_end`, so the last backup (of
    the last good epoch) is kept for a rerun with a smaller learning rate.
    """

    def __init__(self, backup_directory=None):
        super().__init__()
        self.backup_directory = backup_directory
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            where = (
                f" The backup of the last completed epoch is kept in "
                f"{self.backup_directory}."
                if self.backup_directory
                else ""
            )
            raise NonFiniteLossError(
                f"The training loss became {float(loss)} at epoch "
                f"{self._epoch + 1}, step {batch + 1}: training stopped. "
                "Lower the learning rate, keep gradient clipping on, or "
                f"train in float32 (--mixed-precision off).{where}"
            )


class BestCheckpoint(keras.callbacks.Callback):
    """Saves the whole model (`.keras`) whenever `monitor` improves.

    Args:
        path: the `.keras` file.
        monitor: the log key, e.g. `"val_accuracy"`.
        mode: `"max"` or `"min"`.
        best: the best value so far (resuming). Defaults to `None`.
    """

    def __init__(self, path, monitor="val_accuracy", mode="max", best=None):
        super().__init__()
        self.path = path
        self.monitor = monitor
        self.mode = mode
        self.best = best

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        value = float(value)
        better = (
            self.best is None
            or (self.mode == "max" and value > self.best)
            or (self.mode == "min" and value < self.best)
        )
        if better:
            self.best = value
            atomic_write(self.path, lambda p: self.model.save(p))
