import json
import pathlib
import warnings

import keras
import numpy as np
import pytest

from keras_vit.training import recipe
from keras_vit.training import strategy as run_strategy


def test_warmup_then_cosine_and_linear_decay():
    cosine = recipe.WarmupDecay(1e-3, warmup_steps=10, total_steps=110)
    values = [float(cosine(s)) for s in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [0, 5e-4, 1e-3, 5e-4, 0, 0], atol=1e-9)
    linear = recipe.WarmupDecay(1e-3, 10, 110, decay="linear", end=1e-4)
    np.testing.assert_allclose(
        float(linear(35)), 1e-4 + 0.9e-3 * 0.75, rtol=1e-6
    )
    config = linear.get_config()
    assert recipe.WarmupDecay(**config).get_config() == config
    with pytest.raises(ValueError, match="warmup_steps"):
        recipe.WarmupDecay(1e-3, 10, 10)
    with pytest.raises(ValueError, match="decay='step'"):
        recipe.WarmupDecay(1e-3, 1, 10, decay="step")
    for end in (
        float("nan"),
        float("inf"),
        -1e-4,
    ):  # NaN was a NaN learning rate
        with pytest.raises(ValueError, match=f"Received: end={end}"):
            recipe.WarmupDecay(1e-3, 1, 10, end=end)


