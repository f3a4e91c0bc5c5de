"""Workarounds for Keras behaviours that keras_vit's models meet.

Each function says which Keras (3.15) behaviour it works around, so that it
can go when Keras changes. They are kept apart from the models, which call
them at the one place each is needed:

- `finish_functional_init`: after `keras.Model.__init__` of a functional
  model (dtype-policy maps, the model's own policy, frozen layers);
- `trainable_flags`: the per-layer `trainable` flags a model's
  `get_config` records, which `finish_functional_init` sets back;
- `config_dtype_policy`: the dtype a model's `get_config` records;
- `TrainerFixes`: mixed into `ViT` and `MaskedPatchPrediction` before
  `keras.Model`: on the TensorFlow backend, the optimizer of a built model
  built before the first training step is traced, `fit` / `evaluate`
  under MultiWorkerMirroredStrategy, and (not a fix: what only the
  trainer knows) whether XLA compiles the training step; and no training
  step where TensorFlow's oneDNN ops are told the weights never change;
- `overrides_private`: the guard of every override of a private Keras
  method (here and in `keras_vit.training.recipe`'s optimizers).
"""

import inspect
import os
import warnings

import keras

from keras_vit.layers import kernels

#: The last Keras release (major, minor) on which each override of a
#: private Keras method (`overrides_private`) was checked against the
#: behaviour it works around. A test fails on a later Keras, so that each
#: is checked again there and dropped where Keras no longer needs it.
CHECKED_THROUGH = (3, 15)

#: `(Keras class, method name, mixin)` of every private override.
PRIVATE_OVERRIDES = []


def overrides_private(base, *names):
    """Marks a mixin class that overrides the private methods `names` of
    the Keras class `base`, to work around a behaviour of the Keras
    releases up to `CHECKED_THROUGH` that its docstring names.

    A private method may change or go in any Keras release. Where `base`
    has no method of that name, or one that takes other parameters, the
    override would be called with arguments it does not expect, or never:
    it is removed from the mixin, with a warning that says which
    workaround is off, and Keras's own method runs. Checked on the
    TensorFlow backend, the one these workarounds are for (elsewhere the
    overrides hand over to Keras or are not mixed in).
    """

    def guard(mixin):
        if keras.backend.backend() != "tensorflow":
            return mixin
        for name in names:
            theirs = getattr(base, name, None)
            if theirs is None or _parameters(theirs) != _parameters(
                getattr(mixin, name)
            ):
                warnings.warn(
                    f"keras_vit's {mixin.__name__}.{name} works around "
                    f"Keras {CHECKED_THROUGH[0]}.{CHECKED_THROUGH[1]}'s "
                    f"{base.__name__}.{name}, which Keras "
                    f"{keras.__version__} does not have in that form: the "
                    "workaround is off.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                delattr(mixin, name)
            else:
                PRIVATE_OVERRIDES.append((base, name, mixin))
        return mixin

    return guard


def _parameters(method):
    return list(inspect.signature(method).parameters)


def finish_functional_init(model, dtype, layer_trainable=None):
    """Fixes a functional `model` just built with `dtype` (its `dtype=`
    argument), its `trainable=` argument and `layer_trainable` (the
    `trainable_flags` its config recorded, checked by
    `checked_trainable_flags`); returns nothing."""
    if isinstance(dtype, keras.dtype_policies.DTypePolicyMap):
        # A quantized model's config (see `config_dtype_policy`).
        resolve_policy_map(model, dtype)
        dtype = dtype.default_policy
    if dtype is not None:
        # A functional model keeps no policy of its own (Keras 3.15): the
        # config, and so a saved mixed-precision model, would say float32.
        model.dtype_policy = dtype
    if not model.trainable:
        freeze_layers(model)
    if layer_trainable:
        set_trainable_flags(model, layer_trainable)


def resolve_policy_map(model, policies):
    """Gives every layer of `model`, built with the `DTypePolicyMap`
    `policies`, its own policy from the map.

    Keras builds each layer right from a map (the quantized layers with
    their quantized variables, to be loaded), but a layer that keeps the map
    answers `dtype_policy` with the map itself, and Keras 3.15's quantized
    `Dense` reads its mode from there when saving: a reloaded quantized
    model could not be saved again. Resolved, the layers hold plain
    policies, as after `model.quantize()`.
    """
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer._dtype_policy, keras.dtype_policies.DTypePolicyMap):
            layer._dtype_policy = (
                policies[layer.path] if layer.path else policies.default_policy
            )


def freeze_layers(model):
    """Freezes the direct layers of a `model` built with `trainable=False`.

    `trainable=False` as an argument (how a frozen model comes back from its
    config) sets the model's own flag only, before its layers are tracked;
    freeze them and their variables too, or a model holding this one trains
    them. (`model.trainable = False` again would be skipped: Keras ignores
    assigning a value equal to the current one.)
    """
    for layer in model._flatten_layers(include_self=False, recursive=False):
        layer.trainable = False


