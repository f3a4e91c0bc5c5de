"""`TrainConfig`: everything a training run needs, and where the flags of
`keras-vit train` come from.

This module imports neither Keras nor TensorFlow (the command line builds
its parser from `TrainConfig`'s fields). Each field's metadata holds its
`help` for the command line, and how its flag is spelled when it is not
`--field-name VALUE` (`kind`): `"switch"` (`on` / `off`), `"store_true"`,
`"dashes"` (choices spelled with `-`), `"choice_text"` (choices given as
text: `auto`, `on`, `off`, numbers), `"crop_area"` (the smallest area only)
and `"options"` (a dict whose entries have flags of their own, `options`).
"""

import dataclasses
import json
import os

from keras_vit import arg_checks
from keras_vit import registry
from keras_vit.data.pipeline import Augmentation
from keras_vit.options import DECAYS
from keras_vit.options import MIXED_PRECISION
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.options import OBJECTIVES
from keras_vit.options import OPTIMIZERS
from keras_vit.options import POOLINGS
from keras_vit.options import STRATEGIES


def _field(
    default,
    help=None,
    *,
    type=None,
    choices=None,
    kind=None,
    required=False,
    options=(),
):
    """A `TrainConfig` field: its default and its flag's description."""
    metadata = dict(
        help=help,
        type=type,
        choices=choices,
        kind=kind,
        required=required,
        options=options,
    )
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass
class TrainConfig:
    """Everything a run needs; `keras-vit train`'s flags are made from its
    fields (their help, defaults and choices: `keras_vit.cli.train`).

    Model: `model` is a builder name (`"ViT_Ti16"`) or a variant (`"S/16"`);
    `image_size`, `patch_size` and `model_kwargs` (any `keras_vit.ViT`
    argument, e.g. `{"hidden_dim": 96}`) override it; `weights` is a preset
    or a file to start from.

    Data: `dataset` is `"fashion_mnist"`, `"digits"`, `"folder:PATH"` or a
    `tensorflow_datasets` name (`data_dir` for its files).
    `validation_split` holds out a fraction of the training split for
    per-epoch validation and the best checkpoint.

    Recipe: see `keras_vit.training.recipe`; `warmup_steps=None` warms up
    for 5% of the steps. Augmentation: see `keras_vit.data.Augmentation`.

    Objective: `"classification"` (labels, the model's head) or
    `"masked_patches"`, the paper's self-supervised masked patch prediction
    (`keras_vit.training.MaskedPatchPrediction`): labels are not used (an
    image folder needs no class sub-folders), the backbone is built without
    a head, metrics are `loss` and `patch_accuracy`, and the backbone is
    also saved as `backbone.keras`, to fine-tune with `weights=`.
    `masked_patches` overrides the objective's options (`corrupt_rate`,
    `mask_rate`, `replace_rate`, `bits`; the paper's by default).

    Scale: `strategy` (`auto`, `default`, `mirrored`, `multi_worker`,
    `tpu`), `tpu`, `mixed_precision` (`auto`, `off`, `bfloat16`,
    `float16`), `steps_per_execution` (`None`: 1, 32 on TPUs),
    `jit_compile` (XLA; `"auto"`: on, but on CPUs for several replicas,
    where XLA has no collectives, and for bfloat16, where TensorFlow's
    oneDNN kernels are faster: `recipe.auto_jit_compile`).
    """

    model: str = _field("ViT_Ti16", "builder (ViT_Ti16) or variant (S/16)")
    dataset: str = _field(
        "fashion_mnist",
        "fashion_mnist, digits, folder:PATH or a tensorflow_datasets name",
        required=True,
    )
    output: str = _field(
        "runs/vit", "run folder (rerun to resume)", required=True
    )
    epochs: int = _field(10)
    batch_size: int = _field(128, "global batch")
    image_size: object = _field(None, type=int)
    patch_size: int = _field(None)
    model_kwargs: dict = _field(
        dict,
        "any keras_vit.ViT argument",
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
    weights: str = _field(None, "preset or checkpoint to start from")
    data_dir: str = _field(None, "tensorflow_datasets folder (gs:// for TPUs)")
    validation_split: float = _field(
        0.0, "share of the training split held out to validate on"
    )
    optimizer: str = _field("adamw", choices=OPTIMIZERS)
    learning_rate: float = _field(1e-3, "the peak, after the warm-up")
    weight_decay: float = _field(0.1)
    warmup_steps: int = _field(None, "default: 5%% of the steps")
    decay: str = _field("cosine", choices=DECAYS)
    label_smoothing: float = _field(0.0)
    clipnorm: float = _field(1.0, "clip gradients at this global norm")
    momentum: float = _field(0.9, "SGD's momentum (adamw: unused)")
    random_resized_crop: bool = _field(
        True, "random resized (Inception) crops", kind="switch"
    )
    crop_area: tuple = _field(
        (0.35, 1.0),
        "smallest crop, as a fraction of the image",
        kind="crop_area",
    )
    flip: bool = _field(True, "random horizontal flips", kind="switch")
    rand_augment: int = _field(0, "RandAugment ops per image (0: off)")
    mixup: float = _field(0.0, "MixUp alpha (0: off)")
    cutmix: float = _field(0.0, "CutMix alpha (0: off)")
    shuffle: bool = _field(True, kind="switch")
    seed: int = _field(0, "draws the initialisation, shuffle and augmentation")
    deterministic: bool = _field(
        False,
        "deterministic kernels too (a killed and resumed run ends "
        "bit for bit as an uninterrupted one)",
        kind="store_true",
    )
    strategy: str = _field("auto", choices=STRATEGIES)
    tpu: str = _field(None, "TPU name or address (default: TPU_NAME)")
    mixed_precision: str = _field("auto", choices=MIXED_PRECISION)
    steps_per_execution: int = _field(None, "default: 1, 32 on TPUs")
    jit_compile: object = _field(
        "auto", "XLA", choices=("auto", True, False), kind="choice_text"
    )
    verbose: object = _field(
        "auto",
        "progress output (Keras's fit verbose)",
        choices=("auto", 0, 1, 2),
        kind="choice_text",
    )
    objective: str = _field(
        "classification",
        "masked-patches: the paper's self-supervised pre-training (no labels; "
        "writes backbone.keras to fine-tune from)",
        choices=OBJECTIVES,
        kind="dashes",
    )
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

    def augmentation(self):
        return Augmentation(
            random_resized_crop=self.random_resized_crop,
            crop_area=(  # a list once read back from config.json
                tuple(self.crop_area)
                if isinstance(self.crop_area, list)
                else self.crop_area
            ),
            flip=self.flip,
            rand_augment=self.rand_augment,
            mixup=self.mixup,
            cutmix=self.cutmix,
        )

    def check(self):
        """Raises `ValueError` for any bad setting, before anything runs."""
        if registry.resolve(self.model).preset and self.weights is not None:
            raise ValueError(  # (resolve raises for an unknown name)
                f"The model {self.model!r} is a preset, its own weights. "
                f"Received: weights={self.weights!r}"
            )
        arg_checks.positive_int("epochs", self.epochs)
        arg_checks.positive_int("batch_size", self.batch_size)
        if self.image_size is not None:
            arg_checks.size_2d("image_size", self.image_size)
        if self.patch_size is not None:
            arg_checks.positive_int("patch_size", self.patch_size)
        if not isinstance(self.output, str) or not self.output:
            raise ValueError(
                f"`output` must be a folder. Received: output={self.output!r}"
            )
        if os.path.exists(self.output) and not os.path.isdir(self.output):
            raise ValueError(
                "The output folder is an existing file. Received: "
                f"output={self.output!r}"
            )
        arg_checks.rate("validation_split", self.validation_split)
        arg_checks.one_of("optimizer", self.optimizer, OPTIMIZERS)
        arg_checks.one_of("decay", self.decay, DECAYS)
        arg_checks.positive_float("learning_rate", self.learning_rate)
        arg_checks.non_negative_float("weight_decay", self.weight_decay)
        if self.warmup_steps is not None:
            arg_checks.non_negative_int("warmup_steps", self.warmup_steps)
        arg_checks.rate("label_smoothing", self.label_smoothing)
        if self.clipnorm is not None:
            arg_checks.positive_float("clipnorm", self.clipnorm)
        arg_checks.rate("momentum", self.momentum)
        arg_checks.boolean("shuffle", self.shuffle)
        arg_checks.non_negative_int("seed", self.seed)
        if self.seed >= 2**32:  # what keras.utils.set_random_seed takes
            raise ValueError(
                f"`seed` must be below 2**32. Received: seed={self.seed!r}"
            )
        arg_checks.boolean("deterministic", self.deterministic)
        arg_checks.one_of("strategy", self.strategy, STRATEGIES)
        arg_checks.one_of(
            "mixed_precision", self.mixed_precision, MIXED_PRECISION
        )
        arg_checks.one_of(
            "jit_compile", self.jit_compile, ("auto", True, False)
        )
        if self.steps_per_execution is not None:
            arg_checks.positive_int(
                "steps_per_execution", self.steps_per_execution
            )
        arg_checks.one_of("verbose", self.verbose, ("auto", 0, 1, 2))
        self.augmentation()  # validates the augmentation settings
        arg_checks.one_of("objective", self.objective, OBJECTIVES)
        if self.masked_patches:
            from keras_vit.training import masked_patches

            if self.objective != "masked_patches":
                raise ValueError(
                    "`masked_patches` sets the options of masked patch "
                    "prediction, which this run does not train. Received: "
                    f"masked_patches={self.masked_patches!r} with "
                    f"objective={self.objective!r}"
                )
            unknown = sorted(
                set(self.masked_patches) - set(masked_patches.OPTIONS)
            )
            if unknown:
                raise ValueError(
                    "Unknown masked patch prediction option "
                    f"{', '.join(map(repr, unknown))}. Expected some of "
                    f"{', '.join(masked_patches.OPTIONS)}. Received: "
                    f"masked_patches={self.masked_patches!r}"
                )
            masked_patches.check_options(**self.masked_patches)
        if self.objective == "masked_patches":
            for name in ("mixup", "cutmix", "label_smoothing"):
                if getattr(self, name):
                    raise ValueError(
                        "Masked patch prediction uses no labels, so "
                        f"`{name}` (which mixes or smooths labels) has no "
                        "place in it. Received: "
                        f"{name}={getattr(self, name)!r} "
                        "with objective='masked_patches'"
                    )


def load_config(path):
    """A `TrainConfig` from a run's `config.json` (to rerun or resume it)."""
    with open(path) as file:
        data = json.load(file)
    data.pop("resolved", None)
    return TrainConfig(**data)