@pytest.mark.parametrize(
    "name, kind",
    [("adamw", keras.optimizers.AdamW), ("sgd", keras.optimizers.SGD)],
)
def test_weight_decay_moves_weights_but_not_biases_norms_or_embeddings(
    name, kind
):
    # SGD silently dropped a weight decay it was given.
    optimizer = recipe.make_optimizer(
        name, 0.1, weight_decay=0.5, total_steps=10
    )
    assert isinstance(optimizer, kind)
    assert optimizer.global_clipnorm == 1.0
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones(2, "float32"), name="bias")
    posemb = keras.Variable(
        np.ones((1, 3, 2), "float32"), name="position_embedding"
    )
    step = recipe.WarmupDecay(0.1, 0, 10)(0)
    optimizer.apply_gradients(
        [
            (np.zeros((2, 2), "float32"), kernel),
            (np.zeros(2, "float32"), bias),
            (np.zeros((1, 3, 2), "float32"), posemb),
        ]
    )
    # Zero gradients: only the decoupled decay moves weights, by lr * wd.
    np.testing.assert_allclose(kernel.numpy(), 1 - float(step) * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(bias.numpy(), 1.0)
    np.testing.assert_array_equal(posemb.numpy(), 1.0)


def _train_a_few_steps(optimizer, jit_compile):
    """A kernel (decayed) and a bias (not) after five steps of `optimizer`
    on fixed gradients, in a `tf.function` as `fit` runs it."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(16, 8)).astype("float32"))
    bias = keras.Variable(rng.normal(size=8).astype("float32"), name="bias")
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    optimizer.build([kernel, bias])
    steps = [
        [rng.normal(size=v.shape).astype("float32") for v in (kernel, bias)]
        for _ in range(5)
    ]

    @tf.function(jit_compile=jit_compile)
    def step(grads):
        optimizer.apply(grads, [kernel, bias])

    for grads in steps:
        step(grads)
    return kernel.numpy(), bias.numpy()


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize(
    "ours, keras_kind, kwargs",
    [
        # Betas whose complements float32 holds exactly (see the default's
        # test below).
        (
            recipe.AdamW,
            keras.optimizers.AdamW,
            {"weight_decay": 0.1, "beta_1": 0.875, "beta_2": 1 - 2**-10},
        ),
        (recipe.AdamW, keras.optimizers.AdamW, {"amsgrad": True}),
        (recipe.SGD, keras.optimizers.SGD, {"weight_decay": 0.1}),
        (recipe.SGD, keras.optimizers.SGD, {"momentum": 0.9}),
    ],
)
def test_the_recipe_optimizers_update_as_keras_does(
    ours, keras_kind, kwargs, jit_compile
):
    # The fused Adam kernel and the decay moved after the gradient change
    # when the work runs, not what it computes.
    theirs = _train_a_few_steps(keras_kind(0.05, **kwargs), jit_compile)
    mine = _train_a_few_steps(ours(0.05, **kwargs), jit_compile)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-7)
    start = _train_a_few_steps(ours(0.0), jit_compile)
    assert not np.allclose(mine[0], start[0])  # it did train


def test_the_fused_adam_update_takes_beta_2s_complement_in_float32():
    # TensorFlow's kernel computes 1 - beta_2 from float32 beta_2 (1 -
    # 0.999f = 0.0010000467), Keras in Python (0.001): the second moment's
    # rate differs by 4.7e-5 relative, and the weights by far less.
    theirs = _train_a_few_steps(keras.optimizers.AdamW(0.05), False)
    mine = _train_a_few_steps(recipe.AdamW(0.05), False)
    for a, b in zip(mine, theirs):
        assert not np.array_equal(a, b)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_each_variable_is_updated_once_its_gradient_exists(name):
    import tensorflow as tf

    kernel = keras.Variable(np.ones((4, 3), "float32"), name="kernel")
    bias = keras.Variable(np.zeros(3, "float32"), name="bias")
    optimizer = recipe.make_optimizer(name, weight_decay=0.1, clipnorm=None)
    optimizer.build([kernel, bias])
    gradient_ops = {}

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(x @ kernel.value + bias.value))
        grads = tape.gradient(loss, [kernel.value, bias.value])
        gradient_ops["kernel"] = grads[0].op.name
        optimizer.apply(grads, [kernel, bias])

    graph = step.get_concrete_function(tf.ones((2, 4))).graph
    # One replica: no all-reduce joining every gradient (an `IdentityN`).
    assert not [op for op in graph.get_operations() if op.type == "IdentityN"]
    # The kernel's decay (the only `assign_sub`: the updates are fused
    # ops or assignments) waits for the kernel's gradient.
    decays = [
        op for op in graph.get_operations() if op.type == "AssignSubVariableOp"
    ]
    assert decays
    for decay in decays:
        ancestors, todo = set(), [decay]
        while todo:
            op = todo.pop()
            for parent in [t.op for t in op.inputs] + list(op.control_inputs):
                if parent.name not in ancestors:
                    ancestors.add(parent.name)
                    todo.append(parent)
        assert gradient_ops["kernel"] in ancestors


def test_sgd_for_fine_tuning():
    optimizer = recipe.make_optimizer(
        "sgd", 0.01, total_steps=100, warmup_steps=5
    )
    assert isinstance(optimizer, keras.optimizers.SGD)
    assert optimizer.momentum == 0.9
    assert not optimizer.weight_decay  # none unless given
    adamw = recipe.make_optimizer("adamw")
    assert adamw.weight_decay == 0.1
    # The paper's (flax's), timm's and PyTorch's epsilon, not Keras's 1e-7.
    assert (adamw.beta_1, adamw.beta_2, adamw.epsilon) == (0.9, 0.999, 1e-8)
    with pytest.raises(ValueError, match="optimizer='lamb'"):
        recipe.make_optimizer("lamb")


def test_mixed_precision_policies():
    assert recipe.dtype_policy("auto", "tpu") == "mixed_bfloat16"
    assert (
        recipe.dtype_policy("auto", "cpu", cpu_bfloat16=True)
        == "mixed_bfloat16"
    )
    assert recipe.dtype_policy("auto", "cpu", cpu_bfloat16=False) == "float32"
    assert recipe.dtype_policy("off", "gpu") == "float32"
    assert recipe.dtype_policy("float16", "cpu") == "mixed_float16"
    with pytest.raises(ValueError, match="mixed_precision='fp8'"):
        recipe.dtype_policy("fp8", "cpu")


@pytest.mark.parametrize(
    "capability, expected",
    [
        ((7, 0), "mixed_float16"),  # V100: float16 with loss scaling
        ((7, 5), "mixed_float16"),  # T4
        ((8, 0), "mixed_bfloat16"),  # A100: native bfloat16
        ((8, 6), "mixed_bfloat16"),  # RTX 30xx
        ((9, 0), "mixed_bfloat16"),  # H100
        ([8, 9], "mixed_bfloat16"),  # as a list, too
    ],
)
def test_auto_precision_on_gpus_follows_the_compute_capability(
    capability, expected
):
    assert (
        recipe.dtype_policy("auto", "gpu", gpu_capability=capability)
        == expected
    )
    # An explicit choice is kept whatever the GPU.
    assert (
        recipe.dtype_policy("float16", "gpu", gpu_capability=capability)
        == "mixed_float16"
    )


def test_auto_precision_reads_the_lowest_gpu_capability(monkeypatch):
    import tensorflow as tf

    details = {"gpu:0": {"compute_capability": (9, 0)}}
    gpus = ["gpu:0"]
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind=None: list(gpus)
    )
    monkeypatch.setattr(
        tf.config.experimental, "get_device_details", lambda d: details[d]
    )
    assert recipe.gpu_compute_capability() == (9, 0)
    assert recipe.dtype_policy("auto", "gpu") == "mixed_bfloat16"
    # A V100 next to an H100: the lowest decides, float16 for both.
    details["gpu:1"] = {"compute_capability": (7, 0)}
    gpus.append("gpu:1")
    assert recipe.gpu_compute_capability() == (7, 0)
    assert recipe.dtype_policy("auto", "gpu") == "mixed_float16"
    # A GPU of unknown capability, or none: float16, which every GPU runs.
    details["gpu:1"] = {}
    assert recipe.gpu_compute_capability() is None
    assert recipe.dtype_policy("auto", "gpu") == "mixed_float16"
    gpus.clear()
    assert recipe.gpu_compute_capability() is None


def test_auto_xla_is_off_where_tensorflow_kernels_are_faster():
    # XLA on TPUs and GPUs; on a CPU for one float32 replica only: it has
    # no collectives for several, and no oneDNN bfloat16 kernels.
    assert recipe.auto_jit_compile("tpu", 8, "mixed_bfloat16")
    assert recipe.auto_jit_compile("gpu", 2, "mixed_float16")
    assert recipe.auto_jit_compile("cpu", 1, "float32")
    assert recipe.auto_jit_compile("cpu", 1, "mixed_float16")
    assert not recipe.auto_jit_compile("cpu", 2, "float32")
    assert not recipe.auto_jit_compile("cpu", 1, "mixed_bfloat16")
    assert not recipe.auto_jit_compile(
        "cpu", 1, keras.DTypePolicy("mixed_bfloat16")
    )
    assert not recipe.auto_jit_compile("cpu", 1, "bfloat16")
    # On a CPU, float32 over long sequences: oneDNN's attention matmuls.
    longest = recipe.CPU_XLA_MAX_TOKENS
    assert recipe.auto_jit_compile("cpu", 1, "float32", 197)
    assert recipe.auto_jit_compile("cpu", 1, "float32", longest)
    assert not recipe.auto_jit_compile("cpu", 1, "float32", longest + 1)
    assert recipe.auto_jit_compile("gpu", 1, "float32", 1025)
    # and of wide models: oneDNN's matmuls.
    widest = recipe.CPU_XLA_MAX_WIDTH
    assert recipe.auto_jit_compile("cpu", 1, "float32", 197, widest)
    assert not recipe.auto_jit_compile("cpu", 1, "float32", 197, 768)
    assert recipe.auto_jit_compile("gpu", 1, "float32", 197, 768)


def test_cpu_bfloat16_detection(tmp_path):
    flags = tmp_path / "cpuinfo"
    flags.write_text("flags\t: fpu avx512f avx512_vnni\n")
    assert not recipe.cpu_has_bfloat16(str(flags))
    flags.write_text("flags\t: fpu avx512f avx512_bf16 amx_tile\n")
    assert recipe.cpu_has_bfloat16(str(flags))
    assert not recipe.cpu_has_bfloat16(str(tmp_path / "missing"))


def _tf_config(workers, task=0, chief=False):
    cluster = {"worker": [f"localhost:{2000 + i}" for i in range(workers)]}
    if chief:
        cluster["chief"] = ["localhost:1999"]
    return json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": task}}
    )


@pytest.mark.parametrize(
    "name, tpu, environ, gpus, expected",
    [
        ("auto", None, {}, 0, "default"),
        ("auto", None, {}, 1, "default"),
        ("auto", None, {}, 4, "mirrored"),
        ("auto", "my-tpu", {}, 0, "tpu"),
        ("auto", None, {"TPU_NAME": "grpc://10.0.0.2:8470"}, 0, "tpu"),
        ("auto", None, {"TF_CONFIG": _tf_config(2)}, 0, "multi_worker"),
        (
            "auto",
            None,
            {"TF_CONFIG": _tf_config(1, chief=True)},
            8,
            "multi_worker",
        ),
        ("auto", None, {"TF_CONFIG": _tf_config(1)}, 2, "mirrored"),
        ("auto", "my-tpu", {"TF_CONFIG": _tf_config(2)}, 8, "tpu"),
        ("mirrored", None, {}, 0, "mirrored"),
        ("default", None, {"TPU_NAME": "x"}, 8, "default"),
    ],
)
def test_strategy_selection(name, tpu, environ, gpus, expected, monkeypatch):
    monkeypatch.setattr(run_strategy, "_on_tpu_vm", lambda: False)
    assert run_strategy.resolve_kind(name, tpu, environ, gpus) == expected


def test_tpu_vm_is_detected(monkeypatch):
    monkeypatch.setattr(run_strategy, "_on_tpu_vm", lambda: True)
    assert run_strategy.resolve_kind("auto", None, {}, 0) == "tpu"


def test_bad_strategy_settings():
    with pytest.raises(ValueError, match="strategy='horovod'"):
        run_strategy.resolve_kind("horovod", None, {}, 0)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        run_strategy.resolve_kind("auto", None, {"TF_CONFIG": "{not json"}, 0)


class _Resolver:
    def __init__(self, cluster, task_type, task_id):
        self._cluster, self.task_type, self.task_id = (
            cluster,
            task_type,
            task_id,
        )

    def cluster_spec(self):
        class Spec:
            def __init__(s, d):
                s.d = d

            def as_dict(s):
                return s.d

        return Spec(self._cluster)


class _Strategy:
    def __init__(self, resolver):
        self.cluster_resolver = resolver


@pytest.mark.parametrize(
    "cluster, task_type, task_id, chief",
    [
        ({}, None, None, True),
        ({"worker": ["a", "b"]}, "worker", 0, True),
        ({"worker": ["a", "b"]}, "worker", 1, False),
        ({"chief": ["c"], "worker": ["a"]}, "chief", 0, True),
        ({"chief": ["c"], "worker": ["a"]}, "worker", 0, False),
    ],
)
def test_only_the_chief_writes(cluster, task_type, task_id, chief):
    strategy = _Strategy(_Resolver(cluster, task_type, task_id))
    assert run_strategy.is_chief(strategy) is chief
    assert run_strategy.is_chief(object()) is True


def test_a_schedule_for_an_epoch_of_unknown_size_warns():
    from keras_vit.training.train import UNKNOWN_EPOCH_STEPS
    from keras_vit.training.train import make_run_optimizer
    from tests.training.test_train import tiny_config

    config = tiny_config(pathlib.Path("unused"), epochs=3)
    with pytest.warns(UserWarning, match="size is unknown.*1000 steps"):
        optimizer = make_run_optimizer(config, None)
    assert optimizer._learning_rate.total_steps == UNKNOWN_EPOCH_STEPS * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_run_optimizer(config, 7)._learning_rate.total_steps == 21
