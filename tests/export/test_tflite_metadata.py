"""The TFLite Metadata in every `.tflite` file: read back by keras_vit's
reader and by MediaPipe's generated schema, used by `keras-vit predict`
without the sidecar, and run by MediaPipe Tasks' `ImageClassifier` and
`ImageEmbedder` (the C++ core of Android and iOS)."""

import os
import shutil

import flatbuffers
import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import export
from keras_vit.cli import predict
from keras_vit.data import resize
from keras_vit.export import graph
from keras_vit.export import runtime
from keras_vit.export import tflite
from keras_vit.export import tflite_metadata
from tests.export.helpers import TINY_EXPORT
from tests.export.helpers import digits_npz
from tests.helpers import random_images
from tests.helpers import randomize_weights
from tests.weights.test_loading import local_preset  # noqa: F401


def _read(path):
    with open(path, "rb") as file:
        return file.read()


def test_the_export_carries_metadata_read_back(random_tflite_path):
    found = tflite_metadata.read(_read(random_tflite_path))
    assert found["name"] == "tiny_random"
    assert found["min_parser_version"] == "1.0.0"
    assert found["input"] == {
        "height": 32,
        "width": 32,
        "mean": [0.0, 0.0, 0.0],
        "std": [1.0, 1.0, 1.0],
    }
    assert found["output_kind"] == "probabilities"
    assert found["class_names"] == [f"class_{i}" for i in range(10)]


def test_the_converters_bytes_carry_metadata_too(random_model_path):
    model = keras.saving.load_model(random_model_path, compile=False)
    found = tflite_metadata.read(
        tflite.tflite_bytes(model, labels=list("abcdefghij"))
    )
    assert found["class_names"] == list("abcdefghij")
    assert found["input"]["mean"] == [0.0, 0.0, 0.0]


def test_a_preset_models_export_carries_its_licence(
    local_preset,  # noqa: F811 (the fixture)
    random_tflite_path,
    tmp_path,
):
    local_preset["license"] = "MIT"  # the record in the registry
    model = keras_vit.ViT.from_preset("vit_tiny8_tiny_test")
    assert model.weights_preset == "vit_tiny8_tiny_test"
    model.save(str(tmp_path / "m.keras"))  # the record travels in the file
    path = str(tmp_path / "m.tflite")
    export.export_tflite(str(tmp_path / "m.keras"), path, verify=False)
    found = tflite_metadata.read(_read(path))
    assert found["licence"] == "MIT"
    assert "vit_tiny8_tiny_test" in found["description"]
    assert local_preset["url"] in found["description"]
    # A model of no preset (the run's shared random one): none.
    plain = tflite_metadata.read(_read(random_tflite_path))
    assert plain["licence"] is None


@pytest.mark.parametrize("name", ["", 3])
def test_weights_preset_is_a_name(name):
    with pytest.raises(ValueError, match=f"weights_preset={name!r}"):
        keras_vit.ViT(**TINY_EXPORT, weights_preset=name)


def test_a_preset_unknown_here_still_loads_and_exports_no_licence(tmp_path):
    # Renamed since, or registered at run time where the file was saved.
    model = keras_vit.ViT(**TINY_EXPORT, weights_preset="vit_gone_since")
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"))
    assert loaded.weights_preset == "vit_gone_since"
    found = tflite_metadata.read(tflite.tflite_bytes(loaded))
    assert found["licence"] is None


def test_mediapipes_schema_reads_the_same(random_tflite_path):
    schema = pytest.importorskip(
        "mediapipe.tasks.metadata.metadata_schema_py_generated"
    )
    buffer = tflite_metadata.metadata_buffer(_read(random_tflite_path))
    assert schema.ModelMetadata.ModelMetadataBufferHasIdentifier(buffer, 0)
    meta = schema.ModelMetadataT.InitFromObj(
        schema.ModelMetadata.GetRootAs(buffer, 0)
    )
    image = meta.subgraphMetadata[0].inputTensorMetadata[0]
    props = image.content.contentProperties
    assert image.content.contentPropertiesType == (
        schema.ContentProperties.ImageProperties
    )
    assert props.colorSpace == schema.ColorSpaceType.RGB
    assert (props.defaultSize.width, props.defaultSize.height) == (32, 32)
    unit = image.processUnits[0]
    assert unit.optionsType == schema.ProcessUnitOptions.NormalizationOptions
    assert list(unit.options.mean) == [0, 0, 0]
    assert list(unit.options.std) == [1, 1, 1]
    output = meta.subgraphMetadata[0].outputTensorMetadata[0]
    assert output.associatedFiles[0].name == b"labels.txt"
    assert output.associatedFiles[0].type == (
        schema.AssociatedFileType.TENSOR_AXIS_LABELS
    )
    assert (list(output.stats.min), list(output.stats.max)) == ([0], [1])


