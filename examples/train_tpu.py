"""Fine-tune a pre-trained ViT-B/16 on a Cloud TPU (TPUStrategy).

On a TPU VM (the TPU is found by itself):

    python examples/train_tpu.py \\
        --data-dir gs://YOUR_BUCKET/tensorflow_datasets \\
        --output runs/flowers

The output is a folder on the TPU VM's disk, or a bucket mounted there
(e.g. with gcsfuse); a gs:// URL is refused: the run writes its files with
the operating system's file calls.

With a TPU node instead, name it: --tpu my-tpu-name (or set TPU_NAME).

What the run does on the TPU: TPUStrategy is created by `strategy="tpu"`;
the model, optimizer and metrics are built inside its scope; the global
batch (128) is split over the cores; shapes are static (an epoch's
partial training batch is dropped; evaluation batches are padded with
examples of weight 0, so every test image counts); the step is
XLA-compiled and up to 32 steps run per host call
(`steps_per_execution`, at most an epoch's: here 7, 1020 images in
batches of 128); mixed precision is bfloat16. TPUs read data from Cloud
Storage, so the tensorflow_datasets folder must be a
gs:// path; prepare it once from any machine with `tfds build
oxford_flowers102 --data_dir gs://...`.

The recipe is the paper's fine-tuning one: SGD with momentum 0.9, cosine
decay, gradient clipping at norm 1, about 500 steps (100 of warm-up), at
384 px (the position embeddings are resampled from the 224 px checkpoint),
with a batch of 128 rather than the paper's 512: at 512 an epoch of the
1020 training images is one step, and each of 500 epochs would write a
backup of the model and its momentum.
"""

import argparse

from keras_vit.training import DataConfig
from keras_vit.training import ModelConfig
from keras_vit.training import OptimizerConfig
from keras_vit.training import RunConfig
from keras_vit.training import ScaleConfig
from keras_vit.training import TrainConfig
from keras_vit.training import train


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data-dir", required=True, help="gs:// tensorflow_datasets folder"
    )
    parser.add_argument("--output", required=True)
    parser.add_argument(
        "--tpu", default=None, help="TPU name or grpc:// address"
    )
    parser.add_argument("--weights", default="augreg_in21k")
    args = parser.parse_args()
    config = TrainConfig(
        model=ModelConfig("ViT_B16", weights=args.weights, image_size=384),
        data=DataConfig(
            "oxford_flowers102", data_dir=args.data_dir, batch_size=128
        ),
        optimizer=OptimizerConfig(
            "sgd",
            learning_rate=0.003,  # in the paper's grid (RECIPES' fine_tune)
            warmup_steps=100,
            decay="cosine",
            weight_decay=0.0,
        ),
        # oxford_flowers102's 1020 training images make 7 full batches of
        # 128 an epoch: 72 epochs are 504 steps, the paper's ~500 (20
        # epochs of one batch of 512 were 20 steps, fewer than the 100 of
        # warm-up: refused).
        run=RunConfig(output=args.output, epochs=72),
        scale=ScaleConfig(
            strategy="tpu",
            tpu=args.tpu,
            mixed_precision="bfloat16",
            steps_per_execution=32,
        ),
    )
    result = train(config)
    print(f"test accuracy: {result.test_metrics['accuracy']:.4f}")


if __name__ == "__main__":
    main()
