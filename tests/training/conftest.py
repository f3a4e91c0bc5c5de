import pytest

from tests.training import two_devices as two_devices_scripts


@pytest.fixture(scope="session")
def two_devices(tmp_path_factory):
    """`{name: (what it printed last, its folder)}` of each script the
    test files registered in `tests.training.two_devices`: all run in one
    process, once for the whole run."""
    return two_devices_scripts.results(tmp_path_factory)


def pytest_collection_modifyitems(items):
    """A test reading the shared run is slow whatever durations.json says
    of it: whichever such test asks first makes the whole run, so a test
    that found it made would otherwise pass for fast and start it in
    `make test-fast`."""
    for item in items:
        if "two_devices" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session):
    two_devices_scripts.select(session.items)
