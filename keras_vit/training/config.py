"""`TrainConfig`: everything a training run needs, nested by concern, and
where the flags of `keras-vit train` come from.

A run's settings come in seven sections, one per question a reader asks of
a run, in the order `train` answers them:

- `model` (`ModelConfig`): which network, at which size, from which weights.
- `data` (`DataConfig`): which images, how many at a time, in which order,
  and what is held out.
- `augmentation` (`keras_vit.data.Augmentation` itself, not a restatement
  of it): what the pipeline does to each image and batch.
- `optimizer` (`OptimizerConfig`): how the weights move (the optimizer, its
  learning-rate schedule, weight decay, momentum, clipping).
- `objective` (`ObjectiveConfig`): what is learned (classification, with
  its label smoothing, or masked patch prediction, with its options);
  label smoothing is the loss's, not the optimizer's.
- `run` (`RunConfig`): where the run writes, for how long, drawn from
  which seed, how reproducibly, how talkatively.
- `scale` (`ScaleConfig`): where and how fast it computes (strategy,
  precision, XLA, steps per call); these may change between a run and its
  resumption, so they are kept apart from what a backup is made for.

`TrainConfig` takes the sections only. `TrainConfig.from_dict` (and
`load_config`) also reads the flat form (`{"epochs": 3, ...}`) that
earlier versions wrote to a run folder's `config.json`, so that such a
run is rerun and resumed; the resume check compares runs in that form
(`flatten`).

This module imports neither Keras nor TensorFlow (the command line builds
its parser from the sections' fields: `settings`). Each field's metadata
holds its `help` for the command line, the old flat name (`flat`, which is
also the flag's name; the field's own name by default), and how its flag
is spelled when it is not `--flat-name VALUE` (`kind`): `"switch"` (`on` /
`off`), `"store_true"`, `"dashes"` (choices spelled with `-`),
`"choice_text"` (choices given as text: `auto`, `on`, `off`, numbers),
`"crop_area"` (the smallest area only) and `"options"` (a dict whose
entries have flags of their own, `options`).
"""

import dataclasses
import json
import os

from keras_vit import arg_checks
from keras_vit import registry
from keras_vit.data import datasets
from keras_vit.data.pipeline import Augmentation
from keras_vit.options import DECAYS
from keras_vit.options import MIXED_PRECISION
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.options import OBJECTIVES
from keras_vit.options import OPTIMIZERS
from keras_vit.options import POOLINGS
from keras_vit.options import STRATEGIES
from keras_vit.training import strategy as run_strategy


def _metadata(
    help=None,
    *,
    flat=None,
    type=None,
    choices=None,
    kind=None,
    required=False,
    options=(),
):
    """A field's flag: its help, old flat name and spelling."""
    return dict(
        help=help,
        flat=flat,
        type=type,
        choices=choices,
        kind=kind,
        required=required,
        options=options,
    )


def _field(default, help=None, **metadata):
    """A section's field: its default and its flag's description."""
    metadata = _metadata(help, **metadata)
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


#: The network of a run that names none, unless its weights are a Hub
#: repo (whose architecture is built).
DEFAULT_MODEL = "ViT_Ti16"


