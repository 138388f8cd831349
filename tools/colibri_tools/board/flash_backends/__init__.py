"""Flash backends: each turns a FlashRequest into a list of Steps (commands),
which colibri-flash prints (--dry-run) or runs.

    qemu     boot the emulated board (firmware with -kernel, weights with the generic loader)
    pyocd    pyocd flash (CMSIS-DAP / ST-Link probes), readback with pyocd commander savemem
    openocd  openocd -c "program FILE verify ..." (stmqspi bank for external QSPI)
    west     west flash on a Zephyr build, then the weights HEX as a second flash
    scp      Linux boards: copy model.bin (and colibri-run) over SSH, compare SHA-256
    stm32cubeprogrammer  ST's STM32_Programmer_CLI (external loader for QSPI weights)
"""

from __future__ import annotations

from collections.abc import Callable

from . import openocd, pyocd, qemu, scp, stm32cubeprogrammer, west
from .common import FlashError, FlashRequest, Step

PLANNERS: dict[str, Callable[[FlashRequest], list[Step]]] = {
    "qemu": qemu.plan, "pyocd": pyocd.plan, "openocd": openocd.plan, "west": west.plan,
    "scp": scp.plan, "stm32cubeprogrammer": stm32cubeprogrammer.plan,
}

__all__ = ["PLANNERS", "FlashError", "FlashRequest", "Step"]
