import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import cli
from keras_vit import registry
from keras_vit.weights.convert import convert as convert_checkpoint
from tests.weights.test_golden_parity import TINY
from tests.weights.test_golden_parity import expected
from tests.weights.test_golden_parity import golden


@pytest.fixture
def tiny_variant(monkeypatch):
    numbers = {
        k: TINY[k]
        for k in (
            "patch_size",
            "hidden_dim",
            "num_layers",
            "num_heads",
            "mlp_dim",
        )
    }
    monkeypatch.setitem(registry.VARIANTS, "Tiny/8", numbers)


@pytest.mark.parametrize(
    "source", ["vit_token.npz", "vit_token.timm.safetensors"]
)
@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_convert_command(tmp_path, capsys, tiny_variant, source, suffix):
    output = str(tmp_path / f"converted{suffix}")
    assert cli.main(["convert", golden(source), "--output", output]) == 0
    assert "converted" in capsys.readouterr().out
    assert os.listdir(tmp_path) == [f"converted{suffix}"]  # no temporary left
    ref = expected("vit_token.expected.npz")
    if suffix == ".keras":
        model = keras.saving.load_model(output, safe_mode=True)
        probabilities = model.predict(ref["images"], verbose=0)
        logits = np.log(probabilities)
        logits -= logits.mean(-1, keepdims=True)
        want = ref["logits"] - ref["logits"].mean(-1, keepdims=True)
        np.testing.assert_allclose(logits, want, atol=1e-4)
    else:
        model = keras_vit.ViT.from_preset(output, **TINY)
        np.testing.assert_allclose(
            model.predict(ref["images"], verbose=0), ref["logits"], atol=1e-4
        )


def test_convert_with_an_explicit_builder(tmp_path):
    # The golden model is not a released variant; naming one whose numbers
    # differ is refused with the usual listing, and nothing is written.
    output = str(tmp_path / "x.weights.h5")
    assert (
        cli.main(
            [
                "convert",
                golden("vit_token.npz"),
                "--output",
                output,
                "--model",
                "ViT_Ti16",
            ]
        )
        == 2
    )
    assert os.listdir(tmp_path) == []


def test_convert_errors(tmp_path, capsys, tiny_variant):
    missing = str(tmp_path / "no_such_folder" / "x.weights.h5")
    assert (
        cli.main(["convert", golden("vit_token.npz"), "--output", missing]) == 2
    )
    assert (
        "folder to write `output` into does not exist"
        in capsys.readouterr().err
    )
    assert (
        cli.main(
            [
                "convert",
                golden("vit_token.npz"),
                "--output",
                str(tmp_path / "x.h5"),
            ]
        )
        == 2
    )
    assert "must end in .weights.h5 or .keras" in capsys.readouterr().err
    assert (
        cli.main(
            ["convert", "model.pth", "--output", str(tmp_path / "x.keras")]
        )
        == 2
    )
    assert "safetensors" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def _assert_golden_logits(path):
    ref = expected("vit_token.expected.npz")
    model = keras.saving.load_model(path, safe_mode=True)
    assert model.num_heads == TINY["num_heads"]
    logits = np.log(model.predict(ref["images"], verbose=0))
    np.testing.assert_allclose(
        logits - logits.mean(-1, keepdims=True),
        ref["logits"] - ref["logits"].mean(-1, keepdims=True),
        atol=1e-4,
    )


