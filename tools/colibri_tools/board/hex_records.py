"""Intel HEX records for colibri-image: the record format, the limits, and a
streaming reader (:class:`HexReader`) that never holds a whole image in memory."""

from __future__ import annotations

import binascii
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ColibriError

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
        self._ended = 0      # line of the end-of-file record, 0 before it
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
            raise self._fail(self._number, f"record after the end-of-file record at line "
                                           f"{self._ended}: tools that stop there (intelhex, "
                                           f"flashers) would drop every byte after it "
                                           f"(two HEX files joined with cat?)")
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
            self._ended = self._number
        else:
            raise self._fail(self._number, f"unknown or malformed record of type {kind}")
        return None
