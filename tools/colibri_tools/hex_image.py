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
address, and addresses at or beyond 4 GiB (the limit of Intel HEX).
"""

from __future__ import annotations

import argparse
import binascii
import bisect
import itertools
import os
import struct
import sys
import zlib
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import numpy as np
from tqdm import tqdm

from .boards import Board, Region, load
from .errors import ColibriError
from .image_reader import read_image

DATA, EOF, EXT_SEGMENT, START_SEGMENT, EXT_LINEAR, START_LINEAR = range(6)
SEGMENT = 1 << 16            # an extended linear address record covers 64 KiB
HEX_LIMIT = 1 << 32          # Intel HEX addresses are 32-bit
RECORD_SIZES = (16, 32)      # data bytes per record that colibri-image writes
WINDOW = 1 << 20             # bytes of a source file read at once when comparing


class HexImageError(ColibriError):
    """An Intel HEX image cannot be built, is malformed, or differs from its source."""


def span(start: int, end: int) -> str:
    """The address range [start, end) as text, both ends inclusive."""
    return f"0x{start:08X}..0x{end - 1:08X}"


# ---- what goes where --------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """Bytes to place at an address: `size` bytes of a file from `offset`, or `data`."""

    address: int
    size: int
    label: str
    path: Path | None = None
    offset: int = 0
    data: bytes | None = field(default=None, repr=False)

    @property
    def end(self) -> int:
        return self.address + self.size

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """(address, bytes) pieces that never cross a 64 KiB boundary."""
        address, pos, left = self.address, self.offset, self.size
        with _Source(self) as source:
            while left:
                n = min(left, SEGMENT - address % SEGMENT)
                yield address, source.read(pos, n)
                address, pos, left = address + n, pos + n, left - n


class _Source:
    """Reads a piece's bytes, through a 1 MiB window when they live in a file."""

    def __init__(self, piece: Piece) -> None:
        self.piece = piece
        self.file = None
        self.start = 0
        self.buffer = b""

    def __enter__(self) -> Self:
        if self.piece.data is None:
            self.file = open(self.piece.path, "rb")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()

    def read(self, pos: int, n: int) -> bytes | memoryview:
        if self.piece.data is not None:
            return memoryview(self.piece.data)[pos:pos + n]
        if not (self.start <= pos and pos + n <= self.start + len(self.buffer)):
            self.file.seek(pos)
            self.start, self.buffer = pos, self.file.read(max(n, WINDOW))
            if len(self.buffer) < n:
                raise HexImageError(f"file ends before {n} bytes could be read (did it change?)",
                                    path=self.piece.path, offset=pos)
        at = pos - self.start
        return memoryview(self.buffer)[at:at + n]


@dataclass(frozen=True)
class Firmware:
    """The bytes a firmware file places in memory, and its start address record."""

    path: Path
    pieces: tuple[Piece, ...]
    start: tuple[int, bytes] | None   # (record type 3 or 5, payload), if any


def load_firmware(path: str | Path) -> Firmware:
    """Read an ELF (PT_LOAD segments, by physical address) or an Intel HEX file."""
    path = Path(path)
    try:
        head = path.read_bytes()
    except OSError as exc:
        raise HexImageError(f"cannot read firmware: {exc.strerror}", path=path) from None
    if head[:4] == b"\x7fELF":
        return _elf_firmware(path, head)
    if head.lstrip()[:1] == b":":
        return _hex_firmware(path)
    raise HexImageError("firmware is neither an ELF file nor Intel HEX", path=path)


