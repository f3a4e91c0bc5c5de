"""Bad arguments fail early with a clear ValueError and leave no file."""

import os

import numpy as np
import pytest

from keras_vit import cli
from keras_vit import export
from tests.export.helpers import digits_npz
from tests.export.helpers import listing


def test_unknown_quantization(random_model, tmp_path):
    with pytest.raises(ValueError, match=r"quantize='int4'"):
        export.export_tflite(
            random_model, tmp_path / "m.tflite", quantize="int4"
        )
    assert listing(tmp_path) == []


def test_unknown_format_and_quantization_on_the_command_line(
    random_model_path, tmp_path, capsys
):
    out = str(tmp_path / "m.tflite")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(
            ["export", random_model_path, "--format", "coreml", "--output", out]
        )
    assert exit_info.value.code == 2
    assert "invalid choice: 'coreml'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(
            [
                "export",
                random_model_path,
                "--format",
                "tflite",
                "--output",
                out,
                "--quantize",
                "int4",
            ]
        )
    assert exit_info.value.code == 2
    assert listing(tmp_path) == []


def test_saved_model_refuses_tflite_only_flags(
    random_model_path, tmp_path, capsys
):
    code = cli.main(
        [
            "export",
            random_model_path,
            "--format",
            "saved_model",
            "--output",
            str(tmp_path / "sm"),
            "--quantize",
            "int8",
        ]
    )
    assert code == 2
    assert (
        "--quantize applies to --format tflite only" in capsys.readouterr().err
    )
    assert listing(tmp_path) == []


@pytest.mark.parametrize("quantize", ["int8", "int16x8"])
def test_calibrated_modes_need_representative_data(
    random_model, tmp_path, quantize
):
    with pytest.raises(ValueError, match="representative_data=None"):
        export.export_tflite(
            random_model, tmp_path / "m.tflite", quantize=quantize
        )
    assert listing(tmp_path) == []


def test_representative_data_of_the_wrong_shape(random_model, tmp_path):
    npz = digits_npz(tmp_path / "small.npz", image_size=16)
    with pytest.raises(
        ValueError, match=r"shape \(20, 16, 16, 3\).*\(N, 32, 32, 3\)"
    ):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="int8",
            representative_data=npz,
        )
    assert listing(tmp_path) == ["small.npz"]


def test_representative_data_out_of_pixel_range(random_model, tmp_path):
    images = np.random.default_rng(0).uniform(0, 1, (4, 32, 32, 3)) * 2 - 1
    with pytest.raises(ValueError, match=r"values in \[0, 255\]"):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="int8",
            representative_data=images,
        )


def test_unknown_representative_source(random_model, tmp_path):
    with pytest.raises(
        ValueError, match="representative_data='no/such/file.npy'"
    ):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="int8",
            representative_data="no/such/file.npy",
        )
    with pytest.raises(ValueError, match="does not exist"):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="int8",
            representative_data="missing.npz",
        )
    assert listing(tmp_path) == []


def test_output_in_a_missing_folder(random_model, tmp_path):
    for fn in (export.export_tflite, export.export_saved_model):
        with pytest.raises(ValueError, match="does not exist.*Create it first"):
            fn(random_model, tmp_path / "missing" / "m.tflite")
    assert listing(tmp_path) == []


def test_int_io_needs_int8(random_model, tmp_path):
    with pytest.raises(
        ValueError, match="io_dtype='uint8' with quantize='dynamic'"
    ):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="dynamic",
            io_dtype="uint8",
        )


def test_labels_must_match_the_classes(random_model, tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    with pytest.raises(
        ValueError, match="holds 2 class names but the model has 10"
    ):
        export.export_tflite(
            random_model, tmp_path / "m.tflite", labels=str(labels)
        )
    assert listing(tmp_path) == ["labels.txt"]


def test_model_argument(tmp_path):
    with pytest.raises(ValueError, match="model='ViT_X'"):
        export.inference_model("ViT_X")
    with pytest.raises(ValueError, match="does not exist"):
        export.inference_model(str(tmp_path / "none.keras"))
    with pytest.raises(ValueError, match="image_size"):
        export.inference_model(str(tmp_path / "none.keras"), image_size=64)


def test_a_built_model_with_a_shape_override_keeps_its_weights():
    # The override is refused before the weights are loaded into the
    # caller's model, not after.
    import keras_vit
    from tests.weights.test_golden_parity import TINY
    from tests.weights.test_golden_parity import golden as golden_file

    golden = golden_file("vit_token.npz")
    model = keras_vit.ViT(**TINY)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError, match="image_size"):
        export.inference_model(model, weights=golden, image_size=64)
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    # The same weights without the override do load.
    export.inference_model(model, weights=golden)
    assert any(
        not np.array_equal(a, b) for a, b in zip(model.get_weights(), before)
    )


def test_a_pretraining_model_is_refused_with_a_pointer_to_its_backbone(
    tmp_path, capsys
):
    import keras_vit
    from keras_vit.training import MaskedPatchPrediction
    from tests.export.helpers import TINY_EXPORT

    mpp = MaskedPatchPrediction(keras_vit.ViT(**TINY_EXPORT, include_top=False))
    mpp.build()
    path = str(tmp_path / "model.keras")
    mpp.save(path)
    for model in (mpp, path):
        with pytest.raises(
            ValueError, match="pre-training model.*backbone.keras"
        ):
            export.inference_model(model)
    code = cli.main(
        [
            "export",
            path,
            "--format",
            "tflite",
            "--output",
            str(tmp_path / "m.tflite"),
        ]
    )
    assert code != 0
    assert "backbone.keras" in capsys.readouterr().err
    assert listing(tmp_path) == ["model.keras"]


def test_failed_verification_leaves_nothing(
    random_model, tmp_path, monkeypatch
):
    # LiteRT returning NaN (as a file without its weights does): the
    # verification fails, and the file is not written.
    from keras_vit.export import runtime

    monkeypatch.setattr(
        runtime,
        "run_tflite",
        lambda path, images, *args: np.full(
            (len(images), 10), np.nan, "float32"
        ),
    )
    with pytest.raises(export.VerificationError, match="Nothing was written"):
        export.export_tflite(
            random_model,
            tmp_path / "m.tflite",
            quantize="dynamic",
            num_verify_images=8,
        )
    assert listing(tmp_path) == []
    assert not os.path.exists(tmp_path / "m.json")
