"""What a training step keeps between its forward and backward passes.

`_attention_core.attend`, `_gelu.gelu`, `_gelu.gelu_dense` and
`_norm_dense.project` compute the same functions as the plain ops with
backward passes that keep less: these tests hold the gradients to automatic
differentiation's, and read a training step's graph to check that no
`(B, heads, T, T)` attention tensor, no extra MLP-wide GELU tensor and no
LayerNorm output is kept for the backward pass, and that what the backward
pass recomputes is computed there (after the loss), and not merged with the
forward pass's by XLA.
"""

import contextlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import keras_vit
from keras_vit.layers import _attention_core
from keras_vit.layers import _gelu
from keras_vit.layers import _norm_dense
from keras_vit.layers import kernels
from tests.helpers import randomize_weights
from tests.helpers import xla_kernel_op_kinds


def _plain_attention(query, key, value):
    weights = ops.softmax(ops.matmul(query, key), axis=-1)
    outputs = ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3))
    return outputs, weights  # outputs in token order: (B, T, heads, d)


def _attend_and_weights(query, key, value, step_xla=None):
    # What the attention layer computes in training.
    return (
        _attention_core.attend(query, key, value, step_xla),
        _attention_core.probabilities(query, key),
    )


def _gradients(fn, inputs, cotangents):
    inputs = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = fn(*inputs)
        loss = sum(
            tf.reduce_sum(tf.cast(o, "float32") * c)
            for o, c in zip(outputs, cotangents)
            if c is not None
        )
    return outputs, tape.gradient(loss, inputs)


@pytest.mark.parametrize("xla", [None, True])
@pytest.mark.parametrize("through_weights", [False, True])
def test_attention_gradients_equal_autodiff(through_weights, xla):
    # Both row terms: from the outputs (a step not known to run under
    # XLA) and from the probabilities (one said to).
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 3, 7, 4)).astype("float32")
    key = rng.normal(size=(2, 3, 4, 7)).astype("float32")
    value = rng.normal(size=(2, 3, 7, 4)).astype("float32")
    cotangents = [
        rng.normal(size=(2, 7, 3, 4)).astype("float32"),
        rng.normal(size=(2, 3, 7, 7)).astype("float32")
        if through_weights
        else None,
    ]
    inputs = (query, key, value)
    want, want_grads = _gradients(_plain_attention, inputs, cotangents)
    got, got_grads = _gradients(
        lambda *x: _attend_and_weights(*x, step_xla=xla), inputs, cotangents
    )
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(got_grads, want_grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "softmax, row_from_outputs",
    [("float32", True), ("bfloat16", True), ("float32", False)],
)
def test_attention_gradients_in_bfloat16_are_as_accurate_as_autodiff(
    softmax, row_from_outputs, monkeypatch
):
    # The backward pass works in bfloat16 over (B, heads, T, T) and takes
    # its row term from the outputs (or, under XLA, from the float32
    # product of the probabilities and their gradient): its gradients must
    # be as close to the exact ones (float64) as automatic differentiation
    # of the plain bfloat16 graph (a float32 softmax between bfloat16
    # matmuls) is; also with the softmax in bfloat16, where it keeps
    # float32 precision.
    if softmax == "bfloat16" and not _attention_core._keeps_float32(softmax):
        pytest.skip("this CPU's bfloat16 softmax is not float32-precise")
    monkeypatch.setattr(_attention_core, "softmax_dtype", lambda *_: softmax)
    monkeypatch.setattr(
        _attention_core, "row_from_outputs", lambda _: row_from_outputs
    )
    rng = np.random.default_rng(2)
    shapes = ((2, 3, 65, 16), (2, 3, 16, 65), (2, 3, 65, 16))
    inputs = [rng.normal(size=s) * 1.5 for s in shapes]
    cotangent = rng.normal(size=(2, 65, 3, 16))

    def plain_bfloat16(query, key, value):
        weights = _attention_core.probabilities(query, key)
        weights = ops.cast(weights, "bfloat16")
        return (ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3)),)

    exact = _gradients_in(
        lambda *x: (_plain_attention(*x)[0],), inputs, cotangent, "float64"
    )
    plain = _gradients_in(plain_bfloat16, inputs, cotangent, "bfloat16")
    got = _gradients_in(
        lambda *x: (_attention_core.attend(*x),), inputs, cotangent, "bfloat16"
    )
    for name, e, p, g in zip("qkv", exact, plain, got):
        e = e.numpy()
        scale = np.abs(e).max()
        plain_error = np.abs(p.numpy().astype("float64") - e).max() / scale
        error = np.abs(g.numpy().astype("float64") - e).max() / scale
        assert error <= 1.25 * plain_error, (name, error, plain_error)


