"""`keras-vit benchmark` on the architecture options: presets'
architectures and overrides as models, and what their options cost."""

import keras
import measurement
import profiling
import pytest
import suite
from peers import runtime_peers

import keras_vit
from keras_vit import benchmark
from keras_vit.benchmark import throughput

DINO = "vit_s14_dinov2_reg4_lvd142m_518"
SIGLIP = "vit_b16_siglip_webli"


def test_models_are_presets_architectures_with_overrides():
    # A preset is its architecture, random weights, with a head.
    assert throughput.model_arguments(DINO) == (
        "S/14",
        {
            "layer_scale_init": 1e-5,
            "num_register_tokens": 4,
            "position_embedding_tokens": "patches",
        },
    )
    # Overrides: JSON values, else strings; they win over the preset's.
    assert throughput.model_arguments(
        f"{SIGLIP}:pooling=gap,class_token=false"
    ) == (
        "B/16",
        {"class_token": False, "pooling": "gap", "activation": "gelu_tanh"},
    )
    assert throughput.model_arguments("ViT_B16:num_register_tokens=4") == (
        "B/16",
        {"num_register_tokens": 4},
    )
    assert throughput.model_arguments("S/16") == ("S/16", {})
    with pytest.raises(ValueError, match="model='B/16:pooling'"):
        throughput.model_arguments("B/16:pooling")
    with pytest.raises(ValueError, match="model='no_such_model'"):
        throughput.model_arguments("no_such_model:pooling=gap")


def test_the_model_measured_has_the_options(monkeypatch):
    models = []

    def fake(model, *args, jit_compile, **kwargs):
        models.append(model)
        return {"inference_images_per_s": 1.0, "inference_cores_busy": 1.0}

    monkeypatch.setattr(throughput, "benchmark", fake)
    row = measurement.measure(
        peer="keras_vit",
        variant="Ti/16:num_register_tokens=2,num_layers=1",
        mode="inference",
        batch_size=1,
        image_size=32,
        jit_compile=False,
    )
    assert row["images_per_s"] == 1.0
    (model,) = models
    assert (model.num_register_tokens, model.num_layers) == (2, 1)
    assert model.input_shape[1:3] == (32, 32) and model.include_top


def test_peers_that_build_their_own_model_refuse_options():
    row = suite.measure_in_subprocess(
        peer="timm", variant=SIGLIP, mode="inference", batch_size=1
    )
    assert "architecture arguments" in row["error"]
    with pytest.raises(ValueError, match=f"model='{DINO}'"):
        measurement.measure(
            peer="keras_hub", variant=DINO, mode="inference", batch_size=1
        )


def _flops(variant, **arguments):
    with keras.StatelessScope(initialize_variables=False):
        model = keras_vit.ViT.from_variant(variant, image_size=112, **arguments)
        return benchmark.model_flops(model) / 1e9


def test_compare_times_both_and_says_what_the_options_cost(capsys, monkeypatch):
    calls = []

    def fake(timm_python=None, **kwargs):
        calls.append(kwargs)
        # Seconds per image and memory grow as the tokens: 50 for S/16 at
        # 112 px, 69 for DINOv2-S/14 reg4 (64 patches, class, 4 registers).
        row = suite._plan([kwargs["variant"]], ["keras_vit"], [1], [], [112])
        tokens = row[0][2]
        return {
            "images_per_s": 1000.0 / tokens,
            "peak_memory_mb": 10.0 * tokens,
        }

    monkeypatch.setattr(suite, "measure_in_subprocess", fake)
    monkeypatch.setattr(suite.flops_lib, "peak_flops", lambda **k: 1e12)
    gap = f"{SIGLIP}:pooling=gap"
    argv = ["--compare", DINO, "S/16", "--compare", SIGLIP, gap]
    argv += ["--image-size", "112", "--batch-size", "8", "--train"]
    assert suite.main([*argv, "--train-batch-size", "2"]) == 0
    # Every model of the pairs, inference and a training step.
    assert [(c["variant"], c["mode"], c["batch_size"]) for c in calls] == [
        (m, mode, batch)
        for m in (DINO, "S/16", SIGLIP, gap)
        for mode, batch in (("inference", 8), ("train", 2))
    ]
    out = capsys.readouterr().out.splitlines()
    table = [line for line in out if "MB peak" in line]
    assert len(table) == 8
    dino, siglip = (
        _flops("S/14", **throughput.model_arguments(DINO)[1]),
        (_flops("B/16", class_token=False, pooling="map")),
    )
    assert f"69 tokens {dino:6.2f} GFLOPs" in table[0]
    assert f"50 tokens {_flops('S/16'):6.2f} GFLOPs" in table[2]
    assert f"49 tokens {siglip:6.2f} GFLOPs" in table[4]
    s16 = _flops("S/16")
    assert (
        f"options cost, {DINO} against S/16, keras_vit train batch 2, 112 px: "
        f"seconds per image 1.38x, peak memory 1.38x; GFLOPs {dino:.2f} "
        f"against {s16:.2f} ({dino / s16:.2f}x), tokens 69 against 50"
    ) in out
    gap_flops = _flops("B/16", class_token=False, pooling="gap")
    assert (
        f"options cost, {SIGLIP} against {gap}, keras_vit inference batch 8, "
        f"112 px: seconds per image 1.00x, peak memory 1.00x; GFLOPs "
        f"{siglip:.2f} against {gap_flops:.2f} ({siglip / gap_flops:.2f}x), "
        "tokens 49 against 49"
    ) in out
    assert sum(line.startswith("options cost") for line in out) == 4


