"""Boards are data: one TOML file per board in boards/, the single source of
truth for addresses and flags. This module loads and checks them, and derives
from them what must never disagree: the linker script's memory regions, the
compiler flags, the weight address of HEX images, and the compile-time checks
against model_config.h. The colibri-board command is board_cli.

Every field's type, presence and range is board_schema.FIELDS (docs/boards.md,
"Every field", is tested against it); load() checks a file against it first,
then what relates two fields (here). In short:

    name, description, arch ("aarch64" | "armv7e-m" | "armv8.1-m"), cpu, port
    ("baremetal-aarch64" | "baremetal-cortex-m" | "linux" | "zephyr"),
    cross_prefix, cflags = [...], ldflags = [...]
    [memory.code]    origin, length        (bare-metal ports)
    [memory.ram]     origin, length
    [weights]        address, size, alignment, bandwidth (bytes/s), bandwidth_source
    [stacks]         (bare-metal, optional) the port's stack sizes: thread/handler
                     (Cortex-M), main/irq (AArch64); written into memory.ld
    [uart]           kind, base, clock_hz, baud, irq (optional)
    [ticks]          source, hz (0 = not a time unit), unit (plain words)
    [emulate]        (optional) qemu, machine, cpu, memory, extra = [...]
    [flash]          method, and method-specific keys
    [slots]          (optional) origin, length, sector, store: A/B weight slots (docs/ota.md)
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tomllib
from dataclasses import dataclass, field
from typing import Any

from ..converter.config_header import MODEL_FITS_BOARD
from ..errors import ColibriError
from .board_schema import (  # noqa: F401  (ARCHES ... UNIT_TEXT: re-exported)
    ADDRESS_BITS,
    ARCHES,
    CROSS_PREFIX,
    FLAG,
    PORT_STACKS,
    PORTS,
    UNIT_TEXT,
    BoardError,
    check_fields,
)

REPO = pathlib.Path(__file__).resolve().parents[3]
BOARDS_ENV = "COLIBRI_BOARDS"  # more board folders, searched first (os.pathsep-separated)
PACKAGE_BOARDS = pathlib.Path(__file__).resolve().parents[1] / "board_files"  # a wheel's copy


def in_source_tree() -> bool:
    """Whether this package runs from a Colibri checkout (REPO holds the sources)."""
    return (REPO / "sdk" / "include" / "colibri.h").is_file() and (REPO / "boards").is_dir()


# The built-in boards: the checkout's boards/ (the one source of truth), else
# the copy a wheel carries (setup.py maps boards/ into the package at build time).
BOARDS_DIR = REPO / "boards" if in_source_tree() else PACKAGE_BOARDS


def board_dirs() -> list[pathlib.Path]:
    """Where boards are looked for, first match wins: $COLIBRI_BOARDS, then BOARDS_DIR."""
    extra = [pathlib.Path(p) for p in os.environ.get(BOARDS_ENV, "").split(os.pathsep) if p]
    return [*extra, BOARDS_DIR]


@dataclass(frozen=True)
class Region:
    origin: int
    length: int

    @property
    def end(self) -> int:
        return self.origin + self.length

    def overlaps(self, other: Region) -> bool:
        return self.origin < other.end and other.origin < self.end


@dataclass(frozen=True)
class SlotLayout:
    """A/B weight slots (docs/ota.md): two record copies of one sector each
    at origin and origin + sector, slot A at origin + 2 sectors, slot B right
    after it, each (length - 2 sectors) / 2 rounded down to a sector. The
    same rule is colibri_slots_layout() in C (sdk/src/ota/slot_record.c)."""
    origin: int
    length: int
    sector: int
    store: str = ""          # Linux boards: the store file or block device on the board

    @property
    def records(self) -> tuple[int, int]:
        return self.origin, self.origin + self.sector

    @property
    def slot_size(self) -> int:
        half = (self.length - 2 * self.sector) // 2
        return half - half % self.sector

    @property
    def slots(self) -> tuple[int, int]:
        a = self.origin + 2 * self.sector
        return a, a + self.slot_size

    @property
    def region(self) -> Region:
        return Region(self.origin, self.length)


@dataclass(frozen=True)
class Board:
    name: str
    path: pathlib.Path
    description: str
    arch: str
    cpu: str
    port: str
    cross_prefix: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    code: Region | None
    ram: Region | None
    weights: Region
    weights_alignment: int
    kernels: tuple[str, ...] = ()  # SIMD kernel tables, most preferred first
    stacks: dict[str, int] = field(default_factory=dict)  # name -> bytes (bare-metal ports)
    bandwidth: float | None = None  # bytes/s the CPU reads the weight memory at
    bandwidth_source: str = ""      # where that figure comes from (or why there is none)
    zephyr_board: str = ""          # the Zephyr board this file describes (west colibri-*)
    uart: dict[str, Any] = field(default_factory=dict)
    ticks: dict[str, Any] = field(default_factory=dict)
    emulate: dict[str, Any] = field(default_factory=dict)
    flash: dict[str, Any] = field(default_factory=dict)
    slots: SlotLayout | None = None

    @property
    def bare_metal(self) -> bool:
        return self.port.startswith("baremetal-")


KERNELS_MK = pathlib.Path(__file__).resolve().parents[3] / "sdk" / "src" / "kernels" / "tables.mk"
KERNELS_LIST = PACKAGE_BOARDS / "kernel_tables.txt"  # a wheel's copy of tables.mk's names


def kernel_sources() -> dict[str, list[pathlib.Path]]:
    """Each table of sdk/src/kernels/tables.mk and its files, the one defining
    colibri_kernels_<table> first (a checkout only: a wheel has no sources)."""
    lines = re.findall(r"^KERNEL_SOURCES_(\w+)\s*:=(.*)$", KERNELS_MK.read_text(), re.MULTILINE)
    return {table: [KERNELS_MK.parent / name for name in files.split()] for table, files in lines}


def kernel_tables() -> list[str]:
    """The kernel tables of sdk/src/kernels/tables.mk (a wheel: the list setup.py wrote from it)."""
    if KERNELS_MK.is_file():
        return sorted(kernel_sources())
    return KERNELS_LIST.read_text().split() if KERNELS_LIST.is_file() else []


# ---- what relates two fields (each field alone: board_schema.check_fields) ------------

def _region(data: dict, key: str, where: str, bits: int) -> Region | None:
    table = data.get("memory", {}).get(key)
    if table is None:
        return None
    region = Region(table["origin"], table["length"])
    if region.end > 1 << bits:
        raise BoardError(f"{where} [memory.{key}]: origin 0x{region.origin:X} + length "
                         f"0x{region.length:X} runs past 2^{bits}")
    return region


def _stacks(data: dict, port: str, where: str) -> dict[str, int]:
    table = data.get("stacks", {})
    known = PORT_STACKS.get(port, ())
    unknown = sorted(set(table) - {key for key, _, _ in known})
    if unknown:
        names = ", ".join(key for key, _, _ in known) or "none (not a bare-metal port)"
        raise BoardError(f"{where} [stacks]: unknown key(s) {', '.join(unknown)}; port {port} "
                         f"has: {names}")
    return {key: table.get(key, default) for key, _, default in known}


def _bandwidth(weights: dict, where: str) -> tuple[float | None, str]:
    """[weights] bandwidth (bytes/s, optional) and bandwidth_source (required with it)."""
    source = weights.get("bandwidth_source", "")
    if "bandwidth" not in weights:
        return None, source
    if not source.strip():
        raise BoardError(f"{where} [weights]: bandwidth needs bandwidth_source: where the figure "
                         "comes from")
    return float(weights["bandwidth"]), source


def _slots(data: dict, where: str) -> SlotLayout | None:
    if "slots" not in data:
        return None
    table, at = data["slots"], f"{where} [slots]"
    origin, length, sector = table["origin"], table["length"], table["sector"]
    if origin % sector:
        raise BoardError(f"{at}: origin 0x{origin:X} must be a multiple of the sector {sector}")
    if origin + length > 1 << 64:
        raise BoardError(f"{at}: origin 0x{origin:X} + length 0x{length:X} runs past 2^64")
    layout = SlotLayout(origin, length, sector, table.get("store", ""))
    if layout.slot_size < sector:
        raise BoardError(f"{at}: length {length} leaves no room for two records and two slots "
                         f"of at least one sector")
    return layout


def _check_uart(board: Board, where: str) -> None:
    """The drivers divide clock_hz by 16 x baud (PL011, CMSDK, STM32 oversampling by 16)."""
    clock, baud = board.uart.get("clock_hz"), board.uart.get("baud", 115200)
    if clock is not None and clock < 16 * baud:
        raise BoardError(f"{where} [uart]: clock_hz {clock} is below 16 x baud {baud}: no UART "
                         "divides a clock that slow down to this baud")


def _check_regions(board: Board, where: str) -> None:
    bits = ADDRESS_BITS[board.arch]
    w = board.weights
    if w.end > 1 << bits:
        raise BoardError(f"{where} [weights]: address 0x{w.origin:X} and size {w.length} must "
                         f"give a non-empty region below 2^{bits}")
    if w.origin % board.weights_alignment:
        raise BoardError(f"{where}: weights address 0x{w.origin:X} must be a multiple of "
                         f"alignment {board.weights_alignment} (a power of two >= 64)")
    regions = {"code": board.code, "ram": board.ram, "weights": w}
    if board.slots is not None and board.bare_metal:
        if board.slots.region.end > 1 << bits:
            raise BoardError(f"{where} [slots]: origin + length runs past 2^{bits}")
        for name in ("code", "ram"):
            if regions[name] is not None and regions[name].overlaps(board.slots.region):
                raise BoardError(f"{where}: the slots overlap the {name} region")
    # Linux boards: [memory.ram] is the DRAM and the weights are a mapped file,
    # not addresses that could collide.
    names = [n for n, r in regions.items() if r is not None and board.port != "linux"]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if regions[a].overlaps(regions[b]):
                raise BoardError(f"{where}: {a} and {b} regions overlap")


def _check(board: Board) -> None:
    where = str(board.path)
    if board.name != board.path.stem:
        raise BoardError(f"{where}: name '{board.name}' must equal the file name "
                         f"'{board.path.stem}'")
    _check_regions(board, where)
    _check_uart(board, where)
    if not any(f"-mcpu={board.cpu}" == flag for flag in board.cflags):
        raise BoardError(f"{where}: cflags must contain -mcpu={board.cpu} (match the core, "
                         f"not only the ISA)")


def _read(name_or_path: str | pathlib.Path) -> tuple[pathlib.Path, dict]:
    path = pathlib.Path(name_or_path)
    if path.suffix != ".toml":
        found = [d / f"{name_or_path}.toml" for d in board_dirs()]
        path = next((p for p in found if p.is_file()), found[-1])
    if not path.is_file():
        known = ", ".join(board_names()) or "none"
        raise BoardError(f"no board '{name_or_path}' ({path} missing); known boards: {known}")
    try:
        return path, tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BoardError(f"{path}: not valid TOML: {exc}") from exc


def load(name_or_path: str | pathlib.Path) -> Board:
    """A board by name (boards/NAME.toml, $COLIBRI_BOARDS first) or .toml path,
    checked field by field (board_schema) and as a whole; BoardError if not."""
    path, data = _read(name_or_path)
    where = str(path)
    check_fields(data, where, kernel_tables())
    weights, bits = data["weights"], ADDRESS_BITS[data["arch"]]
    bandwidth, bandwidth_source = _bandwidth(weights, where)
    board = Board(
        name=data["name"], path=path, description=data.get("description", ""),
        arch=data["arch"], cpu=data["cpu"], port=data["port"],
        cross_prefix=data.get("cross_prefix", ""), cflags=tuple(data["cflags"]),
        ldflags=tuple(data.get("ldflags", [])),
        code=_region(data, "code", where, bits), ram=_region(data, "ram", where, bits),
        weights=Region(weights["address"], weights["size"]),
        weights_alignment=weights.get("alignment", 4096),
        kernels=tuple(n for n in data.get("kernels", []) if n != "reference"),
        uart=data.get("uart", {}), ticks=data.get("ticks", {}),
        emulate=data.get("emulate", {}), flash=data.get("flash", {}),
        stacks=_stacks(data, data["port"], where),
        zephyr_board=data.get("zephyr_board", ""),
        bandwidth=bandwidth, bandwidth_source=bandwidth_source, slots=_slots(data, where))
    _check(board)
    return board


def board_names() -> list[str]:
    return sorted({p.stem for d in board_dirs() for p in d.glob("*.toml")})


def shown_path(board: Board) -> str:
    """The board file's path as shown in generated files (relative to the repo if inside)."""
    try:
        return str(board.path.resolve().relative_to(REPO))
    except ValueError:
        return str(board.path)