@dataclasses.dataclass
class ModelConfig:
    """The network: `name` is a builder name (`"ViT_Ti16"`) or a variant
    (`"S/16"`), or `None`: a Hub repo's architecture where `weights` is
    one, else `DEFAULT_MODEL` (`builder`); `image_size`, `patch_size` and
    `kwargs` (any `keras_vit.ViT` argument, e.g. `{"hidden_dim": 96}`)
    override it; `weights` is a preset or a file to start from."""

    name: str = _field(
        None,
        f"builder (ViT_Ti16) or variant (S/16); default: a Hub repo's "
        f"architecture (--weights hf://...), else {DEFAULT_MODEL}",
        flat="model",
    )
    weights: str = _field(
        None, "preset, checkpoint or Hub repo (hf://, its architecture too)"
    )
    image_size: object = _field(None, type=int)
    patch_size: int = _field(None)
    kwargs: dict = _field(
        dict,
        "any keras_vit.ViT argument",
        flat="model_kwargs",
        kind="options",
        options=(
            # flag, ViT argument, type, choices, help
            ("hidden_dim", "hidden_dim", int, None, None),
            ("num_layers", "num_layers", int, None, None),
            ("num_heads", "num_heads", int, None, None),
            ("mlp_dim", "mlp_dim", int, None, None),
            ("pooling", "pooling", str, POOLINGS, None),
            (
                "position_embedding",
                "position_embedding",
                str,
                MODEL_POSITION_EMBEDDINGS,
                "default: learned (1D); learned2d, relative and none are the "
                "paper's ablations",
            ),
            ("dropout", "dropout_rate", float, None, None),
            ("drop_path", "drop_path_rate", float, None, None),
        ),
    )

    @property
    def builder(self):
        """The builder or variant named: `name`, else `DEFAULT_MODEL` (a
        Hub repo as `weights` under no `name`: `train` builds the repo's
        architecture instead)."""
        return DEFAULT_MODEL if self.name is None else self.name


@dataclasses.dataclass
class DataConfig:
    """The images: `dataset` is `"fashion_mnist"`, `"digits"`,
    `"folder:PATH"` or a `tensorflow_datasets` name (`data_dir` for its
    files); `validation_split` holds out a fraction of the training split
    for per-epoch validation and the best checkpoint; `batch_size` is the
    global batch."""

    dataset: str = _field(
        "fashion_mnist",
        "fashion_mnist, digits, folder:PATH or a tensorflow_datasets name",
        required=True,
    )
    data_dir: str = _field(
        None, "a tensorflow_datasets dataset's folder (gs:// for TPUs)"
    )
    validation_split: float = _field(
        0.0, "share of the training split held out to validate on"
    )
    batch_size: int = _field(128, "global batch")
    shuffle: bool = _field(True, kind="switch")


#: The flags of `Augmentation`'s fields (`keras_vit.data` knows nothing of
#: the command line), by field.
_AUGMENTATION_FLAGS = dict(
    random_resized_crop=_metadata(
        "random resized (Inception) crops", kind="switch"
    ),
    crop_area=_metadata(
        "smallest crop, as a fraction of the image", kind="crop_area"
    ),
    flip=_metadata("random horizontal flips", kind="switch"),
    rand_augment=_metadata("RandAugment ops per image (0: off)"),
    rand_augment_magnitude=_metadata(
        "RandAugment's magnitude, in [0, 1] (timm's m / 10: rand-m9 is 0.9)"
    ),
    mixup=_metadata("MixUp alpha (0: off)"),
    cutmix=_metadata("CutMix alpha (0: off)"),
)


@dataclasses.dataclass
class OptimizerConfig:
    """How the weights move (`keras_vit.training.recipe`): `name` is
    `"adamw"` or `"sgd"` (with `momentum`); `learning_rate` is the peak,
    reached after `warmup_steps` (`None`: 5% of the steps), then `decay`;
    gradients are clipped at the global norm `clipnorm` (`None`: not)."""

    name: str = _field("adamw", flat="optimizer", choices=OPTIMIZERS)
    learning_rate: float = _field(1e-3, "the peak, after the warm-up")
    weight_decay: float = _field(
        None, "decoupled; default: 0.1 for adamw, 0 for sgd"
    )
    warmup_steps: int = _field(None, "default: 5%% of the steps")
    decay: str = _field("cosine", choices=DECAYS)
    clipnorm: float = _field(1.0, "clip gradients at this global norm")
    momentum: float = _field(0.9, "SGD's momentum (adamw: unused)")