def _gradients_in(fn, inputs, cotangent, dtype):
    inputs = [tf.constant(x, dtype) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        (outputs,) = fn(*inputs)
        loss = tf.reduce_sum(
            tf.cast(outputs, "float64") * tf.constant(cotangent, "float64")
        )
    return tape.gradient(loss, inputs)


def test_attention_in_bfloat16_keeps_a_float32_softmax():
    rng = np.random.default_rng(1)
    inputs = [
        tf.constant(rng.normal(size=s), "bfloat16")
        for s in ((1, 2, 5, 4), (1, 2, 4, 5), (1, 2, 5, 4))
    ]
    outputs, weights = _attend_and_weights(*inputs)
    assert outputs.dtype == "bfloat16" and weights.dtype == "float32"
    np.testing.assert_allclose(np.sum(weights, axis=-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gelu_dense_gradients_equal_autodiff(dtype):
    rng = np.random.default_rng(0)
    inputs = [
        rng.normal(size=shape).astype("float32")
        for shape in ((5, 6), (6, 4), (4,))
    ]
    cotangents = [rng.normal(size=(5, 4)).astype("float32")]

    def plain(x, kernel, bias):
        return (ops.matmul(ops.gelu(x, approximate=False), kernel) + bias,)

    def fused(x, kernel, bias):
        return (_gelu.gelu_dense(x, kernel, bias),)

    def cast(fn):
        return lambda *args: fn(*(tf.cast(a, dtype) for a in args))

    want, want_grads = _gradients(cast(plain), inputs, cotangents)
    got, got_grads = _gradients(cast(fused), inputs, cotangents)
    assert got[0].dtype == dtype
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(
        tf.cast(got[0], "float32"),
        tf.cast(want[0], "float32"),
        rtol=tolerance,
        atol=tolerance,
    )
    for a, b in zip(got_grads, want_grads):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_norm_dense_equals_the_two_layers(dtype):
    rng = np.random.default_rng(3)
    norm = keras_vit.layers.LayerNorm(dtype=dtype)
    dense = keras.layers.Dense(5, dtype=dtype)
    norm.build((None, 8))
    dense.build((None, 8))
    assert _norm_dense.fuses(norm, dense, True)  # the fused function below
    norm.gamma.assign(rng.normal(size=8))
    norm.beta.assign(rng.normal(size=8))
    dense.bias.assign(rng.normal(size=5))
    rows = tf.cast(rng.normal(3.0, 2.0, size=(6, 8)), norm.compute_dtype)
    cotangent = rng.normal(size=(6, 5)).astype("float32")
    weights = norm.trainable_variables + dense.trainable_variables
    results = []
    for fn in (
        lambda: dense(norm(rows)),
        lambda: _norm_dense.project(norm, dense, rows, True),
    ):
        with tf.GradientTape() as tape:
            tape.watch(rows)
            out = fn()
            loss = tf.reduce_sum(tf.cast(out, "float32") * cotangent)
        results.append([out, *tape.gradient(loss, [rows, *weights])])
    (want, *want_grads), (got, *got_grads) = results
    assert got.dtype == want.dtype == dense.compute_dtype
    # The same function, the LayerNorm compiled by XLA (`_fused`), whose
    # sums round otherwise: equal to float32 rounding (or one bfloat16
    # step, where a float32 value lands either side of a rounding).
    tolerance = 1e-5 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(
        tf.cast(got, "float32"),
        tf.cast(want, "float32"),
        rtol=tolerance,
        atol=tolerance,
    )
    for a, b in zip(got_grads, want_grads):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(
            tf.cast(a, "float32"),
            tf.cast(b, "float32"),
            rtol=tolerance,
            atol=tolerance,
        )


def test_norm_dense_is_for_plain_dense_layers_in_training():
    norm = keras_vit.layers.LayerNorm()

    def built(**kwargs):
        dense = keras.layers.Dense(4, **kwargs)
        dense.build((None, 8))
        return dense

    dense = built()
    assert _norm_dense.fuses(norm, dense, True)
    assert not _norm_dense.fuses(norm, dense, False)
    assert not _norm_dense.fuses(norm, built(use_bias=False), True)
    assert not _norm_dense.fuses(norm, built(activation="relu"), True)
    dense.enable_lora(2)
    assert not _norm_dense.fuses(norm, dense, True)


def test_norm_dense_bias_gradient_of_bfloat16_sums_in_float32():
    # Summed in bfloat16 steps, 4096 ones would stop at 256 (bfloat16 holds
    # integers exactly only up to 256): the gradient is the float32 sum.
    norm = keras_vit.layers.LayerNorm(dtype="mixed_bfloat16")
    dense = keras.layers.Dense(2, dtype="mixed_bfloat16")
    norm.build((None, 4))
    dense.build((None, 4))
    rows = tf.cast(tf.random.normal((4096, 4), seed=0), "bfloat16")
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(_norm_dense.project(norm, dense, rows, True))
    np.testing.assert_array_equal(tape.gradient(loss, dense.bias), [4096] * 2)


def test_gelu_value_and_gradient_equal_the_exact_gelu():
    x = np.linspace(-6, 6, 97).astype("float32").reshape(1, -1)
    cotangent = np.random.default_rng(2).normal(size=x.shape).astype("float32")
    exact = lambda t: (ops.gelu(t, approximate=False),)  # noqa: E731
    want, (want_grad,) = _gradients(exact, (x,), [cotangent])
    got, (got_grad,) = _gradients(lambda t: (_gelu.gelu(t),), (x,), [cotangent])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-6)


def test_gelu_derivative_of_bfloat16_is_float32():
    # TensorFlow's bfloat16 erf and exp on the CPU are slow: the backward
    # pass casts x up once and computes the derivative in float32.
    x = np.linspace(-6, 6, 97).astype("float32").reshape(1, -1)

    @tf.function
    def gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = _gelu.gelu(t)
        return tape.gradient(y, t)

    low = tf.constant(x, "bfloat16")
    dtypes = _op_dtypes(gradient.get_concrete_function(low), ("Erf", "Exp"))
    assert dtypes == {"float32"}, dtypes
    got = gradient(low)
    assert got.dtype == "bfloat16"
    np.testing.assert_allclose(
        tf.cast(got, "float32"), gradient(tf.constant(x)), rtol=1e-2, atol=1e-2
    )


def _op_dtypes(function, kinds):
    """The dtypes of a concrete function's ops of types `kinds`, in its
    graph or in the functions it calls (`_fused.elementwise`'s)."""
    graph_def = function.graph.as_graph_def()
    nodes = list(graph_def.node)
    for called in graph_def.library.function:
        nodes += called.node_def
    return {
        tf.dtypes.as_dtype(node.attr["T"].type).name
        for node in nodes
        if node.op in kinds
    }


def _called_op_types(graph):
    """`{function name: op types it runs}` for the functions `graph`'s ops
    call, counting the functions those call."""
    library = {
        f.signature.name: f for f in graph.as_graph_def().library.function
    }

    def types(name, seen=()):
        found = set()
        for node in library[name].node_def:
            found.add(node.op)
            if "f" in node.attr and node.attr["f"].func.name in library:
                if node.attr["f"].func.name not in seen:
                    found |= types(node.attr["f"].func.name, (*seen, name))
        return found

    return {name: types(name) for name in library}


def _runs(op, kind, called):
    """Whether `op` is an op of type `kind` or calls a function running
    one (`called`: `_called_op_types`)."""
    if op.type == kind:
        return True
    try:
        name = op.get_attr("f").name
    except ValueError:
        return False
    return kind in called.get(name, ())


@pytest.mark.parametrize("fn", ["gelu", "gelu_dense"])
def test_training_gelu_of_bfloat16_runs_in_float32(fn):
    # A bfloat16 erfc is several times slower on the CPU than float32 erf.
    x = tf.constant(np.linspace(-4, 4, 24).reshape(4, 6), "bfloat16")
    kernel = tf.ones((6, 3), "bfloat16")
    bias = tf.zeros((3,), "bfloat16")

    @tf.function
    def forward_and_back(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if fn == "gelu":
                y = _gelu.gelu(x)
            else:
                y = _gelu.gelu_dense(x, kernel, bias)
        return y, tape.gradient(y, x)

    function = forward_and_back.get_concrete_function(x)
    dtypes = _op_dtypes(function, ("Erf", "Erfc"))
    assert dtypes == {"float32"}, dtypes
    y, _ = forward_and_back(x)
    want = ops.gelu(tf.cast(x, "float32"), approximate=False)
    if fn == "gelu_dense":
        want = tf.reduce_sum(want, axis=1, keepdims=True) * tf.ones((1, 3))
    np.testing.assert_allclose(
        tf.cast(y, "float32"), want, rtol=2e-2, atol=2e-2
    )


def _tiny_model(**kwargs):
    return keras_vit.ViT(
        image_size=16,
        patch_size=4,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        mlp_dim=40,
        num_classes=3,
        **kwargs,
    )


def _training_step_graph(model, images):
    """The graph of a training step, and how many of its ops (the first
    ones) are the forward pass's."""
    labels = tf.zeros((images.shape[0],), "int32")
    forward, losses = [], []

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(
                tf.keras.losses.sparse_categorical_crossentropy(y, logits)
            )
        forward.append(len(tf.compat.v1.get_default_graph().get_operations()))
        losses.append(loss.op.name)
        # An explicit seed, made from the loss: every op of the backward
        # pass that waits for the upstream gradient descends from the loss.
        seed = tf.raw_ops.OnesLike(x=loss)
        return tape.gradient(loss, model.trainable_variables, seed)

    graph = step.get_concrete_function(images, labels).graph
    return graph, forward[-1], graph.get_operation_by_name(losses[-1])


def test_a_training_step_makes_no_extra_attention_matrix_ops():
    # Without XLA every elementwise op over the (B, heads, T, T) logits is
    # a kernel of its own: the softmax is one op (no log-sum-exp's exp and
    # subtractions), and no zero cotangent is made and added for weights
    # that nothing reads.
    graph, _, _ = _training_step_graph(_tiny_model(), tf.zeros((2, 16, 16, 3)))
    square = [
        op.type
        for op in graph.get_operations()
        for t in op.outputs
        if t.shape.rank and tuple(t.shape.as_list()[-2:]) == (17, 17)
    ]
    assert "Softmax" in square
    for kind in ("Exp", "Fill", "ZerosLike", "AddV2"):
        assert kind not in square, square


def test_the_elementwise_chains_are_compiled_by_xla_in_a_training_step():
    # `_fused.elementwise`: the GELU's, the LayerNorm's and the softmax
    # gradient's chains are functions XLA must compile, not loose ops.
    graph, _, _ = _training_step_graph(_tiny_model(), tf.zeros((2, 16, 16, 3)))
    compiled = xla_kernel_op_kinds(graph)
    for kinds in ({"Erf"}, {"Rsqrt"}, {"Sub", "Mul"}):
        assert any(kinds <= ops_run for ops_run in compiled), kinds
    # (The encoder's last LayerNorm, which feeds no Dense, is the plain
    # layer's own ops.)
    assert "Erf" not in {op.type for op in graph.get_operations()}


def _kept_tensors(model, images):
    """The forward tensors a training step's gradient reads."""
    graph, forward, _ = _training_step_graph(model, images)
    operations = graph.get_operations()
    backward = {op.name for op in operations[forward:]}
    return [
        tensor
        for op in operations[:forward]
        for tensor in op.outputs
        if tensor.shape.rank
        and any(c.name in backward for c in tensor.consumers())
    ]


def _kept_for_backward(model, images):
    """Op types and shapes of the forward tensors a training step's
    gradient reads."""
    return [
        (t.op.type, tuple(t.shape.as_list()))
        for t in _kept_tensors(model, images)
    ]


@pytest.mark.parametrize("attention_dropout_rate", [0.0, 0.1])
def test_a_training_step_keeps_no_attention_matrix(attention_dropout_rate):
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        mlp_dim=40,
        num_classes=3,
        attention_dropout_rate=attention_dropout_rate,
    )
    kept = _kept_for_backward(model, tf.zeros((2, 16, 16, 3)))
    square = [k for k in kept if k[1][-2:] == (17, 17)]  # T x T, T = 17
    mlp_wide = [k for k in kept if k[1][-1] == 40 and k[0] != "ReadVariableOp"]
    if attention_dropout_rate:
        # Dropout's mask must be kept: the plain graph, which keeps them.
        assert square
    else:
        assert not square, square
    # Per block: the GELU's input alone (`gelu_dense` recomputes its
    # output, mlp_fc2's input).
    assert len(mlp_wide) == 2, mlp_wide


def test_the_attention_keeps_its_outputs_in_the_projections_buffer():
    # The backward pass's row term reads the attention's outputs: kept in
    # token order, they are the buffer that, through the custom gradient's
    # IdentityN and a reshape (aliases both), is the output projection's
    # input, which the projection's kernel gradient keeps anyway.
    kept = _kept_tensors(_tiny_model(), tf.zeros((2, 16, 16, 3)))
    (outputs,) = [t for t in kept if tuple(t.shape.as_list()) == (2, 17, 2, 8)]
    aliases = [
        t
        for t in kept
        if t.op.type == "Reshape"
        and t.op.inputs[0].op.type == "IdentityN"
        and outputs in list(t.op.inputs[0].op.inputs)
    ]
    assert [tuple(t.shape.as_list()) for t in aliases] == [(2 * 17, 16)]
    assert "MatMul" in {c.type for c in aliases[0].consumers()}


def test_under_xla_the_attention_keeps_no_second_copy_of_its_outputs():
    # XLA would fuse the token-order transpose into the row term's
    # reduction and keep the matmul's (B, heads, T, d) result as well as
    # the projection's input: in a step said to run under XLA the row
    # term does not read the (B, T, heads, d) outputs; only the projection
    # keeps its (B·T, D) input.
    def kept_outputs(xla=None):
        model = _tiny_model()
        said = (
            contextlib.nullcontext()
            if xla is None
            else kernels.compiled_step(model, xla)
        )
        with said:
            kept = _kept_for_backward(model, tf.zeros((2, 16, 16, 3)))
        return [op for op, shape in kept if shape == (2, 17, 2, 8)]

    assert kept_outputs() == ["Transpose"]  # without XLA: the one buffer
    assert kept_outputs(xla=True) == []
    assert kept_outputs(xla=False) == ["Transpose"]


def test_a_training_step_keeps_no_layer_norm_output(monkeypatch):
    # The kept float32 (B·T, D) or (B, T, D) tensors (T = 17, D = 16) of a
    # one-block model, by the op that makes them.
    def kept_rows(model):
        kept = _kept_for_backward(model, tf.zeros((2, 16, 16, 3)))
        rows = {(2 * 17, 16), (2, 17, 16)}
        return sorted(op for op, shape in kept if shape in rows)

    # Fused: the rows into norm1 and into norm2, the projection's input,
    # and the final (unfused) LayerNorm's normalised tokens (a Mul and its
    # custom gradient's alias, one buffer).
    assert kept_rows(_tiny_model()) == ["IdentityN", "Mul"] + ["Reshape"] * 3
    # Op by op, each of the block's LayerNorms keeps its normalised rows
    # (aliased) and its output instead of its input: two more tensors each.
    monkeypatch.setattr(_norm_dense, "fuses", lambda *args: False)
    assert len(kept_rows(_tiny_model())) == 5 + 2 * 2


def test_a_fused_training_step_has_the_plain_gradients(monkeypatch):
    # Random weights (a fresh ViT's zero head would pass no gradient back)
    # and a random cotangent of the logits: every gradient is non-trivial.
    model = _tiny_model(classifier_activation=None)
    randomize_weights(model)
    images = tf.random.uniform((2, 16, 16, 3), 0, 255, seed=1)
    cotangent = tf.random.normal((2, 3), seed=2)
    fused_calls = []
    fused_function = _norm_dense._norm_dense

    def counted(epsilon):
        fused_calls.append(epsilon)
        return fused_function(epsilon)

    monkeypatch.setattr(_norm_dense, "_norm_dense", counted)

    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(images, training=True) * cotangent)
        return tape.gradient(loss, model.trainable_variables)

    fused = gradients()
    assert len(fused_calls) == 2  # norm1 -> qkv and norm2 -> mlp_fc1
    monkeypatch.setattr(_norm_dense, "fuses", lambda *args: False)
    plain = gradients()
    assert len(fused_calls) == 2
    for a, b, v in zip(fused, plain, model.trainable_variables):
        assert np.abs(b).max() > 1e-4, v.path
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=v.path)


