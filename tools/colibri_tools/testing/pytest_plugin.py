"""pytest plugin: run hardware-in-the-loop tests against a Colibri device.

Registered through the ``pytest11`` entry point ``colibri``; or load it by
hand with ``pytest -p colibri_tools.testing.pytest_plugin``.

    pytest tests/hil --colibri-port socket://127.0.0.1:4321 --colibri-board qemu_virt_a72 \\
                     --colibri-suite suite.json

    def test_answers(colibri_device):            # a connected SerialClient
        assert colibri_device.info.init_status == 0

    @pytest.mark.colibri_device                  # skipped without --colibri-port
    def test_something(...): ...

Fixtures (session scope): ``colibri_device`` (connected
:class:`~colibri_tools.protocol.SerialClient`, INFO in ``.info``),
``colibri_port`` (the URL), ``colibri_board`` (the name given),
``colibri_suite`` (the loaded :class:`~colibri_tools.testing.golden.Suite`). Each
skips its test, with the reason, when its option was not given.

Booting a board instead of naming a port: with ``--colibri-board B
--colibri-firmware F --colibri-weights W`` (and no --colibri-port) the
session boots B in QEMU (``colibri_booted_board``, a
:class:`~colibri_tools.board.qemu.QemuSession`) and ``colibri_device`` talks to
it; QEMU is stopped at the end of the session, and dies with pytest however
pytest ends. For tests that boot their own boards, the factory fixture
``colibri_boot(board, firmware, weights)`` returns a connected client and
stops its QEMU when the test ends::

    def test_two_boards(colibri_boot):
        a = colibri_boot("qemu_an547", "an547.elf", "model.bin")
        b = colibri_boot("qemu_virt_a72", "a72.elf", "model.bin")
        assert a.forward([1, 2]).logits_crc == b.forward([1, 2]).logits_crc
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
    group.addoption("--colibri-firmware", default=None, metavar="FILE",
                    help="with --colibri-board and no --colibri-port: boot the board in QEMU "
                         "with this firmware")
    group.addoption("--colibri-weights", default=None, metavar="FILE",
                    help="the weights (model.bin or HEX) for the booted board")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: needs a Colibri device (skipped without "
                                       "--colibri-port)")


def _boots(config) -> bool:
    return bool(config.getoption("--colibri-firmware")) and not config.getoption("--colibri-port")


def pytest_collection_modifyitems(config, items) -> None:
    if config.getoption("--colibri-port") or _boots(config):
        return
    skip = pytest.mark.skip(reason="no Colibri device: pass --colibri-port URL, or "
                                   "--colibri-board B --colibri-firmware F --colibri-weights W")
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def colibri_booted_board(pytestconfig):
    """The board booted in QEMU from --colibri-board/--colibri-firmware/
    --colibri-weights, for the whole session."""
    from colibri_tools.board.qemu import launch

    if not _boots(pytestconfig):
        pytest.skip("no board to boot: pass --colibri-board B --colibri-firmware F "
                    "--colibri-weights W")
    board = pytestconfig.getoption("--colibri-board")
    if not board:
        pytest.fail("--colibri-firmware needs --colibri-board (the board it was built for)")
    with launch(board, pytestconfig.getoption("--colibri-firmware"),
                pytestconfig.getoption("--colibri-weights"), timeout=3600.0) as session:
        yield session


@pytest.fixture(scope="session")
def colibri_port(pytestconfig, request) -> str:
    url = pytestconfig.getoption("--colibri-port")
    if not url and _boots(pytestconfig):
        return request.getfixturevalue("colibri_booted_board").url
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
    from colibri_tools.testing.golden import load_suite

    path = pytestconfig.getoption("--colibri-suite")
    if not path:
        pytest.skip("no golden suite: pass --colibri-suite FILE")
    return load_suite(path)


@pytest.fixture(scope="session")
def colibri_device(pytestconfig, request, colibri_port):
    """A SerialClient connected to the device (HELLO answered): the port
    given, or the board the session booted."""
    from colibri_tools.protocol import SerialClient

    timeout = pytestconfig.getoption("--colibri-timeout")
    if _boots(pytestconfig):
        session = request.getfixturevalue("colibri_booted_board")
        client = SerialClient.from_port(session.open_serial(), session.url, timeout=timeout)
    else:
        client = SerialClient.open(colibri_port, timeout=timeout,
                                   baudrate=pytestconfig.getoption("--colibri-baudrate"))
    try:
        client.connect()
        yield client
    finally:
        client.close()


@pytest.fixture
def colibri_boot(pytestconfig):
    """colibri_boot(board, firmware, weights, timeout=600) -> a connected
    SerialClient to that board booted in QEMU; stopped when the test ends."""
    from colibri_tools.board.qemu import launch
    from colibri_tools.protocol import SerialClient

    opened = []

    def boot(board, firmware, weights=None, timeout: float = 600.0):
        session = launch(board, firmware, weights, timeout=timeout)
        opened.append(session)
        client = SerialClient.from_port(session.open_serial(), session.url,
                                        timeout=pytestconfig.getoption("--colibri-timeout"))
        opened.append(client)
        client.connect()
        return client

    yield boot
    for thing in reversed(opened):
        thing.close()
