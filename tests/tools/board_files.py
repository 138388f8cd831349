"""Synthetic board files for the tools' tests: a Cortex-M7 board whose weight
region, alignment and code address a test chooses, plus extra TOML text."""
from __future__ import annotations

from pathlib import Path


def write_board(folder: Path, name: str, *, address: int = 0x90000000, size: int = 0x4000000,
                alignment: int = 4096, code: int = 0x08000000, code_length: int = 0x200000,
                extra: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(f"""
name = "{name}"
arch = "armv7e-m"
cpu = "cortex-m7"
port = "baremetal-cortex-m"
cross_prefix = "arm-none-eabi-"
cflags = ["-mcpu=cortex-m7", "-mthumb"]
[memory.code]
origin = 0x{code:X}
length = 0x{code_length:X}
[memory.ram]
origin = 0x24000000
length = 0x80000
[weights]
address = 0x{address:X}
size = 0x{size:X}
alignment = {alignment}
{extra}
""")
    return path
