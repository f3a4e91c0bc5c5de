import os

import numpy as np
import pytest

import keras_vit
from keras_vit import cli
from keras_vit import visualize
from tests.helpers import TINY
from tests.helpers import TINY_HYBRID
from tests.helpers import random_images
from tests.helpers import randomize_weights

rng = np.random.default_rng(0)


def _uniform(tokens, heads=2, batch=1):
    return np.full((batch, heads, tokens, tokens), 1.0 / tokens)


def test_identity_attention_rolls_out_to_the_identity():
    eye = np.broadcast_to(np.eye(5), (2, 3, 5, 5))
    np.testing.assert_allclose(visualize.rollout([eye, eye, eye])[0], np.eye(5))


def test_uniform_attention_gives_a_uniform_map():
    # 1 class token + a 2x3 grid; uniform attention in every layer.
    result = visualize.rollout([_uniform(7), _uniform(7)])
    patch_map = visualize.token_map(result, (2, 3))[0]
    np.testing.assert_allclose(patch_map, patch_map[0, 0])
    # (A + I) / 2 then renormalised, twice: the class token keeps a share.
    first = (np.full((7, 7), 1 / 7) + np.eye(7)) / 2
    np.testing.assert_allclose(result[0], first @ first, atol=1e-12)


def test_rollout_multiplies_in_layer_order_and_fuses_heads():
    a = rng.dirichlet(np.ones(4), size=(1, 2, 4))
    b = rng.dirichlet(np.ones(4), size=(1, 2, 4))

    def step(x):
        return (x.mean(1)[0] + np.eye(4)) / 2

    np.testing.assert_allclose(
        visualize.rollout([a, b])[0], step(b) @ step(a), atol=1e-12
    )
    fused_max = visualize.rollout([a], head_fusion="max")[0]
    expected = a.max(1)[0] + np.eye(4)
    np.testing.assert_allclose(
        fused_max, expected / expected.sum(-1, keepdims=True)
    )
    with pytest.raises(ValueError, match="head_fusion='median'"):
        visualize.rollout([a], head_fusion="median")


def test_discard_ratio_drops_the_weakest_weights_but_keeps_the_class_token():
    attention = np.array([[[[0.05, 0.5, 0.1, 0.35]] * 4]])  # (1, 1, 4, 4)
    kept = visualize.rollout([attention], discard_ratio=0.5)[0]
    # 0.1 is dropped; 0.05 (the class token column) is kept.
    assert kept[0, 2] == pytest.approx(0.0)
    assert kept[1, 0] > 0.0


def test_gap_models_use_the_mean_over_tokens():
    matrix = rng.dirichlet(np.ones(4), size=(1, 4))
    np.testing.assert_allclose(
        visualize.token_map(matrix, (2, 2), num_prefix_tokens=0)[0].ravel(),
        matrix[0].mean(0),
    )


def test_a_class_token_map_needs_a_prefix_token():
    # Without prefix tokens token 0 is the first patch: its row is not a
    # class token's.
    matrix = rng.dirichlet(np.ones(4), size=(1, 4))
    with pytest.raises(ValueError, match="num_prefix_tokens=0"):
        visualize.token_map(
            matrix, (2, 2), num_prefix_tokens=0, class_token=True
        )


def test_attention_two_patches_to_the_right_has_a_known_distance():
    # A 3x4 grid of 16-pixel patches plus a class token. Head 0 looks only
    # 2 patches to the right (queries in columns 0-1); head 1 only at itself.
    grid, patch = (3, 4), 16
    tokens = 1 + 12
    attention = np.zeros((1, 2, tokens, tokens))
    attention[:, :, 0, 0] = 1.0
    for r in range(3):
        for c in range(4):
            q = 1 + r * 4 + c
            attention[0, 1, q, q] = 1.0
            if c < 2:
                attention[0, 0, q, q + 2] = 1.0
            else:  # no patch 2 to the right: look 2 to the left
                attention[0, 0, q, q - 2] = 1.0
    distance = visualize.attention_distance([attention], grid, patch)
    np.testing.assert_allclose(distance, [[2 * patch, 0.0]])


def test_attention_lists_that_are_not_layers_of_weights_are_refused():
    # numpy's "need at least one array to stack" and a bare IndexError.
    square = rng.dirichlet(np.ones(5), size=(1, 2, 5))
    for attentions, match in (
        ([], r"at least one layer. Received: attentions=\[\]"),
        ([square[0]], r"attentions\[0\] of shape \(2, 5, 5\)"),
        ([square, square[..., :4]], r"attentions\[1\] of shape"),
    ):
        with pytest.raises(ValueError, match=match):
            visualize.attention_distance(attentions, (2, 2), 16)
        with pytest.raises(ValueError, match=match):
            visualize.rollout(attentions)