def _elf_firmware(path: Path, data: bytes) -> Firmware:
    if len(data) < 52 or data[4] not in (1, 2) or data[5] != 1:
        raise HexImageError("only little-endian ELF32/ELF64 firmware is supported", path=path)
    wide = data[4] == 2
    if wide:
        entry, phoff = struct.unpack_from("<QQ", data, 24)
        phentsize, phnum = struct.unpack_from("<HH", data, 54)
    else:
        entry, phoff = struct.unpack_from("<II", data, 24)
        phentsize, phnum = struct.unpack_from("<HH", data, 42)
    pieces = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + phentsize > len(data):
            raise HexImageError(f"program header {i} lies past the end of the file", path=path,
                                offset=at)
        if wide:
            kind, _, offset, _, paddr, filesz = struct.unpack_from("<IIQQQQ", data, at)
        else:
            kind, offset, _, paddr, filesz = struct.unpack_from("<IIIII", data, at)
        if kind != 1 or filesz == 0:          # PT_LOAD with bytes in the file
            continue
        if offset + filesz > len(data):
            raise HexImageError(f"segment {i} lies past the end of the file", path=path,
                                offset=offset)
        pieces.append(Piece(paddr, filesz, f"{path.name} segment {i}",
                            data=data[offset:offset + filesz]))
    start = (START_LINEAR, entry.to_bytes(4, "big")) if 0 < entry < HEX_LIMIT else None
    return Firmware(path, tuple(pieces), start)


def _hex_firmware(path: Path) -> Firmware:
    from intelhex import IntelHex, IntelHexError

    ih = IntelHex()
    try:
        ih.loadhex(str(path))
    except (IntelHexError, ValueError) as exc:
        raise HexImageError(f"not valid Intel HEX: {exc}", path=path) from None
    pieces = tuple(Piece(s, e - s, f"{path.name} {span(s, e)}",
                         data=bytes(ih.tobinarray(start=s, end=e - 1))) for s, e in ih.segments())
    start = None
    if ih.start_addr and "EIP" in ih.start_addr:
        start = (START_LINEAR, ih.start_addr["EIP"].to_bytes(4, "big"))
    elif ih.start_addr:
        start = (START_SEGMENT, ih.start_addr["CS"].to_bytes(2, "big")
                 + ih.start_addr["IP"].to_bytes(2, "big"))
    return Firmware(path, pieces, start)


def check_model(model: str | Path, board: Board) -> int:
    """Validate a model image (as colibri_init would) and check that it fits the
    board's weight region and alignment; return its size."""
    model = Path(model)
    image = read_image(model)
    size = model.stat().st_size
    if size != image.image_size:
        raise HexImageError(f"file has {size} bytes but its header says image_size "
                            f"{image.image_size}", path=model)
    w = board.weights
    if image.image_size > w.length:
        raise HexImageError(
            f"model image is {image.image_size} bytes ({image.image_size / 2**20:.2f} MiB) but "
            f"board {board.name}'s weight region {span(w.origin, w.end)} holds only "
            f"{w.length} bytes ({w.length / 2**20:.2f} MiB)", path=model)
    if w.origin % image.alignment:
        raise HexImageError(f"board {board.name}'s weight address 0x{w.origin:08X} is not a "
                            f"multiple of the model's expert-block alignment {image.alignment}",
                            path=model)
    return image.image_size


def model_piece(model: str | Path, board: Board) -> Piece:
    """The model image at the board's weight address, after checking it fits there."""
    model = Path(model)
    if board.port == "linux":
        raise HexImageError(f"board {board.name} runs the Linux port, which maps model.bin at "
                            f"run time: it has no weight address for a HEX image", path=model)
    return Piece(board.weights.origin, check_model(model, board), model.name, path=model)


def check_layout(weights: Region, pieces: Sequence[Piece], board_name: str) -> list[Piece]:
    """Pieces sorted by address, after refusing overlaps and addresses past 4 GiB.

    The first piece is the model; no other may touch the weight region."""
    for piece in pieces[1:]:
        if piece.address < weights.end and weights.origin < piece.end:
            lo, hi = max(piece.address, weights.origin), min(piece.end, weights.end)
            raise HexImageError(f"{piece.label} writes {span(lo, hi)}, inside board "
                                f"{board_name}'s weight region {span(weights.origin, weights.end)}")
    ordered = sorted(pieces, key=lambda p: p.address)
    for a, b in itertools.pairwise(ordered):
        if b.address < a.end:
            raise HexImageError(f"{a.label} and {b.label} both write "
                                f"{span(b.address, min(a.end, b.end))}")
    for piece in ordered:
        if piece.end > HEX_LIMIT:
            raise HexImageError(f"{piece.label} reaches {span(piece.address, piece.end)}: Intel "
                                f"HEX cannot address bytes at or beyond 4 GiB")
    return ordered