#: The argument (and config key) that holds `trainable_flags`.
LAYER_TRAINABLE = "layer_trainable"


def trainable_flags(model):
    """The layers' own `trainable` flags, for `model`'s config: `{path:
    flag}` for each layer with weights whose flag differs from that of the
    layer holding it (the model, for its direct layers), parents first;
    `path` is the layer names from the model down, joined by `/`
    (`"block_0"`, `"resnet_stem/block1_unit1"`). Empty when no layer was
    frozen (or unfrozen) on its own.

    Keras's functional config records every layer's flag, but a
    functional subclass whose config is its constructor arguments rebuilds
    its layers: a layer frozen for partial fine-tuning came back trainable
    from a `.keras` file, and the optimizer, built for more variables than
    it was saved with, dropped its state. Layers without weights are left
    out: their flag changes no training, and their generated names
    (`dropout_2`) change from build to build.
    """
    flags = {}

    def visit(parent, prefix):
        for layer in _sublayers(parent):
            if not layer.weights:
                continue
            path = prefix + layer.name
            if layer.trainable != parent.trainable:
                flags[path] = layer.trainable
            visit(layer, path + "/")

    visit(model, "")
    return flags


def checked_trainable_flags(value):
    """`value` (a `layer_trainable` argument: `None` or a dict of layer
    path to bool) as a dict; `ValueError` for anything else."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(path, str) and isinstance(flag, bool)
        for path, flag in value.items()
    ):
        raise ValueError(
            f"`{LAYER_TRAINABLE}` must map layer paths (layer names from "
            "the model down, joined by '/') to bools. Received: "
            f"{LAYER_TRAINABLE}={value!r}"
        )
    return dict(value)


def set_trainable_flags(model, flags):
    """Sets `trainable_flags`' `flags` on `model`'s layers, parents first
    (a parent's flag goes down to its sublayers, as Keras sets it); every
    path is looked up before any flag is set."""
    layers = {path: _layer_at(model, path, flags) for path in flags}
    for path in sorted(flags, key=lambda path: path.count("/")):
        layers[path].trainable = flags[path]


def _layer_at(model, path, flags):
    """The layer with weights at `path` under `model`; `ValueError`
    naming the path if there is none."""
    layer = model
    for name in path.split("/"):
        layer = next(
            (
                child
                for child in _sublayers(layer)
                if child.name == name and child.weights
            ),
            None,
        )
        if layer is None:
            raise ValueError(
                f"`{LAYER_TRAINABLE}` names {path!r}, and the model "
                f"{model.name!r} has no layer with weights there. Received: "
                f"{LAYER_TRAINABLE}={flags!r}"
            )
    return layer


def _sublayers(layer):
    """The layers `layer` holds directly."""
    return layer._flatten_layers(include_self=False, recursive=False)


def config_dtype_policy(model):
    """The dtype policy `model.get_config()` should record: the model's own,
    or after `quantize()` a `DTypePolicyMap` that gives each quantized layer
    its policy (Keras records only the model's policy, so a saved quantized
    model would be rebuilt unquantized and fail to load its int8 weights)."""
    policies = keras.dtype_policies.DTypePolicyMap(model.dtype_policy)
    for layer in model._flatten_layers():
        if layer.quantization_mode is not None:
            policies[layer.path] = layer.dtype_policy
    return policies if len(policies) else model.dtype_policy


class _OptimizerBuiltFirst:
    """Builds the optimizer before the TensorFlow trainer traces its first
    training step.

    Keras (3.15) on TensorFlow, without a distribution strategy, builds the
    optimizer inside the first traced step (under a strategy, and on the
    other backends, it builds it before). Its slots are then created while
    the step runs: `tf.function` traces the step twice, and the slots (two
    float32 copies of every weight) are allocated among the step's
    activations, which fragments memory: the peak over the later steps,
    and the first step's time, are higher than with the slots made first
    (`benchmarks/results/2026-12-02-optimizer-built-first.md`). Built
    here, as Keras builds it under a strategy, from the trainable
    variables as they are when training starts.
    """

    def make_train_function(self, force=False):
        # Called by every `train_on_batch`: the layers are looked at only
        # while the optimizer is unbuilt. A model that creates variables in
        # its first call (a subclassed one such as `MaskedPatchPrediction`)
        # is left to Keras.
        if (
            self.optimizer is not None
            and not self.optimizer.built
            and all(layer.built for layer in self._flatten_layers())
        ):
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force=force)


@overrides_private(keras.Model, "_maybe_symbolic_build")
class _MultiWorkerFit:
    """`fit` / `evaluate` fixes for MultiWorkerMirroredStrategy on the
    TensorFlow backend."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras (3.15) takes a sample batch for the symbolic build by
        # averaging a distributed batch across replicas with
        # `strategy.reduce`; under MultiWorkerMirroredStrategy that eager
        # collective fails ("Attempt to convert a value (PerReplica...) to a
        # Tensor"). Only the batch's shapes matter here, so this replica's
        # own values serve, with no communication.
        import tensorflow as tf

        if iterator is not None and self._distribute_strategy is not None:
            for _, _, it in iterator:
                batch = next(it)
                data_batch = tf.nest.map_structure(
                    lambda x: (
                        self.distribute_strategy.experimental_local_results(x)[
                            0
                        ]
                        if isinstance(x, tf.distribute.DistributedValues)
                        else x
                    ),
                    batch,
                )
                break
            iterator = None
        return super()._maybe_symbolic_build(
            iterator=iterator, data_batch=data_batch
        )

    def train_step(self, data):
        return multi_worker_logs(
            super().train_step(data), self.distribute_strategy
        )

    def test_step(self, data):
        return multi_worker_logs(
            super().test_step(data), self.distribute_strategy
        )


class _StepSaysXla:
    """Tells the layers whether XLA compiles the step being traced
    (`layers.kernels.compiled_step`): only the trainer knows (TensorFlow
    gives a traced function no sign of it). Without XLA a bfloat16 step
    can take its attention's softmax in bfloat16 at float32 precision
    (`_attention_core.softmax_dtype`), and an evaluation or prediction
    step its LayerNorms as one XLA kernel each (`layer_norm.LayerNorm`);
    under XLA the attention's backward pass reads its probabilities
    rather than keep a second copy of its outputs
    (`_attention_core.attend`)."""

    def train_step(self, data):
        with self._compiled_step():
            return super().train_step(data)

    def test_step(self, data):
        with self._compiled_step():
            return super().test_step(data)

    def predict_step(self, data):
        with self._compiled_step():
            return super().predict_step(data)

    def _compiled_step(self):
        return kernels.compiled_step(self, xla=bool(self.jit_compile))


#: TensorFlow's switch that has its oneDNN ops treat every weight as a
#: constant: each Dense packs its kernel on its first call and keeps it.
FROZEN_WEIGHTS_VARIABLE = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


class _TrainsOnLiveWeights:
    """Refuses to trace a training step in a process where
    `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS` is on (TensorFlow reads it as a bool:
    `1` or `true`): the forward passes would keep computing with the
    weights of the first step while the optimizer changed them, a
    training run silently wrong (measured: a tiny ViT's loss fell 1.61 ->
    1.58 in 8 steps, against 1.61 -> 1.38 without it). The variable is for
    processes that only infer (docs/performance.md)."""

    def train_step(self, data):
        value = os.environ.get(FROZEN_WEIGHTS_VARIABLE, "")
        if value.strip().lower() in ("1", "true"):
            raise ValueError(
                f"Cannot train with {FROZEN_WEIGHTS_VARIABLE} on: "
                "TensorFlow's oneDNN ops then keep each Dense's weights "
                "from its first call, so training would compute with stale "
                "weights. Unset it in processes that train. Received: "
                f"{FROZEN_WEIGHTS_VARIABLE}={value!r}"
            )
        return super().train_step(data)


class _TensorFlowTrainerFixes(
    _TrainsOnLiveWeights, _OptimizerBuiltFirst, _StepSaysXla, _MultiWorkerFit
):
    """The TensorFlow trainer's fixes, mixed into keras_vit's models."""


class _NoFixes:
    """Other Keras backends' trainers: nothing to fix (they build the
    optimizer before tracing; their steps take other arguments, JAX's
    `train_step(state, data)`)."""


#: The mixin that carries the trainer fixes on the current backend.
TrainerFixes = (
    _TensorFlowTrainerFixes
    if keras.backend.backend() == "tensorflow"
    else _NoFixes
)


def multi_worker_logs(logs, strategy):
    """Scalar step logs as `(1,)` tensors under several workers.

    Keras (3.15) reduces each replica's step logs with
    `strategy.reduce("MEAN", value, axis=0)` under MultiWorkerMirroredStrategy,
    which fails for the scalar loss and metrics ("Invalid reduction
    dimension 0 for input with 0 dimensions"); with a leading axis of 1 the
    same reduction gives the scalar mean.
    """
    import tensorflow as tf

    extended = getattr(strategy, "extended", None)
    in_multi_worker = getattr(extended, "_in_multi_worker_mode", lambda: False)
    if (
        not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        or not in_multi_worker()
    ):
        return logs
    return {
        key: tf.reshape(value, [1])
        if getattr(value, "shape", None) == ()
        else value
        for key, value in logs.items()
    }