def linker_memory(board: Board) -> str:
    """MEMORY block and symbols for a bare-metal linker script (INCLUDE it)."""
    if not board.bare_metal:
        raise BoardError(f"{board.name}: port {board.port} has no linker script")
    w = board.weights
    return "\n".join([
        f"/* Generated from {shown_path(board)} by colibri-board; do not edit. */",
        "MEMORY",
        "{",
        f"    CODE (rx)     : ORIGIN = 0x{board.code.origin:08X}, LENGTH = 0x{board.code.length:X}",
        f"    RAM (rwx)     : ORIGIN = 0x{board.ram.origin:08X}, LENGTH = 0x{board.ram.length:X}",
        f"    WEIGHTS (r)   : ORIGIN = 0x{w.origin:08X}, LENGTH = 0x{w.length:X}",
        "}",
        f"__colibri_weights_start = 0x{w.origin:08X};",
        f"__colibri_weights_size = 0x{w.length:X};",
        *(f"{symbol} = 0x{board.stacks[key]:X};" for key, symbol, _ in PORT_STACKS[board.port]),
        *([f"__colibri_slots_start = 0x{board.slots.origin:08X};",
           f"__colibri_slots_size = 0x{board.slots.length:X};"] if board.slots else []),
        "",
    ])


def config_header(board: Board) -> str:
    """board_config.h: the board's addresses for C, with checks against
    model_config.h when both are included."""
    up = board.name.upper()
    uart = board.uart
    lines = [
        f"/* Generated from {shown_path(board)} by colibri-board; do not edit. */",
        "#ifndef COLIBRI_BOARD_CONFIG_H", "#define COLIBRI_BOARD_CONFIG_H", "",
        f'#define COLIBRI_BOARD_NAME "{board.name}"',
        f"#define COLIBRI_BOARD_{up} 1",
        f"#define COLIBRI_BOARD_WEIGHTS_ADDR 0x{board.weights.origin:08X}u",
        f"#define COLIBRI_BOARD_WEIGHTS_SIZE 0x{board.weights.length:X}u",
        f"#define COLIBRI_BOARD_WEIGHTS_ALIGN {board.weights_alignment}u",
    ]
    if uart:
        lines += [f"#define COLIBRI_BOARD_UART_BASE 0x{uart.get('base', 0):08X}u",
                  f"#define COLIBRI_BOARD_UART_CLOCK_HZ {uart.get('clock_hz', 0)}u",
                  f"#define COLIBRI_BOARD_UART_BAUD {uart.get('baud', 115200)}u"]
    if board.ticks:
        lines += [f"#define COLIBRI_BOARD_TICKS_HZ {board.ticks.get('hz', 0)}u",
                  f'#define COLIBRI_BOARD_TICKS_UNIT "{board.ticks.get("unit", "")}"']
    lines += slot_macros(board.slots)
    lines += [
        "", "#ifdef COLIBRI_MODEL_IMAGE_SIZE", *MODEL_FITS_BOARD, "#endif", "", "#endif", ""]
    return "\n".join(lines)


