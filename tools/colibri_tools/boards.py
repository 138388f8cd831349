"""Boards are data: one TOML file per board in boards/, the single source of
truth for addresses and flags. This module loads and checks them, and derives
from them what must never disagree: the linker script's memory regions, the
compiler flags, the weight address of HEX images, and the compile-time checks
against model_config.h.

    colibri-board list
    colibri-board show BOARD
    colibri-board ld BOARD [-o FILE]        MEMORY block + symbols for the linker script
    colibri-board make BOARD                make variables (CC, CFLAGS, ...)
    colibri-board header BOARD [-o FILE]    board_config.h: addresses and limits as macros

Schema (docs/boards.md has the full description):

    name, description, arch ("aarch64" | "armv7e-m" | "armv8.1-m"), cpu, port
    ("baremetal-aarch64" | "baremetal-cortex-m" | "linux" | "zephyr"),
    cross_prefix, cflags = [...], ldflags = [...]
    [memory.code]    origin, length        (bare-metal ports)
    [memory.ram]     origin, length
    [weights]        address, size, alignment
    [uart]           kind, base, clock_hz, baud, irq (optional)
    [ticks]          source, hz (0 = not a time unit), unit (plain words)
    [emulate]        (optional) qemu, machine, cpu, memory, extra = [...]
    [flash]          method, and method-specific keys
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

from .config_header import MODEL_FITS_BOARD
from .errors import ColibriError
from .version import add_version_option

REPO = pathlib.Path(__file__).resolve().parents[2]
BOARDS_ENV = "COLIBRI_BOARDS"  # more board folders, searched first (os.pathsep-separated)
PACKAGE_BOARDS = pathlib.Path(__file__).resolve().parent / "board_files"  # a wheel's copy


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
    uart: dict[str, Any] = field(default_factory=dict)
    ticks: dict[str, Any] = field(default_factory=dict)
    emulate: dict[str, Any] = field(default_factory=dict)
    flash: dict[str, Any] = field(default_factory=dict)

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


KERNELS_DIR = pathlib.Path(__file__).resolve().parents[2] / "sdk" / "src" / "kernels"
KERNELS_LIST = PACKAGE_BOARDS / "kernel_tables.txt"  # a wheel's list of sdk/src/kernels/*.c


def kernel_tables() -> list[str]:
    """The kernel tables sdk/src/kernels has (a wheel: the list setup.py wrote from it)."""
    if KERNELS_DIR.is_dir():
        return sorted(p.stem for p in KERNELS_DIR.glob("*.c"))
    return KERNELS_LIST.read_text().split() if KERNELS_LIST.is_file() else []


def _kernels(data: dict, where: str) -> tuple[str, ...]:
    names = data.get("kernels", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BoardError(f"{where}: 'kernels' must be a list of kernel table names")
    known = kernel_tables()
    for name in names:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name not in known:
            raise BoardError(f"{where}: kernels: no table '{name}' (sdk/src/kernels has: "
                             f"{', '.join(known)})")
    if len(set(names)) != len(names):
        raise BoardError(f"{where}: kernels: a table is named twice")
    return tuple(n for n in names if n != "reference")


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
    names = [n for n, r in regions.items() if r is not None]
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
        emulate=_table(data, "emulate", where), flash=_table(data, "flash", where))
    if board.name != path.stem:
        raise BoardError(f"{where}: name '{board.name}' must equal the file name '{path.stem}'")
    _check(board)
    return board


def board_names() -> list[str]:
    return sorted({p.stem for d in board_dirs() for p in d.glob("*.toml")})


def _source(board: Board) -> str:
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
        f"/* Generated from {_source(board)} by colibri-board; do not edit. */",
        "MEMORY",
        "{",
        f"    CODE (rx)     : ORIGIN = 0x{board.code.origin:08X}, LENGTH = 0x{board.code.length:X}",
        f"    RAM (rwx)     : ORIGIN = 0x{board.ram.origin:08X}, LENGTH = 0x{board.ram.length:X}",
        f"    WEIGHTS (r)   : ORIGIN = 0x{w.origin:08X}, LENGTH = 0x{w.length:X}",
        "}",
        f"__colibri_weights_start = 0x{w.origin:08X};",
        f"__colibri_weights_size = 0x{w.length:X};",
        "",
    ])


def config_header(board: Board) -> str:
    """board_config.h: the board's addresses for C, with checks against
    model_config.h when both are included."""
    up = board.name.upper()
    uart = board.uart
    lines = [
        f"/* Generated from {_source(board)} by colibri-board; do not edit. */",
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
    lines += [
        "", "#ifdef COLIBRI_MODEL_IMAGE_SIZE", *MODEL_FITS_BOARD, "#endif", "", "#endif", ""]
    return "\n".join(lines)


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="colibri-board", description="Board data from boards/")
    add_version_option(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    for cmd in ("show", "ld", "make", "header"):
        s = sub.add_parser(cmd)
        s.add_argument("board")
        s.add_argument("-o", "--output", type=pathlib.Path)
    args = p.parse_args(argv)
    try:
        if args.cmd == "list":
            if not board_names():
                raise BoardError("no board files in " + ", ".join(map(str, board_dirs())) +
                                 " (a broken installation: the package ships its boards)")
            for name in board_names():
                board = load(name)
                print(f"{name:20} {board.arch:10} {board.port:20} weights 0x{board.weights.origin:08X}")
            return 0
        board = load(args.board)
        text = {"show": lambda b: f"{b}\n", "ld": linker_memory, "make": make_vars,
                "header": config_header}[args.cmd](board)
        write_generated(text, args.output)
    except ColibriError as exc:
        print(f"colibri-board: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
