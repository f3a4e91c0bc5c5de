"""What loading a Keras weights file costs: peak memory and time.

For one model, its weights saved as `.weights.h5` and as `.keras`, each
load in a process of its own (peak resident memory is per process):

- `ViT.load_weights`: keras_vit's check of the whole file, then Keras's
  loading;
- `keras.Model.load_weights`: Keras's loading alone (what the check adds
  is the difference);
- `keras_vit.load_weights`: keras_vit's own loader (every format's checks,
  fine-tuning rules), which reads the tensors into memory to assign them.

Each row: the peak resident memory the load added (`ru_maxrss` after,
less the resident memory before, both after the model is built) and its
wall time.

    python benchmarks/load_memory.py --model ViT_B16

Linux and macOS (`resource.getrusage`). The loads import keras_vit as
`python -c` does, from the current folder first: run it from another
checkout's folder to measure that checkout's loaders.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

#: How each loader is called, by name: `model` and `path` in scope.
LOADERS = {
    "ViT.load_weights": "model.load_weights(path)",
    "keras.Model.load_weights": "keras.Model.load_weights(model, path)",
    "keras_vit.load_weights": "keras_vit.load_weights(model, path)",
}

#: One load, in a fresh process; prints its figures as JSON.
MEASURE = """
import json, os, resource, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras, keras_vit

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def peak_mb():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10

model = keras_vit.ViT.from_config(json.loads(sys.argv[1]))
path = sys.argv[2]
before = resident_mb() if os.path.exists("/proc/self/statm") else peak_mb()
start = time.perf_counter()
{call}
seconds = time.perf_counter() - start
print(json.dumps({{"added_mb": peak_mb() - before, "seconds": seconds}}))
"""


#: The files measured, in order.
EXTENSIONS = (".weights.h5", ".keras")


def measure(config, path, loader):
    """`{"added_mb", "seconds"}` of one load of `path` by `loader` (a key
    of `LOADERS`) into a model built from `config`, in its own process."""
    script = MEASURE.format(call=LOADERS[loader])
    process = subprocess.run(
        [sys.executable, "-c", script, json.dumps(config), path],
        capture_output=True,
        text=True,
        check=False,
    )
    if process.returncode != 0:
        raise RuntimeError(f"{loader} on {path}: {process.stderr[-2000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def saved_files(model, folder):
    """The model's weights as `.weights.h5` and `.keras` in `folder`."""
    paths = [os.path.join(folder, f"{model.name}{e}") for e in EXTENSIONS]
    model.save_weights(paths[0])
    model.save(paths[1])
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="ViT_B16", help="a builder name")
    parser.add_argument(
        "--model-kwargs", default="{}", help="JSON overrides of the builder"
    )
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras_vit

    builder = getattr(keras_vit, args.model)
    model = builder(**json.loads(args.model_kwargs))
    config = model.get_config()
    print(f"{args.model}: {model.count_params():,} parameters")
    print("| file | MB | loader | peak MB added | seconds |")
    print("|---|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for path in saved_files(model, folder):
            size = os.path.getsize(path) / 2**20
            for loader in LOADERS:
                runs = [
                    measure(config, path, loader) for _ in range(args.rounds)
                ]
                added = ", ".join(f"{r['added_mb']:.0f}" for r in runs)
                seconds = ", ".join(f"{r['seconds']:.2f}" for r in runs)
                name = os.path.basename(path)
                print(
                    f"| {name} | {size:.0f} | {loader} | {added} | {seconds} |"
                )


if __name__ == "__main__":
    main()