def slot_macros(layout: SlotLayout | None) -> list[str]:
    """The A/B slot layout for C (all 0 on a board without slots)."""
    a, b = layout.slots if layout else (0, 0)
    r0, r1 = layout.records if layout else (0, 0)
    values = [("SLOTS_BASE", layout.origin if layout else 0),
              ("SLOTS_SIZE", layout.length if layout else 0),
              ("SLOTS_SECTOR", layout.sector if layout else 0),
              ("SLOT_RECORD0", r0), ("SLOT_RECORD1", r1), ("SLOT_A", a), ("SLOT_B", b),
              ("SLOT_SIZE", layout.slot_size if layout else 0)]
    return ["", f"#define COLIBRI_BOARD_HAS_SLOTS {1 if layout else 0}",
            *(f"#define COLIBRI_BOARD_{name} 0x{value:08X}ull" for name, value in values)]


def make_vars(board: Board) -> str:
    return "\n".join([
        f"BOARD_ARCH := {board.arch}", f"BOARD_PORT := {board.port}",
        f"BOARD_CC := {board.cross_prefix}gcc", f"BOARD_OBJCOPY := {board.cross_prefix}objcopy",
        f"BOARD_SIZE := {board.cross_prefix}size",
        f"BOARD_CFLAGS := {' '.join(board.cflags)}", f"BOARD_LDFLAGS := {' '.join(board.ldflags)}",
        f"BOARD_WEIGHTS_ADDR := 0x{board.weights.origin:08X}",
        f"BOARD_KERNELS := {' '.join(board.kernels)}", ""])


def write_generated(text: str, out: pathlib.Path | None) -> None:
    """Print text, or write it to out only when it changed (make's timestamps stay quiet)."""
    if out is None:
        sys.stdout.write(text)
        return
    if not out.exists() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


def generator_main(prog: str, render, argv: list[str] | None = None) -> int:
    """`prog BOARD [-o FILE]`: write render(load(BOARD)); for ports' own generators."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("board")
    parser.add_argument("-o", "--output", type=pathlib.Path)
    args = parser.parse_args(argv)
    try:
        write_generated(render(load(args.board)), args.output)
    except ColibriError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return 0
