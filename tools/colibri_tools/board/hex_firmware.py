"""What goes where in a HEX image: :class:`Piece` (bytes at an address, from a file
or from memory), the firmware's pieces (ELF PT_LOAD segments or an Intel HEX file),
the model's piece at the board's weight address, and the layout checks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from ..image.image_reader import read_image
from .boards import Board, Region
from .elf import ElfError, is_elf, parse_elf
from .hex_records import (
    HEX_LIMIT,
    SEGMENT,
    START_LINEAR,
    START_SEGMENT,
    WINDOW,
    HexImageError,
    HexReader,
    span,
)

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
    if is_elf(head):
        return _elf_firmware(path, head)
    if head.lstrip()[:1] == b":":
        return _hex_firmware(path)
    raise HexImageError("firmware is neither an ELF file nor Intel HEX", path=path)


def _elf_firmware(path: Path, data: bytes) -> Firmware:
    try:
        info = parse_elf(data, path)
    except ElfError as exc:
        raise HexImageError(exc.message, path=path, offset=exc.offset) from None
    pieces = [Piece(seg.paddr, seg.filesz, f"{path.name} segment {seg.index}",
                    data=data[seg.offset:seg.offset + seg.filesz])
              for seg in info.segments if seg.filesz]   # bytes in the file, at load addresses
    entry = info.entry
    start = (START_LINEAR, entry.to_bytes(4, "big")) if 0 < entry < HEX_LIMIT else None
    return Firmware(path, tuple(pieces), start)


def _check_records(path: Path) -> None:
    """Read every record with the project's own reader, which refuses a missing
    end-of-file record (a truncated file) and any record after the first one
    (intelhex stops there: `cat boot.hex app.hex` would lose the application)."""
    for _ in HexReader(path):
        pass


def _hex_firmware(path: Path) -> Firmware:
    from intelhex import IntelHex, IntelHexError

    ih = IntelHex()
    try:
        ih.loadhex(str(path))
    except (IntelHexError, ValueError) as exc:
        raise HexImageError(f"not valid Intel HEX: {exc}", path=path) from None
    _check_records(path)
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