def test_a_checkpoint_of_its_own_size_converts(tmp_path, capsys):
    # The golden ViT is no released variant (one's own trained model, say):
    # it was refused. The original .npz records every number, heads included.
    assert (
        cli.main(
            [
                "convert",
                golden("vit_token.npz"),
                "--output",
                str(tmp_path / "a.keras"),
            ]
        )
        == 0
    )
    _assert_golden_logits(tmp_path / "a.keras")
    # timm's fused QKV does not record the heads: they are asked for.
    timm_file = golden("vit_token.timm.safetensors")
    assert (
        cli.main(["convert", timm_file, "--output", str(tmp_path / "b.keras")])
        == 2
    )
    assert (
        "its num_heads (this format does not record it)"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "b.keras").exists()
    assert (
        cli.main(
            [
                "convert",
                timm_file,
                "--output",
                str(tmp_path / "b.keras"),
                "--num-heads",
                str(TINY["num_heads"]),
            ]
        )
        == 0
    )
    _assert_golden_logits(tmp_path / "b.keras")
    with pytest.raises(SystemExit) as stopped:  # the shared argument type
        cli.main(
            [
                "convert",
                timm_file,
                "--output",
                str(tmp_path / "c.keras"),
                "--num-heads",
                "0",
            ]
        )
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "argument --num-heads: expected a positive integer, got '0'" in err


def test_a_checkpoint_with_other_heads_is_refused():
    # The fused QKV kernel has one shape for any head count: loading the
    # 4-head checkpoint into a 2-head model of the same width used to
    # succeed, computing something else.
    with pytest.raises(ValueError, match="num_heads: checkpoint 4, model 2"):
        keras_vit.ViT.from_preset(
            golden("vit_token.npz"), **{**TINY, "num_heads": 2}
        )


def test_presets_command(capsys):
    assert cli.main(["presets", "--model", "ViT_B16"]) == 0
    out = capsys.readouterr().out
    assert "augreg_in21k_ft_in1k" in out and "21843" in out


def test_save_npz_writes_the_original_layout_exactly(tmp_path):
    # Loaded from the golden original-format file (proven with timm's own
    # loader) and written back: the same keys, shapes and values.
    model = keras_vit.ViT.from_preset(golden("vit_prelogits.npz"), **TINY)
    path = str(tmp_path / "roundtrip.npz")
    keras_vit.weights.save_npz(model, path)
    assert os.listdir(tmp_path) == ["roundtrip.npz"]
    with np.load(golden("vit_prelogits.npz")) as want, np.load(path) as got:
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_save_npz_errors(tmp_path):
    model = keras_vit.ViT(**{**TINY, "position_embedding": "sincos2d"})
    with pytest.raises(ValueError, match="sincos2d"):
        keras_vit.weights.save_npz(model, str(tmp_path / "x.npz"))
    with pytest.raises(ValueError, match="end in .npz"):
        keras_vit.weights.save_npz(model, str(tmp_path / "x.h5"))
    assert os.listdir(tmp_path) == []


def test_convert_takes_the_grid_of_a_non_square_checkpoint(
    tmp_path, capsys, tiny_variant
):
    # The .npz records no grid and its releases are square: one of a 2x4
    # grid (8 positions) could not be converted at all ("Pass the grid
    # explicitly", with no way to).
    wide = keras_vit.ViT(**{**TINY, "image_size": (16, 32)})
    with np.load(golden("vit_token.npz")) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["Transformer/posembed_input/pos_embedding"] = wide.get_layer(
        "patch_encoder"
    ).pos_embedding.numpy()
    source = str(tmp_path / "wide.npz")
    np.savez(source, **arrays)
    output = str(tmp_path / "wide.keras")
    assert cli.main(["convert", source, "--output", output]) == 2
    err = capsys.readouterr().err
    assert (
        "8 patch positions, not a square grid" in err and "--source-grid" in err
    )
    assert (
        cli.main(
            ["convert", source, "--output", output, "--source-grid", "2", "4"]
        )
        == 0
    )
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.image_size == (16, 32) and model.grid_size == (2, 4)
    np.testing.assert_array_equal(
        model.get_layer("patch_encoder").pos_embedding.numpy(),
        arrays["Transformer/posembed_input/pos_embedding"],
    )
    assert (
        cli.main(
            [
                "convert",
                source,
                "--output",
                output,
                "--source-grid",
                "3",
                "3",
                "--overwrite",
            ]
        )
        == 2
    )
    assert "Received: source_grid=(3, 3)" in capsys.readouterr().err


