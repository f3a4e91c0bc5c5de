"""Train a ViT-S/16 from scratch on CIFAR-10 with tensorflow_datasets.

    python examples/train_cifar10.py --output runs/cifar10

Single device (one GPU, or the CPU). The images are upsampled to 64 px and
cut into 8x8 patches (an 8x8 grid), the usual way to train a ViT on small
images; strong augmentation (RandAugment, MixUp, CutMix) matters on a dataset
this size. The data downloads once into ~/tensorflow_datasets (or
--data-dir). Rerun the same command to resume an interrupted run.

The same run from the command line:

    keras-vit train --model S/16 --dataset cifar10 --image-size 64 \\
        --patch-size 8 --epochs 100 --batch-size 256 --learning-rate 1e-3 \\
        --weight-decay 0.05 --label-smoothing 0.1 --rand-augment 2 \\
        --mixup 0.8 --cutmix 1.0 --drop-path 0.1 --validation-split 0.02 \\
        --strategy default --output runs/cifar10
"""

import argparse

from keras_vit.data import Augmentation
from keras_vit.training import DataConfig
from keras_vit.training import ModelConfig
from keras_vit.training import ObjectiveConfig
from keras_vit.training import OptimizerConfig
from keras_vit.training import RunConfig
from keras_vit.training import ScaleConfig
from keras_vit.training import TrainConfig
from keras_vit.training import train


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="runs/cifar10")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    config = TrainConfig(
        model=ModelConfig(
            "S/16",
            image_size=64,
            patch_size=8,
            kwargs={"drop_path_rate": 0.1},
        ),
        data=DataConfig(
            "cifar10",
            data_dir=args.data_dir,
            batch_size=256,
            validation_split=0.02,
        ),
        augmentation=Augmentation(rand_augment=2, mixup=0.8, cutmix=1.0),
        optimizer=OptimizerConfig(learning_rate=1e-3, weight_decay=0.05),
        objective=ObjectiveConfig(label_smoothing=0.1),
        run=RunConfig(output=args.output, epochs=args.epochs),
        scale=ScaleConfig(strategy="default"),
    )
    result = train(config)
    print(f"test accuracy: {result.test_metrics['accuracy']:.4f}")


if __name__ == "__main__":
    main()
