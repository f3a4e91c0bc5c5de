"""Fine-tune a pre-trained ViT at a higher resolution on a new dataset.

With a released checkpoint (a connected machine; the file downloads once):

    python examples/finetune.py --weights augreg_in21k --model ViT_Ti16 \\
        --dataset oxford_flowers102 --image-size 384 --output runs/flowers

With a checkpoint made here (`--weights` or `--offline` is required):

    python examples/finetune.py --offline [--epochs 10] [--batch-size 64] \\
        [--learning-rate 0.03]

`--offline` downloads no checkpoint, and takes no `--model`, `--weights`,
`--dataset` or `--image-size` (its model, data and resolutions are its own;
they are refused, not ignored). Its pre-training reads Fashion-MNIST from
the Keras cache (`~/.keras/datasets/fashion-mnist`) or from Debian's
`dataset-fashion-mnist` package (`make demo` installs it), and downloads
it once through Keras where neither has it.

What "fine-tuning" does here, as in the paper (Section 3.2, Appendix B.1.1):
the checkpoint's head is dropped and a new zero-initialised head is made
for the new classes; at a higher resolution the patch size stays, so the
patch grid grows and the pre-trained position embeddings are resampled on
the 2D grid; training uses SGD with momentum 0.9, cosine decay and gradient
clipping at global norm 1.

The offline run: (1) pre-trains a small ViT at 16 px on Fashion-MNIST with
a 40-class pretext task (each clothing class at each of four rotations),
and saves it with `keras_vit.weights.save_npz` in the original
google-research `.npz` format, the same format as the released checkpoints;
(2) fine-tunes it on scikit-learn's digits (10 classes) at 32 px; (3) trains
the same model from scratch with the same budget, for comparison.
"""

import argparse
import os

import numpy as np

import keras_vit
from keras_vit.data import Augmentation
from keras_vit.training import DataConfig
from keras_vit.training import ModelConfig
from keras_vit.training import OptimizerConfig
from keras_vit.training import RunConfig
from keras_vit.training import TrainConfig
from keras_vit.training import train

SMALL = {"hidden_dim": 64, "num_layers": 4, "num_heads": 4, "mlp_dim": 128}


def pretrain_offline(path, epochs=1):
    """A small ViT pre-trained on a rotation pretext task, saved as .npz."""
    import tensorflow as tf

    (x, y), _ = keras_vit.data.datasets.fashion_mnist_arrays()
    rotations = np.arange(len(x)) % 4
    x = np.stack([np.rot90(image, k) for image, k in zip(x, rotations)])[
        ..., None
    ]
    labels = y * 4 + rotations  # 40 classes
    images = tf.image.resize(
        tf.image.grayscale_to_rgb(tf.constant(x)), (16, 16)
    )
    model = keras_vit.ViT(
        image_size=16, patch_size=4, num_classes=40, **SMALL, name="pretrained"
    )
    steps = epochs * -(-len(x) // 128)
    model.compile(
        optimizer=keras_vit.training.make_optimizer(
            "adamw",
            2e-3,
            0.05,
            warmup_steps=min(50, steps // 10),
            total_steps=steps,
        ),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(images.numpy(), labels, batch_size=128, epochs=epochs, verbose=2)
    keras_vit.weights.save_npz(model, path)
    print(f"pre-trained checkpoint written to {path} (original .npz format)")


def _given(**fields):
    """The fields whose flags were given (not `None`)."""
    return {name: value for name, value in fields.items() if value is not None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--offline",
        action="store_true",
        help="pre-train a checkpoint here and fine-tune it on digits",
    )
    parser.add_argument(
        "--weights", default=None, help="preset name or checkpoint file"
    )
    # None where not given: --offline refuses these four, and online runs
    # take the defaults below (the resolution: the recipe's, 384).
    parser.add_argument("--model", default=None, help="default: ViT_Ti16")
    parser.add_argument(
        "--dataset", default=None, help="default: oxford_flowers102"
    )
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=10)
    # Not given: the recipe's (`TrainConfig.fine_tune`), or with --offline
    # 64 and 0.03.
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--output", default="runs/finetune")
    args = parser.parse_args()

    if args.offline:
        for flag in ("model", "weights", "dataset", "image_size"):
            if getattr(args, flag) is not None:
                parser.error(
                    f"--{flag.replace('_', '-')} does not apply to --offline "
                    "(it fine-tunes its own checkpoint on digits at 32 px). "
                    f"Received: {flag}={getattr(args, flag)!r}"
                )
        offline(args)
        return
    if args.weights is None:
        parser.error("--weights is required (or use --offline)")
    # The paper's recipe: SGD (momentum 0.9), no weight decay, cosine
    # decay, clipping at norm 1, at 384 px; the flags given over it.
    config = TrainConfig.fine_tune(
        args.model or "ViT_Ti16",
        weights=args.weights,
        dataset=args.dataset or "oxford_flowers102",
        output=args.output,
        **_given(image_size=args.image_size),
        data=_given(batch_size=args.batch_size),
        optimizer=_given(learning_rate=args.learning_rate),
        run={"epochs": args.epochs, "verbose": 2},
    )
    result = train(config)
    print(f"test accuracy: {result.test_metrics['accuracy']:.4f}")


def offline(args):
    """Pre-trains a checkpoint here (once), then fine-tunes it on digits
    next to a from-scratch run with the same budget."""
    checkpoint = os.path.join(args.output, "pretrained.npz")
    # --batch-size and --learning-rate, where given, over 64 and 0.03.
    batch_size = 64 if args.batch_size is None else args.batch_size
    rate = 0.03 if args.learning_rate is None else args.learning_rate
    # SGD (momentum 0.9, its default), cosine decay, clipping at norm 1.
    fine_tune = OptimizerConfig(
        "sgd",
        learning_rate=rate,
        weight_decay=0.0,
        decay="cosine",
        clipnorm=1.0,
    )

    def digits(output, weights=None):
        return TrainConfig(
            model=ModelConfig(
                "Ti/16",
                weights=weights,
                image_size=32,
                patch_size=4,
                kwargs=SMALL,
            ),
            data=DataConfig("digits", batch_size=batch_size),
            augmentation=Augmentation(random_resized_crop=False, flip=False),
            optimizer=fine_tune,
            run=RunConfig(
                output=os.path.join(args.output, output),
                epochs=args.epochs,
                verbose=2,
            ),
        )

    runs = [digits("tuned", weights=checkpoint), digits("scratch")]
    for config in runs:
        config.check()  # a bad flag stops here, before the pre-training
    os.makedirs(args.output, exist_ok=True)
    if not os.path.exists(checkpoint):
        pretrain_offline(checkpoint)
    tuned, scratch = (train(config) for config in runs)
    print(
        f"digits test accuracy, fine-tuned from the checkpoint: "
        f"{tuned.test_metrics['accuracy']:.4f}"
    )
    print(
        f"digits test accuracy, same budget from scratch:      "
        f"{scratch.test_metrics['accuracy']:.4f}"
    )


if __name__ == "__main__":
    main()