@dataclasses.dataclass
class ObjectiveConfig:
    """What is learned: `name` is `"classification"` (labels, the model's
    head, `label_smoothing`) or `"masked_patches"`, the paper's
    self-supervised masked patch prediction
    (`keras_vit.training.MaskedPatchPrediction`): labels are not used (an
    image folder needs no class sub-folders), the backbone is built without
    a head, metrics are `loss` and `patch_accuracy`, and the backbone is
    also saved as `backbone.keras`, to fine-tune with `weights=`.
    `masked_patches` overrides the objective's options (`corrupt_rate`,
    `mask_rate`, `replace_rate`, `bits`; the paper's by default)."""

    name: str = _field(
        "classification",
        "masked-patches: the paper's self-supervised pre-training (no labels; "
        "writes backbone.keras to fine-tune from)",
        flat="objective",
        choices=OBJECTIVES,
        kind="dashes",
    )
    label_smoothing: float = _field(0.0)
    masked_patches: dict = _field(
        dict,
        "masked patch prediction's options",
        kind="options",
        options=(
            (
                "corrupt_rate",
                "corrupt_rate",
                float,
                None,
                "masked-patches: share of patches corrupted (default 0.5)",
            ),
            (
                "mask_rate",
                "mask_rate",
                float,
                None,
                "masked-patches: share of those masked (default 0.8)",
            ),
            (
                "replace_rate",
                "replace_rate",
                float,
                None,
                "masked-patches: share replaced by another patch (default 0.1)",
            ),
            (
                "color_bits",
                "bits",
                int,
                None,
                "masked-patches: bits per channel of the colour target "
                "(default 3)",
            ),
        ),
    )


@dataclasses.dataclass
class RunConfig:
    """The run itself: its folder (`output`; a rerun resumes it), its
    length, its seed (the initialisation, shuffle, augmentation, dropout and
    masking draws), whether kernels are deterministic too, and `verbose`
    (Keras's `fit` verbose)."""

    output: str = _field(
        "runs/vit", "run folder (rerun to resume)", required=True
    )
    epochs: int = _field(10)
    seed: int = _field(0, "draws the initialisation, shuffle and augmentation")
    deterministic: bool = _field(
        False,
        "deterministic kernels too (a killed and resumed run ends "
        "bit for bit as an uninterrupted one)",
        kind="store_true",
    )
    verbose: object = _field(
        "auto",
        "progress output (Keras's fit verbose)",
        choices=("auto", 0, 1, 2),
        kind="choice_text",
    )


@dataclasses.dataclass
class ScaleConfig:
    """Where and how fast it computes: `strategy` (`auto`, `default`,
    `mirrored`, `multi_worker`, `tpu`), `tpu`, `mixed_precision` (`auto`,
    `off`, `bfloat16`, `float16`; `auto` is bfloat16 on TPUs and on GPUs of
    compute capability 8.0 or more, float16 on older GPUs, and on CPUs
    bfloat16 where native, else float32: `recipe.dtype_policy`),
    `steps_per_execution` (`None`: 1, 32 on
    TPUs), `jit_compile` (XLA; `"auto"`: on, but on CPUs for several
    replicas, where XLA has no collectives, and for bfloat16, long
    sequences and wide models, where TensorFlow's oneDNN kernels are faster:
    `recipe.auto_jit_compile`), `remat` (rematerialise each Transformer
    block in training, `keras_vit.ViT.remat`: less memory, more compute).
    """

    strategy: str = _field("auto", choices=STRATEGIES)
    tpu: str = _field(
        None,
        "TPU name or address, for the strategies tpu and auto "
        "(default: TPU_NAME)",
    )
    mixed_precision: str = _field(
        "auto",
        "auto: bfloat16 on TPUs and on GPUs of compute capability 8.0 or "
        "more (Ampere and later), float16 on older GPUs, and on CPUs "
        "bfloat16 where native (AVX-512 BF16, AMX), else off (float32)",
        choices=MIXED_PRECISION,
    )
    steps_per_execution: int = _field(None, "default: 1, 32 on TPUs")
    jit_compile: object = _field(
        "auto", "XLA", choices=("auto", True, False), kind="choice_text"
    )
    remat: bool = _field(
        False,
        "rematerialise each block in training: less memory, more compute",
        kind="store_true",
    )


#: The sections of a `TrainConfig`, in order, and their classes.
SECTIONS = {
    "model": ModelConfig,
    "data": DataConfig,
    "augmentation": Augmentation,
    "optimizer": OptimizerConfig,
    "objective": ObjectiveConfig,
    "run": RunConfig,
    "scale": ScaleConfig,
}


