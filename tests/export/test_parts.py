"""The export library's parts: image sources, metadata, atomic files."""

import numpy as np
import pytest
from PIL import Image

from keras_vit import files
from keras_vit.export import load_images
from keras_vit.export import metadata
from tests.export.helpers import listing
from tests.helpers import TINY


def _write_pngs(folder, n, size=(20, 12)):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        pixels = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i}.png")


def test_images_from_a_dataset():
    images = load_images("digits", (32, 24), limit=7)
    assert images.images.shape == (7, 32, 24, 3)
    assert images.images.dtype == np.float32
    assert 0 <= images.images.min() and images.images.max() <= 255
    assert images.labels.shape == (7,)
    assert images.source == "digits (test)"


def test_images_from_folders(tmp_path):
    _write_pngs(tmp_path / "flat", 3)
    flat = load_images(f"folder:{tmp_path / 'flat'}", (16, 16))
    assert flat.images.shape == (3, 16, 16, 3) and flat.labels is None
    _write_pngs(tmp_path / "classes" / "a", 2)
    _write_pngs(tmp_path / "classes" / "b", 2)
    labelled = load_images(f"folder:{tmp_path / 'classes'}", (16, 16))
    assert labelled.images.shape == (4, 16, 16, 3)
    assert sorted(labelled.labels.tolist()) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="does not exist"):
        load_images(f"folder:{tmp_path / 'none'}", (16, 16))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no images"):
        load_images(f"folder:{tmp_path / 'empty'}", (16, 16))


def test_images_from_npz(tmp_path):
    images = np.full((5, 8, 8, 3), 7.0, "float32")
    np.savez(tmp_path / "named.npz", images=images, labels=np.arange(5))
    np.savez(tmp_path / "single.npz", x=images)
    np.savez(tmp_path / "two.npz", x=images, y=images)
    named = load_images(str(tmp_path / "named.npz"), (8, 8), limit=3)
    assert named.images.shape == (3, 8, 8, 3) and named.labels.tolist() == [
        0,
        1,
        2,
    ]
    assert load_images(str(tmp_path / "single.npz"), (8, 8)).labels is None
    with pytest.raises(ValueError, match="exactly one"):
        load_images(str(tmp_path / "two.npz"), (8, 8))
    with pytest.raises(ValueError, match=r"shape \(5, 8, 8, 3\)"):
        load_images(str(tmp_path / "named.npz"), (8, 8), num_channels=1)


def test_sidecar_and_labels(tmp_path):
    assert metadata.sidecar_path("out/vit_int8.tflite") == "out/vit_int8.json"
    (tmp_path / "sm").mkdir()
    assert metadata.sidecar_path(tmp_path / "sm").endswith("sm/keras_vit.json")
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\n\n dog \n")
    assert metadata.read_labels(labels) == ["cat", "dog"]
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        metadata.read_labels(tmp_path / "empty.txt")


def test_atomic_file_leaves_nothing_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with files.atomic_file(tmp_path / "out.bin") as tmp:
            open(tmp, "wb").write(b"partial")
            raise RuntimeError("interrupted")
    assert listing(tmp_path) == []
    with files.atomic_file(tmp_path / "out.bin") as tmp:
        open(tmp, "wb").write(b"done")
    assert listing(tmp_path) == ["out.bin"]
    with pytest.raises(RuntimeError):
        with files.atomic_directory(tmp_path / "folder") as tmp:
            open(f"{tmp}/a", "w").write("x")
            raise RuntimeError("interrupted")
    assert listing(tmp_path) == ["out.bin"]


def test_float32_copy_of_mixed_precision_models():
    import keras

    import keras_vit
    from keras_vit.export import float32_copy

    model = keras_vit.ViT(**TINY)
    assert float32_copy.float32_model(model) is model  # nothing to do
    # Any functional model: cloned layer by layer, a nested model included.
    inner_inputs = keras.Input((4,))
    inner = keras.Model(
        inner_inputs,
        keras.layers.Dense(6, dtype="mixed_bfloat16")(inner_inputs),
    )
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(2, dtype="mixed_float16")(inner(inputs))
    mixed = keras.Model(inputs, outputs)
    mixed.set_weights(
        [np.full(w.shape, 0.3, "float32") for w in mixed.get_weights()]
    )
    assert float32_copy.non_float32_dtypes(mixed) == ["bfloat16", "float16"]
    copy = float32_copy.float32_model(mixed)
    assert float32_copy.non_float32_dtypes(copy) == []
    x = np.linspace(-1, 1, 8, dtype="float32").reshape(2, 4)
    expected = (x @ np.full((4, 6), 0.3) + 0.3) @ np.full((6, 2), 0.3) + 0.3
    np.testing.assert_allclose(np.asarray(copy(x)), expected, rtol=1e-6)
    assert float32_copy.non_float32_dtypes(mixed)  # the original is untouched


def test_grayscale_images_for_one_channel_models(tmp_path):
    # A one-channel model's default verification images (digits) used to be
    # refused; grayscale sources come back as they were, photos as luma.
    gray = load_images("digits", (16, 16), num_channels=1, limit=5)
    rgb = load_images("digits", (16, 16), limit=5)
    assert gray.images.shape == (5, 16, 16, 1)
    np.testing.assert_allclose(
        gray.images[..., 0], rgb.images[..., 0], atol=1e-3
    )
    _write_pngs(tmp_path / "photos", 2, size=(16, 16))
    photos = load_images(
        f"folder:{tmp_path / 'photos'}", (16, 16), num_channels=1
    )
    colour = load_images(f"folder:{tmp_path / 'photos'}", (16, 16))
    np.testing.assert_allclose(
        photos.images[..., 0],
        colour.images @ np.array([0.299, 0.587, 0.114]),
        atol=1e-3,
    )
    with pytest.raises(ValueError, match="takes 4 channels"):
        load_images("digits", (16, 16), num_channels=4)
