"""`keras-vit benchmark`: the suite, one measurement, FLOPs and the profile."""

import os

import measurement
import profiling
import pytest
import suite
from peers import runtime_peers

import keras_vit
from keras_vit import benchmark
from keras_vit.benchmark import throughput
from tests.helpers import TEST_VARIANT
from tests.helpers import TINY
from tests.helpers import record_step_xla


@pytest.mark.slow
def test_benchmark_measures(capsys, monkeypatch):
    model = keras_vit.ViT(**TINY)
    result = benchmark.benchmark(
        model, batch_size=2, steps=2, warmup=1, train=True
    )
    assert result["inference_images_per_s"] > 0
    assert result["train_images_per_s"] > 0
    for key in ("inference_cores_busy", "train_cores_busy"):
        assert 0 < result[key] <= os.cpu_count() + 0.5, result
    # The command, its measurements run here rather than in a process each
    # (test_rounds_interleave_and_report_medians runs that process), on a
    # Ti/16 of one block: what the rows say does not depend on the depth,
    # and compiling twelve blocks took most of a minute.
    from keras_vit import registry as variants

    monkeypatch.setitem(
        variants.VARIANTS,
        "Ti/16",
        {**variants.VARIANTS["Ti/16"], "num_layers": 1},
    )
    calls = []

    def in_this_process(timm_python=None, **kwargs):
        calls.append(kwargs)
        return measurement.measure(**kwargs)

    monkeypatch.setattr(suite, "measure_in_subprocess", in_this_process)
    # (The matmul peak: tests/benchmark/test_flops.py measures it.)
    monkeypatch.setattr(suite.flops_lib, "peak_flops", lambda **k: 1e12)
    assert (
        suite.main(
            [
                "--model",
                "ViT_Ti16",
                "--image-size",
                "32",
                "--batch-size",
                "2",
                "--train-batch-size",
                "2",
                "--steps",
                "1",
                "--warmup",
                "1",
                "--min-seconds",
                "0",
                "--train",
                "--remat",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "GFLOP/s" in out
    rows = [line for line in out.splitlines() if "images/s" in line]
    assert len(rows) == 2 and all(
        "% of peak" in r and "MB peak" in r for r in rows
    )
    assert all("cores busy" in r for r in rows)
    # The flags reach each measurement.
    assert [
        (
            c["variant"],
            c["mode"],
            c["batch_size"],
            c["image_size"],
            c["remat"],
            c["steps"],
            c["warmup"],
            c["min_seconds"],
        )
        for c in calls
    ] == [
        ("ViT_Ti16", mode, 2, 32, True, 1, 1, 0.0)
        for mode in ("inference", "train")
    ]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_inference_is_timed_as_predict_runs_it(jit_compile, monkeypatch):
    # The forward pass says whether XLA compiles it, as keras_vit's
    # predict step does (the attention's softmax dtype depends on it).
    seen = record_step_xla(monkeypatch)
    throughput.benchmark(
        keras_vit.ViT(**TINY),
        batch_size=2,
        steps=1,
        warmup=0,
        min_seconds=0,
        jit_compile=jit_compile,
    )
    assert seen and set(seen) == {jit_compile}


def test_flop_count_matches_the_known_figures():
    import keras

    with keras.StatelessScope(initialize_variables=False):
        b16 = keras_vit.ViT_B16()
        r50 = keras_vit.ViT_R50_B16()
    assert benchmark.model_flops(b16) / 1e9 == pytest.approx(35.1, abs=0.05)
    # timm reports 16.9 GMACs for the backbone... the hybrid adds its ResNet.
    assert benchmark.model_flops(r50) > benchmark.model_flops(b16)


def test_failing_peers_are_reported_not_fatal():
    # One XLA setting: one process to fail (under "auto", a second; what
    # a setting that fails leaves: the test below).
    row = suite.measure_in_subprocess(
        peer="no_such_peer",
        variant="Ti/16",
        mode="inference",
        batch_size=1,
        jit_compile=False,
    )
    assert "peer='no_such_peer'" in row["error"]


def test_each_xla_setting_is_measured_in_a_process_of_its_own(monkeypatch):
    # Timed in one process, the slower setting's compilation and buffers
    # would count in the faster one's peak memory.
    calls = []

    def fake(kwargs):
        calls.append(kwargs)
        # Each sample its own figure (the n-th call's: n / 10 more).
        rate = (7.0 if kwargs["jit_compile"] else 5.0) + len(calls) / 10
        return {"images_per_s": rate, "peak_memory_mb": 100 + rate}

    monkeypatch.setattr(suite, "_in_worker", fake)
    row = suite.measure_in_subprocess(
        peer="keras_vit", variant="Ti/16", mode="inference", batch_size=1
    )
    # The faster setting (XLA: 7.2 against 5.1) is timed again in a third
    # process, and that unselected sample is reported (7.3, not the
    # faster-of-two 7.2, biased up), with its own peak memory.
    assert [c["jit_compile"] for c in calls] == [False, True, True]
    assert row == {"images_per_s": 7.3, "peak_memory_mb": 107.3}
    calls.clear()
    row = suite.measure_in_subprocess(
        peer="keras_vit",
        variant="Ti/16",
        mode="train",
        batch_size=1,
        jit_compile=False,
    )
    assert [c["jit_compile"] for c in calls] == [False]
    # Under "auto" a training row's one worker picks the setting from its
    # model's tokens (`measure`).
    calls.clear()
    suite.measure_in_subprocess(
        peer="keras_vit", variant="Ti/16", mode="train", batch_size=1
    )
    assert [c["jit_compile"] for c in calls] == ["auto"]
    # A setting that fails leaves the other's result; both failing, the
    # first error.
    monkeypatch.setattr(
        suite,
        "_in_worker",
        lambda kwargs: (
            {"error": "no"} if kwargs["jit_compile"] else {"images_per_s": 1.0}
        ),
    )
    row = suite.measure_in_subprocess(
        peer="keras_vit", variant="Ti/16", mode="inference", batch_size=1
    )
    assert row == {"images_per_s": 1.0}
    monkeypatch.setattr(suite, "_in_worker", lambda kwargs: {"error": "no"})
    row = suite.measure_in_subprocess(
        peer="keras_vit", variant="Ti/16", mode="inference", batch_size=1
    )
    assert row == {"error": "no"}


def test_bad_model_name_is_a_clear_error(capsys):
    assert suite.main(["--model", "ViT_X"]) == 2
    assert "model='ViT_X'" in capsys.readouterr().err


@pytest.mark.slow
def test_profile_times_every_part(capsys, monkeypatch):
    # Two blocks instead of twelve: the parts printed do not depend on the
    # depth, and compiling a 12-block training step took most of a minute.
    from keras_vit import registry as variants

    monkeypatch.setitem(
        variants.VARIANTS,
        "Ti/16",
        {**variants.VARIANTS["Ti/16"], "num_layers": 2},
    )
    assert (
        suite.main(
            [
                "--model",
                "Ti/16",
                "--image-size",
                "32",
                "--batch-size",
                "2",
                "--steps",
                "1",
                "--warmup",
                "1",
                "--min-seconds",
                "0",
                "--profile",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    for part in (
        "forward, XLA off",
        "training step",
        "strided Conv2D",
        "dot_product_attention",
        "MultiHeadAttention",
        "tf.data pipeline",
    ):
        assert part in out
    assert "(x2 blocks)" in out


def test_auto_xla_times_inference_both_ways_and_reports_which(monkeypatch):
    # "auto" keeps the faster of XLA on / off for inference (neither wins
    # at every size on a CPU) and says which; training uses XLA.
    assert throughput.jit_choices("auto", "inference") == (False, True)
    assert throughput.jit_choices("auto", "train") == (True,)
    assert throughput.jit_choices(False, "inference") == (False,)
    # Training as `keras-vit train` runs it: not XLA for bfloat16 on a CPU.
    assert throughput.jit_choices("auto", "train", "mixed_bfloat16", "cpu") == (
        False,
    )
    assert throughput.jit_choices("auto", "train", "mixed_bfloat16", "gpu") == (
        True,
    )
    # and not for float32 over long sequences (Ti/16 at 384 px: 577
    # tokens) or of wide models (B/16: 768 features).
    for variant, size, xla in (
        ("Ti/16", 224, True),
        ("Ti/16", 384, False),
        ("B/16", 224, False),
    ):
        shape = measurement.sequence_shape(variant, size)
        assert shape[0] == {224: 197, 384: 577}[size]
        assert throughput.jit_choices("auto", "train", None, "cpu", shape) == (
            xla,
        )
    # `measure` takes the tokens from the model it times (Ti/16 in 4 px
    # patches: 65 tokens at 32 px, 577 at 96 px).
    monkeypatch.setattr(measurement, "train_rate", lambda *args: (1.0, 1.0))
    for size, xla in ((32, True), (96, False)):
        row = measurement.measure(
            peer="keras_vit",
            variant="Ti/16:patch_size=4,num_layers=1",
            mode="train",
            batch_size=1,
            image_size=size,
        )
        assert row["xla"] is xla, size
    row = measurement.measure(  # (both settings compiled: a tiny model)
        peer="keras_vit",
        variant=TEST_VARIANT,
        mode="inference",
        batch_size=1,
        steps=1,
        warmup=1,
        image_size=32,
    )
    assert row["xla"] in (True, False) and row["images_per_s"] > 0
    # Whichever setting is faster is the one reported, timed again: the
    # rate of a sample taken after the choice (the faster of two samples
    # is biased up), not the sample that won it.
    for faster in (True, False):
        rates = {faster: [7.0, 6.0], not faster: [5.0]}
        seen = []

        def fake(*a, jit_compile, **k):
            seen.append(jit_compile)  # noqa: B023
            rate = rates[jit_compile].pop(0)  # noqa: B023
            return {
                "inference_images_per_s": rate,
                "inference_cores_busy": rate / 10,
            }

        monkeypatch.setattr(throughput, "benchmark", fake)
        row = measurement.measure(
            peer="keras_vit",
            variant="Ti/16",
            mode="inference",
            batch_size=1,
            image_size=32,
        )
        assert seen == [False, True, faster]
        # ... and the cores busy of that same measurement.
        assert (row["xla"], row["images_per_s"], row["cores_busy"]) == (
            faster,
            6.0,
            0.6,
        )
    line = suite._format_row(
        {
            "variant": "Ti/16",
            "image_size": 32,
            "peer": "keras_vit",
            "mode": "inference",
            "batch": 1,
            "fraction_of_peak": 0.5,
            **row,
        }
    )
    assert line.endswith("XLA")


@pytest.mark.slow
def test_rounds_interleave_and_report_medians(capsys, monkeypatch):
    # The registered test variant: each round's rows are measured in
    # processes of their own, and what they say does not depend on the
    # model's size; nor on the matmul peak, which takes seconds to measure
    # (tests/benchmark/test_flops.py measures it).
    monkeypatch.setattr(suite.flops_lib, "peak_flops", lambda **k: 1e12)
    assert (
        suite.main(
            [
                "--model",
                TEST_VARIANT,
                "--image-size",
                "32",
                "--batch-size",
                "2",
                "--steps",
                "1",
                "--warmup",
                "1",
                "--min-seconds",
                "0",
                "--jit-compile",
                "off",
                "--rounds",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("round 1/2") for line in out) == 1
    assert sum(line.startswith("round 2/2") for line in out) == 1
    median = out[out.index("median of 2 interleaved rounds:") + 1]
    assert "images/s" in median and "(rounds " in median and "no XLA" in median
    assert suite.main(["--model", "Ti/16", "--rounds", "0"]) == 2
    assert "rounds=0" in capsys.readouterr().err


def test_row_takes_the_median_rate_and_the_largest_memory():
    key = ("Ti/16", 224, 197, 1e9, "keras_vit", "inference", 8)
    results = [
        {"images_per_s": r, "peak_memory_mb": m, "xla": x}
        for r, m, x in (
            (10.0, 900, True),
            (30.0, 800, False),
            (20.0, 700, True),
        )
    ]
    row = suite._row(key, results, peak=1e10)
    assert row["images_per_s"] == 20.0 and row["peak_memory_mb"] == 900
    assert row["xla"] is True and row["images_per_s_range"] == (10.0, 30.0)
    assert row["fraction_of_peak"] == pytest.approx(1e9 * 20.0 / 1e10)
    failed = suite._row(key, [{"error": "not installed"}], peak=1e10)
    assert failed["error"] == "not installed"


def test_min_seconds_must_be_a_number_at_least_zero(capsys):
    for bad in (-1, float("nan"), "1"):
        with pytest.raises(ValueError, match="min_seconds"):
            suite.run_suite(variants=("Ti/16",), min_seconds=bad)
        with pytest.raises(ValueError, match="min_seconds"):
            measurement.measure(
                peer="keras_vit",
                variant="Ti/16",
                mode="inference",
                batch_size=1,
                min_seconds=bad,
            )
    for mode in ([], ["--profile"]):
        assert (
            suite.main(["--model", "Ti/16", "--min-seconds", "-1", *mode]) == 2
        )
        assert "min_seconds=-1.0" in capsys.readouterr().err


def test_bad_settings_are_named_before_anything_is_timed(monkeypatch):
    # Each was taken as something else: a mode other than "inference"
    # timed training, jit_compile="off" turned XLA on (bool("off")),
    # image_size=0 built 224 px, warmup=-1 warmed nothing up.
    def timed(*args, **kwargs):
        raise AssertionError("timed despite a bad setting")

    monkeypatch.setattr(suite, "print_peak", timed)
    monkeypatch.setattr(suite, "_in_worker", timed)
    monkeypatch.setattr(throughput, "keras_vit_model", timed)
    one = dict(peer="keras_vit", variant="Ti/16", mode="inference")
    for bad, message in [
        ({"mode": "infer"}, "mode='infer'"),
        ({"jit_compile": "off"}, "jit_compile='off'"),
        ({"image_size": 0}, "image_size=0"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"steps": 0}, "steps=0"),
        ({"warmup": -1}, "warmup=-1"),
        ({"dtype": "int32"}, "dtype='int32'"),
    ]:
        kwargs = {**one, "batch_size": 1, **bad}
        for measure in (measurement.measure, suite.measure_in_subprocess):
            with pytest.raises(ValueError, match=message):
                measure(**kwargs)
    with pytest.raises(ValueError, match="jit_compile='off'"):
        throughput.jit_choices("off", "inference")
    for bad, message in [
        ({"peers": ("tim",)}, "peers='tim'"),
        ({"inference_batches": (8, 0)}, "inference_batches=0"),
        ({"train_batches": -1}, "train_batches=-1"),
        ({"jit_compile": "on"}, "jit_compile='on'"),
        ({"warmup": -1}, "warmup=-1"),
    ]:
        with pytest.raises(ValueError, match=message):
            suite.run_suite(variants="Ti/16", **bad)
    model = keras_vit.ViT(**TINY)
    for bad, message in [
        ({"batch_size": 0}, "batch_size=0"),
        ({"jit_compile": "off"}, "jit_compile='off'"),
        ({"steps": 0}, "steps=0"),
    ]:
        with pytest.raises(ValueError, match=message):
            benchmark.benchmark(model, **bad)
    with pytest.raises(ValueError, match="image_size=0"):
        profiling.profile("Ti/16", image_size=0)


def test_profile_refuses_the_flags_it_would_ignore(capsys, monkeypatch):
    # --profile times float32 keras_vit alone: --dtype mixed_bfloat16 was
    # dropped, and the float32 profile printed as if it were bfloat16's.
    monkeypatch.setattr(
        profiling, "profile", lambda *a, **k: pytest.fail("profiled")
    )
    for flags, shown in [
        (["--dtype", "mixed_bfloat16"], "--dtype mixed_bfloat16"),
        (["--jit-compile", "on"], "--jit-compile on"),
        (["--train"], "--train True"),
        (["--peers", "timm"], "--peers ['timm']"),
        (["--rounds", "3"], "--rounds 3"),
    ]:
        code = suite.main(["--model", "Ti/16", "--profile", *flags])
        assert code == 2
        assert f"Received: {shown}" in capsys.readouterr().err


def test_the_suite_refuses_the_flags_it_would_ignore(capsys, monkeypatch):
    # Each was dropped without a word: training batches and --remat without
    # --train (the header said "remat on"), --timm-python without timm, and
    # --profile took the last of several --batch-size.
    monkeypatch.setattr(suite, "run_suite", lambda **k: pytest.fail("timed"))
    monkeypatch.setattr(
        profiling, "profile", lambda *a, **k: pytest.fail("profiled")
    )
    for flags, shown in [
        (["--train-batch-size", "4"], "--train-batch-size [4]"),
        (["--remat"], "--remat True"),
        (["--timm-python", "/envs/timm/python"], "--timm-python /envs/"),
        (
            ["--peers", "keras_hub", "--timm-python", "python"],
            "--timm-python python",
        ),
        (["--profile", "--batch-size", "1", "8"], "--batch-size 1 8"),
    ]:
        code = suite.main(["--model", "Ti/16", *flags])
        assert code == 2
        assert f"Received: {shown}" in capsys.readouterr().err


def test_the_suite_takes_the_flags_it_uses(capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(suite, "run_suite", lambda **k: calls.append(k))
    monkeypatch.setattr(profiling, "profile", lambda *a, **k: calls.append(k))
    for flags in (
        ["--train", "--train-batch-size", "4", "--remat"],
        ["--peers", "timm", "--timm-python", "python"],
        [],
        ["--profile", "--batch-size", "2"],
        ["--profile"],
    ):
        assert suite.main(["--model", "Ti/16", *flags]) == 0
    suite_calls = [
        (c["inference_batches"], c["train_batches"], c["remat"])
        for c in calls[:3]
    ]
    assert suite_calls == [
        ([1, 8], [4], True),
        ([1, 8], [], False),
        ([1, 8], [], False),
    ]
    assert calls[1]["timm_python"] == "python"
    # --profile times one batch, 8 (profile's default) unless given.
    assert calls[3]["batch_size"] == 2 and "batch_size" not in calls[4]
    assert "remat on" in capsys.readouterr().out


def test_one_variant_or_batch_needs_no_tuple():
    assert suite._names("Ti/16") == ("Ti/16",)
    assert suite._names(["Ti/16", "B/16"]) == ("Ti/16", "B/16")
    assert suite._batches("train_batches", 8) == (8,)


def test_runtimes_are_timed_for_inference_only():
    for peer in measurement.RUNTIMES:
        with pytest.raises(
            ValueError, match=f"{peer} is timed for inference only"
        ):
            measurement.measure(
                peer=peer, variant="Ti/16", mode="train", batch_size=1
            )


def _fake_rate(peer, image_size, mode):
    """images/s of the fake peers: keras_vit twice timm's at 32 px, its
    seconds per image growing as the tokens (5 -> 17 from 32 to 64 px:
    3.4x), timm's as their square."""
    tokens = (image_size // 16) ** 2 + 1
    if peer == "keras_vit":
        return 5 * 100.0 / tokens
    return 5**2 * 50.0 / tokens**2


def test_every_peer_is_timed_at_every_image_size(capsys, monkeypatch):
    calls = []

    def fake(timm_python=None, **kwargs):
        calls.append(kwargs)
        rate = _fake_rate(kwargs["peer"], kwargs["image_size"], kwargs["mode"])
        return {"images_per_s": rate, "peak_memory_mb": 10.0 * rate}

    monkeypatch.setattr(suite, "measure_in_subprocess", fake)
    monkeypatch.setattr(suite.flops_lib, "peak_flops", lambda **k: 1e12)
    assert (
        suite.main(
            [
                "--model",
                "Ti/16",
                "--image-size",
                "32",
                "64",
                "--batch-size",
                "2",
                "--train",
                "--train-batch-size",
                "4",
                "--peers",
                "timm",
                "onnxruntime",
            ]
        )
        == 0
    )
    # Each peer at each size; the runtime for inference only.
    assert sorted(
        (c["peer"], c["image_size"], c["mode"], c["batch_size"]) for c in calls
    ) == sorted(
        [(p, s, "inference", 2) for p in PEERS3 for s in (32, 64)]
        + [(p, s, "train", 4) for p in PEERS3[:2] for s in (32, 64)]
    )
    out = capsys.readouterr().out
    assert "image sizes [32, 64]" in out
    table = [line for line in out.splitlines() if "MB peak" in line]
    assert len(table) == 10
    assert sum(" 32 px " in line for line in table) == 5
    assert sum(" 64 px " in line for line in table) == 5
    summary = out.splitlines()
    # keras_vit 2x timm at 32 px; at 64 px 2 x 17 / 5 = 6.8x.
    assert (
        "keras_vit / timm, Ti/16 train batch 4: images/s 32 px 2.00x, "
        "64 px 6.80x; peak memory 32 px 2.00x, 64 px 6.80x" in summary
    )
    assert any(
        line.startswith("keras_vit / onnxruntime, Ti/16 inference batch 2: ")
        for line in summary
    )
    growth = [line for line in summary if line.startswith("cost growth")]
    assert len(growth) == 5
    assert (
        "cost growth, keras_vit Ti/16 train batch 4, seconds per image "
        "against 32 px: 64 px 3.40x for 3.40x tokens (exponent 1.00)"
    ) in growth
    assert (
        "cost growth, timm Ti/16 train batch 4, seconds per image "
        "against 32 px: 64 px 11.56x for 3.40x tokens (exponent 2.00)"
    ) in growth


PEERS3 = ("keras_vit", "timm", "onnxruntime")


def test_the_summary_leaves_out_failed_rows_and_single_sizes():
    row = {
        "variant": "B/16",
        "mode": "inference",
        "batch": 1,
        "image_size": 224,
        "tokens": 197,
        "images_per_s": 4.0,
        "peak_memory_mb": 100.0,
    }
    rows = [
        {**row, "peer": "keras_vit"},
        {**row, "peer": "timm", "images_per_s": 2.0, "peak_memory_mb": 200.0},
        {**row, "peer": "keras_hub", "error": "not installed"},
    ]
    for r in rows[2:]:
        del r["images_per_s"]
    assert suite.summary_lines(rows) == [
        "keras_vit / timm, B/16 inference batch 1: images/s 224 px 2.00x; "
        "peak memory 224 px 0.50x"
    ]


def test_image_sizes_are_checked():
    assert suite._image_sizes(None) == (None,)
    assert suite._image_sizes(384) == (384,)
    assert suite._image_sizes([224, 384]) == (224, 384)
    for bad in ([], [224, 0]):
        with pytest.raises(ValueError, match="image_size"):
            suite._image_sizes(bad)


def test_keras_hub_and_the_runtimes_build_at_the_image_size(monkeypatch):
    built = []

    def keras_hub_model(variant, dtype, image_size):
        built.append(("keras_hub", image_size))
        raise RuntimeError("stop here")

    monkeypatch.setattr(measurement.keras_hub_peer, "model", keras_hub_model)
    with pytest.raises(RuntimeError, match="stop here"):
        measurement.measure(
            peer="keras_hub",
            variant="Ti/16",
            mode="inference",
            batch_size=1,
            image_size=48,
        )

    def onnx(model, batch_size, steps, warmup, min_seconds):
        built.append(("onnxruntime", model.input_shape[1]))
        return 1.0, 1.0

    monkeypatch.setattr(measurement.runtime_peers, "time_onnxruntime", onnx)
    row = measurement.measure(
        peer="onnxruntime",
        variant="Ti/16",
        mode="inference",
        batch_size=1,
        image_size=48,
    )
    assert row["images_per_s"] == 1.0
    assert built == [("keras_hub", 48), ("onnxruntime", 48)]


def test_keras_vit_benchmark_model_gives_logits_as_its_peers():
    # The training rows' loss takes logits (from_logits=True), as timm's
    # and keras-hub's models give them.
    model = throughput.keras_vit_model("Ti/16", image_size=32)
    assert model.classifier_activation is None
    named = throughput.keras_vit_model(
        "Ti/16:classifier_activation=softmax", image_size=32
    )
    assert named.classifier_activation == "softmax"


def test_runtime_memory_is_marked_not_comparable(monkeypatch):
    # ONNX Runtime's and OpenVINO's process imports TensorFlow, builds the
    # Keras model and exports it before the runtime runs: its peak memory
    # is marked and footnoted, not set against the other peers' as theirs.

    monkeypatch.setattr(
        runtime_peers, "time_onnxruntime", lambda *args: (0.5, 1.0)
    )
    result = measurement.measure(
        peer="onnxruntime",
        variant="Ti/16:num_layers=1",
        mode="inference",
        batch_size=1,
        image_size=32,
    )
    assert result["images_per_s"] == 2.0 and result["peak_memory_mb"] > 0
    assert result["memory_includes_export"] is True
    row = {
        "variant": "Ti/16",
        "image_size": 32,
        "tokens": 17,
        "mode": "inference",
        "batch": 1,
        "fraction_of_peak": 0.1,
    }
    ours = {**row, "peer": "keras_vit", "images_per_s": 4.0}
    ours["peak_memory_mb"] = 100.0
    theirs = {**row, "peer": "onnxruntime", **result}
    assert "MB peak*" in suite._format_row(theirs)
    assert "MB peak*" not in suite._format_row(ours)
    assert suite.summary_lines([ours, theirs]) == [
        suite.MEMORY_NOTE,
        "keras_vit / onnxruntime, Ti/16 inference batch 1: images/s "
        "32 px 2.00x; peak memory 32 px not comparable (*)",
    ]
