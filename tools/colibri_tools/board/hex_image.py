"""colibri-image: a model image as Intel HEX at its board's weight address.

    colibri-image MODEL.bin --board BOARD -o weights.hex
    colibri-image MODEL.bin --board BOARD --merge firmware.elf -o merged.hex
    colibri-image MODEL.bin --board BOARD --merge firmware.hex -o weights.hex -o merged.hex
    colibri-image --check FILE --board BOARD --model MODEL.bin

Library first: build_hex() writes one file, check_file() verifies one; main()
is the command line around them.

The model is streamed: its records are formatted 64 KiB at a time straight
from the file (never held whole, never in intelhex's per-byte dict, which
needs about 100 bytes of RAM per image byte), and the written file is parsed
again, streaming, with every byte compared with its source before it gets its
final name. Firmware (the PT_LOAD segments of an ELF at their physical
addresses, or an Intel HEX file read with intelhex) is small and held in RAM.

Refused, with the address range in the message: a model larger than the
board's weight region, a weight address not aligned for the model's expert
blocks, firmware bytes inside the weight region, two inputs writing the same
address, addresses at or beyond 4 GiB (the limit of Intel HEX), and a firmware
HEX without an end-of-file record or with records after its first one (`cat
boot.hex app.hex`: intelhex would stop there and drop the application).
"""

from __future__ import annotations

import argparse
import bisect
import os
import sys
import zlib
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..errors import ColibriError
from ..version import add_version_option
from .boards import Board, Region, load
from .hex_firmware import Piece, _Source, check_layout, load_firmware, model_piece
from .hex_records import (
    EOF,
    EXT_LINEAR,
    HEX_LIMIT,
    RECORD_SIZES,
    WINDOW,
    HexImageError,
    HexReader,
    _data_lines,
    _record,
    span,
)


def _write_records(out, pieces: Sequence[Piece], model: Piece, start: tuple[int, bytes] | None,
                   record_size: int, bar: tqdm) -> int:
    """Write every piece in address order, then the start address and end-of-file
    records; return the CRC-32 of the model's bytes."""
    upper, crc = None, 0
    for piece in pieces:
        for address, data in piece.chunks():
            if address >> 16 != upper:
                upper = address >> 16
                out.write(_record(EXT_LINEAR, 0, upper.to_bytes(2, "big")))
            out.write(_data_lines(address, data, record_size))
            if piece is model:
                crc = zlib.crc32(data, crc)
            bar.update(len(data))
    if start is not None:
        out.write(_record(start[0], 0, start[1]))
    out.write(_record(EOF, 0))
    return crc


# ---- verification -------------------------------------------------------------

