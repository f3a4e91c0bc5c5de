"""big_vision's class-token `.npz` files (`pool_type="tok"`, as its DeiT
III files), against a NumPy forward pass of big_vision's `vit.py`; and
SigLIP's two-tower files (`pool_type="map"`, below), against timm's
outputs.

big_vision's `_Model.__call__` adds `pos_embedding` (1, N, D) to the
patches and then prepends `cls`: the file's position embeddings cover the
patches only. Its old `vit.py` prepended `cls` first (1 + N entries), which
its `fix_old_checkpoints` undoes by adding the first entry to `cls`. The
reference below is written from that code, on the file's own arrays; it
shares nothing with keras_vit's reader. big_vision's MLP uses flax's
`nn.gelu`, tanh-approximated (keras_vit's `activation="gelu_tanh"`), and
flax's LayerNorm epsilon 1e-6.
"""

import numpy as np
import pytest

import keras_vit
from keras_vit.weights import convert
from keras_vit.weights import read_checkpoint
from tests import reference
from tests.weights.test_golden_parity import expected as golden_arrays
from tests.weights.test_golden_parity import golden

P, D, HEADS, MLP, LAYERS, CLASSES = 8, 16, 2, 32, 2, 5
MHA = "MultiHeadDotProductAttention_0"


def _weights(grid, old=False, seed=0):
    """Random big_vision ViT weights (unprefixed names, one entry per
    block), `pool_type="tok"`, on a `grid` of patches; `old`: the old
    layout, with an entry for the class token."""
    rng = np.random.default_rng(seed)

    def r(*shape, scale=0.3):
        return (rng.normal(size=shape) * scale).astype("float32")

    a = {
        "embedding/kernel": r(P, P, 3, D, scale=0.05),
        "embedding/bias": r(D),
        "cls": r(1, 1, D),
        "pos_embedding": r(1, int(old) + grid[0] * grid[1], D),
        "Transformer/encoder_norm/scale": 1 + r(D),
        "Transformer/encoder_norm/bias": r(D),
        "head/kernel": r(D, CLASSES),
        "head/bias": r(CLASSES),
    }
    for i in range(LAYERS):
        block = f"Transformer/encoderblock_{i}"
        for norm in ("LayerNorm_0", "LayerNorm_1"):
            a[f"{block}/{norm}/scale"] = 1 + r(D)
            a[f"{block}/{norm}/bias"] = r(D)
        for part in ("query", "key", "value"):
            a[f"{block}/{MHA}/{part}/kernel"] = r(D, HEADS, D // HEADS)
            a[f"{block}/{MHA}/{part}/bias"] = r(HEADS, D // HEADS)
        a[f"{block}/{MHA}/out/kernel"] = r(HEADS, D // HEADS, D)
        a[f"{block}/{MHA}/out/bias"] = r(D)
        a[f"{block}/MlpBlock_0/Dense_0/kernel"] = r(D, MLP)
        a[f"{block}/MlpBlock_0/Dense_0/bias"] = r(MLP)
        a[f"{block}/MlpBlock_0/Dense_1/kernel"] = r(MLP, D)
        a[f"{block}/MlpBlock_0/Dense_1/bias"] = r(D)
    return a


def _scanned(a):
    """The weights as big_vision's `scan=True` writes them: one
    `Transformer/encoderblock/...` tensor per weight, stacked on depth."""
    out = {k: v for k, v in a.items() if "encoderblock_" not in k}
    for key in a:
        if key.startswith("Transformer/encoderblock_0/"):
            rest = key[len("Transformer/encoderblock_0/") :]
            out[f"Transformer/encoderblock/{rest}"] = np.stack(
                [a[f"Transformer/encoderblock_{i}/{rest}"] for i in range(2)]
            )
    return out


def _save(tmp_path, a, scan=False, name="bv.npz"):
    path = str(tmp_path / name)
    np.savez(
        path,
        **{"params/" + k: v for k, v in (_scanned(a) if scan else a).items()},
    )
    return path


def _block(a, i):
    """Block `i` of the file as `reference.block` takes it."""
    b = f"Transformer/encoderblock_{i}"
    return {
        "ln1_gamma": a[f"{b}/LayerNorm_0/scale"],
        "ln1_beta": a[f"{b}/LayerNorm_0/bias"],
        "qkv_kernel": np.concatenate(
            [
                a[f"{b}/{MHA}/{p}/kernel"].reshape(D, D)
                for p in "query key value".split()
            ],
            axis=1,
        ),
        "qkv_bias": np.concatenate(
            [
                a[f"{b}/{MHA}/{p}/bias"].reshape(D)
                for p in "query key value".split()
            ]
        ),
        "proj_kernel": a[f"{b}/{MHA}/out/kernel"].reshape(D, D),
        "proj_bias": a[f"{b}/{MHA}/out/bias"],
        "ln2_gamma": a[f"{b}/LayerNorm_1/scale"],
        "ln2_beta": a[f"{b}/LayerNorm_1/bias"],
        "fc1_kernel": a[f"{b}/MlpBlock_0/Dense_0/kernel"],
        "fc1_bias": a[f"{b}/MlpBlock_0/Dense_0/bias"],
        "fc2_kernel": a[f"{b}/MlpBlock_0/Dense_1/kernel"],
        "fc2_bias": a[f"{b}/MlpBlock_0/Dense_1/bias"],
    }


def big_vision_logits(a, images, old=False):
    """big_vision's `vit.py` forward pass, `pool_type="tok"`, in NumPy."""
    x = reference.patches(images.astype("float64") / 127.5 - 1, P)
    x = x @ a["embedding/kernel"].reshape(-1, D) + a["embedding/bias"]
    cls, posemb = a["cls"], a["pos_embedding"]
    if old:  # fix_old_checkpoints: the class token's entry into the token
        cls, posemb = cls + posemb[:, :1], posemb[:, 1:]
    x = x + posemb  # before the class token is prepended
    x = np.concatenate([np.broadcast_to(cls, (len(x), 1, D)), x], axis=1)
    for i in range(LAYERS):
        x, _ = reference.block(x, _block(a, i), HEADS, activation="gelu_tanh")
    x = reference.layer_norm(
        x,
        a["Transformer/encoder_norm/scale"],
        a["Transformer/encoder_norm/bias"],
    )
    return x[:, 0] @ a["head/kernel"] + a["head/bias"]


def assert_gives_big_visions_logits(model, a, grid, old=False):
    images = _images(grid)
    np.testing.assert_allclose(
        model.predict(images, verbose=0),
        big_vision_logits(a, images, old=old),
        atol=1e-5,
        rtol=0,
    )


def _images(grid, seed=1):
    rng = np.random.default_rng(seed)
    shape = (2, P * grid[0], P * grid[1], 3)
    return rng.integers(0, 256, shape).astype("float32")


#: The model the files are of (big_vision's MLP: the tanh GELU), but its
#: image size and token layout.
ARCHITECTURE = dict(
    patch_size=P,
    hidden_dim=D,
    num_layers=LAYERS,
    num_heads=HEADS,
    mlp_dim=MLP,
    num_classes=CLASSES,
    activation="gelu_tanh",
    classifier_activation=None,
)


def _model(grid, **kwargs):
    return keras_vit.ViT(
        image_size=(P * grid[0], P * grid[1]), **ARCHITECTURE, **kwargs
    )


@pytest.mark.parametrize("scan", [False, True])
def test_a_class_token_file_gives_big_visions_logits(tmp_path, scan):
    a = _weights((4, 4))
    path = _save(tmp_path, a, scan)
    checkpoint = read_checkpoint(path)
    assert checkpoint.position_embedding_tokens == "patches"
    assert checkpoint.position_grid == (4, 4)
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    assert convert.architecture(checkpoint)["position_embedding_tokens"] == (
        "patches"
    )
    model = _model((4, 4), position_embedding_tokens="patches")
    keras_vit.load_weights(model, path)
    assert_gives_big_visions_logits(model, a, (4, 4))


def test_the_model_for_the_file_is_built_from_it(tmp_path):
    a = _weights((4, 4))
    path = _save(tmp_path, a)
    model = keras_vit.ViT.from_preset(path, **ARCHITECTURE)
    assert model.position_embedding_tokens == "patches"
    assert_gives_big_visions_logits(model, a, (4, 4))


def test_a_default_model_is_refused_with_advice_that_works(tmp_path):
    """A default model has a position embedding for the class token: the
    file's are refused, naming the model that takes them, which does."""
    path = _save(tmp_path, _weights((4, 4)))
    with pytest.raises(ValueError, match="nothing was loaded") as info:
        keras_vit.load_weights(_model((4, 4)), path)
    advice = "build the model with position_embedding_tokens='patches'"
    assert advice in str(info.value)
    assert "not a square grid" not in str(info.value)
    keras_vit.load_weights(
        _model((4, 4), position_embedding_tokens="patches"), path
    )


def test_an_old_file_with_the_class_tokens_entry(tmp_path):
    """big_vision's old layout (1 + N entries, under `Transformer/` before
    2022) loads into a default model, exactly as big_vision reads it."""
    a = _weights((4, 4), old=True)
    a["Transformer/pos_embedding"] = a.pop("pos_embedding")
    path = _save(tmp_path, a)
    checkpoint = read_checkpoint(path)
    assert checkpoint.position_embedding_tokens == "all"
    assert checkpoint.unexpected == []
    model = _model((4, 4))
    keras_vit.load_weights(model, path)
    a["pos_embedding"] = a.pop("Transformer/pos_embedding")
    assert_gives_big_visions_logits(model, a, (4, 4), old=True)


def test_a_non_square_grid_with_source_grid(tmp_path):
    a = _weights((2, 3))
    path = _save(tmp_path, a)
    with pytest.raises(ValueError, match="not a square grid"):
        keras_vit.load_weights(
            _model((2, 3), position_embedding_tokens="patches"), path
        )
    model = _model((2, 3), position_embedding_tokens="patches")
    keras_vit.load_weights(model, path, source_grid=(2, 3))
    assert_gives_big_visions_logits(model, a, (2, 3))


def test_at_another_resolution_the_patches_are_resampled(tmp_path):
    """The 4x4 file at 6x6: the patches' embeddings resampled (no class
    entry to keep), as for a patches-only file of any format."""
    a = _weights((4, 4))
    path = _save(tmp_path, a)
    model = _model((6, 6), position_embedding_tokens="patches")
    with pytest.warns(UserWarning, match="from a 4x4 to a 6x6 patch grid"):
        keras_vit.load_weights(model, path, interpolation="bilinear")
    loaded = model.get_layer("patch_encoder").pos_embedding.numpy()
    expected = keras_vit.patch_grid.resample_position_embeddings(
        a["pos_embedding"], (6, 6), num_prefix_tokens=0
    )
    np.testing.assert_allclose(loaded, expected, atol=1e-6)


# SigLIP's own releases: big_vision two-tower files (`params/img/`,
# `params/txt/`, `params/t`, `params/b`), whose image tower pools with a
# `MAPHead_0`. tests/golden/make_bigvision_siglip.py (developer-side: torch,
# timm) wrote a tiny one from a timm model, proven by timm's own reader of
# these files, and timm's outputs.

SIGLIP_FILES = ("bigvision_siglip.npz", "bigvision_siglip_scan.npz")
#: The image tower of the golden files, what they do not record included
#: (its tanh GELU): SigLIP's structure, made tiny.
SIGLIP = dict(
    image_size=32,
    patch_size=8,
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    mlp_dim=64,
    class_token=False,
    pooling="map",
    activation="gelu_tanh",
)
#: The image embedding's width (the file's `head`).
EMBEDDING = 16
SIGLIP_ATOL = 1e-4


def _siglip(name=SIGLIP_FILES[0]):
    """A golden two-tower file's path, and timm's outputs on its images."""
    return golden(name), golden_arrays("bigvision_siglip.expected.npz")


def _arrays(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _write(tmp_path, arrays, name="siglip.npz"):
    path = str(tmp_path / name)
    np.savez(path, **arrays)
    return path


def _embedder(**kwargs):
    """The image tower with its head: the image embedding."""
    return keras_vit.ViT(
        **SIGLIP,
        num_classes=EMBEDDING,
        classifier_activation=None,
        **kwargs,
    )


def _assert_gives(model, expected, key="logits"):
    np.testing.assert_allclose(
        model.predict(expected["images"], verbose=0),
        expected[key],
        atol=SIGLIP_ATOL,
        rtol=0,
    )


@pytest.mark.parametrize("name", SIGLIP_FILES)
def test_a_siglip_two_tower_file_gives_timms_outputs(name):
    """The image tower, from the file alone: its MAP head and its `head`
    (the image embedding, no softmax), as timm's outputs; the pooled
    features with `include_top=False`."""
    path, expected = _siglip(name)
    checkpoint = read_checkpoint(path)
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    assert checkpoint.misshaped == []
    model = convert.model_for_checkpoint(checkpoint)
    assert model.pooling == "map" and not model.class_token
    assert model.num_classes == EMBEDDING
    assert model.classifier_activation is None
    assert model.activation == "gelu_tanh"
    _assert_gives(model, expected)
    features = keras_vit.ViT(**SIGLIP, include_top=False)
    keras_vit.load_weights(features, path)
    _assert_gives(features, expected, "features")


def test_from_preset_builds_the_siglip_image_tower():
    path, expected = _siglip()
    model = keras_vit.ViT.from_preset(
        path, **SIGLIP, num_classes=EMBEDDING, classifier_activation=None
    )
    _assert_gives(model, expected)


def test_the_text_tower_is_not_read(tmp_path):
    """Its tensors (NaN here, which a read tensor may not be), `t` and `b`
    are left out, not reported; a tensor of neither tower is."""
    path, expected = _siglip()
    arrays = _arrays(path)
    text = [k for k in arrays if k.startswith("params/txt/")]
    assert text and "params/t" in arrays and "params/b" in arrays
    for key in text + ["params/t", "params/b"]:
        arrays[key] = np.full_like(arrays[key], np.nan)
    model = _embedder()
    keras_vit.load_weights(model, _write(tmp_path, arrays))
    _assert_gives(model, expected)
    arrays["params/extra"] = np.zeros(3, "float32")
    checkpoint = read_checkpoint(_write(tmp_path, arrays, "extra.npz"))
    assert checkpoint.unexpected == ["extra"]  # under the stripped params/


@pytest.mark.parametrize("prefix", ["params/", ""])
def test_a_single_tower_file_with_a_map_head(tmp_path, prefix):
    """The image tower alone, its `MAPHead_0` at the top level."""
    path, expected = _siglip()
    arrays = {
        prefix + k[len("params/img/") :]: v
        for k, v in _arrays(path).items()
        if k.startswith("params/img/")
    }
    path = _write(tmp_path, arrays)
    checkpoint = read_checkpoint(path)
    assert checkpoint.pooling == "map"
    assert checkpoint.unexpected == [] and checkpoint.missing == []
    model = _embedder()
    keras_vit.load_weights(model, path)
    _assert_gives(model, expected)


def _section(message, title):
    """The items of the `title` section of a loading error."""
    items = []
    for line in message.split(f"  {title} (")[1].split("\n")[1:]:
        if not line.startswith(" " * 4):
            break
        items.append(line.strip())
    return items


@pytest.mark.parametrize(
    "tensor, ours",
    [
        ("MAPHead_0/probe", "pooling/probe"),
        ("MAPHead_0/LayerNorm_0/scale", "pooling/norm/gamma"),
        (
            "MAPHead_0/MultiHeadDotProductAttention_0/key/kernel",
            "pooling/key_value/kernel",
        ),
    ],
)
def test_a_file_missing_a_map_tensor_is_refused_naming_it(
    tmp_path, tensor, ours
):
    path, _ = _siglip()
    arrays = _arrays(path)
    del arrays["params/img/" + tensor]
    model = _embedder()
    before = [w.numpy() for w in model.weights]
    with pytest.raises(ValueError, match="nothing was loaded") as info:
        keras_vit.load_weights(model, _write(tmp_path, arrays))
    message = str(info.value)
    assert sorted(_section(message, "missing from the checkpoint")) == sorted(
        [f"{tensor} (source name)", ours]
    )
    assert "unexpected in the checkpoint" not in message
    for weight, value in zip(model.weights, before):
        np.testing.assert_array_equal(weight.numpy(), value)


def test_a_map_head_of_another_head_count_is_refused(tmp_path):
    """keras_vit's MAP head has the blocks' heads: one with another count
    would compute another pooling, and is refused, naming it."""
    path, _ = _siglip()
    arrays = _arrays(path)
    mha = "params/img/MAPHead_0/MultiHeadDotProductAttention_0"
    for part in ("query", "key", "value"):
        arrays[f"{mha}/{part}/kernel"] = arrays[f"{mha}/{part}/kernel"].reshape(
            32, 2, 16
        )
        arrays[f"{mha}/{part}/bias"] = arrays[f"{mha}/{part}/bias"].reshape(
            2, 16
        )
    arrays[f"{mha}/out/kernel"] = arrays[f"{mha}/out/kernel"].reshape(2, 16, 32)
    with pytest.raises(ValueError, match="nothing was loaded") as info:
        keras_vit.load_weights(_embedder(), _write(tmp_path, arrays))
    assert (
        "MAPHead_0/MultiHeadDotProductAttention_0/query/kernel (source "
        "name): 2 heads, and the blocks have 4"
    ) in str(info.value)


def test_a_two_tower_file_without_an_image_tower_is_refused(tmp_path):
    path, _ = _siglip()
    arrays = {
        k: v
        for k, v in _arrays(path).items()
        if not k.startswith("params/img/")
    }
    path = _write(tmp_path, arrays)
    with pytest.raises(ValueError, match="without an image tower") as info:
        read_checkpoint(path)
    assert f"Received: weights={path!r}" in str(info.value)
