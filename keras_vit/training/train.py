"""`train(config)`: one training entry point for every scale.

The same code trains on one CPU or GPU, several GPUs (MirroredStrategy),
several machines (MultiWorkerMirroredStrategy) and Cloud TPUs
(TPUStrategy): model, optimizer and metrics are created inside
`strategy.scope()` and the batch size is global. Training batches are
whole (an epoch's partial batch is dropped). On a TPU, whose shapes are
static, evaluation pads the validation and test splits to whole batches
with examples of weight 0, so that every example counts; masked patch
prediction, whose loss cannot be padded exactly, needs splits of whole
batches there (`_check_whole_batches`). The step is XLA-compiled where it
pays (`jit_compile`), and several steps run per call
(`steps_per_execution`). A multi-worker run checks that every worker
resumes from the same epoch (`strategy.check_same_initial_epoch`).
"""

import dataclasses
import json
import os
import shutil
import socket
import tempfile
import warnings

import keras

from keras_vit import extras
from keras_vit import files
from keras_vit import resolver
from keras_vit.data import datasets as data_datasets
from keras_vit.data import pipeline as data_pipeline
from keras_vit.data import resize
from keras_vit.model_argument import RUN_MODEL_FILE
from keras_vit.models.preprocessing import scale_and_offset
from keras_vit.training import callbacks as run_callbacks
from keras_vit.training import recipe
from keras_vit.training import strategy as run_strategy
from keras_vit.training.config import DEFAULT_MODEL
from keras_vit.training.config import flatten
from keras_vit.training.masked_patches import MaskedPatchPrediction
from keras_vit.weights import convert
from keras_vit.weights import hub
from keras_vit.weights import reader


@dataclasses.dataclass
class TrainResult:
    """What a run produced."""

    model: object
    history: dict
    test_metrics: dict
    output: str
    strategy_kind: str
    initial_epoch: int


def build_model(config, num_classes, dtype=None, class_names=None):
    """The model a config asks for (inside a strategy scope): a
    `keras_vit.ViT` (named `class_names`, its dataset's, which its saved
    files then carry), or for masked patch prediction a
    `MaskedPatchPrediction` around a `keras_vit.ViT` without a head. Each
    ViT rematerialises its blocks in training as `scale.remat` says.
    Weights from a Hub repo (`hf://`, a snapshot folder) bring their
    architecture: under no model name (the default), the repo's is
    built; a name's numbers must agree with the repo's."""

    spec = config.model
    kwargs = dict(spec.kwargs)
    if spec.image_size is not None:
        kwargs["image_size"] = spec.image_size
    if spec.patch_size is not None:
        kwargs["patch_size"] = spec.patch_size
    for key, value in _checkpoint_options(spec.weights).items():
        kwargs.setdefault(key, value)
    kwargs.update(num_classes=num_classes, weights=spec.weights, dtype=dtype)
    masked = config.objective.name == "masked_patches"
    if masked:
        kwargs["include_top"] = False
    elif class_names is not None:
        kwargs["class_names"] = list(class_names)
    name = spec.builder
    if spec.name is None and hub.is_source(spec.weights):
        name, kwargs["weights"] = spec.weights, None
    model = resolver.resolve_model(name, **kwargs)
    model.remat = config.scale.remat
    if masked:
        model = MaskedPatchPrediction(
            model, seed=config.run.seed, **config.objective.masked_patches
        )
        model.build()
    return model


#: What a checkpoint implies that fine-tuning sets itself (a new head, the
#: run's resolution; the paper drops the pre-logits layer).
_RUN_SETS = ("image_size", "include_top", "num_classes", "representation_size")


def _checkpoint_options(weights):
    """The architecture a checkpoint file (`.npz`, `.safetensors`) implies
    beyond the variant's numbers (`keras_vit.weights.convert.architecture`:
    registers, LayerScale, MAP pooling, a distillation token, ...), so that
    `--weights FILE` of a modern family builds the model its tensors fit;
    `{}` for a preset name or a Keras weights file."""

    checkpoint_file = (
        isinstance(weights, str)
        and weights.endswith((".npz", ".safetensors"))
        and os.path.isfile(weights)
        and not reader.is_native(weights)
    )
    if not checkpoint_file:
        return {}
    implied = convert.architecture(reader.read_checkpoint(weights))
    return {k: v for k, v in implied.items() if k not in _RUN_SETS}


def _output_dirs(config, chief):
    """The run's folder, or a temporary one for a non-chief worker."""
    if chief:
        os.makedirs(config.run.output, exist_ok=True)
        return config.run.output, None
    temporary = tempfile.mkdtemp(prefix="keras_vit_worker_")
    return temporary, temporary


