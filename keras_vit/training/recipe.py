"""The optimisation recipe: optimizer, learning-rate schedule, precision.

The optimizers are the paper's (Section 4.1, Appendix B.1): Adam with
beta1 0.9, beta2 0.999 and decoupled weight decay 0.1, gradient clipping
at global norm 1; SGD with momentum 0.9 for fine-tuning
(`TrainConfig.fine_tune`). The schedule's defaults are keras_vit's: a
linear warm-up then cosine decay (the paper pre-trains with linear
decay), and no decay on biases, norms and embeddings (big_vision's).
"""

import math

import keras

from keras_vit import arg_checks
from keras_vit.models import keras_fixes
from keras_vit.options import DECAYS
from keras_vit.options import DEFAULT_WEIGHT_DECAY
from keras_vit.options import MIXED_PRECISION
from keras_vit.options import OPTIMIZERS


@keras.saving.register_keras_serializable(package="keras_vit")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak`, then cosine or linear decay to `end`.

    Args:
        peak: float, the learning rate at the end of the warm-up.
        warmup_steps: int >= 0, steps of linear warm-up.
        total_steps: int > warmup_steps, the step at which the decay ends.
        decay: `"cosine"` or `"linear"`. Defaults to `"cosine"`.
        end: float >= 0, the final learning rate. Defaults to `0.0`.
    """

    def __init__(
        self, peak, warmup_steps, total_steps, decay="cosine", end=0.0
    ):
        self.peak = arg_checks.positive_float("learning_rate", peak)
        if (
            isinstance(warmup_steps, bool)
            or not isinstance(warmup_steps, int)
            or warmup_steps < 0
        ):
            raise ValueError(
                "`warmup_steps` must be an integer >= 0. "
                f"Received: warmup_steps={warmup_steps!r}"
            )
        self.warmup_steps = warmup_steps
        self.total_steps = arg_checks.positive_int("total_steps", total_steps)
        if self.total_steps <= warmup_steps:
            raise ValueError(
                "`warmup_steps` must be fewer than the total training steps. "
                f"Received: warmup_steps={warmup_steps} for "
                f"{self.total_steps} steps"
            )
        self.decay = arg_checks.one_of("decay", decay, DECAYS)
        # A NaN or inf `end` gave a NaN or inf learning rate, silently.
        self.end = arg_checks.finite_non_negative_float("end", end)

    def __call__(self, step):
        from keras import ops

        step = ops.cast(step, "float32")
        warmup = self.peak * step / max(self.warmup_steps, 1)
        progress = (step - self.warmup_steps) / (
            self.total_steps - self.warmup_steps
        )
        progress = ops.clip(progress, 0.0, 1.0)
        if self.decay == "cosine":
            fraction = 0.5 * (1.0 + ops.cos(math.pi * progress))
        else:
            fraction = 1.0 - progress
        decayed = self.end + (self.peak - self.end) * fraction
        return ops.where(step < self.warmup_steps, warmup, decayed)

    def get_config(self):
        return {
            "peak": self.peak,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
            "end": self.end,
        }


@keras_fixes.overrides_private(keras.optimizers.Optimizer, "_clip_gradients")
class _GlobalClipAcrossReplicas:
    """Clips by the global norm of the gradient summed over all replicas.

    Keras's optimizers clip each replica's gradients before summing them
    across replicas (`_clip_gradients` runs before the all-reduce in
    `_backend_update_step`), so with `global_clipnorm` a run on N devices
    does not compute the same update as one device with the same global
    batch. Here the gradients are summed first, clipped, and each replica
    keeps 1/N of the clipped sum, so the optimizer's own all-reduce
    restores it exactly. It costs one more all-reduce per step, and only
    under a strategy with several replicas.
    """

    def _clip_gradients(self, grads):
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync if context is not None else 1
        if not self.global_clipnorm or replicas == 1:
            return super()._clip_gradients(grads)
        present = [g for g in grads if g is not None]
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, present)
        clipped, _ = tf.clip_by_global_norm(summed, self.global_clipnorm)
        shares = iter([c / replicas for c in clipped])
        return [None if g is None else next(shares) for g in grads]


@keras_fixes.overrides_private(
    keras.optimizers.Optimizer,
    "_all_reduce_sum_gradients",
    "_apply_weight_decay",
)
class _UpdateAsGradientsArrive:
    """Updates each variable once its own gradient exists, on TensorFlow.

    Keras (3.15) on TensorFlow lets no variable's update start before the
    whole backward pass ends, and decays the weights before the backward
    pass needs them no more:

    - `_all_reduce_sum_gradients` passes the gradients through one
      all-reduce, an `IdentityN` of all of them even with one replica: every
      gradient (344 MB for ViT-B/16) stays alive until the last is made.
      With one replica the sum is the gradient itself, and it is skipped.
    - `_apply_weight_decay` writes every decaying variable with no input
      from the gradients, so TensorFlow's executor runs it during the
      forward pass, as soon as the variable is read: the backward pass
      still holds the value read, and the write copies the variable (a
      second float32 copy of the kernels). Here the decay runs in
      `update_step`, after the variable's gradient exists.

    A training step's tensor peak falls to about what computing the
    gradients alone takes (figures:
    `benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`). Under
    global-norm clipping every gradient is needed for the norm anyway.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync == 1:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _apply_weight_decay(self, variables):
        if keras.backend.backend() != "tensorflow":
            super()._apply_weight_decay(variables)
        # On TensorFlow: in `update_step`.

    def update_step(self, gradient, variable, learning_rate):
        if (
            keras.backend.backend() == "tensorflow"
            and self.weight_decay is not None
            and self._use_weight_decay(variable)
        ):
            import tensorflow as tf

            # Keras's decay (its TensorFlow `_apply_weight_decay`), once the
            # gradient exists.
            with tf.control_dependencies([gradient]):
                lr = tf.cast(learning_rate, variable.dtype)
                decay = tf.cast(self.weight_decay, variable.dtype)
                variable.assign_sub(variable * decay * lr)
        return super().update_step(gradient, variable, learning_rate)


class _FusedAdamUpdate:
    """Adam's update of one variable as TensorFlow's fused kernel.

    `keras.optimizers.Adam.update_step` (Keras 3.15) is a dozen elementwise
    ops, each a pass over the variable's size (`g - m`, its product,
    `m`'s update, `g * g`, ..., `sqrt(v) + epsilon`, the quotient, the
    variable's update): for ViT-B/16's 86 M parameters, 14 passes of 344
    MB a step. TensorFlow's `ResourceApplyAdam` computes the same formula
    in the same order (`m += (g - m)(1 - beta_1)`, `v += (g^2 - v)(1 -
    beta_2)`, `var -= alpha m / (sqrt(v) + epsilon)`, `alpha = lr sqrt(1 -
    beta_2^t) / (1 - beta_1^t)`) in one pass that reads `g` and `var`, `m`,
    `v` and writes the last three, as PyTorch's fused AdamW does (what a
    training step gains:
    `benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`). One
    difference: the kernel takes `1 - beta_2` in float32 (1 - 0.999f =
    0.0010000467), where Keras casts Python's 0.001, a second-moment rate
    4.7e-5 higher relative (as if beta_2 were 0.99899995, the float32
    beta_2 Keras's own bias correction uses). XLA compiles the op too
    (TPUs, `jit_compile`). Other backends, and AMSGrad, take Keras's
    update.
    """

    def update_step(self, gradient, variable, learning_rate):
        if keras.backend.backend() != "tensorflow" or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        index = self._get_variable_index(variable)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


@keras.saving.register_keras_serializable(package="keras_vit")
class AdamW(
    _UpdateAsGradientsArrive,
    _FusedAdamUpdate,
    _GlobalClipAcrossReplicas,
    keras.optimizers.AdamW,
):
    """`keras.optimizers.AdamW` whose `global_clipnorm` clips the gradient
    summed over replicas (see `_GlobalClipAcrossReplicas`), whose update is
    one fused op on TensorFlow (see `_FusedAdamUpdate`), and which updates
    each variable once its gradient exists (`_UpdateAsGradientsArrive`)."""


@keras.saving.register_keras_serializable(package="keras_vit")
class SGD(
    _UpdateAsGradientsArrive, _GlobalClipAcrossReplicas, keras.optimizers.SGD
):
    """`keras.optimizers.SGD` whose `global_clipnorm` clips the gradient
    summed over replicas (see `_GlobalClipAcrossReplicas`) and which updates
    each variable once its gradient exists (`_UpdateAsGradientsArrive`)."""


#: Variables that get no weight decay (biases, norms, embeddings, the
#: learned RoPE frequencies: timm's `no_weight_decay`), by the names
#: keras_vit gives them.
NO_DECAY = [
    "bias",
    "gamma",
    "beta",
    "class_token",
    "position_embedding",
    "mask_token",
    "register_tokens",
    "distillation_token",
    "probe",
    "frequencies",
]


def make_optimizer(
    name="adamw",
    learning_rate=1e-3,
    weight_decay=None,
    warmup_steps=0,
    total_steps=1,
    decay="cosine",
    clipnorm=1.0,
    momentum=0.9,
):
    """The optimizer of the recipe, with its learning-rate schedule.

    Args:
        name: `"adamw"` (pre-training, training from scratch) or `"sgd"`
            (fine-tuning, with momentum). Defaults to `"adamw"`.
        learning_rate: float, the peak learning rate.
        weight_decay: float >= 0, decoupled weight decay, not applied to
            biases, norms, class token, position embeddings. Defaults to
            `None`: `DEFAULT_WEIGHT_DECAY[name]` (0.1 for AdamW, 0 for SGD).
        warmup_steps: int, linear warm-up steps.
        total_steps: int, total training steps (the decay's end).
        decay: `"cosine"` or `"linear"`.
        clipnorm: float or `None`, clip gradients at this global norm.
            Defaults to `1.0`.
        momentum: float, SGD momentum. Defaults to `0.9`.

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    name = arg_checks.one_of("optimizer", name, OPTIMIZERS)
    schedule = WarmupDecay(learning_rate, warmup_steps, total_steps, decay)
    if clipnorm is not None:
        clipnorm = arg_checks.positive_float("clipnorm", clipnorm)
    if weight_decay is None:
        weight_decay = DEFAULT_WEIGHT_DECAY[name]
    # A NaN here trained into NaN losses (and advice to lower the rate).
    weight_decay = arg_checks.non_negative_float("weight_decay", weight_decay)
    if name == "sgd":
        momentum = arg_checks.rate("momentum", momentum)
        # Keras applies `weight_decay` decoupled, for SGD as for AdamW; 0
        # is None for it (no decay step in the graph).
        optimizer = SGD(
            schedule,
            momentum=momentum,
            weight_decay=weight_decay or None,
            global_clipnorm=clipnorm,
        )
    else:
        optimizer = AdamW(
            schedule,
            weight_decay=weight_decay,
            beta_1=0.9,
            beta_2=0.999,
            # The paper's Adam (flax; big_vision's optax), timm's and
            # PyTorch's: 1e-8. Keras's default is 1e-7.
            epsilon=1e-8,
            global_clipnorm=clipnorm,
        )
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    return optimizer


def cpu_has_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX)."""
    try:
        with open(cpuinfo) as file:
            flags = file.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


#: The lowest CUDA compute capability whose GPUs compute bfloat16 natively
#: (Ampere, 8.0): `dtype_policy`'s `"auto"` picks bfloat16 there (no loss
#: scaling) and float16 on older GPUs.
GPU_BFLOAT16_CAPABILITY = (8, 0)


def gpu_compute_capability():
    """The lowest CUDA compute capability of the visible GPUs, as
    `(major, minor)` (`tf.config.experimental.get_device_details`), or
    `None` when there are none or TensorFlow does not say."""
    import tensorflow as tf

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except (ValueError, RuntimeError):
            return None
        capability = details.get("compute_capability")
        if capability is None:
            return None  # one GPU of unknown kind: not the lowest known
        found.append(tuple(capability))
    return min(found) if found else None


def dtype_policy(
    mixed_precision, device_kind, cpu_bfloat16=None, gpu_capability=None
):
    """The Keras dtype policy for a `--mixed-precision` choice.

    `"auto"` is bfloat16 on TPUs; on GPUs, bfloat16 where every GPU has
    compute capability 8.0 or more (Ampere and later: A100, H100, RTX 30xx
    and later), which computes it natively and needs no loss scaling, and
    float16 on older GPUs (Volta, Turing: Keras scales the loss), also when
    the capability is unknown; on CPUs, bfloat16 where the CPU computes it
    natively (AVX-512 BF16 or AMX) and float32 elsewhere: without those
    instructions bfloat16 is emulated, slower than float32, while with
    them oneDNN's bfloat16 matmuls make it the faster (without XLA: see
    `auto_jit_compile`). Figures: `benchmarks/results/2026-11-30-profile.md`
    and `benchmarks/results/2026-12-01-epyc-avx512bf16.md`. `"off"` is
    float32.

    Args:
        mixed_precision: `"auto"`, `"off"`, `"bfloat16"` or `"float16"`.
        device_kind: `"tpu"`, `"gpu"` or `"cpu"`.
        cpu_bfloat16: whether the CPU has native bfloat16. Defaults to
            `None`: read `/proc/cpuinfo`.
        gpu_capability: the lowest compute capability of the GPUs, as
            `(major, minor)`. Defaults to `None`: ask TensorFlow
            (`gpu_compute_capability`).
    """
    mixed_precision = arg_checks.one_of(
        "mixed_precision", mixed_precision, MIXED_PRECISION
    )
    if mixed_precision == "auto":
        if device_kind == "gpu":
            if gpu_capability is None:
                gpu_capability = gpu_compute_capability()
            native = (
                gpu_capability is not None
                and tuple(gpu_capability) >= GPU_BFLOAT16_CAPABILITY
            )
            mixed_precision = "bfloat16" if native else "float16"
        elif device_kind == "tpu":
            mixed_precision = "bfloat16"
        else:
            native = (
                cpu_has_bfloat16() if cpu_bfloat16 is None else cpu_bfloat16
            )
            mixed_precision = "bfloat16" if native else "off"
    return "float32" if mixed_precision == "off" else f"mixed_{mixed_precision}"


# On a CPU, float32 training steps are compiled with XLA only for sequences
# up to this many tokens, of models up to this wide: see `auto_jit_compile`.
CPU_XLA_MAX_TOKENS = 512
CPU_XLA_MAX_WIDTH = 384


def auto_jit_compile(
    device_kind, replicas=1, dtype_policy="float32", tokens=None, width=None
):
    """Whether `jit_compile="auto"` compiles training steps with XLA.

    On TPUs and GPUs, yes. On CPUs, only for float32 steps of one replica
    over at most `CPU_XLA_MAX_TOKENS` tokens of at most `CPU_XLA_MAX_WIDTH`
    features:

    - XLA has no cross-device collectives (several CPU replicas).
    - It computes bfloat16 matmuls without oneDNN's AVX-512 BF16 kernels,
      which TensorFlow uses without XLA: a `mixed_bfloat16` step compiled
      with XLA runs at about float32's speed
      (`benchmarks/results/2026-12-01-epyc-avx512bf16.md`).
    - In float32 its fused elementwise ops win where they are a large part
      of the step, in narrow models; oneDNN's matmuls win in wide ones and
      its batched attention matmuls on long sequences. The two limits
      are where XLA stopped paying in training steps alternated with and
      without it: by width,
      `benchmarks/results/2026-12-02-xeon-optimizer-fusions.md`; by
      tokens,
      `benchmarks/results/2026-12-05-figures-moved-from-docstrings.md`.

    Args:
        device_kind: `"tpu"`, `"gpu"` or `"cpu"`.
        replicas: the strategy's number of replicas.
        dtype_policy: the model's dtype policy (a name or a
            `keras.DTypePolicy`).
        tokens: the tokens each block sees (`ViT.num_tokens`), or `None`
            if unknown (taken as few).
        width: the features of each token (`ViT.hidden_dim`), or `None` if
            unknown (taken as narrow).
    """
    if device_kind != "cpu":
        return True
    compute = getattr(dtype_policy, "compute_dtype", None) or {
        "mixed_bfloat16": "bfloat16",
        "mixed_float16": "float16",
    }.get(dtype_policy, dtype_policy)
    short = tokens is None or tokens <= CPU_XLA_MAX_TOKENS
    narrow = width is None or width <= CPU_XLA_MAX_WIDTH
    return replicas == 1 and compute != "bfloat16" and short and narrow
