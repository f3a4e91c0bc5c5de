"""The main job: train a small ViT on Fashion-MNIST on the CPU, end to end.

Run it with `make demo` (which also sets up .venv and, where apt works, the
Fashion-MNIST Debian package), or `python examples/demo.py [--output DIR]`.

What it does: trains a ViT with the keras_vit training entry point (the same
`keras_vit.training.train` that `keras-vit train` and the multi-GPU / TPU
runs use), evaluates it on the 10,000 Fashion-MNIST test images, writes the
paper's figures for the trained model (`figures/index.html`), and prints a
summary whose last line is `test accuracy: 0.xxxx`.

The recipe, sized to train in a few minutes on a 2-core CPU: a 4-block ViT
of width 64 on 28x28 images cut into 7x7 patches (16 tokens + the class
token), 3 epochs over the 60,000 training images in batches of 256, AdamW
(learning rate 3e-3, weight decay 0.05) with linear warm-up and cosine
decay, gradient clipping at norm 1, random flips, 32 steps per call.
Times and accuracies: benchmarks/results/2026-12-05-demo.md. Rerunning
with the same --output resumes an interrupted run (and retrains nothing
once done).
"""

import argparse
import dataclasses
import os
import time

import numpy as np

from keras_vit import visualize
from keras_vit.data import Augmentation
from keras_vit.data import datasets
from keras_vit.training import DataConfig
from keras_vit.training import ModelConfig
from keras_vit.training import OptimizerConfig
from keras_vit.training import RunConfig
from keras_vit.training import ScaleConfig
from keras_vit.training import TrainConfig
from keras_vit.training import train

DEMO = TrainConfig(
    model=ModelConfig(
        "Ti/16",
        image_size=28,
        patch_size=7,
        kwargs={
            "hidden_dim": 64,
            "num_layers": 4,
            "num_heads": 4,
            "mlp_dim": 128,
        },
    ),
    data=DataConfig("fashion_mnist", batch_size=256),
    augmentation=Augmentation(random_resized_crop=False, flip=True),
    optimizer=OptimizerConfig(learning_rate=3e-3, weight_decay=0.05),
    run=RunConfig(output="runs/demo", epochs=3, verbose=2),
    # float32 on every CPU, so the demo's figures are those of float32 on
    # every machine; no XLA: at width 64 its compilation is not paid back
    # in a 3-epoch run (benchmarks/results/2026-12-05-demo.md).
    scale=ScaleConfig(
        mixed_precision="off", jit_compile=False, steps_per_execution=32
    ),
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=DEMO.run.output)
    parser.add_argument("--epochs", type=int, default=DEMO.run.epochs)
    args = parser.parse_args()
    config = dataclasses.replace(
        DEMO,
        run=dataclasses.replace(
            DEMO.run, output=args.output, epochs=args.epochs
        ),
    )
    start = time.time()
    result = train(config)
    minutes = (time.time() - start) / 60
    model = result.model
    # The paper's figures for the trained model, on a few test images.
    _, (test_images, test_labels) = datasets.fashion_mnist_arrays()
    picks = [int(np.flatnonzero(test_labels == c)[0]) for c in (0, 7, 9)]
    images = np.repeat(test_images[picks, ..., None], 3, axis=-1).astype(
        "float32"
    )
    names = [
        datasets.FASHION_MNIST_CLASSES[c]
        .split("/")[0]
        .replace(" ", "_")
        .lower()
        for c in (0, 7, 9)
    ]
    figures = os.path.join(config.run.output, "figures")
    visualize.inspect(model, images, figures, names)
    print()
    print("keras_vit demo: a ViT trained from scratch on Fashion-MNIST")
    print(
        f"  model:     {model.count_params():,} parameters, {model.num_layers} "
        "blocks, "
        f"width {model.hidden_dim}, {model.grid_size[0]}x{model.grid_size[1]} "
        "patches of "
        f"{model.patch_size}x{model.patch_size} px"
    )
    if result.initial_epoch >= config.run.epochs:
        print(
            f"  training:  already done in {config.run.output} (delete it to "
            "train again)"
        )
    else:
        print(
            f"  training:  {config.run.epochs} epochs, strategy "
            f"{result.strategy_kind}, "
            f"{minutes:.1f} min on this machine"
        )
    print(
        f"  outputs:   {config.run.output} (model.keras, curves.png, "
        "history.json, logs/)"
    )
    print(
        f"  figures:   {figures}/index.html (attention rollout, attention "
        "distance, "
        "position embeddings, embedding filters)"
    )
    print(f"test accuracy: {result.test_metrics['accuracy']:.4f}")


if __name__ == "__main__":
    main()