#: The lock file of a run folder (`RunLock`).
LOCK_FILE = ".lock"


class RunLock:
    """An exclusive lock on a run folder, held while a run writes there.

    Two runs started into one folder would resume the same backup and
    overwrite each other's files; the second one is refused, naming the
    first. The lock is the operating system's (`flock` on `OUTPUT/.lock`),
    so a killed run releases it: no stale lock is left behind.
    """

    def __init__(self, folder):
        self.folder = folder
        self.path = os.path.join(folder, LOCK_FILE)
        self._file = None

    def acquire(self):
        file = open(self.path, "a+")
        try:
            _lock(file)
        except OSError:
            try:
                file.seek(0)
                holder = file.read().strip() or "another process"
            except OSError:
                holder = "another process"
            file.close()
            raise ValueError(
                f"Another run is writing into the output folder ({holder}); "
                "two runs in one folder would overwrite each other's backups "
                "and files. Wait for it to end, or use another `output`. "
                f"Received: output={self.folder!r}"
            ) from None
        file.seek(0)
        file.truncate()
        file.write(f"process {os.getpid()} on {socket.gethostname()}\n")
        file.flush()
        self._file = file
        return self

    def release(self):
        if self._file is not None:
            self._file.close()  # closing releases the lock
            self._file = None


def _lock(file):
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        file.seek(0)
        msvcrt.locking(file.fileno(), msvcrt.LK_NBLCK, 1)
        return
    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


#: The optional modules a run needs (the `train` extra), checked before it
#: starts: the learning curves are drawn only at its end.
_RUN_NEEDS = {
    "matplotlib": "Training's learning curves (curves.png)",
    "tensorboard": "Training's TensorBoard logs",
}


def _plot_history(history, path):
    plt = extras.pyplot(_RUN_NEEDS["matplotlib"])

    metrics = [
        k for k in history if not k.startswith("val_") and k != "learning_rate"
    ]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5))
    axes = [axes] if len(metrics) == 1 else axes
    for ax, key in zip(axes, metrics):
        epochs = range(1, len(history[key]) + 1)
        ax.plot(epochs, history[key], marker="o", label="train")
        if f"val_{key}" in history:
            ax.plot(
                epochs, history[f"val_{key}"], marker="o", label="validation"
            )
        ax.set_xlabel("epoch")
        ax.set_title(key)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    run_callbacks.atomic_write(
        path, lambda p: fig.savefig(p, format="png", dpi=100)
    )
    plt.close(fig)


#: What a rerun into a run's folder must keep to resume it: what its backup
#: was made for (the model and optimizer variables), its data (the
#: validation split, which the seed draws: another one would train on
#: images validated on so far) and its batch size (the backup's optimizer
#: step counts batches of that size: with another one the learning-rate
#: schedule, whose length is counted in the new batches, would resume at
#: the wrong place, silently). By their flat names (`config.flatten`), so
#: that a `config.json` of either form compares with the run's settings.
RESUME_SETTINGS = (
    "model",
    "image_size",
    "patch_size",
    "model_kwargs",
    "dataset",
    "objective",
    "masked_patches",
    "optimizer",
    "validation_split",
    "seed",
    "batch_size",
)


#: The file of a run folder that holds its settings (the nested config,
#: JSON), written when the run starts: resuming compares the new settings
#: with it, `--config` reruns it, and exports find the run's dataset in it.
RUN_CONFIG_FILE = "config.json"

#: The folder of a run folder that holds the backup of the last completed
#: epoch (`keras_vit.training.callbacks`), which a rerun resumes from.
BACKUP_FOLDER = "backup"

#: The file of a run folder that names its classes, in the order of the
#: model's outputs (a JSON list of strings), written when the run starts:
#: exports and predictions read the names from it, not from the dataset,
#: which may have changed since.
CLASS_NAMES_FILE = "class_names.json"

#: The file of a run folder that holds the model of the best epoch so far
#: (by validation accuracy, else training accuracy; patch accuracy for
#: masked patch prediction), beside the final one (`RUN_MODEL_FILE`, the
#: run's model for every command that takes a run's folder).
BEST_MODEL_FILE = "best.keras"

#: What `train` writes into a run folder (besides its `.lock` and the
#: hidden temporary files of its atomic writes).
RUN_ENTRIES = (
    RUN_CONFIG_FILE,
    CLASS_NAMES_FILE,
    "history.json",
    "log.csv",
    "curves.png",
    RUN_MODEL_FILE,
    BEST_MODEL_FILE,
    "backbone.keras",
    BACKUP_FOLDER,
    "logs",
)


