"""pytest plugin: run hardware-in-the-loop tests against a Colibri device.

Registered through the ``pytest11`` entry point ``colibri``; or load it by
hand with ``pytest -p colibri_tools.pytest_plugin``.

    pytest tests/hil --colibri-port socket://127.0.0.1:4321 --colibri-board qemu_virt_a72 \\
                     --colibri-suite suite.json

    def test_answers(colibri_device):            # a connected SerialClient
        assert colibri_device.info.init_status == 0

    @pytest.mark.colibri_device                  # skipped without --colibri-port
    def test_something(...): ...

Fixtures (session scope): ``colibri_device`` (connected
:class:`~colibri_tools.protocol.SerialClient`, INFO in ``.info``),
``colibri_port`` (the URL), ``colibri_board`` (the name given),
``colibri_suite`` (the loaded :class:`~colibri_tools.golden.Suite`). Each
skips its test, with the reason, when its option was not given.
"""

from __future__ import annotations

import pytest

MARKER = "colibri_device"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("colibri", "Colibri device under test")
    group.addoption("--colibri-port", default=None, metavar="URL",
                    help="device to test: socket://HOST:PORT, a pty or a /dev/tty* path")
    group.addoption("--colibri-board", default=None, metavar="NAME",
                    help="board name (boards/NAME.toml) of the device under test")
    group.addoption("--colibri-suite", default=None, metavar="FILE",
                    help="golden suite written by 'colibri-test golden'")
    group.addoption("--colibri-timeout", default=30.0, type=float, metavar="S",
                    help="seconds to wait for each device reply (default 30)")
    group.addoption("--colibri-baudrate", default=115200, type=int, metavar="BAUD",
                    help="baud rate for real serial ports (default 115200)")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: needs a Colibri device (skipped without "
                                       "--colibri-port)")


def pytest_collection_modifyitems(config, items) -> None:
    if config.getoption("--colibri-port"):
        return
    skip = pytest.mark.skip(reason="no Colibri device: pass --colibri-port URL")
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def colibri_port(pytestconfig) -> str:
    url = pytestconfig.getoption("--colibri-port")
    if not url:
        pytest.skip("no Colibri device: pass --colibri-port URL")
    return url


@pytest.fixture(scope="session")
def colibri_board(pytestconfig) -> str:
    name = pytestconfig.getoption("--colibri-board")
    if not name:
        pytest.skip("no board named: pass --colibri-board NAME")
    return name


@pytest.fixture(scope="session")
def colibri_suite(pytestconfig):
    from colibri_tools.golden import load_suite

    path = pytestconfig.getoption("--colibri-suite")
    if not path:
        pytest.skip("no golden suite: pass --colibri-suite FILE")
    return load_suite(path)


@pytest.fixture(scope="session")
def colibri_device(pytestconfig, colibri_port):
    """A SerialClient connected to the device (HELLO answered)."""
    from colibri_tools.protocol import SerialClient

    client = SerialClient.open(colibri_port, timeout=pytestconfig.getoption("--colibri-timeout"),
                               baudrate=pytestconfig.getoption("--colibri-baudrate"))
    try:
        client.connect()
        yield client
    finally:
        client.close()