def test_an_existing_output_is_replaced_only_when_asked(
    tmp_path, capsys, tiny_variant
):
    # A converted .keras cannot be told from a trained one: replacing it
    # unasked could destroy a trained model.
    output = tmp_path / "model.keras"
    output.write_bytes(b"a trained model")
    assert (
        cli.main(["convert", golden("vit_token.npz"), "--output", str(output)])
        == 2
    )
    err = capsys.readouterr().err
    assert "--overwrite" in err
    # Said as it is for convert (it was "not an export of this kind written
    # by keras_vit": a converted file is refused too).
    assert (
        "`output` names an existing file, and writing there would delete it"
        in err
    )
    assert "export" not in err
    assert output.read_bytes() == b"a trained model"
    assert (
        cli.main(
            [
                "convert",
                golden("vit_token.npz"),
                "--output",
                str(output),
                "--overwrite",
            ]
        )
        == 0
    )
    assert (
        keras.saving.load_model(str(output), safe_mode=True).count_params() > 0
    )
    # The input is never the output, overwrite or not.
    source = tmp_path / "vit.npz"
    source.write_bytes(open(golden("vit_token.npz"), "rb").read())
    before = source.read_bytes()
    with pytest.raises(ValueError, match="is an input"):
        convert_checkpoint(str(source), str(source), overwrite=True)
    assert source.read_bytes() == before


def test_outputs_that_name_a_folder_are_refused(tmp_path, capsys, tiny_variant):
    # os.replace onto a folder raised IsADirectoryError, a traceback.
    folder = tmp_path / "out.keras"
    folder.mkdir()
    assert (
        cli.main(["convert", golden("vit_token.npz"), "--output", str(folder)])
        == 2
    )
    assert "names an existing folder" in capsys.readouterr().err
    (tmp_path / "out.npz").mkdir()
    with pytest.raises(ValueError, match="names an existing folder"):
        keras_vit.weights.save_npz(
            keras_vit.ViT(**TINY), str(tmp_path / "out.npz")
        )
    assert sorted(os.listdir(tmp_path)) == ["out.keras", "out.npz"]
    assert os.listdir(folder) == [] and os.listdir(tmp_path / "out.npz") == []