@pytest.mark.parametrize(
    "normalization, mean, std",
    [
        (None, [127.5] * 3, [127.5] * 3),
        (
            {"mean": (0.5, 0.25, 0.0), "std": (0.5, 0.25, 1.0)},
            [127.5, 63.75, 0.0],
            [127.5, 63.75, 255.0],
        ),
    ],
)
def test_normalised_inputs_state_their_pixel_normalization(
    normalization, mean, std
):
    model = keras_vit.ViT(
        **TINY_EXPORT,
        include_preprocessing=False,
        normalization=normalization,
    )
    assert tflite_metadata.pixel_normalization(model) == (mean, std)


def test_predict_needs_no_sidecar(random_tflite_path, tmp_path):
    alone = str(tmp_path / "alone.tflite")
    shutil.copyfile(random_tflite_path, alone)
    photos = random_images((2, 32, 32, 3), seed=5).astype("uint8")
    paths = []
    for i, photo in enumerate(photos):
        paths.append(str(tmp_path / f"p{i}.png"))
        keras.utils.save_img(paths[-1], photo)
    with_sidecar = predict.load_predictor(str(random_tflite_path))
    without = predict.load_predictor(alone)
    assert not os.path.exists(str(tmp_path / "alone.json"))
    assert without.class_names == with_sidecar.class_names
    np.testing.assert_allclose(
        without.predict(paths), with_sidecar.predict(paths), atol=1e-6
    )


def test_a_damaged_tflite_without_sidecar_is_named(tmp_path):
    path = str(tmp_path / "broken.tflite")
    with open(path, "wb") as file:
        file.write(b"\x10\x00\x00\x00TFL3" + b"\xff" * 40)
    with pytest.raises(ValueError, match="broken.tflite"):
        predict.load_predictor(path)


# MediaPipe Tasks: the real client.


def _model(seed=3, scale=0.2, **options):
    model = keras_vit.ViT(**TINY_EXPORT, name="tiny", **options)
    randomize_weights(model, seed=seed, scale=scale)
    return model


def _mp_image(mp, pixels):
    return mp.Image(image_format=mp.ImageFormat.SRGB, data=pixels)


def _classify(path, pixels):
    mp = pytest.importorskip("mediapipe")
    from mediapipe.tasks.python import vision
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = vision.ImageClassifierOptions(
        base_options=BaseOptions(model_asset_path=str(path))
    )
    with vision.ImageClassifier.create_from_options(options) as classifier:
        results = [
            classifier.classify(_mp_image(mp, p)).classifications[0]
            for p in pixels
        ]
    return [
        (
            [c.category_name for c in r.categories],
            [c.score for c in r.categories],
        )
        for r in results
    ]


#: Score tolerance against Keras, by quantization.
SCORE_ATOL = {"none": 1e-5, "float16": 5e-3, "dynamic": 0.03, "int8": 0.06}


def _export(tmp_path, model, quantize="none"):
    model.save(str(tmp_path / "m.keras"))
    npz = digits_npz(tmp_path / "digits.npz")
    options = {"quantize": quantize}
    if quantize == "int8":
        options.update(representative_data=npz, io_dtype="uint8")
    path = str(tmp_path / "m.tflite")
    export.export_tflite(
        str(tmp_path / "m.keras"), path, verify=False, **options
    )
    return path, np.load(npz)["images"][:8].astype("uint8")


@pytest.mark.parametrize("quantize", ["none", "float16", "dynamic", "int8"])
def test_mediapipe_classifier_gives_keras_top_k(quantize, tmp_path):
    pytest.importorskip("mediapipe")
    model = _model()
    path, pixels = _export(tmp_path, model, quantize)
    expected = model.predict(pixels.astype("float32"), verbose=0)
    # The same file run by keras_vit (inputs quantized with the input's
    # own scale and zero point): MediaPipe feeds what it should.
    own = runtime.run_tflite(path, pixels.astype("float32"))
    for (labels, scores), row, mine in zip(
        _classify(path, pixels), expected, own
    ):
        indices = [int(label.split("_")[1]) for label in labels]
        assert len(indices) == 10
        np.testing.assert_allclose(scores, mine[indices], atol=1e-6)
        assert scores == sorted(scores, reverse=True)
        np.testing.assert_allclose(
            scores, row[indices], atol=SCORE_ATOL[quantize]
        )
        # Its top class is Keras's, or within the mode's tolerance of it.
        assert row[indices[0]] >= row.max() - SCORE_ATOL[quantize]