def test_compare_pairs_are_among_the_models():
    with pytest.raises(ValueError, match="compare="):
        suite.run_suite(variants=("S/16",), compare=[("S/16", "B/16")])


def test_models_that_cannot_be_built_fail_before_any_timing(
    capsys, monkeypatch
):
    def no_timing(**kwargs):
        raise AssertionError("timed a model that cannot be built")

    monkeypatch.setattr(suite.flops_lib, "peak_flops", no_timing)
    for model, message in (
        ("B/16:pooling", "model='B/16:pooling'"),
        ("B/16:no_such_argument=1", "no_such_argument=1"),
        (f"{SIGLIP}:pooling=token", "pooling='token'"),
    ):
        assert suite.main(["--model", model]) == 2
        assert message in capsys.readouterr().err


def test_profile_builds_the_models_the_suite_builds(monkeypatch):
    # --profile took builder and variant names only ("Unknown ViT variant"
    # for a preset or an override, which `--model --help` documents).

    models = []
    monkeypatch.setattr(
        profiling, "_time_model", lambda model, *a: models.append(model)
    )
    for part in ("_time_patch_embedding", "_time_block_and_attention"):
        monkeypatch.setattr(profiling, part, lambda *a: None)
    monkeypatch.setattr(profiling, "_pipeline_rate", lambda *a: 1.0)
    lines = []
    for name in (
        "S/16:hidden_dim=16,num_heads=2,mlp_dim=16,num_layers=1",
        f"{SIGLIP}:num_layers=1",
    ):
        profiling.profile(name, image_size=32, printer=lines.append)
    small, siglip = models
    assert (small.hidden_dim, small.num_heads, small.num_layers) == (16, 2, 1)
    assert (siglip.pooling, siglip.class_token) == ("map", False)
    assert siglip.input_shape[1:3] == (32, 32)
    assert lines[0].startswith("S/16:hidden_dim=16") and "32x32" in lines[0]


def test_profile_builds_every_model_before_timing_one(capsys, monkeypatch):
    # A bad name was refused only after the models before it were profiled.
    monkeypatch.setattr(
        profiling, "profile", lambda *a, **k: pytest.fail("profiled")
    )
    code = suite.main(["--profile", "--model", "Ti/16", "ViT_X"])
    assert code == 2
    assert "model='ViT_X'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, flag",
    [
        ('dtype="int32"', "--dtype"),
        ("image_size=64", "--image-size"),
        ("remat=true", "--remat"),
    ],
)
def test_overrides_of_what_a_flag_sets_are_refused(
    override, flag, capsys, monkeypatch
):
    # Each was dropped for the flag's value, the row still labelled with
    # it: Ti/16:dtype="int32" printed a float32 row.
    monkeypatch.setattr(
        suite.flops_lib, "peak_flops", lambda **k: pytest.fail("timed")
    )
    model = f"Ti/16:{override}"
    assert suite.main(["--model", model]) == 2
    err = capsys.readouterr().err
    assert flag in err and f"Received: model={model!r}" in err


def test_a_dynamic_image_size_model_is_timed_at_each_image_size(
    capsys, monkeypatch
):
    # Its rows were labelled with its input shape's height, None: a
    # TypeError in the row formatter, after the machine's peak was timed.
    model = "Ti/16:num_layers=1,dynamic_image_size=true"
    monkeypatch.setattr(suite.flops_lib, "peak_flops", lambda **k: 1e12)
    monkeypatch.setattr(
        suite,
        "measure_in_subprocess",
        lambda timm_python=None, **kwargs: measurement.measure(**kwargs),
    )
    argv = ["--model", model, "--image-size", "32", "48"]
    argv += ["--batch-size", "1", "--train", "--train-batch-size", "1"]
    argv += ["--steps", "1", "--warmup", "0", "--min-seconds", "0"]
    assert suite.main([*argv, "--jit-compile", "off"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines()]
    table = [line for line in table if "MB peak" in line]
    assert len(table) == 4
    for line, size, tokens in zip(table, (32, 32, 48, 48), (5, 5, 10, 10)):
        assert f" {size} px " in line and f" {tokens} tokens " in line, line
    # ONNX Runtime and OpenVINO run its export, at that size too.

    dynamic = throughput.keras_vit_model(model, image_size=48)
    assert runtime_peers._pixels(dynamic, 2).shape == (2, 48, 48, 3)
