import pytest

from tests.training import two_devices as two_devices_scripts


@pytest.fixture(scope="session")
def two_devices(tmp_path_factory):
    """`{name: (what it printed last, its folder)}` of each script the
    test files registered in `tests.training.two_devices`: all run in one
    process, once for the whole run."""
    return two_devices_scripts.results(tmp_path_factory)


def pytest_collection_finish(session):
    two_devices_scripts.select(session.items)
