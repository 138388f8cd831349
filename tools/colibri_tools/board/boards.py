"""Boards are data: one TOML file per board in boards/, the single source of
truth for addresses and flags. This module loads and checks them, and derives
from them what must never disagree: the linker script's memory regions, the
compiler flags, the weight address of HEX images, and the compile-time checks
against model_config.h. The colibri-board command is board_cli.

Schema (docs/boards.md has the full description):

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
ARCHES = {"aarch64", "armv7e-m", "armv8.1-m"}
PORTS = {"baremetal-aarch64", "baremetal-cortex-m", "linux", "zephyr"}


class BoardError(ColibriError):
    """A board file is missing, unreadable or inconsistent."""


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


def _need(data: dict, key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise BoardError(f"{where}: missing key '{key}'")
    value = data[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise BoardError(f"{where}: '{key}' must be {kind.__name__}, got {value!r}")
    return value


def _table(data: dict, key: str, where: str) -> dict:
    """An optional [key] table (empty when absent)."""
    return _need(data, key, dict, where) if key in data else {}


def _region(data: dict, key: str, where: str) -> Region | None:
    if key not in data:
        return None
    table = _need(data, key, dict, where)
    origin = _need(table, "origin", int, f"{where} [{key}]")
    length = _need(table, "length", int, f"{where} [{key}]")
    if origin < 0 or length <= 0 or origin + length > 1 << 64:
        raise BoardError(f"{where} [{key}]: origin/length out of range")
    return Region(origin, length)


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


def _kernels(data: dict, where: str) -> tuple[str, ...]:
    names = data.get("kernels", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BoardError(f"{where}: 'kernels' must be a list of kernel table names")
    known = kernel_tables()
    for name in names:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name not in known:
            raise BoardError(f"{where}: kernels: no table '{name}' (sdk/src/kernels/tables.mk has: "
                             f"{', '.join(known)})")
    if len(set(names)) != len(names):
        raise BoardError(f"{where}: kernels: a table is named twice")
    return tuple(n for n in names if n != "reference")


# Each bare-metal port's stacks: board-file key, linker symbol (link.ld reads
# it from memory.ld), default size. A board file's [stacks] table overrides.
PORT_STACKS = {
    "baremetal-cortex-m": (("thread", "__cm_thread_stack_size", 0x4000),
                           ("handler", "__cm_handler_stack_size", 0x2000)),
    "baremetal-aarch64": (("main", "AARCH64_MAIN_STACK_SIZE", 0x10000),
                          ("irq", "AARCH64_IRQ_STACK_SIZE", 0x8000)),
}


def _stacks(data: dict, port: str, where: str) -> dict[str, int]:
    table = _table(data, "stacks", where)
    known = PORT_STACKS.get(port, ())
    unknown = sorted(set(table) - {key for key, _, _ in known})
    if unknown:
        names = ", ".join(key for key, _, _ in known) or "none (not a bare-metal port)"
        raise BoardError(f"{where} [stacks]: unknown key(s) {', '.join(unknown)}; port {port} "
                         f"has: {names}")
    out = {}
    for key, _, default in known:
        value = _need(table, key, int, f"{where} [stacks]") if key in table else default
        if not 0 < value < 1 << 32 or value % 16:
            raise BoardError(f"{where} [stacks]: {key} = {value} must be a positive multiple "
                             "of 16 below 4 GiB")
        out[key] = value
    return out


def _bandwidth(weights: dict, where: str) -> tuple[float | None, str]:
    """[weights] bandwidth (bytes/s, optional) and bandwidth_source (required with it)."""
    where = f"{where} [weights]"
    source = weights.get("bandwidth_source", "")
    if not isinstance(source, str):
        raise BoardError(f"{where}: bandwidth_source must be a string")
    if "bandwidth" not in weights:
        return None, source
    value = weights["bandwidth"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e15:
        raise BoardError(f"{where}: bandwidth must be a positive number of bytes per second, "
                         f"got {value!r}")
    if not source.strip():
        raise BoardError(f"{where}: bandwidth needs bandwidth_source: where the figure comes from")
    return float(value), source


# What a board file may put into generated make files, C headers and linker
# scripts: flags without spaces, quotes or make/shell syntax; plain unit text.
FLAG = re.compile(r"-[A-Za-z0-9_=.,+/:-]+")
CROSS_PREFIX = re.compile(r"([A-Za-z0-9_.+]+-)*")
UNIT_TEXT = re.compile(r"[ -!#-\[\]-~]{0,200}")  # printable ASCII but " and \\
ADDRESS_BITS = {"aarch64": 64, "armv7e-m": 32, "armv8.1-m": 32}


def _check_text(board: Board, where: str) -> None:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", board.name):
        raise BoardError(f"{where}: name {board.name!r} must be lower-case letters, digits and _ "
                         "(it becomes a C macro and a make target)")
    for flag in (*board.cflags, *board.ldflags):
        if not isinstance(flag, str) or not FLAG.fullmatch(flag):
            raise BoardError(f"{where}: compiler/linker flag {flag!r} is not a plain -option "
                             "(no spaces, quotes, $ or parentheses)")
    if not CROSS_PREFIX.fullmatch(board.cross_prefix):
        raise BoardError(f"{where}: cross_prefix {board.cross_prefix!r} is not a tool prefix "
                         "like 'arm-none-eabi-'")
    unit = board.ticks.get("unit", "")
    if not isinstance(unit, str) or not UNIT_TEXT.fullmatch(unit):
        raise BoardError(f"{where} [ticks]: unit must be printable text without quotes or "
                         "backslashes, at most 200 characters")


def _check_numbers(board: Board, where: str) -> None:
    tables = {"uart": (board.uart, ("base", "clock_hz", "baud", "irq")),
              "ticks": (board.ticks, ("hz",))}
    for name, (table, keys) in tables.items():
        for key in keys:
            if key in table:
                value = _need(table, key, int, f"{where} [{name}]")
                if not 0 <= value < 1 << 32:
                    raise BoardError(f"{where} [{name}]: {key} = {value} out of range")
    w, limit = board.weights, 1 << ADDRESS_BITS.get(board.arch, 64)
    if w.origin < 0 or w.length <= 0 or w.origin + w.length > limit:
        raise BoardError(f"{where} [weights]: address 0x{w.origin:X} and size {w.length} must "
                         f"give a non-empty region below 2^{ADDRESS_BITS.get(board.arch, 64)}")


def _slots(data: dict, where: str) -> SlotLayout | None:
    if "slots" not in data:
        return None
    table = _need(data, "slots", dict, where)
    at = f"{where} [slots]"
    origin, length = _need(table, "origin", int, at), _need(table, "length", int, at)
    sector = _need(table, "sector", int, at)
    store = table.get("store", "")
    if not isinstance(store, str) or not re.fullmatch(r"[A-Za-z0-9_./-]*", store):
        raise BoardError(f"{at}: store must be a plain path (letters, digits, _ . / -)")
    if sector < 4096 or sector & (sector - 1) or sector > 1 << 24:
        raise BoardError(f"{at}: sector {sector} must be a power of two, 4 KiB .. 16 MiB")
    if origin < 0 or origin % sector or length <= 0 or origin + length > 1 << 64:
        raise BoardError(f"{at}: origin 0x{origin:X} must be a multiple of the sector and "
                         f"length {length} positive")
    layout = SlotLayout(origin, length, sector, store)
    if layout.slot_size < sector:
        raise BoardError(f"{at}: length {length} leaves no room for two records and two slots "
                         f"of at least one sector")
    return layout


def _check(board: Board) -> None:
    where = str(board.path)
    _check_text(board, where)
    if board.arch not in ARCHES:
        raise BoardError(f"{where}: arch '{board.arch}' not one of {sorted(ARCHES)}")
    if board.port not in PORTS:
        raise BoardError(f"{where}: port '{board.port}' not one of {sorted(PORTS)}")
    _check_numbers(board, where)
    align = board.weights_alignment
    if not isinstance(align, int) or isinstance(align, bool):
        raise BoardError(f"{where} [weights]: alignment must be an integer")
    if align < 64 or align & (align - 1) or board.weights.origin % align:
        raise BoardError(f"{where}: weights address 0x{board.weights.origin:X} must be a "
                         f"multiple of alignment {align} (a power of two >= 64)")
    if board.bare_metal and (board.code is None or board.ram is None):
        raise BoardError(f"{where}: a bare-metal board needs [memory.code] and [memory.ram]")
    regions = {"code": board.code, "ram": board.ram, "weights": board.weights}
    if board.slots is not None and board.bare_metal:
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
    if not any(f"-mcpu={board.cpu}" == flag for flag in board.cflags):
        raise BoardError(f"{where}: cflags must contain -mcpu={board.cpu} (match the core, "
                         f"not only the ISA)")


def load(name_or_path: str | pathlib.Path) -> Board:
    path = pathlib.Path(name_or_path)
    if path.suffix != ".toml":
        found = [d / f"{name_or_path}.toml" for d in board_dirs()]
        path = next((p for p in found if p.is_file()), found[-1])
    if not path.is_file():
        known = ", ".join(board_names()) or "none"
        raise BoardError(f"no board '{name_or_path}' ({path} missing); known boards: {known}")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BoardError(f"{path}: not valid TOML: {exc}") from exc
    where = str(path)
    memory = data.get("memory", {})
    weights = _need(data, "weights", dict, where)
    board = Board(
        name=_need(data, "name", str, where), path=path,
        description=data.get("description", ""), arch=_need(data, "arch", str, where),
        cpu=_need(data, "cpu", str, where), port=_need(data, "port", str, where),
        cross_prefix=data.get("cross_prefix", ""),
        cflags=tuple(_need(data, "cflags", list, where)),
        ldflags=tuple(data.get("ldflags", [])),
        code=_region(memory, "code", where), ram=_region(memory, "ram", where),
        weights=Region(_need(weights, "address", int, f"{where} [weights]"),
                       _need(weights, "size", int, f"{where} [weights]")),
        weights_alignment=weights.get("alignment", 4096), kernels=_kernels(data, where),
        uart=_table(data, "uart", where), ticks=_table(data, "ticks", where),
        emulate=_table(data, "emulate", where), flash=_table(data, "flash", where),
        stacks=_stacks(data, data.get("port", ""), where),
        zephyr_board=str(data.get("zephyr_board", "")),
        bandwidth=_bandwidth(weights, where)[0], bandwidth_source=_bandwidth(weights, where)[1],
        slots=_slots(data, where))
    if board.name != path.stem:
        raise BoardError(f"{where}: name '{board.name}' must equal the file name '{path.stem}'")
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