class _Coverage:
    """Address ranges seen so far, merged; refuses a byte seen twice."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> tuple[int, int] | None:
        """Record [start, end); return the overlap with earlier ranges, if any."""
        starts, ends = self.starts, self.ends
        if not ends or start >= ends[-1]:                 # the usual, ascending case
            if ends and start == ends[-1]:
                ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
            return None
        i = bisect.bisect_right(starts, start)
        if i and ends[i - 1] > start:
            return start, min(end, ends[i - 1])
        if i < len(starts) and starts[i] < end:
            return starts[i], min(end, ends[i])
        starts.insert(i, start)
        ends.insert(i, end)
        for j in (i, i - 1):                              # merge with touching neighbours
            if 0 <= j < len(starts) - 1 and ends[j] == starts[j + 1]:
                ends[j] = ends.pop(j + 1)
                starts.pop(j + 1)
        return None

    def first_gap(self, start: int, end: int) -> tuple[int, int] | None:
        """The first part of [start, end) not covered, if any."""
        i = bisect.bisect_right(self.starts, start) - 1
        if i < 0 or self.ends[i] <= start:
            nxt = self.starts[i + 1] if i + 1 < len(self.starts) else end
            return start, min(nxt, end)
        if self.ends[i] < end:
            nxt = self.starts[i + 1] if i + 1 < len(self.starts) else end
            return self.ends[i], min(nxt, end)
        return None

    def spans(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends))


@dataclass(frozen=True)
class HexCheck:
    """What a verified HEX file holds."""

    path: Path
    records: int
    checked_bytes: int                 # bytes compared equal with a source
    other_bytes: int                   # bytes outside the region checked (firmware)
    spans: tuple[tuple[int, int], ...]  # address ranges present, merged
    start: tuple[int, bytes] | None


def _mismatch(address: int, got: bytes, want: bytes, piece: Piece) -> HexImageError:
    i = next(k for k in range(len(got)) if got[k] != want[k])
    where = address + i
    return HexImageError(f"byte at 0x{where:08X} is 0x{got[i]:02X} but {piece.label} has "
                         f"0x{want[i]:02X} at offset {where - piece.address + piece.offset}")


def _clip(address: int, data: bytes, lo: int, hi: int) -> tuple[int, bytes]:
    """The part of `data` (at `address`) inside [lo, hi); possibly empty."""
    a, b = max(address, lo), min(address + len(data), hi)
    return a, data[a - address:max(a, b) - address]


def _compare_span(address: int, data: bytes, pieces: Sequence[Piece], starts: list[int],
                  sources: list[_Source], path: Path) -> None:
    """Compare bytes read from a HEX with the pieces they must come from (a run
    of records may cover two adjacent pieces)."""
    pos, end = address, address + len(data)
    while pos < end:
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0 or pos >= pieces[i].end:
            nxt = starts[i + 1] if i + 1 < len(starts) else end
            raise HexImageError(f"bytes {span(pos, min(end, nxt))} do not belong to "
                                f"{' or '.join(p.label for p in pieces)}", path=path)
        piece = pieces[i]
        stop = min(end, piece.end)
        got = data[pos - address:stop - address]
        want = sources[i].read(piece.offset + pos - piece.address, stop - pos)
        if got != want:
            raise _mismatch(pos, got, bytes(want), piece)
        pos = stop


def verify_hex(path: str | Path, pieces: Sequence[Piece], *, within: Region | None = None,
               progress: bool = False) -> HexCheck:
    """Parse a HEX file and compare every data byte with `pieces` (sorted, not
    overlapping): each byte must come from a piece and equal it, no byte may be
    written twice, and every piece must be complete. With `within`, bytes
    outside that region are only counted (firmware beside the weights)."""
    path = Path(path)
    reader = HexReader(path)
    starts = [p.address for p in pieces]
    region = within or Region(0, HEX_LIMIT)
    coverage, checked, other = _Coverage(), 0, 0
    total = sum(p.size for p in pieces)
    with ExitStack() as stack:
        sources = [stack.enter_context(_Source(p)) for p in pieces]
        bar = stack.enter_context(tqdm(total=total, unit="B", unit_scale=True, desc="read back",
                                       disable=not progress, leave=False))
        for address, data in reader:
            overlap = coverage.add(address, address + len(data))
            if overlap:
                raise HexImageError(f"{span(*overlap)} is written twice", path=path)
            inside_at, inside = _clip(address, data, region.origin, region.end)
            other += len(data) - len(inside)
            if inside:
                _compare_span(inside_at, inside, pieces, starts, sources, path)
                checked += len(inside)
                bar.update(len(inside))
    for piece in pieces:
        gap = coverage.first_gap(piece.address, piece.end)
        if gap:
            raise HexImageError(f"{span(*gap)} of {piece.label} is missing", path=path)
    return HexCheck(path, reader.records, checked, other, tuple(coverage.spans()), reader.start)


def compare_dump(dump: str | Path, base: int, expected: Piece | str | Path) -> int:
    """Compare a raw memory dump taken at `base` (e.g. read back from a board)
    with a model piece, or with the records of a HEX file that fall in the dump.
    Returns the count of bytes compared."""
    dump = Path(dump)
    have = dump.stat().st_size
    if isinstance(expected, Piece):
        if have < expected.address - base + expected.size:
            raise HexImageError(f"dump has {have} bytes, fewer than the "
                                f"{expected.size} of {expected.label}", path=dump)
        mirror = Piece(expected.address, expected.size, dump.name, path=dump,
                       offset=expected.address - base)
        with _Source(expected) as want_src, _Source(mirror) as got_src:
            for pos in range(0, expected.size, WINDOW):
                n = min(WINDOW, expected.size - pos)
                want = want_src.read(expected.offset + pos, n)
                got = got_src.read(mirror.offset + pos, n)
                if got != want:
                    raise _mismatch(expected.address + pos, bytes(got), bytes(want), expected)
        return expected.size
    compared = 0
    whole = Piece(base, have, dump.name, path=dump)
    with _Source(whole) as got_src:
        for address, data in HexReader(expected):
            at, part = _clip(address, data, base, base + have)
            if part:
                got = got_src.read(at - base, len(part))
                if got != part:
                    raise _mismatch(at, bytes(got), part,
                                    Piece(at, len(part), Path(expected).name))
                compared += len(part)
    return compared


def hex_extent(path: str | Path, within: Region) -> tuple[int, int]:
    """The lowest and highest+1 address of the HEX file's bytes inside `within`."""
    lo, hi = HEX_LIMIT, 0
    for address, data in HexReader(path):
        if within.origin <= address and address + len(data) <= within.end:
            lo, hi = min(lo, address), max(hi, address + len(data))
    if hi == 0:
        raise HexImageError(f"no bytes inside {span(within.origin, within.end)}", path=path)
    return lo, hi