# ---- records ----------------------------------------------------------------

def _record(kind: int, address: int, payload: bytes | memoryview = b"") -> bytes:
    body = bytes([len(payload), address >> 8, address & 0xFF, kind]) + bytes(payload)
    return b":" + binascii.hexlify(body + bytes([-sum(body) & 0xFF])).upper() + b"\n"


def _data_lines(address: int, data: bytes | memoryview, record_size: int) -> bytes:
    """Data records for `data` at `address`; the bytes stay inside one 64 KiB segment."""
    count, rest = divmod(len(data), record_size)
    out = []
    if count:
        width = 5 + record_size
        rows = np.empty((count, width), np.uint8)
        low = address % SEGMENT + record_size * np.arange(count, dtype=np.int64)
        rows[:, 0] = record_size
        rows[:, 1] = low >> 8
        rows[:, 2] = low & 0xFF
        rows[:, 3] = DATA
        rows[:, 4:-1] = np.frombuffer(data, np.uint8, count * record_size).reshape(count, -1)
        rows[:, -1] = -rows[:, :-1].sum(axis=1, dtype=np.int64) & 0xFF
        digits = np.frombuffer(binascii.hexlify(rows.tobytes()).upper(), np.uint8)
        text = np.empty((count, 2 * width + 2), np.uint8)
        text[:, 0] = ord(":")
        text[:, 1:-1] = digits.reshape(count, 2 * width)
        text[:, -1] = ord("\n")
        out.append(text.tobytes())
    if rest:
        tail = count * record_size
        out.append(_record(DATA, (address + tail) % SEGMENT, data[tail:]))
    return b"".join(out)


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


