"""The Cortex-M board files against QEMU's own memory map (`info mtree -f` of
the machine the board file names), and colibri_tools.board.port_cortex_m's checks of what the
port needs from a board file."""
from __future__ import annotations

import re
import subprocess

import pytest
from cm_helpers import QEMU, QEMU_BOARDS, REPO, STM32_BOARDS, missing_tools
from colibri_tools.board import boards
from colibri_tools.board import port_cortex_m as port_config
from colibri_tools.board.boards import BoardError

MTREE_LINE = re.compile(r"^\s+([0-9a-f]+)-([0-9a-f]+) \(prio (-?\d+), ([\w/-]+)\): (.+)$")

def _cpu_memory_map(board: boards.Board) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, name) of the CPU's view in QEMU: Secure for the
    TrustZone machines, the only one otherwise."""
    emulate = board.emulate
    done = subprocess.run(
        ["timeout", "30", emulate["qemu"], "-M", emulate["machine"], "-cpu", emulate["cpu"],
         "-m", emulate["memory"], "-S", "-display", "none", "-serial", "null",
         "-monitor", "stdio"],
        input="info mtree -f\nquit\n", capture_output=True, text=True, timeout=60, check=False)
    views = re.split(r"\nFlatView #\d+\n", done.stdout)
    view = next((v for v in views if 'AS "cpu-secure-memory-0"' in v), None) or \
        next(v for v in views if 'AS "cpu-memory-0"' in v)
    regions = []
    for line in view.splitlines():
        match = MTREE_LINE.match(line)
        if match and int(match.group(3)) >= 0:
            regions.append((int(match.group(1), 16), int(match.group(2), 16) + 1,
                            match.group(4), match.group(5)))
    return regions


def _backed_by_memory(regions, start: int, end: int) -> bool:
    """[start, end) is covered by adjacent RAM/ROM regions, or regions behind a
    TrustZone memory protection controller (whose upstream side QEMU lists as
    i/o)."""
    address = start
    while address < end:
        region = next((r for r in regions if r[0] <= address < r[1]), None)
        if region is None or not (region[2] in ("ram", "rom") or region[3] == "tz-mpc-upstream"):
            return False
        address = region[1]
    return True


@pytest.mark.parametrize("board_name", QEMU_BOARDS)
def test_qemu_board_regions_exist_in_the_machine(board_name):
    if missing_tools(QEMU):
        pytest.skip(f"{QEMU} not installed (Debian: qemu-system-arm)")
    board = boards.load(board_name)
    regions = _cpu_memory_map(board)
    for name, region in (("code", board.code), ("ram", board.ram), ("weights", board.weights)):
        assert _backed_by_memory(regions, region.origin, region.end), (name, hex(region.origin))
    uart = board.uart["base"]
    device = [r for r in regions if r[0] <= uart < r[1]]
    assert device and device[0][2] == "i/o" and "mpc" not in device[0][3], device


@pytest.mark.parametrize("board_name", QEMU_BOARDS + STM32_BOARDS)
def test_port_config_accepts_the_cortex_m_boards(board_name):
    header = port_config.port_header(boards.load(board_name))
    assert "CM_BOARD_UART_DRIVER" in header and "CM_BOARD_SEMIHOSTING" in header


def _variant(tmp_path, board_name: str, old: str, new: str) -> boards.Board:
    text = (REPO / "boards" / f"{board_name}.toml").read_text()
    assert old in text, old
    path = tmp_path / f"{board_name}.toml"
    path.write_text(text.replace(old, new, 1))
    return boards.load(path)


@pytest.mark.parametrize("old, new, message", [
    ("size = 0x08000000", "size = 0x06000000", "power of two"),
    ("mpu_guard = { origin = 0x90000000, length = 0x10000000 }",
     "mpu_guard = { origin = 0x90000000, length = 0x04000000 }", "contain the weights"),
    ('kind = "stm32-usart"', 'kind = "pl011"', "kind must be one of"),
    ('tx = "PA9"', 'tx = "PZ9"', "pin must look like"),
    ("\nhz = 64000000", "\nhz = 64000500", "multiple of"),
    ('weights_ready = "stm32h7-quadspi"', 'weights_ready = "maybe"', "weights_ready"),
])
def test_port_config_rejects_what_the_port_cannot_do(tmp_path, old, new, message):
    board = _variant(tmp_path, "stm32h747i_disco", old, new)
    with pytest.raises(BoardError, match=message):
        port_config.port_header(board)


def test_semihosting_follows_the_emulator_command(tmp_path):
    board = _variant(tmp_path, "qemu_an500", '"-semihosting"]', "]")
    assert "#define CM_BOARD_SEMIHOSTING 0" in port_config.port_header(board)
    assert "#define CM_BOARD_SEMIHOSTING 1" in port_config.port_header(boards.load("qemu_an500"))