def read_class_names(folder):
    """The class names a run recorded in `folder` (`CLASS_NAMES_FILE`), or
    `None` if it has none (a run of an earlier version, or a masked patch
    prediction run, which has no classes).

    Raises:
        ValueError: if the file is there but is not a JSON list of names.
    """
    path = os.path.join(os.fspath(folder), CLASS_NAMES_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            names = json.load(file)
    except (OSError, ValueError) as error:  # JSONDecodeError, UnicodeError
        names = error
    if not (
        isinstance(names, list)
        and names
        and all(isinstance(name, str) for name in names)
    ):
        raise ValueError(
            "The run's class names file is not a JSON list of names "
            f"({names!r}); pass the names (`labels`) instead. Received: "
            f"{path!r}"
        )
    return names


def _is_run_config(path):
    """Whether `path` is the `config.json` that `train` writes."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or not isinstance(data.get("resolved"), dict):
        return False
    flat = flatten(data)  # either form: nested, or flat as runs wrote it
    return all(key in flat for key in ("model", "dataset", "output"))


def _check_run_folder(config):
    """Raises if `config.run.output` holds files a run writes that no run wrote.

    A run writes `RUN_ENTRIES` into its folder, replacing what is there;
    in a folder that is not a run's (no keras_vit `config.json`) they are
    a user's files (a project's `config.json`, another `model.keras`), and
    the run is refused, naming them, rather than overwriting them. Other
    files in the folder are never touched, and a run's own folder is
    resumed.
    """
    folder = config.run.output
    if not os.path.isdir(folder):
        return
    if _is_run_config(os.path.join(folder, RUN_CONFIG_FILE)):
        return
    taken = sorted(set(os.listdir(folder)) & set(RUN_ENTRIES))
    if taken:
        raise ValueError(
            "The output folder is not a keras_vit run's (its "
            f"{RUN_CONFIG_FILE} is not one a run wrote, or it has none) and "
            f"holds files a run writes: {', '.join(taken)}. Training would "
            "overwrite them. "
            "Use another `output`, or move them first. Received: "
            f"output={folder!r}"
        )


def _check_resumable(config):
    """Raises if `config.run.output` holds a backup made with other settings.

    A rerun resumes from the backup; with another model, dataset, objective
    or optimizer its variables would not fit (or not mean the same), and
    with another validation split or seed it would train on images it
    validated on, and with another batch size its learning-rate schedule
    would resume at another step than the backup's; so such a rerun is
    refused before anything runs, naming what differs. Epochs, the
    optimizer's numbers (learning rate, weight decay, warm-up, decay,
    clipping, momentum), label smoothing, augmentation, the precision and
    the strategy may change (`RESUME_SETTINGS` names what may not).
    """
    path = os.path.join(config.run.output, RUN_CONFIG_FILE)
    if not run_callbacks.read_backup(
        os.path.join(config.run.output, BACKUP_FOLDER)
    ):
        return
    if not os.path.isfile(path):
        return
    with open(path) as file:
        previous = flatten(json.load(file))  # either form
    current = flatten(json.loads(json.dumps(dataclasses.asdict(config))))
    if current["model"] is None and previous.get("model") == DEFAULT_MODEL:
        # Recorded before no name (`None`) meant the default: the same.
        previous["model"] = None
    differ = [
        f"{name}={previous.get(name)!r} there, {current[name]!r} here"
        for name in RESUME_SETTINGS
        if name in previous and previous[name] != current[name]
    ]
    if differ:
        raise ValueError(
            "The output folder holds a run made with other settings, and a "
            "rerun resumes it: " + "; ".join(differ) + ". Use another "
            "`output`, or the run's settings. Received: "
            f"output={config.run.output!r}"
        )


def train(config, callbacks=(), strategy=None):
    """Trains (or resumes training) a ViT as `config` says.

    Writes into `config.run.output`: `backup/` (resumable state, kept after the
    run), `best.keras` (best validation accuracy, or training accuracy
    without validation; for masked patch prediction, patch accuracy),
    `model.keras` (the final model; for masked patch prediction also
    `backbone.keras`, its ViT), `config.json`, `class_names.json` (when
    the run starts: the dataset's class names in the order of the model's
    outputs, which exports and predictions read; not for masked patch
    prediction), `history.json`, `log.csv`, `curves.png` and TensorBoard
    `logs/`. A model built with `include_preprocessing=False` (in
    `model.kwargs`) trains on inputs normalised as its `normalization`
    says, in the pipelines, after the augmentations; its saved files take
    normalised inputs too. A rerun that resumes a run whose dataset's
    classes or examples have changed since (an image folder's files
    added, removed or renamed: its validation split would hold other
    images out) is refused. In a multi-worker run only the chief writes
    there; other workers write to temporary folders that are removed
    afterwards. The folder is locked while the run writes there
    (`RunLock`): a second run into it is refused.

    A rerun with the same `run.output` resumes after the last completed epoch
    and trains on what the uninterrupted run would have: every epoch's
    shuffle, augmentation, dropout and masking draws are seeded from
    `(seed, epoch)`. With `run.deterministic` a killed and resumed run
    ends with the same weights, bit for bit, as an uninterrupted one on the
    same machine.

    Args:
        config: a `TrainConfig`.
        callbacks: extra `keras.callbacks.Callback`s, run after keras_vit's.
        strategy: a `tf.distribute.Strategy` to use instead of the one
            `config.scale.strategy` names. Defaults to `None`.

    Returns:
        A `TrainResult`.
    """
    config.check()
    for module, feature in _RUN_NEEDS.items():
        extras.require(module, feature)
    _check_run_folder(config)
    _check_resumable(config)
    setup = _set_up(config, strategy)
    data = _load_data(config, setup)
    # The model and optimizer are made (and so checked) before anything is
    # written.
    model = _build_and_compile(config, setup, data)
    out_dir, temporary = _output_dirs(config, setup.chief)
    lock = None
    try:
        lock = _claim_run_folder(config, setup, out_dir, data)
        backup = _resume(config, setup, model, out_dir)
        pipelines = _pipelines(config, setup, data, model, backup)
        run_files = _callbacks(config, model, out_dir, pipelines, backup)
        if setup.chief:
            _write_config(config, setup, model, out_dir, backup, data)
        history, test_metrics = _fit_and_evaluate(
            config, model, data, pipelines, backup, [*run_files, *callbacks]
        )
        _save(config, setup, model, out_dir, history, test_metrics)
        return TrainResult(
            model=model,
            history=history,
            test_metrics=test_metrics,
            output=config.run.output,
            strategy_kind=setup.kind,
            initial_epoch=backup.initial_epoch,
        )
    finally:
        if lock is not None:
            lock.release()
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


@dataclasses.dataclass
class _Setup:
    """Where and how a run computes (`_set_up`)."""

    strategy: object
    kind: str
    replicas: int
    chief: bool
    device: str
    policy: str
    steps_per_execution: int = None
    jit_compile: object = None


def _set_up(config, strategy):
    """Step 1: the strategy, the seeds and the precision."""
    if strategy is None:
        strategy, kind = run_strategy.make_strategy(
            config.scale.strategy, config.scale.tpu
        )
    else:
        kind = run_strategy.kind_of(strategy)
    replicas = strategy.num_replicas_in_sync
    batch_size = config.data.batch_size
    if batch_size % replicas:
        raise ValueError(
            f"`batch_size` is the global batch and must be divisible by the "
            f"{replicas} replicas. Received: batch_size={batch_size}"
        )
    _check_steps_per_execution(config.scale.steps_per_execution, kind, replicas)
    chief = run_strategy.is_chief(strategy)
    # Refused now if held (a multi-worker chief checks with the others:
    # `_claim_run_folder`).
    if chief and kind != "multi_worker" and os.path.isdir(config.run.output):
        RunLock(config.run.output).acquire().release()
    device = run_strategy.device_kind(kind)
    # The run is reproducible from its seed: initialisation, shuffling and
    # augmentation; `deterministic` also makes TensorFlow's kernels so.
    keras.utils.set_random_seed(config.run.seed)
    if config.run.deterministic:
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    policy = recipe.dtype_policy(config.scale.mixed_precision, device)
    return _Setup(strategy, kind, replicas, chief, device, policy)


def _check_steps_per_execution(steps_per_execution, kind, replicas):
    """Raises for several steps per execution on more than one mirrored
    replica: Keras 3's multi-step loop fails there with "You must feed a
    value for placeholder tensor" (keras-team/keras#19246, still so with
    Keras 3.15 and TensorFlow 2.21; one replica, and TPUs, run it)."""
    if (
        steps_per_execution
        and steps_per_execution > 1
        and kind in ("mirrored", "multi_worker")
        and replicas > 1
    ):
        raise ValueError(
            f"`steps_per_execution` above 1 fails in Keras on {replicas} "
            f"{kind.replace('_', '-')} replicas (keras-team/keras#19246). "
            "Use steps_per_execution=1 (the default there). Received: "
            f"steps_per_execution={steps_per_execution}"
        )


@dataclasses.dataclass
class _Data:
    """The splits a run trains, validates and tests on (`_load_data`)."""

    num_classes: int
    class_names: list
    train: object
    validation: object
    test: object
    num_train: int
    steps_per_epoch: int
    #: What the validation split is drawn from (`EXAMPLES_KEY`).
    examples: dict = None
    #: The validation and test splits' sizes (`None` without the split).
    num_validation: int = None
    num_test: int = None


#: The entry of `config.json`'s `resolved` that records what the run's
#: examples were (their number and, for an image folder, its files'
#: `train_digest`): a rerun resumes only on the same ones.
EXAMPLES_KEY = "examples"


def _load_data(config, setup):
    """Step 2: the dataset and its validation hold-out."""
    import tensorflow as tf

    masked = config.objective.name == "masked_patches"
    data = data_datasets.load(
        config.data.dataset, config.data.data_dir, labels=not masked
    )
    # Shuffled before its images are read or decoded where the source
    # allows (`Dataset.training_source`): arrays and image folders by index,
    # each epoch a shuffle of the whole split (a shuffle buffer of an image
    # folder's class-ordered files mixed a few classes at a time); a
    # tensorflow_datasets split of JPEGs through the buffer still encoded,
    # decoded after it (a buffer of decoded images took ~4x the memory).
    train_split = data.training_source()
    num_train = data.num_train
    validation_split = num_held = None
    if config.data.validation_split:
        train_split, validation_split, num_train, num_held = data.holdout(
            config.data.validation_split, seed=config.run.seed, training=True
        )
        # Its size, known: an image folder's selection has none, and Keras
        # then warned "Your input ran out of data" after every validation.
        validation_split = validation_split.apply(
            tf.data.experimental.assert_cardinality(num_held)
        )
    if num_train is not None and num_train < config.data.batch_size:
        raise ValueError(
            f"`batch_size` is larger than the {num_train} training examples. "
            f"Received: batch_size={config.data.batch_size}"
        )
    num_test = data.num_test  # None without a test split
    if setup.kind == "tpu" and masked:
        _check_whole_batches(config, data.num_train, num_held, num_test)
    steps_per_epoch = (
        None if num_train is None else num_train // config.data.batch_size
    )
    return _Data(
        data.num_classes,
        None if masked else list(data.class_names),
        train_split,
        validation_split,
        data.test,
        num_train,
        steps_per_epoch,
        {"num_examples": data.num_train, "digest": data.train_digest},
        num_validation=num_held,
        num_test=num_test,
    )


def _check_whole_batches(config, num_examples, num_validation, num_test):
    """Raises for a masked patch prediction run on a TPU whose validation
    or test split is not a whole number of batches.

    A TPU's evaluation batches are whole (static shapes); a classifier's
    splits are padded with examples of weight 0 (`eval_pipeline`'s `pad`),
    which leaves its loss and accuracy those of the whole split, but
    masked patch prediction's cannot be: its loss is each batch's mean,
    which Keras weights by the batch's rows, padding included, and its
    corruption draws another patch from the padded batch. The split's last
    partial batch was dropped instead, without a word.
    """
    batch_size = config.data.batch_size
    for name, count in (("validation", num_validation), ("test", num_test)):
        if count is None or count % batch_size == 0:
            continue
        hint = f"a batch_size that divides {count}"
        if name == "validation":
            whole = max(1, round(count / batch_size)) * batch_size
            hint += (
                ", or validation_split="
                f"{whole / num_examples:.6g} "
                f"({whole} examples)"
            )
        raise ValueError(
            f"The {name} split's {count} examples are not a whole number of "
            f"batches: on a TPU evaluation batches are whole (static "
            "shapes), and masked patch prediction's loss cannot be padded "
            f"exactly, so {count % batch_size} examples would not be "
            f"evaluated. Use {hint}. Received: batch_size={batch_size} for "
            f"{count} {name} examples"
        )


#: The steps an epoch of unknown size is taken to have by the schedule.
UNKNOWN_EPOCH_STEPS = 1000


def make_run_optimizer(config, steps_per_epoch):
    """The run's optimizer and schedule, over `steps_per_epoch` (`None`
    for a dataset of unknown size: `UNKNOWN_EPOCH_STEPS`, with a warning)
    times `config.run.epochs` steps; raises for a warm-up not shorter
    than that."""
    if steps_per_epoch is None:
        warnings.warn(
            "The training split's size is unknown: the learning-rate "
            f"schedule takes {UNKNOWN_EPOCH_STEPS} steps an epoch. Longer "
            "epochs end at the decay's final rate (0 for cosine), shorter "
            "ones before the decay ends; set optimizer.warmup_steps and "
            "epochs for your data's size, or use a dataset whose size is "
            "known (every built-in loader's is).",
            stacklevel=2,
        )
    total_steps = (steps_per_epoch or UNKNOWN_EPOCH_STEPS) * config.run.epochs
    # 5% of the steps by default, at least one, but none for a run of
    # one step (a tiny folder: its one step is the decay's start).
    warmup = (
        config.optimizer.warmup_steps
        if config.optimizer.warmup_steps is not None
        else min(max(1, int(0.05 * total_steps)), total_steps - 1)
    )
    return recipe.make_optimizer(
        config.optimizer.name,
        config.optimizer.learning_rate,
        config.optimizer.weight_decay,
        warmup,
        total_steps,
        config.optimizer.decay,
        config.optimizer.clipnorm,
        config.optimizer.momentum,
    )


def _build_and_compile(config, setup, data):
    """Step 3: the model and its optimizer, compiled in the strategy's
    scope; sets `setup.steps_per_execution` and `setup.jit_compile`."""
    masked = config.objective.name == "masked_patches"
    with setup.strategy.scope():
        model = build_model(
            config, data.num_classes, setup.policy, data.class_names
        )
        optimizer = make_run_optimizer(config, data.steps_per_epoch)
        steps_per_execution = config.scale.steps_per_execution or (
            32 if setup.kind == "tpu" else 1
        )
        if data.steps_per_epoch:
            steps_per_execution = min(steps_per_execution, data.steps_per_epoch)
        jit = config.scale.jit_compile
        if jit == "auto":
            vit = model.backbone if masked else model
            jit = recipe.auto_jit_compile(
                setup.device,
                setup.replicas,
                setup.policy,
                vit.num_tokens,
                vit.hidden_dim,
            )
        objective = {}  # MaskedPatchPrediction computes its own
        if not masked:
            objective = dict(
                loss=keras.losses.CategoricalCrossentropy(
                    label_smoothing=config.objective.label_smoothing
                ),
                # Weighted: a TPU's padded evaluation batches weigh their
                # padding 0 (Keras's plain `metrics` ignore the weights).
                weighted_metrics=[
                    keras.metrics.CategoricalAccuracy(name="accuracy")
                ],
            )
        model.compile(
            optimizer=optimizer,
            steps_per_execution=steps_per_execution,
            jit_compile=jit,
            **objective,
        )
        # The optimizer as compiled: under mixed_float16 Keras wraps it in
        # a LossScaleOptimizer, whose variables a backup must restore.
        model.optimizer.build(model.trainable_variables)
    setup.steps_per_execution, setup.jit_compile = steps_per_execution, jit
    return model


def _check_same_data(config, data):
    """Raises if the run folder's backup was trained on other classes or
    other examples.

    A resumed run trains on its dataset's classes as they are now; if the
    folder's class sub-folders were renamed, added or removed since the run
    started, its labels would mean something else than the model learned
    so far, silently. And its validation split is drawn by index: with
    images added, removed or renamed since, it holds other images out, some
    of which the run trained on (and its epochs have another length than
    its learning-rate schedule's).
    """
    folder = config.run.output
    if not run_callbacks.read_backup(os.path.join(folder, BACKUP_FOLDER)):
        return
    recorded = None if data.class_names is None else read_class_names(folder)
    if recorded is not None and recorded != data.class_names:
        raise ValueError(
            "The output folder holds a run trained on other classes, and a "
            f"rerun resumes it: {recorded!r} there, {data.class_names!r} "
            "in the dataset now. Use another `output`, or the run's "
            f"classes. Received: output={folder!r}"
        )
    path = os.path.join(folder, RUN_CONFIG_FILE)
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as file:
        recorded = json.load(file).get("resolved", {}).get(EXAMPLES_KEY)
    if recorded is not None and recorded != data.examples:
        raise ValueError(
            "The output folder holds a run trained on other images, and a "
            f"rerun resumes it: {_described(recorded)} there, "
            f"{_described(data.examples)} in the dataset now (a validation "
            "split drawn again would hold other images out, some trained "
            "on). Use another `output`, or the run's images. Received: "
            f"output={folder!r}"
        )


def _described(examples):
    """`examples` (`EXAMPLES_KEY`'s record) in words."""
    if not isinstance(examples, dict):
        return repr(examples)
    digest = examples.get("digest")
    files = f", files digest {digest[:12]}" if digest else ""
    return f"{examples.get('num_examples')} examples{files}"


@dataclasses.dataclass
class _Backup:
    """What a run resumes from (`_resume`)."""

    found: bool
    history: dict
    initial_epoch: int
    folder: str
    log: str


def _claim_run_folder(config, setup, out_dir, data):
    """Step 3b: the chief locks the run folder (its `RunLock`, returned;
    `None` on other workers) and checks it again, as another run may have
    written it since the first check. In a multi-worker run every worker
    learns whether the chief succeeded (`run_strategy.all_succeed`), so
    that none waits for a chief that stopped."""

    def claim():
        if not setup.chief:
            return None
        lock = RunLock(out_dir).acquire()
        try:
            # A run killed while writing left hidden temporary files.
            for folder in (out_dir, os.path.join(out_dir, BACKUP_FOLDER)):
                files.remove_leftovers(folder)
            _check_run_folder(config)
            _check_resumable(config)
            _check_same_data(config, data)
        except BaseException:
            lock.release()
            raise
        return lock

    if setup.kind != "multi_worker":
        return claim()
    claimed = []
    try:
        run_strategy.all_succeed(
            setup.strategy, lambda: claimed.append(claim()), config.run.output
        )
    except BaseException:  # another worker failed, or the gathering did
        for lock in claimed:
            if lock is not None:
                lock.release()
        raise
    return claimed[0]


def _resume(config, setup, model, out_dir):
    """Step 4 (in the locked folder): the backup's state, loaded."""
    backup_dir = os.path.join(out_dir, BACKUP_FOLDER)
    # Every worker resumes from the chief's backup (the run folder must be
    # readable by all of them: shared storage or gs://), so that all start
    # the same epoch with the same weights.
    backup = run_callbacks.read_backup(
        os.path.join(config.run.output, BACKUP_FOLDER)
    )
    initial_epoch = backup[0]["epoch"] if backup else 0
    if setup.kind == "multi_worker":  # (one process reads one backup)
        run_strategy.check_same_initial_epoch(
            setup.strategy, initial_epoch, config.run.output
        )
    if backup:
        with setup.strategy.scope():
            run_callbacks.load_backup(model, backup[1])
    return _Backup(
        found=bool(backup),
        history=backup[0]["history"] if backup else {},
        initial_epoch=initial_epoch,
        folder=backup_dir,
        log=os.path.join(out_dir, "log.csv"),
    )


def _pipelines(config, setup, data, model, backup):
    """Step 5: the `tf.data` pipelines (train, validation, test) of what
    the model takes."""
    vit = model.backbone if config.objective.name == "masked_patches" else model
    size = vit.image_size
    train_ds = data_pipeline.train_pipeline(
        data.train,
        data.num_classes,
        size,
        config.data.batch_size,
        augmentation=config.augmentation,
        shuffle=config.data.shuffle,
        seed=config.run.seed,
        deterministic=config.run.deterministic,
        # One endless stream cut into epochs by steps_per_epoch, so an
        # epoch never runs out of data halfway; it starts at the epoch the
        # run resumes at, with that epoch's draws. (Of unknown size, each
        # of fit's epochs is one iteration: the next epoch's draws.)
        repeat=data.steps_per_epoch is not None,
        num_examples=data.num_train,
        initial_epoch=backup.initial_epoch,
    )
    # A TPU's shapes are static: its splits are padded to whole batches
    # with examples of weight 0, so that every example counts.
    static = setup.kind == "tpu"
    evaluated = {}
    for name, split, count in (
        ("validation", data.validation, data.num_validation),
        ("test", data.test, data.num_test),
    ):
        evaluated[name] = (
            data_pipeline.eval_pipeline(
                split,
                data.num_classes,
                size,
                config.data.batch_size,
                pad=static,
                num_examples=count,
                # As the model is evaluated (a preset's: timm's centre
                # crop, or the squash); training's augmentation is its own.
                image_resize=resize.of_model(vit),
            )
            if split is not None
            else None
        )
    return {
        name: _as_model_inputs(dataset, vit)
        for name, dataset in dict(train=train_ds, **evaluated).items()
    }


def _as_model_inputs(dataset, vit):
    """The `(images, labels)` batches of `dataset` (or `(images, labels,
    weights)`, padded for static shapes), [0, 255] pixels, as
    `vit` takes them: as they are, or for a model built with
    `include_preprocessing=False`, normalised as its `normalization` says
    (the multiply-add its `rescaling` layer would be), after the
    augmentations, which work on pixels. The model trained on pixels
    instead: masked patch prediction's targets were all the top class."""
    if dataset is None or vit.include_preprocessing:
        return dataset
    import tensorflow as tf

    scale, offset = (
        tf.constant(value, "float32")
        for value in scale_and_offset(vit.normalization)
    )
    return dataset.map(
        lambda images, *rest: (images * scale + offset, *rest),
        num_parallel_calls=tf.data.AUTOTUNE,
    ).prefetch(tf.data.AUTOTUNE)


def _callbacks(config, model, out_dir, pipelines, backup):
    """Step 6: keras_vit's callbacks (seeds, best model, backup, NaN stop,
    TensorBoard); the backup is the third."""
    monitor = (
        "patch_accuracy"
        if config.objective.name == "masked_patches"
        else "accuracy"
    )
    monitor = (
        f"val_{monitor}" if pipelines["validation"] is not None else monitor
    )
    history = backup.history
    best_so_far = max(history[monitor]) if history.get(monitor) else None
    return [
        run_callbacks.EpochSeeds(config.run.seed),
        # Before the backup: a kill between the two repeats the epoch,
        # which writes best.keras again (after the backup, the epoch's
        # best model would be lost).
        run_callbacks.BestCheckpoint(
            os.path.join(out_dir, BEST_MODEL_FILE),
            monitor,
            "max",
            best_so_far,
        ),
        # Writes log.csv from the history it backs up.
        run_callbacks.Backup(backup.folder, history, log=backup.log),
        run_callbacks.StopOnNonFiniteLoss(backup.folder),
        keras.callbacks.TensorBoard(os.path.join(out_dir, "logs")),
    ]


def _write_config(config, setup, model, out_dir, backup, data):
    """The chief's `config.json` (with what `auto` settings resolved to),
    its `class_names.json` and the log of the epochs the backup holds, no
    more, no less."""
    vit = model.backbone if config.objective.name == "masked_patches" else model
    write_config = dataclasses.asdict(config)
    write_config.update(
        resolved={
            "strategy": setup.kind,
            "replicas": setup.replicas,
            "dtype_policy": setup.policy,
            "steps_per_execution": setup.steps_per_execution,
            "jit_compile": setup.jit_compile,
            "model": vit.get_config(),
            EXAMPLES_KEY: data.examples,
        }
    )
    run_callbacks.write_json(
        os.path.join(out_dir, RUN_CONFIG_FILE), write_config
    )
    if data.class_names is not None:
        run_callbacks.write_json(
            os.path.join(out_dir, CLASS_NAMES_FILE), data.class_names
        )
    if backup.found:
        run_callbacks.write_csv(backup.log, backup.history)


def _fit_and_evaluate(config, model, data, pipelines, backup, callbacks):
    """Step 7: trains from the backup's epoch; the history and the test
    split's metrics."""
    initial_epoch = backup.initial_epoch
    if initial_epoch < config.run.epochs:
        if initial_epoch and config.run.verbose:
            print(
                f"Resuming from the backup in {backup.folder}: "
                f"{initial_epoch} of {config.run.epochs} epochs done."
            )
        model.fit(
            pipelines["train"],
            epochs=config.run.epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=data.steps_per_epoch,
            validation_data=pipelines["validation"],
            callbacks=callbacks,
            shuffle=False,  # the pipeline shuffles
            verbose=config.run.verbose,
        )
    history = callbacks[2].history  # the Backup's
    test_metrics = {}
    if pipelines["test"] is not None:
        # The same draws (masked patches) however the run got here.
        run_callbacks.seed_model(model, config.run.seed, config.run.epochs)
        test_metrics = model.evaluate(
            pipelines["test"], return_dict=True, verbose=0
        )
        test_metrics = {k: float(v) for k, v in test_metrics.items()}
    return history, test_metrics


def _save(config, setup, model, out_dir, history, test_metrics):
    """Step 8: the final model (and backbone), history and curves."""
    run_callbacks.atomic_write(
        os.path.join(out_dir, RUN_MODEL_FILE), lambda p: model.save(p)
    )
    if (
        config.objective.name == "masked_patches"
    ):  # what fine-tuning starts from
        run_callbacks.atomic_write(
            os.path.join(out_dir, "backbone.keras"),
            lambda p: model.backbone.save(p),
        )
    if setup.chief:
        run_callbacks.write_json(
            os.path.join(out_dir, "history.json"),
            {"history": history, "test": test_metrics},
        )
        if history:
            _plot_history(history, os.path.join(out_dir, "curves.png"))