class HexReader:
    """Streams an Intel HEX file: iterating gives (address, data) in file order,
    one pair per data record or per run of consecutive records (a run of
    same-length records at ascending addresses is decoded at once with numpy);
    `start` holds the start address record, if any; `records` counts records."""

    BLOCK = 1 << 20          # bytes of text decoded at once
    MIN_RUN = 8              # shorter runs of equal-length lines go line by line

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.start: tuple[int, bytes] | None = None
        self.records = 0
        self._base = 0
        self._ended = False
        self._number = 0     # lines consumed so far

    def _fail(self, number: int, message: str) -> HexImageError:
        return HexImageError(f"line {number}: {message}", path=self.path)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        try:
            f = open(self.path, "rb")  # noqa: SIM115 (the with below closes it)
        except OSError as exc:
            raise HexImageError(f"cannot read: {exc.strerror}", path=self.path) from None
        with f:
            pending = b""
            while chunk := f.read(self.BLOCK):
                text = pending + chunk
                cut = text.rfind(b"\n") + 1
                pending = text[cut:]
                yield from self._block(text[:cut])
            if pending:
                yield from self._block(pending + b"\n")
        if not self._ended:
            raise HexImageError("no end-of-file record (the file is truncated)", path=self.path)

    def _block(self, text: bytes) -> Iterator[tuple[int, bytes]]:
        """Lines of `text` (each ends with a newline): runs fast, the rest one by one."""
        if not text:
            return
        chars = np.frombuffer(text, np.uint8)
        ends = np.flatnonzero(chars == 10)
        starts = np.concatenate(([0], ends[:-1] + 1))
        lengths = ends - starts
        cuts = [0, *(np.flatnonzero(np.diff(lengths)) + 1).tolist(), len(ends)]
        for i, j in itertools.pairwise(cuts):
            run = self._run(chars, int(starts[i]), int(lengths[i]), j - i) if j - i >= self.MIN_RUN \
                else None
            if run is not None:
                self._number += j - i
                self.records += j - i
                yield run
                continue
            for k in range(i, j):
                self._number += 1
                item = self._line(text[starts[k]:ends[k]].strip())
                if item is not None:
                    yield item

    def _run(self, chars: np.ndarray, first: int, length: int, count: int
             ) -> tuple[int, bytes] | None:
        """Decode `count` lines of equal `length` as one run of data records at
        consecutive addresses inside one 64 KiB segment, or None if they are not."""
        if self._ended:
            return None
        lines = chars[first:first + count * (length + 1)].reshape(count, length + 1)
        digits_end = length - 1 if lines[0, length - 1] == 13 else length   # CR LF endings
        if not (lines[:, 0] == 58).all() or (digits_end - 1) % 2:
            return None
        try:
            raw = binascii.unhexlify(np.ascontiguousarray(lines[:, 1:digits_end]).tobytes())
        except binascii.Error:
            return None
        rec = np.frombuffer(raw, np.uint8).reshape(count, -1)
        n = rec.shape[1] - 5
        low = rec[:, 1].astype(np.int64) << 8 | rec[:, 2]
        if (n <= 0 or (rec[:, 0] != n).any() or (rec[:, 3] != DATA).any()
                or (rec.sum(axis=1, dtype=np.int64) & 0xFF).any()
                or (np.diff(low) != n).any() or low[-1] + n > SEGMENT):
            return None
        address = self._base + int(low[0])
        if address + count * n > HEX_LIMIT:
            return None
        return address, rec[:, 4:-1].tobytes()

    def _decode(self, line: bytes) -> bytes:
        number = self._number
        if line[:1] != b":":
            raise self._fail(number, "a record must start with ':'")
        try:
            record = binascii.unhexlify(line[1:])
        except binascii.Error:
            raise self._fail(number, "not an even count of hexadecimal digits") from None
        if len(record) < 5 or record[0] != len(record) - 5:
            raise self._fail(number, f"the length byte does not match the record's "
                                     f"{max(len(record) - 5, 0)} data bytes")
        if sum(record) & 0xFF:
            raise self._fail(number, "bad checksum")
        return record

    def _line(self, line: bytes) -> tuple[int, bytes] | None:
        """One record; returns (address, data) for a data record, else None."""
        if not line:
            return None
        if self._ended:
            raise self._fail(self._number, "record after the end-of-file record")
        record = self._decode(line)
        kind, payload = record[3], record[4:-1]
        self.records += 1
        if kind == DATA:
            address = self._base + (record[1] << 8 | record[2])
            if address + len(payload) > HEX_LIMIT:
                raise self._fail(self._number, "data past 4 GiB")
            return address, payload
        if kind in (EXT_LINEAR, EXT_SEGMENT) and len(payload) == 2:
            self._base = int.from_bytes(payload, "big") << (16 if kind == EXT_LINEAR else 4)
        elif kind in (START_LINEAR, START_SEGMENT) and len(payload) == 4:
            self.start = (kind, payload)
        elif kind == EOF:
            self._ended = True
        else:
            raise self._fail(self._number, f"unknown or malformed record of type {kind}")
        return None


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


def build_hex(model: str | Path, board: Board | str, output: str | Path, *,
              firmware: str | Path | None = None, record_size: int = 32,
              progress: bool = False) -> HexResult:
    """Write OUTPUT: the model at the board's weight address, merged with the
    firmware if one is given; read it back and compare before renaming it in place."""
    board = board if isinstance(board, Board) else load(board)
    if record_size not in RECORD_SIZES:
        raise HexImageError(f"record size must be one of {RECORD_SIZES}, not {record_size}")
    weights = model_piece(model, board)
    fw = load_firmware(firmware) if firmware is not None else None
    extra = fw.pieces if fw else ()
    ordered = check_layout(board.weights, [weights, *extra], board.name)
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
                               record_size=args.record_size, progress=not args.quiet)
            if not args.quiet:
                print(result.summary())
    except (ColibriError, OSError) as exc:
        print(f"colibri-image: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
