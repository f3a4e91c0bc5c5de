"""Callbacks that make a run survive: atomic backups, a non-finite loss
stop, a best-so-far checkpoint."""

import json
import math
import os

import keras

from keras_vit import files

STATE_FILE = "state.json"


def atomic_write(path, write):
    """Calls `write(temporary_path)`, then renames it to `path`.

    The temporary file sits next to `path` (same file system, same suffix
    for Keras's extension checks), so the rename is atomic: a process killed
    at any moment leaves either the old file or the new one, never half of
    one (`keras_vit.files.atomic_file`).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    suffix = ".weights.h5" if path.endswith(".weights.h5") else os.path.splitext(path)[1]
    with files.atomic_file(path, suffix=suffix) as temporary:
        write(temporary)


def write_json(path, data):
    def write(temporary):
        with open(temporary, "w") as file:
            json.dump(data, file, indent=2, default=str)

    atomic_write(path, write)


def read_backup(directory):
    """The last backup in `directory`: `(state, weights_path)` or `None`.

    `state` holds `epoch` (epochs completed) and `history` (the logs so
    far). Only a state file that names an existing weights file counts.
    """
    path = os.path.join(directory, STATE_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as file:
        state = json.load(file)
    weights = os.path.join(directory, state["weights"])
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

    Args:
        directory: the backup folder.
        history: logs of epochs completed before this run (resuming).
    """

    def __init__(self, directory, history=None):
        super().__init__()
        self.directory = directory
        self.history = {k: list(v) for k, v in (history or {}).items()}

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
        for old in os.listdir(self.directory):
            if old.startswith("epoch-") and old != name:
                os.remove(os.path.join(self.directory, old))


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