def test_token_counts_and_pixel_sizes_that_cannot_be_right_are_refused():
    attention = rng.dirichlet(np.ones(5), size=(1, 2, 5))  # 1 + 2 x 2 tokens
    for value in (np.inf, np.nan, 0.0):
        with pytest.raises(ValueError, match="pixels_per_token="):
            visualize.attention_distance([attention], (2, 2), value)
    # Too many prefix tokens (mean of no patches: NaN), or a grid that does
    # not hold the patches: refused, not a NaN or a numpy reshape error.
    for grid, prefix in (((1, 1), 5), ((2, 2), 2), ((3, 3), 1)):
        match = (
            rf"over 5 tokens.*num_prefix_tokens={prefix}, "
            rf"grid=\({grid[0]}, {grid[1]}\)"
        )
        with pytest.raises(ValueError, match=match):
            visualize.attention_distance(
                [attention], grid, 16, num_prefix_tokens=prefix
            )
        with pytest.raises(ValueError, match=match):
            visualize.token_map(attention[:, 0], grid, num_prefix_tokens=prefix)
    for prefix in (5, 7, -1, 1.5):
        with pytest.raises(ValueError, match=f"num_prefix_tokens={prefix}"):
            visualize.rollout(
                [attention], num_prefix_tokens=prefix, discard_ratio=0.5
            )


def test_sincos_similarity_peaks_at_the_patch_and_falls_with_distance():
    model = keras_vit.ViT(
        image_size=64,
        patch_size=8,
        hidden_dim=64,
        num_layers=1,
        num_heads=2,
        mlp_dim=32,
        position_embedding="sincos2d",
    )
    similarity = visualize.position_embedding_similarity(model)
    assert similarity.shape == (8, 8, 8, 8)
    for i, j in ((0, 0), (3, 4), (7, 2)):
        assert np.unravel_index(similarity[i, j].argmax(), (8, 8)) == (i, j)
        assert similarity[i, j, i, j] == pytest.approx(1.0)
    assert np.all(np.diff(similarity[3, 3, 3, 3:]) < 0)


def test_embedding_filters_are_principal_components():
    model = keras_vit.ViT(
        image_size=16,
        patch_size=4,
        hidden_dim=48,
        num_layers=1,
        num_heads=2,
        mlp_dim=16,
        num_classes=3,
    )
    filters = visualize.embedding_filters(model, n=5)
    assert filters.shape == (5, 4, 4, 3)
    assert filters.min() >= 0 and filters.max() <= 1
    kernel = model.get_layer("patch_encoder").projection.kernel.numpy().T
    centred = kernel - kernel.mean(0)
    first = np.linalg.svd(centred, full_matrices=False)[2][0]
    got = filters[0].ravel()
    # The same direction up to sign and the display scaling.
    assert abs(np.corrcoef(got, first)[0, 1]) > 0.999


def _model(**kwargs):
    model = keras_vit.ViT(**{**TINY, "image_size": (32, 48), **kwargs})
    randomize_weights(model, scale=0.3)
    return model


@pytest.mark.parametrize("kwargs", [{}, {"pooling": "gap"}])
def test_model_level_functions_on_a_non_square_model(kwargs):
    model = _model(**kwargs)
    images = random_images((2, 32, 48, 3))
    result = visualize.attention_rollout(model, images)
    assert result.maps.shape == (2, 4, 6)
    np.testing.assert_allclose(result.maps.sum(axis=(1, 2)), 1.0, atol=1e-6)
    assert result.class_attention.shape == (2, 2, 2, 4, 6)
    distances = visualize.mean_attention_distance(model, images)
    assert distances.shape == (2, 2)
    assert np.all(distances > 0) and np.all(distances < np.hypot(32, 48))


def test_hybrid_maps_are_on_the_feature_grid():
    model = keras_vit.ViT(**TINY_HYBRID)
    images = random_images((1, 32, 32, 3))
    assert visualize.attention_rollout(model, images).maps.shape == (1, 4, 4)
    assert visualize._pixels_per_token(model) == (8, 8)
    with pytest.raises(ValueError, match="feature map"):
        visualize.embedding_filters(model)


def _variance(path):
    import matplotlib.image

    return float(np.asarray(matplotlib.image.imread(path))[..., :3].var())


