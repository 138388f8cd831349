"""Cortex-M port facts that board_config.h does not carry yet.

The board file is the single source of truth (docs/port-cortex-m.md). This
reads what only the Cortex-M port needs from it, checks it, and writes
cm_board_config.h next to board_config.h:

    [uart]      kind = "cmsdk-apb" | "stm32-usart"; for stm32-usart also
                tx = "PA9", rx = "PA10", af = 7 (pins and alternate function)
    [ticks]     source = "systick", hz = the processor clock (a multiple of 1000)
    [cortex_m]  (optional) clocks = "as-reset" | "stm32h7-hsi64",
                caches = true, weights_ready = "always" | "stm32h7-quadspi",
                mpu_guard = { origin, length }
    [emulate]   extra containing "-semihosting...": board_exit uses semihosting

The MPU constraints of the core (ARMv7-M: power-of-two regions aligned to
their size; ARMv8-M: 32-byte granules) are checked here, so a board file the
MPU cannot express fails the build with a message.

    python -m colibri_tools.board.port_cortex_m BOARD [-o FILE]    (ports/baremetal/cortex_m/port.mk)
"""
from __future__ import annotations

import pathlib
import re
import sys
import tomllib
from typing import Any

from .boards import REPO, Board, BoardError, Region, generator_main

PORT = "baremetal-cortex-m"
UART_DRIVERS = {"cmsdk-apb": "cm_uart_cmsdk", "stm32-usart": "cm_uart_stm32"}
WEIGHTS_READY = {"always": "cm_weights_always_ready",
                 "stm32h7-quadspi": "cm_weights_stm32h7_quadspi_mapped"}
CLOCKS = {"as-reset": "cm_clocks_as_reset", "stm32h7-hsi64": "cm_clocks_stm32h7_hsi64"}
SYSTICK_RELOAD_MAX = 1 << 24
PIN = re.compile(r"^P([A-K])([0-9]|1[0-5])$")


def _pin(value: Any, where: str) -> tuple[int, int]:
    match = PIN.match(value) if isinstance(value, str) else None
    if match is None:
        raise BoardError(f"{where}: pin must look like 'PA9' (port A-K, pin 0-15), got {value!r}")
    return ord(match.group(1)) - ord("A"), int(match.group(2))


def uart_facts(board: Board) -> dict[str, int | str]:
    where = f"{board.path} [uart]"
    kind = board.uart.get("kind")
    if kind not in UART_DRIVERS:
        raise BoardError(f"{where}: kind must be one of {sorted(UART_DRIVERS)}, got {kind!r}")
    for key in ("base", "clock_hz", "baud"):
        value = board.uart.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise BoardError(f"{where}: '{key}' must be a positive integer, got {value!r}")
    facts: dict[str, int | str] = {"driver": UART_DRIVERS[kind], "tx_port": 0, "tx_pin": 0,
                                   "rx_port": 0, "rx_pin": 0, "af": 0}
    if kind == "stm32-usart":
        facts["tx_port"], facts["tx_pin"] = _pin(board.uart.get("tx"), f"{where} tx")
        facts["rx_port"], facts["rx_pin"] = _pin(board.uart.get("rx"), f"{where} rx")
        af = board.uart.get("af")
        if isinstance(af, bool) or not isinstance(af, int) or not 0 <= af <= 15:
            raise BoardError(f"{where}: 'af' must be the pins' alternate function 0-15, got {af!r}")
        facts["af"] = af
    return facts


def _check_ticks(board: Board) -> None:
    where = f"{board.path} [ticks]"
    if board.ticks.get("source") != "systick":
        raise BoardError(f"{where}: source must be 'systick' (the only tick source of this "
                         f"port), got {board.ticks.get('source')!r}")
    hz = board.ticks.get("hz")
    if isinstance(hz, bool) or not isinstance(hz, int) or hz <= 0 or hz % 1000:
        raise BoardError(f"{where}: hz must be the processor clock, a positive multiple of "
                         f"1000 (SysTick reloads every millisecond), got {hz!r}")
    if hz // 1000 > SYSTICK_RELOAD_MAX:
        raise BoardError(f"{where}: hz {hz} too high for SysTick's 24-bit reload at 1 kHz")


