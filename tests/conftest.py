import gc
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA compiles without LLVM's optimizations (XLA's own graph passes still
# run). On a CPU compiling is most of a tiny model's time and halves at
# -O0; the programs, their tracing and their float32 results stay the
# same. Set before TensorFlow loads, for this process and every process
# a test starts (a `keras-vit` command, a JAX-backend script): tests/
# training took 221 s instead of 247 s.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()
# With one pytest worker per core, each worker's TensorFlow keeps to its
# share of the cores instead of every worker running a thread per core
# (tests/training under two workers: 209 s instead of 221 s).
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    os.environ.setdefault(
        "TF_NUM_INTRAOP_THREADS", str(max(1, (os.cpu_count() or 1) // _workers))
    )

import keras  # noqa: E402
import pytest  # noqa: E402

import keras_vit  # noqa: E402
from tests.export.helpers import TINY_EXPORT  # noqa: E402
from tests.helpers import made_once  # noqa: E402
from tests.helpers import randomize_weights  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32, a fixed seed and an empty session."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1337)
    yield
    keras.config.set_dtype_policy("float32")
    # A collection of the young generations frees what the test made; a
    # full one (clear_session's own) also scans everything earlier tests
    # left alive: a median 0.95 s a test in the full suite (0.01 s in
    # isolation), 43% of the suite's time.
    keras.backend.clear_session(free_memory=False)
    gc.collect(1)
    _out_of_sight()


# One tiny model, its `.keras` file and its `.tflite` export, made once for
# the whole run (the workers share them) for every test that needs a model
# and not a particular one: conversions cost seconds each. Each test loads
# its own copy (`random_model`).


def _save_random_model(folder):
    model = keras_vit.ViT(**TINY_EXPORT, name="tiny_random")
    randomize_weights(model, seed=3, scale=0.2)
    model.save(str(folder / "random.keras"))


@pytest.fixture(scope="session")
def random_model_path(tmp_path_factory):
    """A tiny ViT (`TINY_EXPORT`: 32 px, 10 classes) with every weight
    perturbed (heads included), as a `.keras` file."""
    folder = made_once(tmp_path_factory, "random_model", _save_random_model)
    return str(folder / "random.keras")


@pytest.fixture(scope="session")
def random_tflite_path(random_model_path, tmp_path_factory):
    """The random model as a float32 `.tflite` file (unverified)."""
    from keras_vit import export

    def make(folder):
        export.export_tflite(
            random_model_path, folder / "random.tflite", verify=False
        )

    return made_once(tmp_path_factory, "random_tflite", make) / "random.tflite"


@pytest.fixture
def random_model(random_model_path):
    """A fresh copy of the random model."""
    return keras.saving.load_model(random_model_path, compile=False)


#: Tests between two full collections (`_out_of_sight`).
_FULL_COLLECTION_EVERY = 100
_tests_run = 0


def _out_of_sight():
    """Moves what the tests so far left alive out of the cyclic garbage
    collector's sight, with a full collection every
    `_FULL_COLLECTION_EVERY` tests.

    What earlier tests leave alive (caches, module fixtures) grows to
    gigabytes in a worker, and Python's own full collections, which a
    test that makes many objects sets off, scanned it all, about 2 s each:
    249 s of a full run's 2,822 s of worker time went to collections, 19 s
    of a 19 s test (Keras's int8 quantization, 1.9 s alone: 10 of them);
    113 s of 2,899 s with this (3 December). A frozen object's cycles are
    not collected, so every `_FULL_COLLECTION_EVERY` tests everything is
    collected once: the workers' peak memory stayed as it was (7.1 and
    7.8 GB)."""
    global _tests_run
    _tests_run += 1
    if _tests_run % _FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def pytest_collection_finish(session):
    """Moves what the imports made (TensorFlow's and Keras's ~430k objects)
    out of the cyclic garbage collector's sight: a full collection took
    0.5-0.9 s scanning them (`_out_of_sight` does the same for what the
    tests leave)."""
    gc.collect()
    gc.freeze()


#: Each test's seconds (setup, call and teardown) in a full run, by node
#: id: `make durations` writes it. `make test-fast` leaves out the tests
#: marked `slow` (`pytest -m "not slow"`), which are those marked so in
#: their file and those that took more than `FAST_SECONDS` here; a test
#: not in the file counts as fast until the file is written again.
DURATIONS = os.path.join(os.path.dirname(__file__), "durations.json")
FAST_SECONDS = 0.5


def pytest_addoption(parser):
    parser.addoption(
        "--write-durations",
        metavar="PATH",
        default=None,
        help="write each test's seconds to PATH as JSON (tests/durations.json "
        "is what marks the slow tests: `make durations`)",
    )


def pytest_collection_modifyitems(config, items):
    try:
        with open(DURATIONS, encoding="utf-8") as file:
            seconds = json.load(file)
    except FileNotFoundError:
        return
    for item in items:
        if seconds.get(item.nodeid, 0.0) > FAST_SECONDS:
            item.add_marker(pytest.mark.slow)


_durations = {}


def pytest_runtest_logreport(report):
    """Adds up each test's phases (in the controller under xdist, which
    hands it every worker's reports)."""
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + (
        report.duration
    )


def pytest_sessionfinish(session):
    path = session.config.getoption("--write-durations")
    if path and not os.environ.get("PYTEST_XDIST_WORKER") and _durations:
        times = {k: round(v, 2) for k, v in sorted(_durations.items())}
        with open(path, "w", encoding="utf-8") as file:
            json.dump(times, file, indent=0)
            file.write("\n")