#: Named recipes (`TrainConfig.from_recipe`, `keras-vit train --recipe`):
#: the fields each one sets, by section, over the fields' defaults. The one
#: place of their numbers.
#:
#: - `pretrain`: the fields' defaults, as they are: the paper's pre-training
#:   optimizer (Section 4.1, Appendix B.1: Adam, beta 0.9 / 0.999, weight
#:   decay 0.1, decoupled, here not on biases, norms or embeddings as in
#:   big_vision; linear warm-up; clipping at global norm 1), with cosine
#:   decay and a peak learning rate of 0.001, at a small batch (128, the
#:   paper's is 4096) for 10 epochs, with random resized crops and flips:
#:   for training from scratch.
#: - `fine_tune`: the paper's fine-tuning recipe (Appendix B.1.1): SGD with
#:   momentum 0.9, no weight decay, clipping at global norm 1, cosine decay
#:   after a linear warm-up, a learning rate from the paper's grid
#:   {0.001, 0.003, 0.01, 0.03}, at a higher resolution (384 px) than
#:   pre-training (the position embeddings are resampled and a new head is
#:   zero-initialised when weights are loaded into a model of another size
#:   or class count), and no regularisation but the package's default
#:   random resized crops and flips (no RandAugment, MixUp, CutMix, label
#:   smoothing or weight decay). Chosen for small data, not the paper's:
#:   the paper fine-tunes at batch 512 for thousands of steps (about 10k,
#:   millions of images) on TPUs; here the batch is 64 (a folder of a few
#:   hundred images per class gives a 512 batch too few steps, and B/16 at
#:   384 px and batch 512 does not fit one GPU), the learning rate 0.003
#:   (0.024 scaled linearly to batch 512, inside the paper's grid), 10
#:   epochs (a budget of minutes on one GPU, not a tuned value) and 10% of
#:   the training images held out (`validation_split`: an image folder has
#:   no test split, and the best model is chosen on it).
RECIPES = {
    "pretrain": {},
    "fine_tune": {
        "model": {"image_size": 384},
        "data": {"batch_size": 64, "validation_split": 0.1},
        "augmentation": {
            "random_resized_crop": True,
            "flip": True,
            "rand_augment": 0,
            "mixup": 0.0,
            "cutmix": 0.0,
        },
        "optimizer": {
            "name": "sgd",
            "learning_rate": 0.003,
            "momentum": 0.9,
            "weight_decay": 0.0,
            "clipnorm": 1.0,
            "decay": "cosine",
            "warmup_steps": None,
        },
        "objective": {"name": "classification", "label_smoothing": 0.0},
        "run": {"epochs": 10},
    },
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One field of one section, as the command line sees it."""

    section: str
    name: str
    flat: str  # the old flat name; also the flag's (`--flat-name`)
    default: object
    type: object
    metadata: dict


def settings():
    """Every field of every section, in order (`Setting`s)."""
    found = []
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            metadata = field.metadata or _AUGMENTATION_FLAGS[field.name]
            default = field.default
            if default is dataclasses.MISSING:
                default = field.default_factory()
            found.append(
                Setting(
                    section,
                    field.name,
                    metadata["flat"] or field.name,
                    default,
                    field.type,
                    metadata,
                )
            )
    return found


#: Each old flat name's place: `{"epochs": ("run", "epochs"), ...}`.
FLAT = {s.flat: (s.section, s.name) for s in settings()}


def _nest(data, flat=True):
    """`{section: {field: value}}` from a dict of sections (as dicts or
    section objects) and, with `flat`, flat names (a `config.json` of an
    earlier version); raises `ValueError` for a section given as anything
    else, `TypeError` for a name that is neither."""
    nested, flat_names = {}, []
    for key, value in data.items():
        cls = SECTIONS.get(key)
        if cls is not None and value is None:  # the section's defaults
            continue
        if cls is not None and isinstance(value, cls):
            value = {
                f.name: getattr(value, f.name)
                for f in dataclasses.fields(value)
            }
        if cls is not None and isinstance(value, dict):
            nested.setdefault(key, {}).update(value)
        elif flat and key in FLAT:  # `model`, `optimizer`, `objective`: a name
            flat_names.append(key)
        elif cls is not None:
            raise ValueError(
                f"`{key}` must be a {cls.__name__} or a dict of its fields. "
                f"Received: {key}={value!r}"
            )
        else:
            raise TypeError(
                f"TrainConfig got an unexpected keyword argument {key!r}"
            )
    for key in flat_names:  # after the sections, which they override
        section, name = FLAT[key]
        nested.setdefault(section, {})[name] = data[key]
    return nested


def flatten(data):
    """The flat form (`{"epochs": 10, ...}`) of a config dict in either
    form, as `config.json` holds it, without checking it: a field no
    section has keeps its `"section.field"` name."""
    flat = {}
    places = {place: name for name, place in FLAT.items()}
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            for name, inner in value.items():
                flat[places.get((key, name), f"{key}.{name}")] = inner
        else:
            flat[key] = value
    return flat


def _fields(value, section):
    """The fields of a section given as a dict or a section object, as a
    new dict; raises `ValueError` for anything else."""
    if isinstance(value, SECTIONS[section]):
        return {
            f.name: getattr(value, f.name) for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return dict(value)
    raise ValueError(
        f"`{section}` must be a {SECTIONS[section].__name__} or a dict of its "
        f"fields. Received: {section}={value!r}"
    )


#: The `keras_vit.ViT` arguments a run sets itself, and where each one is
#: set instead of `model.kwargs` (`train.build_model` overwrote them).
_KWARGS_THE_RUN_SETS = {
    "num_classes": "the dataset's classes set it",
    "weights": "use `model.weights` (--weights)",
    "dtype": "use `scale.mixed_precision` (--mixed-precision)",
    "include_top": "the objective sets it (a head to classify, none for "
    "masked patch prediction)",
    "image_size": "use `model.image_size` (--image-size), not both",
    "patch_size": "use `model.patch_size` (--patch-size), not both",
}


@dataclasses.dataclass(init=False)
class TrainConfig:
    """Everything a run needs, by section; `keras-vit train`'s flags are
    made from the sections' fields (their help, defaults and choices:
    `keras_vit.cli.train`).

    Args:
        model: a `ModelConfig` (or a dict of its fields).
        data: a `DataConfig` (or a dict).
        augmentation: a `keras_vit.data.Augmentation` (or a dict).
        optimizer: an `OptimizerConfig` (or a dict).
        objective: an `ObjectiveConfig` (or a dict).
        run: a `RunConfig` (or a dict).
        scale: a `ScaleConfig` (or a dict).

    Example:

    ```python
    config = TrainConfig(
        model=ModelConfig("S/16", image_size=64, patch_size=8),
        data=DataConfig("cifar10", batch_size=256),
        run=RunConfig(output="runs/c10", epochs=100),
    )
    ```
    """

    model: ModelConfig
    data: DataConfig
    augmentation: Augmentation
    optimizer: OptimizerConfig
    objective: ObjectiveConfig
    run: RunConfig
    scale: ScaleConfig

    def __init__(
        self,
        model=None,
        data=None,
        augmentation=None,
        optimizer=None,
        objective=None,
        run=None,
        scale=None,
    ):
        given = dict(
            model=model,
            data=data,
            augmentation=augmentation,
            optimizer=optimizer,
            objective=objective,
            run=run,
            scale=scale,
        )
        self._assign(_nest(given, flat=False))

    def _assign(self, nested):
        for section, cls in SECTIONS.items():
            values = dict(nested.get(section, {}))
            if isinstance(values.get("crop_area"), list):  # from JSON
                values["crop_area"] = tuple(values["crop_area"])
            setattr(self, section, cls(**values))

    @classmethod
    def from_dict(cls, data):
        """A `TrainConfig` from a dict in either form (a run's
        `config.json`: nested, or flat as earlier versions wrote it)."""
        config = cls()
        config._assign(_nest(data))
        return config

    @classmethod
    def from_recipe(cls, recipe, **sections):
        """A `TrainConfig` of a named recipe (`RECIPES`: `"pretrain"`, the
        fields' defaults, or `"fine_tune"`, the paper's fine-tuning
        recipe), with `sections` on top.

        Args:
            recipe: `"pretrain"` or `"fine_tune"`.
            **sections: any of the seven sections, as a dict of some of
                its fields (set over the recipe's, which the others keep)
                or as a section object (taken as it is, all its fields);
                `None` is the recipe's section.

        Raises:
            ValueError: for an unknown recipe, or a `fine_tune` one without
                pre-trained weights (neither `model.weights` nor a preset
                as `model.name`).
        """
        arg_checks.one_of("recipe", recipe, tuple(RECIPES))
        nested = {key: dict(value) for key, value in RECIPES[recipe].items()}
        for key, value in sections.items():
            cls_ = SECTIONS.get(key)
            if cls_ is None:
                raise TypeError(
                    f"TrainConfig.from_recipe got an unexpected keyword "
                    f"argument {key!r}"
                )
            if value is None:  # the recipe's section
                continue
            if isinstance(value, dict):
                nested.setdefault(key, {}).update(value)
            else:
                nested[key] = value  # `TrainConfig` checks what it is
        config = cls(**nested)
        model = config.model
        if (
            recipe == "fine_tune"
            and model.weights is None
            and not registry.resolve(model.builder).preset
        ):
            raise ValueError(
                "Fine-tuning starts from pre-trained weights: give `weights` "
                "(a preset such as 'augreg_in21k', or a checkpoint file) or "
                f"a preset as the model. Received: model={model.builder!r}, "
                "weights=None"
            )
        return config

    @classmethod
    def fine_tune(
        cls,
        model,
        *,
        dataset,
        weights=None,
        image_size=RECIPES["fine_tune"]["model"]["image_size"],
        output=None,
        **sections,
    ):
        """The paper's fine-tuning recipe for `model` on `dataset`
        (`RECIPES["fine_tune"]`, which says which values are the paper's
        and which are chosen for small data): SGD with momentum 0.9, no
        weight decay, clipping at global norm 1, cosine decay after a
        linear warm-up, at 384 px; batch 64, learning rate 0.003, 10
        epochs, 10% held out.

        Args:
            model: a builder name (`"ViT_B16"`), a variant (`"B/16"`), a
                preset (its own weights), or a `ModelConfig` or dict of its
                fields (its `image_size` is then the argument's below, and
                its `weights` too when that is given).
            dataset: `"folder:PATH"` (one sub-folder per class), a
                `tensorflow_datasets` name, `"digits"` or
                `"fashion_mnist"`.
            weights: the preset or checkpoint to start from (`None` only
                for a preset `model`). Defaults to `None`.
            image_size: the fine-tuning resolution; `None` keeps the
                model's own. Defaults to the recipe's, 384.
            output: the run folder. Defaults to `None`: `RunConfig`'s.
            **sections: any section, as a dict of some of its fields (over
                the recipe's) or a section object (as it is):
                `optimizer={"learning_rate": 0.01}`, `run={"epochs": 3}`.

        Example:

        ```python
        config = TrainConfig.fine_tune(
            "ViT_B16",
            weights="augreg_in21k",
            dataset="folder:flowers",
            output="runs/flowers",
        )
        ```
        """
        if isinstance(model, str):
            model = {"name": model}
        spec = _fields(model, "model")
        spec["image_size"] = image_size
        if weights is not None:
            spec["weights"] = weights
        data = {**_fields(sections.pop("data", {}), "data"), "dataset": dataset}
        run = _fields(sections.pop("run", {}), "run")
        if output is not None:
            run["output"] = output
        return cls.from_recipe(
            "fine_tune", model=spec, data=data, run=run, **sections
        )

    def check(self):
        """Raises `ValueError` for any bad setting, before anything runs."""
        model, data, run = self.model, self.data, self.run
        if registry.resolve(model.builder).preset and model.weights is not None:
            raise ValueError(  # (resolve raises for an unknown name)
                f"The model {model.name!r} is a preset, its own weights. "
                f"Received: weights={model.weights!r}"
            )
        if model.image_size is not None:
            arg_checks.size_2d("image_size", model.image_size)
        if model.patch_size is not None:
            arg_checks.positive_int("patch_size", model.patch_size)
        self._check_model_kwargs()
        self._check_model_numbers()
        datasets.check_data_dir(data.dataset, data.data_dir)
        arg_checks.positive_int("batch_size", data.batch_size)
        arg_checks.rate("validation_split", data.validation_split)
        arg_checks.boolean("shuffle", data.shuffle)
        # Augmentation checks itself when it is made (again: it may have
        # been changed since).
        dataclasses.replace(self.augmentation)
        self._check_optimizer()
        self._check_switched_off()
        self._check_objective()
        arg_checks.positive_int("epochs", run.epochs)
        _check_output(run.output)
        arg_checks.non_negative_int("seed", run.seed)
        if run.seed >= 2**32:  # what keras.utils.set_random_seed takes
            raise ValueError(
                f"`seed` must be below 2**32. Received: seed={run.seed!r}"
            )
        arg_checks.boolean("deterministic", run.deterministic)
        arg_checks.one_of("verbose", run.verbose, ("auto", 0, 1, 2))
        self._check_scale()

    def _check_model_kwargs(self):
        """Raises for a `model.kwargs` entry the run sets itself (it was
        overwritten without a word), naming where it belongs."""
        model = self.model
        if not isinstance(model.kwargs, dict):
            raise ValueError(
                "`model_kwargs` must be a dict of keras_vit.ViT arguments. "
                f"Received: model_kwargs={model.kwargs!r}"
            )
        for key, place in _KWARGS_THE_RUN_SETS.items():
            given = key in model.kwargs
            if key in ("image_size", "patch_size"):  # only if both are set
                given = given and getattr(model, key) is not None
            if given:
                raise ValueError(
                    f"`model.kwargs` may not set `{key}`: {place}. Received: "
                    f"model_kwargs={model.kwargs!r}"
                )

    def _check_model_numbers(self):
        """Raises for a width, depth, head count or MLP width the model
        refuses (`num_heads=0`, a `hidden_dim` the heads do not divide):
        `ViT`'s own rules (`vit_config`), on the variant's numbers as
        `model.kwargs` overrides them. Found when the model was built, they
        were found after the dataset was loaded (a download, for a
        `tensorflow_datasets` one) and a lock file was written into an
        existing output folder."""
        # Deferred: `keras-vit train --help` builds its flags from this
        # module, without Keras (models.config imports it).
        from keras_vit.models.config import vit_config

        model = self.model
        variant = registry.get_variant(registry.resolve(model.builder).variant)
        numbers = {
            name: model.kwargs.get(name, variant[name])
            for name in ("hidden_dim", "num_layers", "num_heads", "mlp_dim")
        }
        try:
            vit_config(**numbers)
        except ValueError as error:
            raise ValueError(
                f"{error}, for model={model.builder!r} (its numbers: "
                f"{numbers!r})"
            ) from None

    def _check_optimizer(self):
        optimizer = self.optimizer
        arg_checks.one_of("optimizer", optimizer.name, OPTIMIZERS)
        arg_checks.one_of("decay", optimizer.decay, DECAYS)
        arg_checks.positive_float("learning_rate", optimizer.learning_rate)
        if optimizer.weight_decay is not None:
            arg_checks.non_negative_float(
                "weight_decay", optimizer.weight_decay
            )
        if optimizer.warmup_steps is not None:
            arg_checks.non_negative_int("warmup_steps", optimizer.warmup_steps)
        if optimizer.clipnorm is not None:
            arg_checks.positive_float("clipnorm", optimizer.clipnorm)
        arg_checks.rate("momentum", optimizer.momentum)

    def _check_switched_off(self):
        """Raises for a setting, changed from its default, of a feature
        that the run switches off (as `_check_objective` does for
        `masked_patches`): it was taken, written to config.json and
        ignored."""
        augmentation, optimizer = self.augmentation, self.optimizer
        for section, name, off, switch, feature in (
            (
                augmentation,
                "rand_augment_magnitude",
                augmentation.rand_augment == 0,
                "rand_augment=0",
                "RandAugment's",
            ),
            (
                augmentation,
                "crop_area",
                not augmentation.random_resized_crop,
                "random_resized_crop=False",
                "the random resized crop's",
            ),
            (
                optimizer,
                "momentum",
                optimizer.name != "sgd",
                f"optimizer={optimizer.name!r}",
                "SGD's",
            ),
        ):
            value = getattr(section, name)
            if isinstance(value, list):  # a crop_area as a list
                value = tuple(value)
            (field,) = [
                f for f in dataclasses.fields(section) if f.name == name
            ]
            if off and value != field.default:
                raise ValueError(
                    f"`{name}` is {feature}, which this run does not use. "
                    f"Received: {name}={value!r} with {switch}"
                )

    def _check_scale(self):
        scale = self.scale
        arg_checks.one_of("strategy", scale.strategy, STRATEGIES)
        run_strategy.check_tpu(scale.strategy, scale.tpu)
        arg_checks.one_of(
            "mixed_precision", scale.mixed_precision, MIXED_PRECISION
        )
        arg_checks.one_of(
            "jit_compile", scale.jit_compile, ("auto", True, False)
        )
        if scale.steps_per_execution is not None:
            arg_checks.positive_int(
                "steps_per_execution", scale.steps_per_execution
            )
        arg_checks.boolean("remat", scale.remat)

    def _check_objective(self):
        objective = self.objective
        arg_checks.rate("label_smoothing", objective.label_smoothing)
        arg_checks.one_of("objective", objective.name, OBJECTIVES)
        options = objective.masked_patches
        if options:
            # Deferred: as `vit_config` above (masked_patches is Keras).
            from keras_vit.training import masked_patches

            if objective.name != "masked_patches":
                raise ValueError(
                    "`masked_patches` sets the options of masked patch "
                    "prediction, which this run does not train. Received: "
                    f"masked_patches={options!r} with "
                    f"objective={objective.name!r}"
                )
            unknown = sorted(set(options) - set(masked_patches.OPTIONS))
            if unknown:
                raise ValueError(
                    "Unknown masked patch prediction option "
                    f"{', '.join(map(repr, unknown))}. Expected some of "
                    f"{', '.join(masked_patches.OPTIONS)}. Received: "
                    f"masked_patches={options!r}"
                )
            masked_patches.check_options(**options)
        if objective.name == "masked_patches":
            for section, name in (
                (self.augmentation, "mixup"),
                (self.augmentation, "cutmix"),
                (objective, "label_smoothing"),
            ):
                if getattr(section, name):
                    raise ValueError(
                        "Masked patch prediction uses no labels, so "
                        f"`{name}` (which mixes or smooths labels) has no "
                        "place in it. Received: "
                        f"{name}={getattr(section, name)!r} "
                        "with objective='masked_patches'"
                    )


def load_config(path):
    """A `TrainConfig` from a run's `config.json` (to rerun or resume it),
    in the nested form this version writes or the flat one of earlier
    versions."""
    with open(path) as file:
        data = json.load(file)
    data.pop("resolved", None)
    return TrainConfig.from_dict(data)


def _check_output(output):
    """Raises for an `output` that is not a local folder's path: a URL
    (`gs://...`) was written under the current folder, in `./gs:/...`, as
    the run writes with `os` and `open`."""
    if not isinstance(output, str) or not output:
        raise ValueError(
            f"`output` must be a folder. Received: output={output!r}"
        )
    if "://" in output:
        raise ValueError(
            "`output` must be a local folder: the run writes its files "
            "with the operating system's file calls, which would make a "
            "folder named after the URL's scheme under the current one. "
            "Use the machine's disk, or mount the bucket (e.g. with "
            "gcsfuse) and give its path. Received: "
            f"output={output!r}"
        )
    if os.path.exists(output) and not os.path.isdir(output):
        raise ValueError(
            "The output folder is an existing file. Received: "
            f"output={output!r}"
        )