def test_inspect_writes_non_blank_figures_and_a_page(tmp_path):
    model = _model()
    images = random_images((2, 32, 48, 3))
    files = visualize.inspect(model, images, str(tmp_path), names=["a", "b"])
    names = sorted(os.path.basename(f) for f in files)
    assert names == sorted(
        [
            "rollout_a.png",
            "rollout_b.png",
            "class_attention_a.png",
            "attention_distance.png",
            "position_similarity.png",
            "embedding_filters.png",
            "index.html",
        ]
    )
    for path in files:
        if path.endswith(".png"):
            assert _variance(path) > 1e-3, path
    page = (tmp_path / "index.html").read_text()
    assert page.count("<img") == 6


@pytest.mark.parametrize("pooling", ["token", "map"])
def test_inspect_runs_the_attention_once(tmp_path, monkeypatch, pooling):
    # The maps and the distances came from two forward passes of the
    # same images (a MAP model's maps from `forward_features`, the
    # distances from `attention_weights`); the distances drawn are the
    # public function's.
    import matplotlib.pyplot as plt

    model = _model(pooling=pooling)
    images = random_images((2, 32, 48, 3))
    expected = visualize.mean_attention_distance(model, images)
    calls, drawn = [], []
    weights, features = visualize.attention_weights, model.forward_features

    def counted(function):
        def call(*args, **kwargs):
            calls.append(function.__name__)
            return function(*args, **kwargs)

        return call

    def distances(values, image_size):
        drawn.append(values)
        return plt.figure()

    monkeypatch.setattr(visualize, "attention_weights", counted(weights))
    monkeypatch.setattr(model, "forward_features", counted(features))
    monkeypatch.setattr(visualize, "plot_attention_distance", distances)
    visualize.inspect(model, images, str(tmp_path / "a"))
    assert len(calls) == 1, calls
    np.testing.assert_allclose(drawn[0], expected, rtol=1e-6)


def test_inspect_draws_the_pixels_it_is_given(tmp_path, monkeypatch):
    # A model built with include_preprocessing=False takes normalised
    # images; the rollout figure draws the pixels.
    model = _model()
    pixels = random_images((1, 32, 48, 3))
    drawn = []
    plot = visualize.plot_rollout
    monkeypatch.setattr(
        visualize,
        "plot_rollout",
        lambda image, *a, **k: drawn.append(image) or plot(image, *a, **k),
    )
    visualize.inspect(model, pixels / 127.5 - 1, str(tmp_path), pixels=pixels)
    np.testing.assert_array_equal(drawn[0], pixels[0])
    with pytest.raises(ValueError, match=r"pixels of shape \(1, 32, 32, 3\)"):
        visualize.inspect(
            model, pixels, str(tmp_path / "b"), pixels=pixels[:, :, :32]
        )
    assert not (tmp_path / "b").exists()


def test_an_image_named_like_a_figure_keeps_every_figure(tmp_path):
    # `attention_<name>.png` for an image named "distance" was the
    # distance plot's file: one figure was lost, the page captioned twice.
    model = _model()
    written = visualize.inspect(
        model, random_images((1, 32, 48, 3)), str(tmp_path), names=["distance"]
    )
    names = [os.path.basename(f) for f in written]
    assert len(set(names)) == len(names) == 6
    assert "class_attention_distance.png" in names
    page = (tmp_path / "index.html").read_text()
    assert page.count('src="attention_distance.png"') == 1


