"""Hostile board files: every value a board file puts into a generated make
file, C header or linker script is checked, and a bad one is a BoardError
naming the file, never a traceback or injected text (issue 13, item 5)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from colibri_tools.board import boards
from colibri_tools.board.boards import BoardError

REPO = Path(__file__).resolve().parents[2]
BASE = (REPO / "boards" / "qemu_an547.toml").read_text()

EDITS = [
    ("ticks unit breaks out of its C string",
     r'^unit = .*$', 'unit = "x\\"\\n#error injected"',
     "[ticks] unit = 'x\"\\n#error injected': must be printable"),
    ("negative weight size", r"^size = 0x10000000 .*$", "size = -4096",
     "[weights] size = -0x1000: must be 1..2^32"),
    ("empty weight region", r"^size = 0x10000000 .*$", "size = 0", "[weights] size = 0x0: must be 1.."),
    ("weights past a 32-bit address space", r"^address = 0x90000000$", "address = 0x100000000",
     "[weights] address = 0x100000000: must be below 2^32"),
    ("uart base not a number", r"^base = 0x59303000$", 'base = "0x59303000"',
     "[uart] base = '0x59303000': must be an integer"),
    ("make syntax in a flag", r'^cflags = .*$', 'cflags = ["-mcpu=cortex-m55", "$(shell id)"]',
     "must be plain -options"),
    ("a flag with a space", r'^cflags = .*$', 'cflags = ["-mcpu=cortex-m55", "-O2 -g"]',
     "must be plain -options"),
    ("alignment not a number", r"^alignment = 4096$", 'alignment = "4096"',
     "[weights] alignment = '4096': must be an integer"),
    ("uart is not a table", r"^\[uart\]$", "[uart_spare]", "[uart] = 'cmsdk': must be a table"),
    ("cross prefix with a path trick", r'^cross_prefix = .*$', 'cross_prefix = "../../evil "',
     "cross_prefix = '../../evil ': must be a tool prefix"),
    ("huge baud", r"^baud = 115200$", "baud = 0x100000000",
     "[uart] baud = 4294967296: must be 300..12000000"),
    # issue 25, item 8: a traceback in every colibri-board command; a division by zero in
    # the STM32 UART driver
    ("ldflags not a list", r"^ldflags = \[\]$", "ldflags = 7", "ldflags = 7: must be a list of strings"),
    ("zero baud", r"^baud = 115200$", "baud = 0", "[uart] baud = 0: must be 300..12000000"),
    ("a UART clock too slow for its baud", r"^baud = 115200$", "baud = 2000000",
     "clock_hz 25000000 is below 16 x baud 2000000"),
]


@pytest.mark.parametrize("what, pattern, replacement, message", EDITS,
                         ids=[e[0] for e in EDITS])
def test_bad_value_is_refused(what, pattern, replacement, message, tmp_path):
    text, n = re.subn(pattern, lambda _: replacement, BASE, count=1, flags=re.M)
    assert n == 1, f"the edit for {what!r} found nothing to change"
    if what == "uart is not a table":
        text = 'uart = "cmsdk"\n' + text
    path = tmp_path / "qemu_an547.toml"
    path.write_text(text)
    with pytest.raises(BoardError, match=re.escape(message)) as info:
        boards.load(path)
    assert str(path) in str(info.value)


def test_name_that_is_not_an_identifier_is_refused(tmp_path):
    path = tmp_path / 'x"y.toml'
    path.write_text(BASE.replace('name = "qemu_an547"', 'name = "x\\"y"'))
    with pytest.raises(BoardError, match="lower-case letters"):
        boards.load(path)


def test_the_shipped_boards_pass():
    for name in boards.board_names():
        boards.load(name)
