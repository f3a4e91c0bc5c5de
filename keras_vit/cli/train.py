"""`keras-vit train`: `keras_vit.training.train` from the command line."""

from keras_vit.options import DECAYS
from keras_vit.options import MIXED_PRECISION
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.options import OBJECTIVES
from keras_vit.options import OPTIMIZERS
from keras_vit.options import POOLINGS
from keras_vit.options import STRATEGIES


def add_parser(sub):
    t = sub.add_parser("train", help="train a ViT (any tf.distribute strategy)")
    t.add_argument("--model", default="ViT_Ti16", help="builder (ViT_Ti16) or variant (S/16)")
    t.add_argument("--dataset", required=True, help="fashion_mnist, digits, folder:PATH or a tensorflow_datasets name")
    t.add_argument("--data-dir", default=None, help="tensorflow_datasets folder (gs:// for TPUs)")
    t.add_argument("--output", required=True, help="run folder (rerun to resume)")
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--batch-size", type=int, default=128, help="global batch")
    t.add_argument("--image-size", type=int, default=None)
    t.add_argument("--patch-size", type=int, default=None)
    t.add_argument("--hidden-dim", type=int, default=None)
    t.add_argument("--num-layers", type=int, default=None)
    t.add_argument("--num-heads", type=int, default=None)
    t.add_argument("--mlp-dim", type=int, default=None)
    t.add_argument("--pooling", choices=POOLINGS, default=None)
    t.add_argument("--position-embedding", default=None,
                   choices=MODEL_POSITION_EMBEDDINGS,
                   help="default: learned (1D); learned2d, relative and none "
                        "are the paper's ablations")
    t.add_argument("--dropout", type=float, default=None)
    t.add_argument("--drop-path", type=float, default=None)
    t.add_argument("--weights", default=None, help="preset or checkpoint to start from")
    t.add_argument("--validation-split", type=float, default=0.0)
    t.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    t.add_argument("--learning-rate", type=float, default=1e-3)
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--warmup-steps", type=int, default=None, help="default: 5%% of the steps")
    t.add_argument("--decay", choices=DECAYS, default="cosine")
    t.add_argument("--label-smoothing", type=float, default=0.0)
    t.add_argument("--clipnorm", type=float, default=1.0)
    t.add_argument("--random-resized-crop", choices=["on", "off"], default="on")
    t.add_argument("--crop-min-area", type=float, default=0.35, help="smallest crop, as a fraction of the image")
    t.add_argument("--flip", choices=["on", "off"], default="on")
    t.add_argument("--rand-augment", type=int, default=0, help="RandAugment ops per image (0: off)")
    t.add_argument("--mixup", type=float, default=0.0, help="MixUp alpha (0: off)")
    t.add_argument("--cutmix", type=float, default=0.0, help="CutMix alpha (0: off)")
    t.add_argument("--shuffle", choices=["on", "off"], default="on")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--deterministic", action="store_true")
    t.add_argument("--strategy", choices=STRATEGIES, default="auto")
    t.add_argument("--tpu", default=None, help="TPU name or address (default: TPU_NAME)")
    t.add_argument("--mixed-precision", choices=MIXED_PRECISION, default="auto")
    t.add_argument("--steps-per-execution", type=int, default=None)
    t.add_argument("--jit-compile", choices=["auto", "on", "off"], default="auto")
    t.add_argument("--verbose", type=int, default=1, choices=[0, 1, 2])
    t.add_argument("--objective", choices=[o.replace("_", "-") for o in OBJECTIVES],
                   default="classification",
                   help="masked-patches: the paper's self-supervised pre-training "
                        "(no labels; writes backbone.keras to fine-tune from)")
    t.add_argument("--corrupt-rate", type=float, default=None,
                   help="masked-patches: share of patches corrupted (default 0.5)")
    t.add_argument("--mask-rate", type=float, default=None,
                   help="masked-patches: share of those masked (default 0.8)")
    t.add_argument("--replace-rate", type=float, default=None,
                   help="masked-patches: share replaced by another patch (default 0.1)")
    t.add_argument("--color-bits", type=int, default=None,
                   help="masked-patches: bits per channel of the colour target (default 3)")
    t.set_defaults(run=run)


def _given(**options):
    """The options whose flags were given (not `None`)."""
    return {k: v for k, v in options.items() if v is not None}


def run(args):
    from keras_vit.training import TrainConfig
    from keras_vit.training import train

    def flag(value):
        return {"on": True, "off": False}.get(value, value)

    config = TrainConfig(
        model=args.model,
        dataset=args.dataset,
        output=args.output,
        epochs=args.epochs,
        batch_size=args.batch_size,
        image_size=args.image_size,
        patch_size=args.patch_size,
        model_kwargs=_given(
            hidden_dim=args.hidden_dim,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
            mlp_dim=args.mlp_dim,
            dropout_rate=args.dropout,
            drop_path_rate=args.drop_path,
            pooling=args.pooling,
            position_embedding=args.position_embedding,
        ),
        weights=args.weights,
        data_dir=args.data_dir,
        validation_split=args.validation_split,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        decay=args.decay,
        label_smoothing=args.label_smoothing,
        clipnorm=args.clipnorm,
        random_resized_crop=args.random_resized_crop == "on",
        crop_area=(args.crop_min_area, 1.0),
        flip=args.flip == "on",
        rand_augment=args.rand_augment,
        mixup=args.mixup,
        cutmix=args.cutmix,
        shuffle=args.shuffle == "on",
        seed=args.seed,
        deterministic=args.deterministic,
        strategy=args.strategy,
        tpu=args.tpu,
        mixed_precision=args.mixed_precision,
        steps_per_execution=args.steps_per_execution,
        jit_compile=flag(args.jit_compile),
        verbose=args.verbose,
        objective=args.objective.replace("-", "_"),
        masked_patches=_given(
            corrupt_rate=args.corrupt_rate,
            mask_rate=args.mask_rate,
            replace_rate=args.replace_rate,
            bits=args.color_bits,
        ),
    )
    result = train(config)
    for key, value in result.test_metrics.items():
        print(f"test {key}: {value:.4f}")
    print(f"outputs in {result.output}")