# ---- build and check ----------------------------------------------------------

@dataclass(frozen=True)
class HexResult:
    path: Path
    board: str
    model: Piece
    firmware: tuple[Piece, ...]
    model_crc32: int
    check: HexCheck

    def summary(self) -> str:
        m = self.model
        lines = [(f"{self.path}: {m.label} ({m.size} bytes, CRC-32 0x{self.model_crc32:08X}) "
                 f"at {span(m.address, m.end)} for board {self.board}")]
        lines += [f"  + {p.label} at {span(p.address, p.end)}" for p in self.firmware]
        lines.append(f"  read back: {self.check.records} records, "
                     f"{self.check.checked_bytes} bytes, every byte matches its source")
        return "\n".join(lines)


def _refuse_overwriting_an_input(output: Path, *inputs: str | Path | None) -> None:
    """The output must not be one of the inputs (the same file by any name)."""
    for source in inputs:
        if source is not None and output.exists() and Path(source).exists() and \
                os.path.samefile(output, source):
            raise HexImageError(f"the output {output} is the input {source}: writing it would "
                                f"destroy the input; choose another -o", path=output)


def build_hex(model: str | Path, board: Board | str, output: str | Path, *,
              firmware: str | Path | None = None, record_size: int = 32,
              progress: bool = False) -> HexResult:
    """Write OUTPUT: the model at the board's weight address, merged with the
    firmware if one is given; read it back and compare before renaming it in place."""
    board = board if isinstance(board, Board) else load(board)
    if record_size not in RECORD_SIZES:
        raise HexImageError(f"record size must be one of {RECORD_SIZES}, not {record_size}")
    _refuse_overwriting_an_input(Path(output), model, firmware)
    weights = model_piece(model, board)
    fw = load_firmware(firmware) if firmware is not None else None
    extra = fw.pieces if fw else ()
    ordered = check_layout(board.weights, [weights, *extra], board.name)
    if firmware is not None:
        from .board_check import check_firmware

        check_firmware(board, firmware)
    output = Path(output)
    temp = output.with_name(output.name + ".tmp")
    total = sum(p.size for p in ordered)
    try:
        with open(temp, "wb") as out, tqdm(total=total, unit="B", unit_scale=True,
                                            desc=output.name, disable=not progress) as bar:
            crc = _write_records(out, ordered, weights, fw.start if fw else None, record_size, bar)
        check = verify_hex(temp, ordered, progress=progress)
        os.replace(temp, output)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return HexResult(output, board.name, weights, tuple(extra), crc, check)


