"""A plain NumPy ViT forward pass, written from the paper's equations.

It shares no code with keras_vit: tests compare keras_vit's layers and
model against it with random weights.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return (
        0.5
        * x
        * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    )


def quick_gelu(x):
    return x / (1.0 + np.exp(-1.702 * x))


def silu(x):
    return x / (1.0 + np.exp(-x))


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "quick_gelu": quick_gelu,
    "silu": silu,
}


def layer_norm(x, gamma, beta, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def patches(images, p):
    """Patch by patch, in row-major order, each flattened (row, col, ch)."""
    b, h, w, c = images.shape
    out = []
    for i in range(h // p):
        for j in range(w // p):
            out.append(
                images[:, i * p : (i + 1) * p, j * p : (j + 1) * p, :].reshape(
                    b, -1
                )
            )
    return np.stack(out, axis=1)


def rope_angles(rows, cols, head_dim, theta):
    """DINOv3's rotary angles, `(rows * cols, head_dim / 2)`: for the patch
    at row i, column j, its centre normalised to [-1, 1] on each axis,
    `y = (i + 0.5) / rows * 2 - 1`, `x` alike; angle `k` of `head_dim / 4`
    is `2 pi y / theta ** (4k / head_dim)`, then the same of `x`."""
    quarter = head_dim // 4
    angles = np.zeros((rows * cols, 2 * quarter))
    for i in range(rows):
        for j in range(cols):
            y = (i + 0.5) / rows * 2 - 1
            x = (j + 0.5) / cols * 2 - 1
            for k in range(quarter):
                period = theta ** (4 * k / head_dim)
                angles[i * cols + j, k] = 2 * math.pi * y / period
                angles[i * cols + j, quarter + k] = 2 * math.pi * x / period
    return angles


def rotate(v, angles, prefix):
    """Rotates the `(B, heads, T, d)` queries or keys of the tokens after
    the first `prefix`: each pair `(v[m], v[m + d/2])` by `angles[:, m]`."""
    v = v.copy()
    half = v.shape[-1] // 2
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = v[..., prefix:, :half].copy(), v[..., prefix:, half:].copy()
    v[..., prefix:, :half] = a * cos - b * sin
    v[..., prefix:, half:] = b * cos + a * sin
    return v


def attention(x, w, num_heads):
    """`w`: qkv kernel (D, 3D) / bias, proj kernel / bias, and optionally
    `relative`: `(2T - 1, D)` embeddings of the offsets `p_q - p_k`, from
    `-(T - 1)` to `T - 1`, each head reading its own `D / heads` columns."""
    b, t, d = x.shape
    hd = d // num_heads
    qkv = x @ w["qkv_kernel"]
    if w.get("qkv_bias") is not None:
        qkv = qkv + w["qkv_bias"]
    q, k, v = (qkv[..., i * d : (i + 1) * d] for i in range(3))

    def heads(a):
        return a.reshape(b, t, num_heads, hd).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    if w.get("q_norm") is not None:  # QK-norm: over each head's width
        q = layer_norm(q, *w["q_norm"], w.get("eps", 1e-6))
        k = layer_norm(k, *w["k_norm"], w.get("eps", 1e-6))
    if w.get("rope") is not None:  # (angles, prefix tokens)
        q, k = rotate(q, *w["rope"]), rotate(k, *w["rope"])
    logits = q @ k.transpose(0, 1, 3, 2)
    if w.get("relative") is not None:
        # The paper's relative attention (App. D.4): the query against the
        # embedding of its offset to each key, added to the content logits.
        rel = w["relative"]
        for h in range(num_heads):
            for i in range(t):
                for j in range(t):
                    r = rel[(i - j) + (t - 1), h * hd : (h + 1) * hd]
                    logits[:, h, i, j] += q[:, h, i] @ r
    weights = softmax(logits / math.sqrt(hd))
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return out @ w["proj_kernel"] + w["proj_bias"], weights


def block(x, w, num_heads, eps=1e-6, activation="gelu"):
    """`w` as `block_weights` gives; `ls1` / `ls2` (LayerScale) optional."""
    y, weights = attention(
        layer_norm(x, w["ln1_gamma"], w["ln1_beta"], eps),
        {**w, "eps": eps},
        num_heads,
    )
    if w.get("ls1") is not None:
        y = y * w["ls1"]
    x = x + y
    y = layer_norm(x, w["ln2_gamma"], w["ln2_beta"], eps)
    y = y @ w["fc1_kernel"] + w["fc1_bias"]
    if y.shape[-1] == 2 * w["fc2_kernel"].shape[0]:  # gated: gate first
        gate, y = np.split(y, 2, axis=-1)
        y = ACTIVATIONS[activation](gate) * y
    else:
        y = ACTIVATIONS[activation](y)
    y = y @ w["fc2_kernel"] + w["fc2_bias"]
    if w.get("ls2") is not None:
        y = y * w["ls2"]
    return x + y, weights


def map_head(x, layer, num_heads, eps=1e-6, activation="gelu"):
    """Multihead attention pooling (big_vision's MAPHead) of `(B, T, D)`
    tokens by a keras_vit AttentionPooling `layer`'s weights."""

    def dense(name, a):
        sub = getattr(layer, name)
        return a @ sub.kernel.numpy() + sub.bias.numpy()

    b, t, d = x.shape
    hd = d // num_heads
    probe = layer.probe.numpy().reshape(1, d)
    q = dense("query", probe).reshape(num_heads, hd)
    kv = dense("key_value", x)
    k = kv[..., :d].reshape(b, t, num_heads, hd)
    v = kv[..., d:].reshape(b, t, num_heads, hd)
    weights = softmax(np.einsum("hc,bthc->bht", q, k) / math.sqrt(hd))
    out = np.einsum("bht,bthc->bhc", weights, v).reshape(b, d)
    out = dense("proj", out)
    y = layer_norm(out, layer.norm.gamma.numpy(), layer.norm.beta.numpy(), eps)
    y = dense("mlp_fc2", ACTIVATIONS[activation](dense("mlp_fc1", y)))
    return out + y, weights


def block_weights(layer):
    """The weights of a keras_vit TransformerBlock, by meaning."""

    def get(sublayer, suffix):
        return next(
            v.numpy() for v in sublayer.weights if v.path.endswith(suffix)
        )

    a = layer.attention
    return {
        "ln1_gamma": get(layer.norm1, "gamma"),
        "ln1_beta": get(layer.norm1, "beta"),
        "qkv_kernel": get(a.qkv, "kernel"),
        "qkv_bias": get(a.qkv, "bias") if a.qkv_bias else None,
        "proj_kernel": get(a.proj, "kernel"),
        "proj_bias": get(a.proj, "bias"),
        "ln2_gamma": get(layer.norm2, "gamma"),
        "ln2_beta": get(layer.norm2, "beta"),
        "fc1_kernel": get(layer.mlp_fc1, "kernel"),
        "fc1_bias": get(layer.mlp_fc1, "bias"),
        "fc2_kernel": get(layer.mlp_fc2, "kernel"),
        "fc2_bias": get(layer.mlp_fc2, "bias"),
        "relative": (
            get(a, "relative_position_embedding")
            if layer.relative_positions
            else None
        ),
        "q_norm": (
            (get(a.q_norm, "gamma"), get(a.q_norm, "beta"))
            if layer.qk_norm
            else None
        ),
        "k_norm": (
            (get(a.k_norm, "gamma"), get(a.k_norm, "beta"))
            if layer.qk_norm
            else None
        ),
        "ls1": (get(layer.ls1, "gamma") if layer.layer_scale_init else None),
        "ls2": (get(layer.ls2, "gamma") if layer.layer_scale_init else None),
    }


def vit(images, model):
    """The forward pass of a keras_vit.ViT `model`, recomputed in NumPy."""
    x = images.astype("float64")
    if model.include_preprocessing and model.normalization is None:
        x = x / 127.5 - 1.0
    elif model.include_preprocessing:  # a preset's mean and std
        norm = model.normalization
        x = (x / 255.0 - np.array(norm["mean"])) / np.array(norm["std"])
    rows, cols = (side // model.patch_size for side in x.shape[1:3])
    x = patches(x, model.patch_size)
    enc = model.get_layer("patch_encoder")
    x = x @ enc.projection.kernel.numpy()
    if model.patch_bias:
        x = x + enc.projection.bias.numpy()
    learned = model.position_embedding == "learned"
    if learned and model.position_embedding_tokens == "patches":
        x = x + enc.pos_embedding.numpy()  # (DINOv2's, DeiT III's)
    # [class, registers..., patches], timm's order.
    prefix = []
    if model.class_token:
        prefix.append(enc.cls.numpy())
    if model.distillation:  # DeiT's, after the class token
        prefix.append(enc.dist.numpy())
    if model.num_register_tokens:
        prefix.append(enc.registers.numpy())
    prefix = [np.broadcast_to(p, (x.shape[0], *p.shape[1:])) for p in prefix]
    x = np.concatenate([*prefix, x], axis=1)
    if learned and model.position_embedding_tokens == "all":
        x = x + enc.pos_embedding.numpy()
    eps = model.layer_norm_epsilon

    def norm(x, name):
        layer = model.get_layer(name)
        return layer_norm(x, layer.gamma.numpy(), layer.beta.numpy(), eps)

    if model.norm_pre:
        x = norm(x, "norm_pre")
    for i in range(model.num_layers):
        layer = model.get_layer(f"block_{i}")
        w = block_weights(layer)
        if model.position_embedding == "rope":
            head_dim = model.hidden_dim // model.num_heads
            angles = rope_angles(rows, cols, head_dim, model.rope_theta)
            w["rope"] = (angles, model.num_prefix_tokens)
        x, _ = block(x, w, model.num_heads, eps, model.activation)
    if not model.fc_norm:
        x = norm(x, "encoder_norm")
    if model.distillation and model.pooling == "token":
        cls, dist = x[:, 0], x[:, 1]
        if not model.include_top:
            return (cls + dist) / 2
        head, head_dist = model.get_layer("head"), model.get_layer("head_dist")
        x = (
            cls @ head.kernel.numpy()
            + head.bias.numpy()
            + dist @ head_dist.kernel.numpy()
            + head_dist.bias.numpy()
        ) / 2
        return softmax(x) if model.classifier_activation == "softmax" else x
    if model.pooling == "map":
        if not model.pool_include_prefix:  # timm's pool_include_prefix
            x = x[:, model.num_prefix_tokens :]
        x, _ = map_head(
            x,
            model.get_layer("pooling"),
            model.num_heads,
            eps,
            model.activation,
        )
    elif model.pooling == "token":
        x = x[:, 0]
    elif model.pooling == "gap":
        x = x[:, model.num_prefix_tokens :].mean(1)
    if model.fc_norm:
        x = norm(x, "fc_norm")
    if not model.include_top:
        return x
    if model.representation_size:
        pre = model.get_layer("pre_logits")
        x = np.tanh(x @ pre.kernel.numpy() + pre.bias.numpy())
    head = model.get_layer("head")
    x = x @ head.kernel.numpy() + head.bias.numpy()
    if model.classifier_activation == "softmax":
        x = softmax(x)
    return x