def test_mediapipe_ranks_a_logits_classifier(tmp_path):
    # A logits classifier's scores are its logits: ranked as Keras's.
    model = _model(classifier_activation=None)
    path, pixels = _export(tmp_path, model)
    expected = model.predict(pixels.astype("float32"), verbose=0)
    for (labels, scores), row in zip(_classify(path, pixels), expected):
        indices = [int(label.split("_")[1]) for label in labels]
        assert indices == list(np.argsort(-row, kind="stable"))
        np.testing.assert_allclose(scores, row[indices], atol=1e-5)


def test_mediapipe_embedder_gives_keras_features(tmp_path):
    mp = pytest.importorskip("mediapipe")
    from mediapipe.tasks.python import vision
    from mediapipe.tasks.python.core.base_options import BaseOptions

    model = _model(include_top=False)
    path, pixels = _export(tmp_path, model)
    assert tflite_metadata.read(_read(path))["class_names"] is None
    features = model.predict(pixels.astype("float32"), verbose=0)
    options = vision.ImageEmbedderOptions(
        base_options=BaseOptions(model_asset_path=path)
    )
    with vision.ImageEmbedder.create_from_options(options) as embedder:
        embeddings = [
            embedder.embed(_mp_image(mp, p)).embeddings[0] for p in pixels
        ]
    for i in range(1, len(pixels)):
        got = vision.ImageEmbedder.cosine_similarity(
            embeddings[0], embeddings[i]
        )
        a, b = features[0], features[i]
        want = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
        assert abs(got - want) < 1e-5


def test_mediapipe_takes_the_region_of_interest(tmp_path):
    # The whole image as the region is the stretch; the centre crop's is
    # another input.
    mp = pytest.importorskip("mediapipe")
    from mediapipe.tasks.python import vision
    from mediapipe.tasks.python.components.containers.rect import RectF
    from mediapipe.tasks.python.core.base_options import BaseOptions

    crop = {"crop_pct": 0.875, "interpolation": "bilinear", "antialias": False}
    path, _ = _export(tmp_path, _model(scale=1.0))
    photo = random_images((1, 48, 64, 3), seed=7)[0].astype("uint8")
    options = vision.ImageClassifierOptions(
        base_options=BaseOptions(model_asset_path=path)
    )
    scores = []
    with vision.ImageClassifier.create_from_options(options) as classifier:
        for image_resize in (None, None, crop):
            roi = resize.region_of_interest(photo.shape, (32, 32), image_resize)
            processing = vision.ImageProcessingOptions(
                region_of_interest=RectF(**roi)
            )
            if not scores:
                processing = None  # no region: stretched
            result = classifier.classify(_mp_image(mp, photo), processing)
            scores.append(
                {
                    c.category_name: c.score
                    for c in result.classifications[0].categories
                }
            )
    assert scores[1] == pytest.approx(scores[0], abs=1e-6)
    assert scores[2] != pytest.approx(scores[0], abs=1e-3)


def test_another_writers_metadata_is_not_taken_for_keras_vits(
    random_tflite_path, random_model, tmp_path, monkeypatch
):
    def name_only(model, **fields):  # a ModelMetadata with a name alone
        builder = flatbuffers.Builder(64)
        name = builder.CreateString("other")
        builder.StartObject(1)
        builder.PrependUOffsetTRelativeSlot(0, name, 0)
        builder.Finish(builder.EndObject(), b"M001")
        return bytes(builder.Output())

    monkeypatch.setattr(tflite_metadata, "metadata_bytes", name_only)
    data = tflite_metadata.attach(
        _read(random_tflite_path), random_model, ["a"] * 10
    )
    path = tmp_path / "other.tflite"
    path.write_bytes(data)
    assert tflite_metadata.read(data)["name"] == "other"
    assert graph.read_graph(str(path)).histogram()  # still a readable graph
    with pytest.raises(ValueError, match="not keras_vit's.*other.tflite"):
        predict.load_predictor(str(path))