def test_recomputations_wait_for_the_upstream_gradient():
    # TensorFlow's executor runs an op once its inputs exist: a backward
    # op computed from forward tensors alone would run, and its result be
    # kept, in the forward pass.
    graph, forward, loss = _training_step_graph(
        _tiny_model(), tf.zeros((2, 16, 16, 3))
    )
    after_loss, frontier = set(), [loss]
    while frontier:
        op = frontier.pop()
        for tensor in op.outputs:
            for consumer in tensor.consumers():
                if consumer.name not in after_loss:
                    after_loss.add(consumer.name)
                    frontier.append(consumer)
    operations = graph.get_operations()
    # `_norm_dense`'s backward pass reads the forward rows and each row's
    # statistics only once the upstream gradient exists.
    rows = {(2 * 17, 16), (2 * 17, 1)}
    early = [
        op.name
        for op in operations[forward:]
        if any(
            t.op in operations[:forward] and tuple(t.shape.as_list()) in rows
            for t in op.inputs
            if t.shape.rank
        )
        and op.name not in after_loss
    ]
    assert not early, early
    called = _called_op_types(graph)
    for kind in ("Softmax", "Erf"):  # the probabilities, the GELU
        found = [op for op in operations[forward:] if _runs(op, kind, called)]
        assert found, kind  # recomputed in the backward pass
        early = [op.name for op in found if op.name not in after_loss]
        assert not early, early


def test_xla_keeps_the_recomputed_softmax_apart():
    # XLA merges common subexpressions: a recomputation of the forward
    # pass's softmax from the same tensors would become the forward's,
    # whose probabilities would then be kept for the backward pass.
    model = _tiny_model()

    @tf.function(jit_compile=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(
                tf.keras.losses.sparse_categorical_crossentropy(y, logits)
            )
        return tape.gradient(loss, model.trainable_variables)

    hlo = step.experimental_get_compiler_ir(
        tf.zeros((2, 16, 16, 3)), tf.zeros((2,), "int32")
    )(stage="optimized_hlo")
    exps = re.findall(r"f32\[2,2,17,17\]\S* exponential\(", hlo)
    assert len(exps) == 2, exps  # the forward's softmax and the backward's
