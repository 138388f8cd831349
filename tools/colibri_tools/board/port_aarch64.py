"""AArch64 port facts that board_config.h does not carry yet.

The board file is the single source of truth (docs/port-aarch64.md). Its
[interrupts] table (GIC kind and addresses, timer interrupt) is read here and
written as aarch64_board.h, next to board_config.h, until colibri-board emits
the same macros itself; each macro is guarded so both can coexist. The port's
other assumptions about the board (a PL011 console, the PMU cycle counter as
tick source) are checked here too, so a wrong board file fails the build with
a message instead of hanging the firmware.

    python -m colibri_tools.board.port_aarch64 BOARD [-o FILE]    (ports/baremetal/aarch64/port.mk)
"""
from __future__ import annotations

import sys
import tomllib

from .boards import REPO, Board, BoardError, generator_main

PORT = "baremetal-aarch64"
GIC_KINDS = {"gicv2"}
PPI_FIRST, PPI_LAST = 16, 31


def _int(table: dict, key: str, where: str) -> int:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BoardError(f"{where}: '{key}' must be a non-negative integer, got {value!r}")
    return value


def interrupt_facts(board: Board) -> dict[str, int | str]:
    """The [interrupts] table of an AArch64 bare-metal board, checked."""
    where = str(board.path)
    if board.port != PORT:
        raise BoardError(f"{where}: port is '{board.port}', this is the {PORT} port")
    if board.uart.get("kind") != "pl011":
        raise BoardError(f"{where} [uart]: kind must be 'pl011' (the only console driver of "
                         f"this port), got {board.uart.get('kind')!r}")
    if board.ticks.get("source") != "pmccntr":
        raise BoardError(f"{where} [ticks]: source must be 'pmccntr' (PMCCNTR_EL0), got "
                         f"{board.ticks.get('source')!r}")
    table = tomllib.loads(board.path.read_text()).get("interrupts")
    if not isinstance(table, dict):
        raise BoardError(f"{where}: missing [interrupts] table (controller, distributor, "
                         f"cpu_interface, timer_irq)")
    kind = table.get("controller")
    if kind not in GIC_KINDS:
        raise BoardError(f"{where} [interrupts]: controller must be one of {sorted(GIC_KINDS)}, "
                         f"got {kind!r}")
    facts: dict[str, int | str] = {"controller": kind}
    for key in ("distributor", "cpu_interface", "timer_irq"):
        facts[key] = _int(table, key, f"{where} [interrupts]")
    if not PPI_FIRST <= int(facts["timer_irq"]) <= PPI_LAST:
        raise BoardError(f"{where} [interrupts]: timer_irq {facts['timer_irq']} is not a PPI "
                         f"({PPI_FIRST}..{PPI_LAST})")
    for key in ("distributor", "cpu_interface"):
        if int(facts[key]) % 4096:
            raise BoardError(f"{where} [interrupts]: {key} 0x{facts[key]:X} is not 4 KiB aligned")
    return facts


def _define(name: str, value: str) -> list[str]:
    return [f"#ifndef {name}", f"#define {name} {value}", "#endif"]


def port_header(board: Board) -> str:
    facts = interrupt_facts(board)
    source = board.path.relative_to(REPO)
    lines = [f"/* Generated from {source} by colibri_tools.board.port_aarch64; do not edit. */",
             "#ifndef COLIBRI_AARCH64_BOARD_H", "#define COLIBRI_AARCH64_BOARD_H", ""]
    lines += _define("COLIBRI_BOARD_GIC_DIST_BASE", f"0x{facts['distributor']:08X}u")
    lines += _define("COLIBRI_BOARD_GIC_CPU_BASE", f"0x{facts['cpu_interface']:08X}u")
    lines += _define("COLIBRI_BOARD_TIMER_IRQ", f"{facts['timer_irq']}u")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return generator_main("colibri_tools.board.port_aarch64", port_header, argv)


if __name__ == "__main__":
    sys.exit(main())
