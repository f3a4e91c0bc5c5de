"""Choosing a `tf.distribute` strategy: TPU, several machines, GPUs, or one
device."""

import json
import os

from keras_vit import arg_checks
from keras_vit.options import STRATEGIES


def _workers(tf_config):
    """The number of tasks that train (chief + workers) in a TF_CONFIG."""
    if not tf_config:
        return 0
    try:
        cluster = json.loads(tf_config).get("cluster", {})
    except (ValueError, AttributeError):
        raise ValueError(
            f"TF_CONFIG is not valid JSON. Received: TF_CONFIG={tf_config!r}"
        ) from None
    return len(cluster.get("chief", [])) + len(cluster.get("worker", []))


def _on_tpu_vm():
    # Cloud TPU VMs expose the chips as /dev/accel* (v2-v4) or /dev/vfio.
    return any(os.path.exists(path) for path in ("/dev/accel0", "/dev/vfio/0"))


#: The strategies that can run on the TPU `tpu` names.
TPU_STRATEGIES = ("auto", "tpu")


def check_tpu(name, tpu):
    """Raises unless `tpu` is unset or `name` is a strategy that uses it:
    `default`, `mirrored` and `multi_worker` ignored it, and a run meant
    for a TPU trained on the host's CPU without a word."""
    if tpu and name not in TPU_STRATEGIES:
        raise ValueError(
            "`tpu` names the TPU of the 'tpu' strategy (or of 'auto'), "
            f"which this run does not use. Received: tpu={tpu!r}, "
            f"strategy={name!r}"
        )


def resolve_kind(name="auto", tpu=None, environ=None, num_gpus=None):
    """Which strategy `name` means here, without creating it.

    Args:
        name: one of `STRATEGIES`.
        tpu: the `--tpu` name or address, if any.
        environ: the environment to read (`TPU_NAME`, `TF_CONFIG`).
            Defaults to `os.environ`.
        num_gpus: GPUs visible. Defaults to `None`: ask TensorFlow.

    Returns:
        One of `"tpu"`, `"multi_worker"`, `"mirrored"`, `"default"`.

    Raises:
        ValueError: for an unknown `name`, or a `tpu` with a `name` that
            does not use it (`check_tpu`).
    """
    name = arg_checks.one_of("strategy", name, STRATEGIES)
    check_tpu(name, tpu)
    environ = os.environ if environ is None else environ
    if name != "auto":
        return name
    if tpu or environ.get("TPU_NAME") or _on_tpu_vm():
        return "tpu"
    if _workers(environ.get("TF_CONFIG")) > 1:
        return "multi_worker"
    if num_gpus is None:
        import tensorflow as tf

        num_gpus = len(tf.config.list_physical_devices("GPU"))
    return "mirrored" if num_gpus > 1 else "default"


def make_strategy(name="auto", tpu=None, devices=None):
    """Creates the `tf.distribute.Strategy` for `name` (see `resolve_kind`).

    Args:
        name: `"auto"`, `"default"`, `"mirrored"`, `"multi_worker"` or
            `"tpu"`.
        tpu: TPU name or gRPC address for `"tpu"` (`None`: `TPU_NAME`, or
            the local TPU VM).
        devices: device list for `"mirrored"` (default: all GPUs, else the
            CPU).

    Returns:
        `(strategy, kind)`.
    """
    import tensorflow as tf

    kind = resolve_kind(name, tpu)
    if kind == "tpu":
        address = tpu or os.environ.get("TPU_NAME") or "local"
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu=address
            )
            if address != "local":
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.OpError) as error:
            raise ValueError(
                f"Could not reach the TPU {address!r}: {error}. Received: "
                f"strategy={name!r}, tpu={tpu!r}"
            ) from None
        return tf.distribute.TPUStrategy(resolver), kind
    if kind == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy(), kind
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices), kind
    return tf.distribute.get_strategy(), kind


def is_chief(strategy):
    """Whether this process writes the run's files (always, but for the
    non-chief workers of a multi-worker run)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def all_succeed(strategy, step, output):
    """Runs `step()` on this worker, then tells every worker of `strategy`
    whether all of them succeeded (`strategy.gather` of a flag per
    replica, a collective every worker joins).

    A check that only the chief makes (of the run folder, which only it
    writes) used to stop the chief alone: the other workers then waited at
    the run's next collective for a process that had exited, forever.
    Now each of them stops too.

    Args:
        strategy: the run's `tf.distribute.Strategy`.
        step: a callable, run on every worker.
        output: the run folder, named in the others' error.

    Returns:
        What `step` returned.

    Raises:
        Exception: `step`'s own error, on the worker where it failed, once
            the others know.
        ValueError: on the other workers, when one failed.
    """
    import tensorflow as tf

    error, result = None, None
    try:
        result = step()
    except Exception as caught:  # told to the others, then raised
        error = caught
    failed = int(error is not None)
    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([failed], tf.int64)
    )
    gathered = strategy.gather(values, axis=0)
    if error is not None:
        raise error
    if int(tf.reduce_max(gathered).numpy()):
        raise ValueError(
            "Another worker of the run stopped before training (its own "
            "error says why; the chief checks the output folder, which "
            "only it writes): this worker stops too rather than wait for "
            f"it. Received: output={output!r}"
        )
    return result


def check_same_initial_epoch(strategy, epoch, output):
    """Raises unless every worker of `strategy` resumes at the same epoch.

    Each worker of a multi-worker run reads the backup in the run folder
    itself; on storage the workers do not share, each reads its own copy
    of the path (or none), and workers resuming at different epochs failed
    later with an obscure collective error, or trained out of step. Every
    replica's epoch is gathered on every worker (`strategy.gather`, a
    collective), so that all of them raise, not only the one that
    differs.

    Args:
        strategy: the run's `tf.distribute.Strategy`.
        epoch: int, the epoch this worker resumes at (0 without a
            backup).
        output: the run folder, named in the error.

    Raises:
        ValueError: naming the epochs, if the replicas disagree.
    """
    import tensorflow as tf

    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([epoch], tf.int64)
    )
    epochs = sorted({int(e) for e in strategy.gather(values, axis=0).numpy()})
    if len(epochs) > 1:
        raise ValueError(
            "The workers would resume from different epochs "
            f"({', '.join(map(str, epochs))}; 0: no backup): each read the "
            "backup in its own copy of the output folder. The output "
            "folder must be on storage all workers share (a network file "
            "system, or a bucket mounted on every worker). Received: "
            f"output={output!r}"
        )


def device_kind(strategy_kind):
    """`"tpu"`, `"gpu"` or `"cpu"`: what the training runs on."""
    if strategy_kind == "tpu":
        return "tpu"
    import tensorflow as tf

    return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"


def kind_of(strategy):
    """The kind (`"tpu"`, `"multi_worker"`, `"mirrored"`, `"default"`) of a
    strategy object."""
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "tpu"
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return "multi_worker"
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        return "mirrored"
    return "default"