def test_a_uint8_input_is_the_pixels_whatever_the_calibration(tmp_path):
    # Calibration images that never reach 0 or 255 would give the uint8
    # input another scale: MediaPipe, feeding pixels as they are, would
    # compute on misread inputs. The export pins the range to [0, 255].
    model = _model()
    model.save(str(tmp_path / "m.keras"))
    dim = random_images((20, 32, 32, 3), seed=3) * 0.4 + 60.0  # [60, 162]
    np.savez(tmp_path / "dim.npz", images=dim.astype("uint8"))
    path = str(tmp_path / "m.tflite")
    export.export_tflite(
        str(tmp_path / "m.keras"),
        path,
        quantize="int8",
        io_dtype="uint8",
        representative_data=str(tmp_path / "dim.npz"),
        verify=False,
    )
    details = runtime.io_details(path)
    assert details["input_dtype"] == "uint8"
    assert details["input_quantization"] == {"scale": 1.0, "zero_point": 0}


def test_a_uint8_input_of_normalised_values_is_refused(tmp_path):
    model = _model(include_preprocessing=False)
    model.save(str(tmp_path / "m.keras"))
    path = tmp_path / "m.tflite"
    with pytest.raises(ValueError, match="io_dtype='uint8'"):
        export.export_tflite(
            str(tmp_path / "m.keras"),
            str(path),
            quantize="int8",
            io_dtype="uint8",
            representative_data="digits",  # normalised for the model
            verify=False,
        )
    assert os.listdir(tmp_path) == ["m.keras"]


def test_mediapipe_refuses_an_int8_input_rather_than_misread_it(tmp_path):
    # An int8 input cannot hold pixels as they are; MediaPipe says so.
    pytest.importorskip("mediapipe")
    from mediapipe.tasks.python import BaseOptions
    from mediapipe.tasks.python import vision

    model = _model()
    model.save(str(tmp_path / "m.keras"))
    path = str(tmp_path / "m.tflite")
    export.export_tflite(
        str(tmp_path / "m.keras"),
        path,
        quantize="int8",
        io_dtype="int8",
        representative_data="digits",
        verify=False,
    )
    options = vision.ImageClassifierOptions(
        base_options=BaseOptions(model_asset_path=path)
    )
    with pytest.raises(ValueError, match="uint8/float32, got INT8"):
        vision.ImageClassifier.create_from_options(options)


def test_a_file_with_weights_after_the_flatbuffer_is_left_whole(
    random_model_path,
):
    # Over 2 GB the converter stores the weights after the flatbuffer, at
    # offsets: a repacked model would drop them. Such a file is kept as the
    # converter wrote it (a small one marked so stands in for it).
    from tensorflow.lite.python import schema_py_generated as schema

    model = keras.saving.load_model(random_model_path, compile=False)
    model_t = schema.ModelT.InitFromObj(
        schema.Model.GetRootAs(tflite.tflite_bytes(model), 0)
    )
    model_t.buffers[-1].offset, model_t.buffers[-1].size = 1 << 31, 4
    builder = flatbuffers.Builder(1024)
    builder.Finish(model_t.Pack(builder), tflite_metadata.MODEL_IDENTIFIER)
    data = bytes(builder.Output())
    assert tflite_metadata.attach(data, model, ["a"] * 10) == data


@pytest.mark.parametrize(
    "normalization",
    [None, {"mean": (0.5, 0.25, 0.1), "std": (0.5, 0.25, 0.2)}],
    ids=["minus_one_to_one", "mean_std"],
)
def test_predict_without_sidecar_normalises_as_the_sidecar(
    normalization, tmp_path
):
    # A model that takes normalised values: the embedded metadata's mean
    # and std (in pixel units) must give the sidecar's normalisation.
    model = _model(include_preprocessing=False, normalization=normalization)
    with_sidecar = str(tmp_path / "m.tflite")
    export.export_tflite(model, with_sidecar, verify=False)
    alone = str(tmp_path / "alone.tflite")
    shutil.copyfile(with_sidecar, alone)
    paths = []
    for i, photo in enumerate(random_images((2, 32, 32, 3), seed=6)):
        paths.append(str(tmp_path / f"p{i}.png"))
        keras.utils.save_img(paths[-1], photo.astype("uint8"))
    expected = predict.load_predictor(with_sidecar).predict(paths)
    np.testing.assert_allclose(
        predict.load_predictor(alone).predict(paths), expected, atol=1e-6
    )
