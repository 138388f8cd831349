"""uart_stm32.c never divides by a zero baud (issue 25, item 8): colibri-board
refuses `[uart] baud = 0` (tests/tools/test_board_schema.py), and the driver,
given 0 anyway (a hand-written board_config.h), programs its fallback, the
board files' default 115200. Built for the host with a cm_regs.h whose
registers are an array, so the division runs here (x86 traps on /0)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CM_DIR = REPO / "ports" / "baremetal" / "cortex_m"
HOST_CC = shutil.which("gcc") or shutil.which("cc")

FAKE_REGS = r"""
#include <stdint.h>
uint32_t *fake_register(uintptr_t addr);
#define CM_REG(addr) (*fake_register((uintptr_t)(addr)))
"""

MAIN = r"""
#include <stdio.h>
#include "cortex_m.h"

static struct { uintptr_t addr; uint32_t value; } regs[64];

uint32_t *fake_register(uintptr_t addr)
{
    for (int i = 0; i < 63; i++) {
        if (regs[i].addr == addr || regs[i].addr == 0) {
            regs[i].addr = addr;
            return &regs[i].value;
        }
    }
    return &regs[63].value;
}

int main(void)
{
    cm_uart_config config = {.base = 0x40011000u, .clock_hz = 64000000u, .baud = BAUD,
                             .tx_pin = 9, .rx_pin = 10, .alternate_function = 7};
    cm_uart_stm32.init(&config);
    printf("%u\n", (unsigned)*fake_register(0x40011000u + 0x0Cu)); /* USART_BRR */
    return 0;
}
"""


def _brr(tmp_path: Path, baud: int) -> subprocess.CompletedProcess:
    if HOST_CC is None:
        pytest.skip("no host C compiler")
    shutil.copy(CM_DIR / "uart_stm32.c", tmp_path / "uart_stm32.c")
    (tmp_path / "cm_regs.h").write_text(FAKE_REGS)     # found first: the .c file's folder
    (tmp_path / "main.c").write_text(MAIN)
    exe = tmp_path / f"brr_{baud}"
    subprocess.run([HOST_CC, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-DBAUD={baud}u",
                    f"-I{CM_DIR}", str(tmp_path / "uart_stm32.c"), str(tmp_path / "main.c"),
                    "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=10)


def test_zero_baud_programs_the_fallback_instead_of_dividing_by_zero(tmp_path):
    zero, default = _brr(tmp_path, 0), _brr(tmp_path, 115200)
    assert zero.returncode == 0, f"the driver trapped: status {zero.returncode}"
    assert default.returncode == 0 and int(default.stdout) == (64000000 + 57600) // 115200
    assert zero.stdout == default.stdout