def test_convert_reports_every_tensor_of_the_wrong_rank(
    tmp_path, capsys, tiny_variant
):
    with np.load(golden("vit_token.npz")) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["Transformer/encoder_norm/scale"] = np.zeros((1, 32), "float32")
    arrays["head/bias"] = np.zeros((1, 5), "float32")
    source = str(tmp_path / "bad.npz")
    np.savez(source, **arrays)
    assert (
        cli.main(["convert", source, "--output", str(tmp_path / "bad.keras")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(
        f"keras-vit: error: {source} holds tensors of the wrong rank"
    )
    assert "Transformer/encoder_norm/scale (source name): shape (1, 32)" in err
    assert "head/bias (source name): shape (1, 5)" in err
    assert os.listdir(tmp_path) == ["bad.npz"]


@pytest.mark.parametrize("quiet", [False, True])
def test_convert_shows_its_steps_unless_quiet(
    tmp_path, capsys, tiny_variant, quiet
):
    output = str(tmp_path / "converted.weights.h5")
    argv = ["convert", golden("vit_token.npz"), "--output", output]
    assert cli.main(argv + (["--quiet"] if quiet else [])) == 0
    out = capsys.readouterr().out
    # Keras's progress bar: read, build and load, write.
    assert ("3/3" in out) is not quiet, out
    assert out.strip().splitlines()[-1].startswith(golden("vit_token.npz"))


def test_classes_asked_for_give_a_head_over_a_file_without_one():
    # A DINOv2 file has no head: `num_classes=3` quietly gave a model
    # without one (the file's include_top=False won).
    from keras_vit.weights import convert as convert_module
    from keras_vit.weights import read_checkpoint

    path = os.path.join(
        os.path.dirname(__file__),
        "..",
        "golden",
        "family_dinov2.timm.safetensors",
    )
    with pytest.warns(UserWarning, match="no classification head"):
        model = convert_module.model_for_checkpoint(
            read_checkpoint(path), num_heads=2, num_classes=3
        )
    assert model.include_top and model.output_shape == (None, 3)
    head = model.get_layer("head").get_weights()
    assert all(not np.any(w) for w in head)  # new, zero-initialised
    # Not asked for: the file's own (no head, the features).
    features = convert_module.model_for_checkpoint(
        read_checkpoint(path), num_heads=2
    )
    assert not features.include_top


def test_convert_says_what_the_file_does_not_record(
    tmp_path, capsys, tiny_variant
):
    # A fused-QKV file's heads come from the variant of its width and depth,
    # the activation, epsilon and normalisation from the defaults: each is
    # named on stderr, with its value, before the user trusts the numbers.
    output = str(tmp_path / "a.keras")
    timm_file = golden("vit_token.timm.safetensors")
    assert cli.main(["convert", timm_file, "--output", output]) == 0
    err = capsys.readouterr().err
    heads = TINY["num_heads"]
    for line in (
        f"num_heads={heads} (the ViT variant of its width and depth)",
        "activation='gelu' (keras_vit's default)",
        "layer_norm_epsilon=1e-06 (keras_vit's default)",
        "normalization=None (keras_vit's default: inputs scaled to [-1, 1])",
    ):
        assert line in err, err
    # What is given is not assumed; the original .npz records its heads.
    given = [
        "--activation", "gelu", "--layer-norm-epsilon", "1e-6",
        "--mean", "0.5", "0.5", "0.5", "--std", "0.5", "0.5", "0.5",
    ]  # fmt: skip
    npz = golden("vit_token.npz")
    args = ["convert", npz, "--output", str(tmp_path / "b.keras"), *given]
    assert cli.main(args) == 0
    assert "assumed" not in capsys.readouterr().err


def test_convert_of_a_clip_layout_names_the_activation(tmp_path):
    # A timm CLIP file (norm_pre, no patch bias) converted with the default
    # GELU is 0.03 off for OpenAI's CLIPs: the warning says what they need.
    clip = os.path.join(os.path.dirname(golden("x")), "family_clip")
    with pytest.warns(UserWarning, match="need 'quick_gelu'") as caught:
        convert_checkpoint(
            clip + ".timm.safetensors",
            str(tmp_path / "c.keras"),
            num_heads=2,
            verbose=0,
        )
    assert "num_heads" not in str(caught[0].message)


def _swiglu_file(tmp_path):
    """The tiny timm golden with a SwiGLU MLP's names (timm's `SwiGLU`:
    `mlp.fc1_g` and `mlp.fc1_x` for `mlp.fc1`): #52 item 9's file."""
    import safetensors.numpy

    tensors = safetensors.numpy.load_file(golden("vit_token.timm.safetensors"))
    for name in [n for n in tensors if ".mlp.fc1." in n]:
        value = tensors.pop(name)
        for part in ("fc1_g", "fc1_x"):
            tensors[name.replace("fc1", part)] = value
    path = str(tmp_path / "swiglu.safetensors")
    safetensors.numpy.save_file(tensors, path)
    return path


def test_a_swiglu_file_converts_to_a_gated_model(tmp_path, capsys):
    # It was refused with "`mlp_dim` must be a positive integer. Received:
    # mlp_dim=None", an argument never given; then with the usual report.
    # It is a gated MLP now (tests/weights/test_swiglu_parity.py checks
    # the numbers against timm).
    import safetensors.numpy

    path = _swiglu_file(tmp_path)
    output = str(tmp_path / "out.keras")
    argv = ["convert", path, "--output", output, "--quiet"]
    assert cli.main([*argv, "--num-heads", "4"]) == 0, capsys.readouterr()
    model = keras.saving.load_model(output, safe_mode=True)
    assert model.use_gated_mlp and model.activation == "silu"
    gate = safetensors.numpy.load_file(path)["blocks.0.mlp.fc1_g.weight"]
    assert model.mlp_dim == gate.shape[0]
