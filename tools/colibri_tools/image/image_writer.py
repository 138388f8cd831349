"""Write a model image (docs/format.md), streaming one tensor at a time.

The data region is written first (tensor by tensor, each loaded only when its
turn comes, with its CRC-32 taken on the way), then the header and tables are
written at the start of the file with their meta CRC-32. Padding is zero.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..errors import ImageFormatError
from .image_layout import align_up, attn_kind_ok, format_minor, model_problems, place_tensors
from .image_spec import (
    DATA_ALIGN,
    DEFAULT_ALIGNMENT,
    LAYER_ENTRY_SIZE,
    MAGIC,
    QK_DTYPES,
    QK_R16_DTYPES,
    QUANT_DTYPES,
    R16_DTYPES,
    TENSOR_ENTRY_SIZE,
    VERSION_MAJOR,
    LayerEntry,
    ModelRecord,
    TensorEntry,
    header_flags,
    meta_crc32,
    pack_header,
    pack_layer,
    pack_tensor,
    tables_end,
)
from .layer_shapes import canonical_tensors
from .quant import dtype_allowed, first_bad_scale, quantize, tensor_size
from .status import Status

_ZEROS = bytes(1 << 16)


@dataclass(frozen=True)
class SourceTensor:
    """A tensor to write: its table identity, shape and dtype, and how to load its
    float32 data (quantized on the way when the entry's dtype is Q8 or Q4), and
    for a super-block dtype the energy of its input columns on a calibration
    text, which weighs the quantizer's error (None: unit weights)."""

    entry: TensorEntry
    load: Callable[[], np.ndarray]
    importance: np.ndarray | None = None


@dataclass(frozen=True)
class WrittenImage:
    path: Path
    image_size: int
    meta_crc32: int
    layers: list[LayerEntry]
    tensors: list[TensorEntry]


def _check_inputs(path: Path, arch: int, alignment: int, record: ModelRecord,
                  ffn_kinds: list[int], sources: Sequence[SourceTensor],
                  attn_kinds: list[int] | None) -> list[LayerEntry]:
    problems = model_problems(arch, alignment, record, ffn_kinds)
    if problems:
        p = problems[0]
        raise ImageFormatError(f"cannot write {p.field} = {p.value!r}: {p.reason}",
                               status=p.status, path=path)
    if attn_kinds is not None and (len(attn_kinds) != len(ffn_kinds) or not all(
            attn_kind_ok(record, k) for k in attn_kinds)):
        raise ImageFormatError(f"attention kinds {attn_kinds!r}: one per layer, 0 .. 7 (1 and 3 "
                               "need a sliding_window, 4 a conv_kernel, 5 .. 7 the ssm_* sizes "
                               "too; MLA only 0, 2 and the recurrent kinds)",
                               status=Status.E_BAD_LAYER_TABLE.c_name, path=path)
    expected, layers = canonical_tensors(record, ffn_kinds, attn_kinds)
    got = [(s.entry.key, tuple(s.entry.shape)) for s in sources]
    want = [(e.key, e.shape) for e in expected]
    if got != want:
        index = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        raise ImageFormatError(f"tensor #{index} given to the writer is not the one "
                               f"section 3.1 asks for", status=Status.E_BAD_TENSOR_TABLE.c_name, path=path)
    for s in sources:
        if not dtype_allowed(s.entry.role, s.entry.dtype):
            raise ImageFormatError(f"{s.entry.describe()}: dtype {s.entry.dtype} is not one this "
                                   "role may have (docs/format.md 3.3)",
                                   status=Status.E_UNSUPPORTED_DTYPE.c_name, path=path)
    return layers


def _pad_to(f: BinaryIO, position: int, target: int) -> int:
    while position < target:
        n = min(target - position, len(_ZEROS))
        f.write(_ZEROS[:n])
        position += n
    return position


def _as_bytes(path: Path, entry: TensorEntry, array: np.ndarray,
              importance: np.ndarray | None = None) -> memoryview:
    if entry.dtype in QUANT_DTYPES and array.dtype == np.uint8:
        return _blocks_as_bytes(path, entry, array)
    if tuple(array.shape) != tuple(entry.shape):
        raise ImageFormatError(f"{entry.describe()}: data of shape {tuple(array.shape)} for a "
                               f"{entry.shape} entry", status=Status.E_BAD_SHAPE.c_name, path=path)
    if entry.dtype in QUANT_DTYPES:
        return memoryview(quantize(entry.dtype, array, entry.describe(), importance))
    data = np.ascontiguousarray(array, dtype="<f4").reshape(-1)
    return memoryview(data.view(np.uint8))


def _blocks_as_bytes(path: Path, entry: TensorEntry, blocks: np.ndarray) -> memoryview:
    """A Q8/Q4 tensor given already as its blocks (uint8, e.g. colibri-bench's
    synthesized images): written as they are, after a size and scale check."""
    data = np.ascontiguousarray(blocks).reshape(-1)
    if data.size != tensor_size(entry):
        raise ImageFormatError(f"{entry.describe()}: {data.size} bytes of blocks for a tensor of "
                               f"{tensor_size(entry)}", status=Status.E_QUANT_SIZE.c_name, path=path)
    bad = first_bad_scale(entry.dtype, data)
    if bad is not None:
        raise ImageFormatError(f"{entry.describe()}: the scale at byte {bad} is not finite",
                               status=Status.E_QUANT_SCALE.c_name, path=path)
    return memoryview(data)


def _write_data(f: BinaryIO, path: Path, placed: list[TensorEntry],
                sources: Sequence[SourceTensor], image_size: int,
                progress: Callable[[int], None] | None) -> list[TensorEntry]:
    """Write zeros for the tables, then every tensor at its offset, in the order
    of the offsets (an experts-last image's differs from the table's); return
    the entries, in table order, with their CRCs."""
    position = 0
    out: list[TensorEntry | None] = [None] * len(placed)
    for i in sorted(range(len(placed)), key=lambda i: placed[i].offset):
        entry = placed[i]
        position = _pad_to(f, position, entry.offset)
        data = _as_bytes(path, entry, sources[i].load(), sources[i].importance)
        f.write(data)
        position += len(data)
        out[i] = replace(entry, data_crc32=zlib.crc32(data) & 0xFFFFFFFF)
        if progress is not None:
            progress(len(data))
    _pad_to(f, position, image_size)
    return out


def _tables(arch: int, alignment: int, record: ModelRecord, layers: list[LayerEntry],
            tensors: list[TensorEntry], image_size: int, experts_last: bool) -> bytearray:
    layer_offset = record.header_size
    tensor_offset = layer_offset + LAYER_ENTRY_SIZE * len(layers)
    end = tables_end(len(layers), len(tensors), layer_offset)
    buf = bytearray(end)
    quantized = any(t.dtype in QUANT_DTYPES for t in tensors)
    row_groups = any(t.dtype in R16_DTYPES for t in tensors)
    superblocks = any(t.dtype in QK_DTYPES for t in tensors)
    qk_row_groups = any(t.dtype in QK_R16_DTYPES for t in tensors)
    header = {"magic": MAGIC, "version_major": VERSION_MAJOR,
              "version_minor": format_minor(arch, record, quantized, row_groups, experts_last,
                                            tuple(e.attn_kind for e in layers),
                                            tuple(e.ffn_kind for e in layers), superblocks,
                                            qk_row_groups),
              "header_size": layer_offset, "image_size": image_size, "meta_crc32": 0,
              "flags": header_flags(record, experts_last),
              "alignment": alignment, "arch": arch, "layer_table_offset": layer_offset,
              "tensor_table_offset": tensor_offset, "n_tensors": len(tensors)}
    pack_header(buf, header, record)
    for i, layer in enumerate(layers):
        pack_layer(buf, layer_offset + LAYER_ENTRY_SIZE * i, layer)
    for i, tensor in enumerate(tensors):
        pack_tensor(buf, tensor_offset + TENSOR_ENTRY_SIZE * i, tensor)
    buf[24:28] = meta_crc32(buf, end).to_bytes(4, "little")
    return buf


def write_image(path: str | Path, *, arch: int, record: ModelRecord, ffn_kinds: list[int],
                sources: Sequence[SourceTensor], alignment: int = DEFAULT_ALIGNMENT,
                progress: Callable[[int], None] | None = None,
                attn_kinds: list[int] | None = None,
                experts_last: bool = False) -> WrittenImage:
    """Write the image to `path`; `sources` must be in canonical order (section 3.1);
    attn_kinds: each layer's attention kind (format 1.6), all full when None;
    experts_last: every expert block after the other tensors' data (format 1.9)."""
    path = Path(path)
    layers = _check_inputs(path, arch, alignment, record, ffn_kinds, sources, attn_kinds)
    unplaced = [s.entry for s in sources]
    end = tables_end(len(layers), len(unplaced), record.header_size)
    placed, image_size = place_tensors(unplaced, align_up(end, DATA_ALIGN), alignment,
                                       experts_last=experts_last)
    with path.open("wb") as f:
        tensors = _write_data(f, path, placed, sources, image_size, progress)
        tables = _tables(arch, alignment, record, layers, tensors, image_size, experts_last)
        f.seek(0)
        f.write(tables)
    return WrittenImage(path, image_size, int.from_bytes(tables[24:28], "little"), layers, tensors)