def _guard(table: dict, where: str) -> Region | None:
    guard = table.get("mpu_guard")
    if guard is None:
        return None
    if not isinstance(guard, dict):
        raise BoardError(f"{where}: mpu_guard must be a table {{ origin, length }}")
    origin, length = guard.get("origin"), guard.get("length")
    for key, value in (("origin", origin), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BoardError(f"{where}: mpu_guard.{key} must be a non-negative integer")
    return Region(origin, length)


def _is_pow2_region(region: Region) -> bool:
    size = region.length
    return size >= 32 and size & (size - 1) == 0 and region.origin % size == 0


def _check_mpu(board: Board, guard: Region | None, where: str) -> None:
    w = board.weights
    if guard is not None and not (guard.origin <= w.origin and w.end <= guard.end):
        raise BoardError(f"{where}: mpu_guard must contain the weights region")
    if board.arch == "armv7e-m":
        for name, region in (("weights", w), ("mpu_guard", guard)):
            if region is not None and not _is_pow2_region(region):
                raise BoardError(f"{where}: the ARMv7-M MPU needs {name} to be a power of two "
                                 f">= 32 bytes aligned to its size (0x{region.origin:X}, "
                                 f"0x{region.length:X})")
    else:
        for name, region in (("weights", w), ("mpu_guard", guard)):
            if region is not None and (region.origin % 32 or region.length % 32):
                raise BoardError(f"{where}: the ARMv8-M MPU needs {name} in 32-byte granules")


def port_facts(board: Board) -> dict[str, Any]:
    """Everything cm_board_config.h says, checked against the port's needs."""
    where = str(board.path)
    if board.port != PORT:
        raise BoardError(f"{where}: port is '{board.port}', this is the {PORT} port")
    if board.arch not in ("armv7e-m", "armv8.1-m"):
        raise BoardError(f"{where}: arch '{board.arch}' is not a Cortex-M7/M55 architecture")
    _check_ticks(board)
    table = tomllib.loads(board.path.read_text()).get("cortex_m", {})
    if not isinstance(table, dict):
        raise BoardError(f"{where}: [cortex_m] must be a table")
    ready = table.get("weights_ready", "always")
    if ready not in WEIGHTS_READY:
        raise BoardError(f"{where} [cortex_m]: weights_ready must be one of "
                         f"{sorted(WEIGHTS_READY)}, got {ready!r}")
    clocks = table.get("clocks", "as-reset")
    if clocks not in CLOCKS:
        raise BoardError(f"{where} [cortex_m]: clocks must be one of {sorted(CLOCKS)}, "
                         f"got {clocks!r}")
    caches = table.get("caches", True)
    if not isinstance(caches, bool):
        raise BoardError(f"{where} [cortex_m]: caches must be true or false")
    guard = _guard(table, f"{where} [cortex_m]")
    _check_mpu(board, guard, f"{where} [cortex_m]")
    extra = board.emulate.get("extra", [])
    return {"uart": uart_facts(board), "clocks": CLOCKS[clocks], "caches": caches,
            "weights_ready": WEIGHTS_READY[ready],
            "guard": guard or Region(0, 0),
            "semihosting": any(str(arg).startswith("-semihosting") for arg in extra)}


def _define(name: str, value: str) -> list[str]:
    return [f"#ifndef {name}", f"#define {name} {value}", "#endif"]


def _shown(path: pathlib.Path) -> pathlib.Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def port_header(board: Board) -> str:
    facts = port_facts(board)
    uart = facts["uart"]
    lines = [(f"/* Generated from {_shown(board.path)} by "
              f"colibri_tools.board.port_cortex_m; do not edit. */"),
             "#ifndef COLIBRI_CM_BOARD_CONFIG_H", "#define COLIBRI_CM_BOARD_CONFIG_H", ""]
    lines += _define("CM_BOARD_CLOCKS_INIT", facts["clocks"])
    lines += _define("CM_BOARD_UART_DRIVER", str(uart["driver"]))
    for key, macro in (("tx_port", "TX_PORT"), ("tx_pin", "TX_PIN"), ("rx_port", "RX_PORT"),
                       ("rx_pin", "RX_PIN"), ("af", "ALTERNATE_FUNCTION")):
        lines += _define(f"CM_BOARD_UART_{macro}", f"{uart[key]}u")
    lines += _define("CM_BOARD_CACHES", "1" if facts["caches"] else "0")
    lines += _define("CM_BOARD_WEIGHTS_READY", facts["weights_ready"])
    lines += _define("CM_BOARD_MPU_GUARD_ADDR", f"0x{facts['guard'].origin:08X}u")
    lines += _define("CM_BOARD_MPU_GUARD_SIZE", f"0x{facts['guard'].length:X}u")
    lines += _define("CM_BOARD_SEMIHOSTING", "1" if facts["semihosting"] else "0")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return generator_main("colibri_tools.board.port_cortex_m", port_header, argv)


if __name__ == "__main__":
    sys.exit(main())