def is_hex_file(path: str | Path) -> bool:
    """True if the file starts like Intel HEX (a ':' record), False for raw bytes."""
    with open(path, "rb") as f:
        return f.read(64).lstrip()[:1] == b":"


def check_file(path: str | Path, board: Board | str, model: str | Path) -> str:
    """Verify that PATH holds the model at the board's weight address.

    PATH is an Intel HEX file (every record inside the weight region must match
    the model, the model must be complete; records elsewhere are firmware and
    only counted) or a raw dump read back from the board at the weight address.
    MODEL is a model.bin, or (for a raw dump) the weights HEX that was flashed.
    Returns a one-line report; raises HexImageError on any difference."""
    board = board if isinstance(board, Board) else load(board)
    path, model = Path(path), Path(model)
    for p in (path, model):
        if not p.is_file():
            raise HexImageError("no such file", path=p)
    if is_hex_file(model):
        if is_hex_file(path):
            raise HexImageError("to check a HEX file, give the model.bin it was made from",
                                path=model)
        n = compare_dump(path, board.weights.origin, model)
        return f"{path}: {n} bytes match the records of {model.name}"
    piece = model_piece(model, board)
    if not is_hex_file(path):
        n = compare_dump(path, board.weights.origin, piece)
        return f"{path}: {n} bytes at 0x{piece.address:08X} match {model.name}"
    check = verify_hex(path, [piece], within=board.weights)
    tail = f", plus {check.other_bytes} bytes outside the weight region" if check.other_bytes else ""
    return (f"{path}: {model.name} complete at {span(piece.address, piece.end)}, "
            f"{check.checked_bytes} bytes match{tail}")


# ---- command line ---------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="colibri-image",
        description="Write a model image as Intel HEX at the board's weight address, "
                    "optionally merged with firmware, and read it back to check it.")
    p.add_argument("model", nargs="?", type=Path, help="model.bin written by colibri-convert")
    p.add_argument("--board", required=True, help="board name (boards/NAME.toml) or a .toml path")
    p.add_argument("-o", "--output", action="append", type=Path, default=[],
                   help="output HEX. With --merge: one -o names the merged file; two name the "
                        "weights-only file, then the merged file")
    p.add_argument("--merge", type=Path, metavar="FIRMWARE",
                   help="firmware .elf or .hex to merge with the weights")
    p.add_argument("--record-size", type=int, choices=RECORD_SIZES, default=32,
                   help="data bytes per HEX record (default 32)")
    p.add_argument("--check", type=Path, metavar="FILE",
                   help="verify FILE (HEX, or a raw dump read back at the weight address) "
                        "against --model instead of writing")
    p.add_argument("--model", dest="check_model", type=Path, help="with --check: the model.bin")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    add_version_option(p)
    return p


def _outputs(args: argparse.Namespace) -> list[tuple[Path, Path | None]]:
    """(output, firmware) pairs to build, from the -o and --merge options."""
    outs = args.output
    if args.merge is None:
        if len(outs) != 1:
            raise HexImageError("give exactly one -o without --merge")
        return [(outs[0], None)]
    if len(outs) == 1:
        return [(outs[0], args.merge)]
    if len(outs) == 2:
        return [(outs[0], None), (outs[1], args.merge)]
    raise HexImageError("with --merge give one -o (merged) or two (weights-only, merged)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.check is not None:
            if args.check_model is None or args.model is not None or args.output:
                raise HexImageError("--check FILE needs --model MODEL, and no MODEL or -o")
            print(check_file(args.check, args.board, args.check_model))
            return 0
        if args.model is None:
            raise HexImageError("give MODEL.bin (or --check FILE --model MODEL.bin)")
        board = load(args.board)
        for output, firmware in _outputs(args):
            result = build_hex(args.model, board, output, firmware=firmware,
                               record_size=args.record_size,
                               progress=not args.quiet and sys.stderr.isatty())
            if not args.quiet:
                print(result.summary())
    except (ColibriError, OSError) as exc:
        print(f"colibri-image: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
