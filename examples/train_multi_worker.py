"""Train on several machines with MultiWorkerMirroredStrategy.

Run the same command on every machine, each with its own TF_CONFIG. For two
machines (host1 is the chief, "worker" 0):

    # on host1
    export TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                       "task": {"type": "worker", "index": 0}}'
    python examples/train_multi_worker.py --output /shared/runs/mw

    # on host2: the same, with "index": 1

`strategy="auto"` sees two workers in TF_CONFIG and picks
MultiWorkerMirroredStrategy. --batch-size (256 by default) is the global
batch: each of the N workers computes batch/N examples per step. Only the
chief (worker 0) writes the run folder (model.keras, backup/, logs); the
other workers write to temporary folders that are removed at the end.
After a crash, rerun the same commands (the same --batch-size: a rerun
with another is refused): training resumes from the chief's last backup,
which is why --output should be a folder every worker can read (shared
storage, e.g. a bucket mounted with gcsfuse; a gs:// URL is refused).

To try it on one machine, use two terminals and localhost ports.
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
    parser.add_argument("--output", required=True)
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--batch-size", type=int, default=256, help="the global batch"
    )
    args = parser.parse_args()
    config = TrainConfig(
        model=ModelConfig(
            "Ti/16",
            image_size=28,
            patch_size=7,
            kwargs={
                "hidden_dim": 96,
                "num_layers": 6,
                "num_heads": 4,
                "mlp_dim": 192,
            },
        ),
        data=DataConfig(args.dataset, batch_size=args.batch_size),
        optimizer=OptimizerConfig(learning_rate=2e-3, weight_decay=0.05),
        run=RunConfig(output=args.output, epochs=args.epochs),
        scale=ScaleConfig(strategy="auto"),
    )
    result = train(config)
    print(
        "test accuracy: "
        f"{result.test_metrics.get('accuracy', float('nan')):.4f}"
    )


if __name__ == "__main__":
    main()
