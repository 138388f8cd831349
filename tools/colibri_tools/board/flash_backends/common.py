"""What every flash backend shares: the request, a step of a plan, the board's
[flash] keys, and where the weights live (internal or external flash)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ColibriError
from ..boards import BOARDS_DIR, Board
from ..hex_image import check_file, hex_extent, is_hex_file, span

INSTALL_HINTS = {
    "pyocd": "install it with: .venv/bin/pip install pyocd (then the target's CMSIS pack: "
             "pyocd pack install TARGET)",
    "openocd": "install it with: apt-get install openocd",
    "west": "install it with: .venv/bin/pip install west, inside a Zephyr workspace "
            "(west init; west update)",
    "qemu": "install it with: apt-get install qemu-system-arm (it also provides "
            "qemu-system-aarch64)",
    "ssh": "install it with: apt-get install openssh-client",
    "scp": "install it with: apt-get install openssh-client",
    "STM32_Programmer_CLI": "install STM32CubeProgrammer (from ST; no Debian package) and put "
                            "its bin/ folder on PATH",
}


class FlashError(ColibriError):
    """A flash plan cannot be made (board data missing, files that do not fit) or a step failed."""


@dataclass(frozen=True)
class FlashRequest:
    board: Board
    weights: Path | None = None       # model.bin or weights HEX
    firmware: Path | None = None      # firmware ELF or HEX
    build_dir: Path | None = None     # a Zephyr build (west)
    port: int | None = None           # QEMU: serial on this TCP port instead of stdio
    probe: str | None = None          # debug probe serial number / unique id
    workdir: Path = Path("build/flash")
    timeout: float = 300.0            # QEMU: bound on the emulated run, in seconds
    verify: bool = True
    host: str | None = None           # scp: user@address of the board (--host)
    slot: str | None = None           # "auto": update the A/B slot that is not running
    trusted_key: bytes | None = None  # the key the image must be signed with (--slot)
    allow_older: bool = False         # --slot: accept a lower signed version


@dataclass(frozen=True)
class Step:
    """One command of a plan. `argv` is what --dry-run prints; `tool` must be on
    PATH to run it; `action`, when set, runs the step in this process instead
    (colibri-image checks, the QEMU session) and returns its exit status."""

    argv: tuple[str, ...]
    what: str
    tool: str | None = None
    action: Callable[[], int] | None = field(default=None, compare=False)
    notes: tuple[str, ...] = ()


def board_ref(board: Board) -> str:
    """How a command line names the board: its name if it lives in boards/, else its path."""
    return board.name if board.path.parent.resolve() == BOARDS_DIR.resolve() else str(board.path)


def flash_key(board: Board, key: str, kind: type, default: object = None) -> object:
    value = board.flash.get(key, default)
    if value is not default and not isinstance(value, kind):
        raise FlashError(f"board {board.name}: [flash] {key} must be {kind.__name__}, "
                         f"got {value!r}", path=board.path)
    return value


def board_file(board: Board, key: str) -> str | None:
    """A [flash] key naming a file, relative to the board file's folder unless absolute."""
    value = flash_key(board, key, str)
    if not value:
        return None
    path = Path(value)
    path = path if path.is_absolute() else (board.path.parent / path).resolve()
    if not path.is_file():
        raise FlashError(f"board {board.name}: [flash] {key} names {path}, which does not exist",
                         path=board.path)
    return str(path)


def string_list(board: Board, key: str) -> list[str] | None:
    """A [flash] key that holds a string or a list of strings; None if absent."""
    value = board.flash.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise FlashError(f"board {board.name}: [flash] {key} must be a string or a list of "
                         f"strings", path=board.path)
    return items


CODE_REGION_END = 0x20000000   # Cortex-M "Code" region (0x0-0x1FFFFFFF): on-chip flash lives here


def weights_external(board: Board) -> bool:
    """True when the weights go to memory a debug probe cannot write by itself
    (external QSPI/OSPI flash). [flash] weights_memory ("internal" or
    "external") decides; by default the weights are internal when they lie in
    the Cortex-M code region, below 0x20000000, where on-chip flash is mapped."""
    declared = board.flash.get("weights_memory")
    if declared is not None:
        if declared not in ("internal", "external"):
            raise FlashError(f"board {board.name}: [flash] weights_memory must be 'internal' or "
                             f"'external', got {declared!r}", path=board.path)
        return declared == "external"
    return board.weights.end > CODE_REGION_END


def external_loader_missing(board: Board, tool: str, key: str, what: str) -> FlashError:
    w = board.weights
    return FlashError(
        f"board {board.name} keeps its weights in external flash at {span(w.origin, w.end)} "
        f"(outside its internal flash); {tool} can write there only with a loader for that "
        f"memory, and the board file names none: set [flash] {key} to {what} "
        f"(docs/flashing.md, 'External QSPI flash')", path=board.path)


def weights_span(board: Board, weights: Path) -> tuple[int, int]:
    """(address, size) of the bytes a weights file places."""
    if is_hex_file(weights):
        lo, hi = hex_extent(weights, board.weights)
        return lo, hi - lo
    return board.weights.origin, weights.stat().st_size


def check_step(req: FlashRequest, readback: Path) -> Step:
    """Compare a raw readback of the weight region with the weights file."""
    board, weights = req.board, req.weights

    def run() -> int:
        print(check_file(readback, board, weights))
        return 0

    return Step(("colibri-image", "--check", str(readback), "--board", board_ref(board),
                 "--model", str(weights)),
                f"compare the bytes read back with {weights.name}", action=run)


def tcl_word(text: str) -> str:
    """A file name as one Tcl word (OpenOCD commands)."""
    return text if re.fullmatch(r"[\w./+:@-]+", text) else "{" + text + "}"
