"""A small, defensive reader of .safetensors files.

Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data.
Each JSON entry is {"dtype": str, "shape": [int, ...], "data_offsets": [begin, end]}
with offsets relative to the first data byte. Everything in the header is checked
before any data is touched, so a hostile or truncated file gives CheckpointError
(with the file and the offset of the defect), never a crash or a huge allocation.

Tensors are read through a read-only memory map, one at a time, and returned as
float32 numpy arrays (BF16 is widened by shifting its 16 bits into the high half
of a float32).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CheckpointError

HEADER_LENGTH_BYTES = 8
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the limit the safetensors library itself uses

# dtypes this reader converts to float32, as little-endian numpy dtypes.
FLOAT_DTYPES: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}

# Every dtype name of the safetensors spec and its item size: a file may hold
# tensors we never load, but each must still be well formed.
KNOWN_ITEMSIZES: dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor's bytes are, relative to the start of the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute file offset of the first byte
    end: int    # absolute file offset one past the last byte


def bf16_to_float32(raw: np.ndarray) -> np.ndarray:
    """Widen BF16 values held as uint16 to float32 (exact)."""
    widened = raw.astype(np.uint32) << np.uint32(16)
    return widened.view(np.float32)


def _fail(path: Path, message: str, offset: int | None) -> CheckpointError:
    return CheckpointError(message, path=path, offset=offset)


def _read_header_bytes(path: Path) -> tuple[bytes, int]:
    file_size = path.stat().st_size
    if file_size < HEADER_LENGTH_BYTES:
        raise _fail(path, f"file is {file_size} bytes, shorter than the 8-byte header length", 0)
    with path.open("rb") as f:
        length = int.from_bytes(f.read(HEADER_LENGTH_BYTES), "little")
        if length > MAX_HEADER_BYTES:
            raise _fail(path, f"header length {length} exceeds the {MAX_HEADER_BYTES}-byte limit", 0)
        if length > file_size - HEADER_LENGTH_BYTES:
            raise _fail(path, f"header length {length} runs past the end of the "
                        f"{file_size}-byte file", 0)
        return f.read(length), file_size


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _parse_json(path: Path, raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except RecursionError:
        raise _fail(path, "header JSON is nested too deeply", HEADER_LENGTH_BYTES) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(path, f"header is not valid JSON: {exc}", HEADER_LENGTH_BYTES) from None
    if not isinstance(header, dict):
        raise _fail(path, "header JSON is not an object", HEADER_LENGTH_BYTES)
    return header


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_entry(path: Path, name: str, entry: object, data_start: int,
                 data_len: int) -> TensorInfo:
    def bad(message: str) -> CheckpointError:
        return _fail(path, f"tensor {name!r}: {message}", HEADER_LENGTH_BYTES)

    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise bad("entry must have exactly dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in KNOWN_ITEMSIZES:
        raise bad(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise bad(f"shape {shape!r} is not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(_is_int(o) for o in offsets)):
        raise bad(f"data_offsets {offsets!r} is not a pair of integers")
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise _fail(path, f"tensor {name!r}: data_offsets [{begin}, {end}] outside the "
                    f"{data_len} data bytes", data_start + min(max(begin, 0), data_len))
    expected = math.prod(shape) * KNOWN_ITEMSIZES[dtype]
    if end - begin != expected:
        raise _fail(path, f"tensor {name!r}: {end - begin} bytes for shape {shape} of "
                    f"{dtype} (expected {expected})", data_start + begin)
    return TensorInfo(name, dtype, tuple(shape), data_start + begin, data_start + end)


def _check_overlaps(path: Path, infos: list[TensorInfo]) -> None:
    ordered = sorted(infos, key=lambda t: (t.start, t.end))
    for prev, cur in zip(ordered, ordered[1:]):
        if cur.start < prev.end:
            raise _fail(path, f"tensor {cur.name!r} overlaps tensor {prev.name!r}", cur.start)


def parse_header(path: str | Path) -> dict[str, TensorInfo]:
    """Read and validate a .safetensors header; return its tensors by name."""
    path = Path(path)
    raw, file_size = _read_header_bytes(path)
    header = _parse_json(path, raw)
    data_start = HEADER_LENGTH_BYTES + len(raw)
    data_len = file_size - data_start
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not isinstance(metadata, dict):
        raise _fail(path, "__metadata__ is not an object", HEADER_LENGTH_BYTES)
    infos = {name: _parse_entry(path, name, entry, data_start, data_len)
             for name, entry in header.items()}
    _check_overlaps(path, list(infos.values()))
    return infos


class SafetensorsFile:
    """One validated .safetensors file; tensors are read lazily through a memory map."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tensors = parse_header(self.path)
        self._map: np.memmap | None = None

    def names(self) -> list[str]:
        return list(self.tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def dtype(self, name: str) -> str:
        return self.tensors[name].dtype

    def _bytes(self, info: TensorInfo) -> np.ndarray:
        if info.end == info.start:
            return np.zeros(0, dtype=np.uint8)
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        return self._map[info.start:info.end]

    def raw(self, name: str) -> np.ndarray:
        """The tensor in its stored dtype (BF16 as uint16), a read-only view."""
        info = self.tensors[name]
        if info.dtype not in FLOAT_DTYPES:
            raise _fail(self.path, f"tensor {name!r} has dtype {info.dtype}; only "
                        f"{', '.join(FLOAT_DTYPES)} can be converted", info.start)
        return self._bytes(info).view(FLOAT_DTYPES[info.dtype]).reshape(info.shape)

    def load(self, name: str, index: int | None = None) -> np.ndarray:
        """The tensor (or its slice [index] along the first axis) as float32."""
        raw = self.raw(name)
        if index is not None:
            raw = raw[index]
        if self.tensors[name].dtype == "BF16":
            return bf16_to_float32(raw)
        return raw.astype(np.float32)

    def close(self) -> None:
        self._map = None