def test_inspect_command_on_a_saved_model_and_image_files(tmp_path, capsys):
    from PIL import Image

    model = _model(image_size=32)
    path = str(tmp_path / "m.keras")
    model.save(path)
    image = str(tmp_path / "photo.png")
    Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(
        image
    )
    out = str(tmp_path / "figs")
    assert cli.main(["inspect", path, "--image", image, "--output", out]) == 0
    assert os.path.isfile(os.path.join(out, "rollout_photo.png"))
    assert os.path.isfile(os.path.join(out, "index.html"))
    assert (
        cli.main(
            [
                "inspect",
                path,
                "--image",
                str(tmp_path / "no.png"),
                "--output",
                out,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "The image file does not exist. Received: image=" in err
    assert "no.png" in err
    # Two files of one name (a/photo.png, b/photo.png) get a figure each.
    (tmp_path / "b").mkdir()
    Image.open(image).save(tmp_path / "b" / "photo.png")
    assert (
        cli.main(
            [
                "inspect",
                path,
                "--image",
                image,
                "--image",
                str(tmp_path / "b" / "photo.png"),
                "--output",
                out,
            ]
        )
        == 0
    )
    assert os.path.isfile(os.path.join(out, "rollout_photo_0.png"))
    assert os.path.isfile(os.path.join(out, "rollout_photo_1.png"))


def test_inspect_refuses_names_that_do_not_fit_the_images(tmp_path):
    # Too few names skipped images, duplicates overwrote each other's
    # figures, and a name with a separator wrote outside `output`.
    model = _model()
    images = random_images((2, 32, 48, 3))
    for names in (["a"], ["a", "a"], ["a", "../b"], ["a", "b", "c"]):
        with pytest.raises(ValueError, match=r"`names` must hold one distinct"):
            visualize.inspect(model, images, str(tmp_path / "out"), names=names)
    assert not (tmp_path / "out").exists()


def test_inspect_refuses_names_too_long_for_a_file(tmp_path):
    # A 230-character name failed with an OSError after the first
    # figures had been written.
    model = _model()
    images = random_images((2, 32, 48, 3))
    with pytest.raises(ValueError, match="at most 180 bytes"):
        visualize.inspect(
            model, images, str(tmp_path / "out"), names=["a", "b" * 230]
        )
    assert not (tmp_path / "out").exists()


def test_inspect_stopped_among_its_figures_may_run_again(tmp_path, monkeypatch):
    # The folder it left held some figures and no page of inspect's, so
    # the next run refused to replace those figures.
    model = _model()
    images = random_images((1, 32, 48, 3))
    output = str(tmp_path / "out")
    real = visualize.attention_distance

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(visualize, "attention_distance", stopped)
    with pytest.raises(KeyboardInterrupt):
        visualize.inspect(model, images, output)
    assert "rollout_image0.png" in os.listdir(output)
    monkeypatch.setattr(visualize, "attention_distance", real)
    written = visualize.inspect(model, images, output)
    assert all(os.path.isfile(path) for path in written)


def test_functions_of_a_vit_refuse_other_models(tmp_path):
    import keras

    from keras_vit import weights
    from keras_vit.training.masked_patches import MaskedPatchPrediction

    other = keras.Sequential(
        [
            keras.Input((32, 48, 3)),
            keras.layers.Flatten(),
            keras.layers.Dense(2),
        ]
    )
    images = random_images((1, 32, 48, 3))
    for call in (
        lambda m: visualize.attention_rollout(m, images),
        lambda m: visualize.mean_attention_distance(m, images),
        lambda m: visualize.position_embedding_similarity(m),
        lambda m: visualize.embedding_filters(m),
        lambda m: visualize.inspect(m, images, str(tmp_path / "out")),
        lambda m: weights.save_npz(m, tmp_path / "m.npz"),
        lambda m: keras_vit.load_weights(m, tmp_path / "m.npz"),
    ):
        with pytest.raises(
            ValueError,
            match=r"takes a keras_vit.ViT\. Received: model=<Sequential",
        ):
            call(other)
    pretraining = MaskedPatchPrediction(_model(include_top=False, pooling=None))
    with pytest.raises(ValueError, match="pass its `backbone`"):
        visualize.attention_rollout(pretraining, images)
    assert os.listdir(tmp_path) == []


def test_inspect_never_writes_a_figure_over_its_inputs(tmp_path, capsys):
    # An input image named like a figure, in the output folder, was replaced
    # by the figure (`--image out/attention_distance.png --output out`).
    from PIL import Image

    model = _model(image_size=32)
    path = str(tmp_path / "m.keras")
    model.save(path)
    out = tmp_path / "figs"
    out.mkdir()
    image = out / "attention_distance.png"
    Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(
        image
    )
    before = image.read_bytes()
    assert (
        cli.main(["inspect", path, "--image", str(image), "--output", str(out)])
        == 2
    )
    assert "would replace an input" in capsys.readouterr().err
    assert image.read_bytes() == before
    assert sorted(os.listdir(out)) == ["attention_distance.png"]
    # An output that is a file is refused by name, not a FileExistsError.
    assert (
        cli.main(["inspect", path, "--image", str(image), "--output", path])
        == 2
    )
    assert "Received: output=" in capsys.readouterr().err


def test_inspect_does_not_replace_files_it_did_not_write(tmp_path):
    # `--output site/` replaced the site's own index.html with the figures'.
    model = _model()
    images = random_images((1, 32, 48, 3))
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html>my site</html>")
    (site / "logo.png").write_bytes(b"png")
    with pytest.raises(
        ValueError,
        match=r"not a folder of keras_vit's figures.*: index\.html\. ",
    ):
        visualize.inspect(model, images, str(site), names=["cat"])
    assert sorted(os.listdir(site)) == ["index.html", "logo.png"]
    assert (site / "index.html").read_text() == "<html>my site</html>"
    # A folder without those names is written into (its files stay), and
    # inspect's own folder is written again.
    (site / "index.html").unlink()
    visualize.inspect(model, images, str(site), names=["cat"])
    visualize.inspect(model, images, str(site), names=["cat"])
    assert (site / "logo.png").read_bytes() == b"png"
