"""Read and validate a model image (docs/format.md, section 4), in the same
order as colibri_init, and give access to its tensors.

Each defect raises ImageFormatError whose `status` names the colibri_status the
C reader reports, with the offset of the offending bytes.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ImageFormatError
from .image_layout import (
    ExpertBlock,
    Problem,
    alignment_ok,
    attn_kind_ok,
    expert_block_start,
    expert_blocks,
    missing_widths,
    record_problems,
    shortcut_placed,
    unused_widths,
)
from .image_spec import (
    ATTN_NONE,
    DATA_ALIGN,
    DTYPE_F32,
    EXPERT_ROLES,
    EXTENSION_END,
    EXTENSION_FIELDS,
    FLAG_EXPERTS_LAST,
    FLAG_SCALES,
    FLAG_SLIDING,
    HEADER_FIELDS,
    HEADER_SIZE,
    HEADER_SIZE_EXTENDED,
    KNOWN_FLAGS,
    LAYER_ENTRY_SIZE,
    MAGIC,
    META_CRC_OFFSET,
    MODEL_RECORD_FIELDS,
    NO_EXPERT,
    NO_LAYER,
    QUANT_DTYPES,
    RECURRENT_KINDS,
    TENSOR_ENTRY_SIZE,
    TENSOR_RESERVED,
    VERSION_MAJOR,
    FfnKind,
    LayerEntry,
    ModelRecord,
    Role,
    TensorEntry,
    block_weights,
    meta_crc32,
    row_blocks,
    unpack_header,
    unpack_layer,
    unpack_tensor,
)
from .layer_shapes import canonical_tensors, global_tensors, layer_tensor_count
from .quant import (
    DTYPE_NAMES,
    FLOAT_WITH_ATTENTION_EXPERTS,
    allowed_dtypes,
    dequantize,
    dtype_allowed,
    first_bad_scale,
    matrix_bytes,
)
from .status import Status

Source = str | Path | bytes | bytearray | memoryview


@dataclass
class ModelImage:
    """A validated image: header fields, model record, layer and tensor tables."""

    source: str
    header: dict
    record: ModelRecord
    layers: list[LayerEntry]
    tensors: list[TensorEntry]
    data: np.ndarray = field(repr=False)  # uint8 view of the whole image
    _by_key: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {t.key: t for t in self.tensors}

    @property
    def arch(self) -> int:
        return self.header["arch"]

    @property
    def alignment(self) -> int:
        return self.header["alignment"]

    @property
    def image_size(self) -> int:
        return self.header["image_size"]

    @property
    def resident_size(self) -> int:
        """Bytes a device needs in memory when the routed experts come from
        storage: the image's start up to its first expert block when they come
        last (format 1.9, EXPERTS_LAST; docs/core.md), else the whole image."""
        blocks = self.expert_blocks()
        if blocks and self.header["flags"] & FLAG_EXPERTS_LAST:
            return min(b.offset for b in blocks)
        return self.image_size

    @property
    def fingerprint(self) -> int:
        return self.header["meta_crc32"]

    def find(self, role: int, layer: int = NO_LAYER, expert: int = NO_EXPERT) -> TensorEntry:
        try:
            return self._by_key[(role, layer, expert)]
        except KeyError:
            raise KeyError((Role(role).name, layer, expert)) from None

    def tensor_bytes(self, tensor: TensorEntry | int) -> bytes:
        t = self.tensors[tensor] if isinstance(tensor, int) else tensor
        return self.data[t.offset:t.offset + t.size].tobytes()

    def tensor_array(self, tensor: TensorEntry | int) -> np.ndarray:
        """A float32 copy of the tensor, shaped as its table entry says (a Q8/Q4
        tensor dequantized: weight = scale * q, docs/format.md 3.3)."""
        t = self.tensors[tensor] if isinstance(tensor, int) else tensor
        if t.dtype in QUANT_DTYPES:
            return dequantize(t.dtype, self.tensor_bytes(t), t.shape)
        return np.frombuffer(self.tensor_bytes(t), dtype="<f4").reshape(t.shape).astype(np.float32)

    @property
    def quantized(self) -> bool:
        """Whether some matrix is stored Q8 or Q4 (format 1.2)."""
        return any(t.dtype in QUANT_DTYPES for t in self.tensors)

    @property
    def shortcut(self) -> bool:
        """Whether some layer is a shortcut layer (format 1.12)."""
        return any(layer.ffn_kind == FfnKind.SHORTCUT for layer in self.layers)

    @property
    def ffn_only_layers(self) -> int:
        """How many layers have no operator (attn_kind 9, format 1.14): no KV cache."""
        return sum(layer.attn_kind == ATTN_NONE for layer in self.layers)

    @property
    def conv_layers(self) -> int:
        """How many layers are recurrent (short convolutions, 1.13; Mamba2, 1.14):
        no KV cache."""
        return sum(layer.attn_kind in RECURRENT_KINDS for layer in self.layers)

    def expert_blocks(self) -> list[ExpertBlock]:
        return expert_blocks(self.tensors)

    def verify_data(self) -> None:
        """Check every tensor's data CRC-32 (what colibri_verify does)."""
        for index, t in enumerate(self.tensors):
            crc = zlib.crc32(self.data[t.offset:t.offset + t.size]) & 0xFFFFFFFF
            if crc != t.data_crc32:
                raise ImageFormatError(f"tensor #{index} {t.describe()}: data CRC-32 0x{crc:08X} "
                                       f"!= 0x{t.data_crc32:08X} in the table",
                                       status=Status.E_CHECKSUM.c_name, path=self.source, offset=t.offset)
            bad = first_bad_scale(t.dtype, self.data[t.offset:t.offset + t.size])
            if bad is not None:
                raise ImageFormatError(f"tensor #{index} {t.describe()}: the scale at byte {bad} "
                                       "of its data is not finite",
                                       status=Status.E_QUANT_SCALE.c_name, path=self.source,
                                       offset=t.offset + bad)


class _Checker:
    """Validation steps over one buffer; each raises with the source's name."""

    def __init__(self, source: str, data: np.ndarray) -> None:
        self.source = source
        self.data = data
        self.buf = memoryview(data)

    def fail(self, message: str, status: str, offset: int | None = None) -> ImageFormatError:
        return ImageFormatError(message, status=status, path=self.source, offset=offset)

    def raise_first(self, problems: list[Problem], where: str = "") -> None:
        if problems:
            p = problems[0]
            raise self.fail(f"{where}{p.field} = {p.value!r}: {p.reason}", p.status,
                            _field_offset(p.field))

    def check_fixed_header(self) -> tuple[dict, ModelRecord]:
        """Section 4 step 1: size, magic, version, flags and the fixed table layout."""
        if len(self.data) < HEADER_SIZE:
            raise self.fail(f"{len(self.data)} bytes, shorter than the {HEADER_SIZE}-byte header",
                            Status.E_TRUNCATED.c_name, 0)
        header, record = unpack_header(self.buf)
        if header["magic"] != MAGIC:
            raise self.fail(f"magic {header['magic']!r} is not {MAGIC!r}", Status.E_BAD_MAGIC.c_name, 0)
        if header["version_major"] != VERSION_MAJOR:
            raise self.fail(f"format major version {header['version_major']} (reader knows "
                            f"{VERSION_MAJOR})", Status.E_UNSUPPORTED_VERSION.c_name, 8)
        if header["flags"] & ~KNOWN_FLAGS:
            raise self.fail(f"unknown flags 0x{header['flags']:08X}",
                            Status.E_UNSUPPORTED_VERSION.c_name, 28)
        self._check_table_offsets(header, record)
        return header, record

    def _check_table_offsets(self, header: dict, record: ModelRecord) -> None:
        size = header["header_size"]
        if size not in (HEADER_SIZE, HEADER_SIZE_EXTENDED):
            raise self.fail(f"header_size is {size}, the fixed layout needs {HEADER_SIZE} (or "
                            f"{HEADER_SIZE_EXTENDED}, format 1.13)",
                            Status.E_BAD_HYPERPARAMS.c_name, 12)
        checks = [("layer_table_offset", 40, size),
                  ("tensor_table_offset", 48, size + LAYER_ENTRY_SIZE * record.n_layers)]
        for name, offset, want in checks:
            if header[name] != want:
                raise self.fail(f"{name} is {header[name]}, the fixed layout needs {want}",
                                Status.E_BAD_HYPERPARAMS.c_name, offset)
        if not alignment_ok(header["alignment"]):
            raise self.fail(f"alignment {header['alignment']} is not a power of two 64 .. 1 MiB",
                            Status.E_BAD_HYPERPARAMS.c_name, 32)

    def check_extent(self, header: dict) -> int:
        if not HEADER_SIZE <= header["image_size"] <= len(self.data):
            raise self.fail(f"image_size {header['image_size']} is not {HEADER_SIZE} .. the "
                            f"{len(self.data)} bytes given", Status.E_TRUNCATED.c_name, 16)
        end = header["tensor_table_offset"] + TENSOR_ENTRY_SIZE * header["n_tensors"]
        if end > header["image_size"]:
            raise self.fail(f"tables end at {end}, past image_size {header['image_size']}",
                            Status.E_TRUNCATED.c_name, header["tensor_table_offset"])
        return end

    def check_meta_crc(self, header: dict, end: int, expected_fingerprint: int) -> None:
        crc = meta_crc32(self.buf, end)
        if crc != header["meta_crc32"]:
            raise self.fail(f"meta CRC-32 0x{crc:08X} != 0x{header['meta_crc32']:08X} stored",
                            Status.E_CHECKSUM.c_name, META_CRC_OFFSET)
        if expected_fingerprint and crc != expected_fingerprint:
            raise self.fail(f"fingerprint 0x{crc:08X} != expected 0x{expected_fingerprint:08X}",
                            Status.E_CONFIG_MISMATCH.c_name, META_CRC_OFFSET)

    def check_reserved(self, start: int, end: int, what: str) -> None:
        """Reserved bytes are zero: a later minor version's feature is refused,
        not misread (docs/format.md 7)."""
        raw = bytes(self.buf[start:end])
        if any(raw):
            raise self.fail(f"{what}: reserved bytes {start} .. {end - 1} are {raw.hex()}, not "
                            "zero (a later format feature)", Status.E_RESERVED.c_name, start)

    def check_record(self, header: dict, record: ModelRecord) -> None:
        self.raise_first(record_problems(header["arch"], header["alignment"], record,
                                         header["flags"]))
        present = bool(header["flags"] & FLAG_SCALES)
        if present != record.has_scales:
            raise self.fail(f"header flag SCALES is {int(present)} but the record's scales are "
                            f"{'set' if record.has_scales else 'zero'}",
                            Status.E_BAD_HYPERPARAMS.c_name, 164)
        sliding = bool(header["flags"] & FLAG_SLIDING)
        if sliding != (record.sliding_window != 0):
            raise self.fail(f"header flag SLIDING is {int(sliding)} but sliding_window is "
                            f"{record.sliding_window}", Status.E_BAD_HYPERPARAMS.c_name, 212)
        if header["header_size"] == HEADER_SIZE_EXTENDED:
            self.check_reserved(EXTENSION_END, HEADER_SIZE_EXTENDED, "record extension")

    def read_layers(self, header: dict, record: ModelRecord) -> list[LayerEntry]:
        """The layer table, where the stored header_size puts it (an extension
        of zeros is valid: 512 with nothing the record needs)."""
        return [unpack_layer(self.buf, header["header_size"] + LAYER_ENTRY_SIZE * i)
                for i in range(record.n_layers)]

    def check_layers(self, header: dict, record: ModelRecord, layers: list[LayerEntry]) -> None:
        """Section 2: contiguous layers of known kinds with the entry counts of 3.1;
        then the widths each kind present needs (and zero for kinds absent)."""
        cursor = len(global_tensors(record))
        kinds = [layer.ffn_kind for layer in layers]
        for i, layer in enumerate(layers):
            offset = header["header_size"] + LAYER_ENTRY_SIZE * i
            kind_ok = layer.ffn_kind in tuple(FfnKind) and attn_kind_ok(
                record, layer.attn_kind) and shortcut_placed(kinds, i)
            if (not kind_ok or layer.first_tensor != cursor
                    or layer.n_tensors != layer_tensor_count(record, layer.ffn_kind,
                                                             layer.attn_kind)):
                raise self.fail(f"layer {i}: ffn_kind {layer.ffn_kind}, attn_kind "
                                f"{layer.attn_kind}, first_tensor "
                                f"{layer.first_tensor}, n_tensors {layer.n_tensors} (first "
                                f"expected at {cursor})", Status.E_BAD_LAYER_TABLE.c_name, offset)
            self.raise_first(missing_widths(record, layer.ffn_kind), f"layer {i}: ")
            cursor += layer.n_tensors
        if cursor != header["n_tensors"]:
            raise self.fail(f"layers end at tensor {cursor}, the table has {header['n_tensors']}",
                            Status.E_BAD_LAYER_TABLE.c_name, header["header_size"])
        self.raise_first(unused_widths(record, kinds))
        recurrent = any(layer.attn_kind in RECURRENT_KINDS for layer in layers)
        if (record.conv_kernel or record.ssm_heads) and not recurrent:
            name = "conv_kernel" if record.conv_kernel else "ssm_heads"
            raise self.fail(f"{name} = {getattr(record, name)}: must be 0: no short convolution "
                            "or Mamba2 layer", Status.E_BAD_HYPERPARAMS.c_name,
                            256 if record.conv_kernel else 264)

    def read_tensors(self, header: dict) -> list[tuple[TensorEntry, int, tuple, tuple]]:
        base = header["tensor_table_offset"]
        return [unpack_tensor(self.buf, base + TENSOR_ENTRY_SIZE * i)
                for i in range(header["n_tensors"])]

    def check_tensors(self, header: dict, record: ModelRecord, layers: list[LayerEntry],
                      actual: list[tuple[TensorEntry, int, tuple, tuple]],
                      tables_end: int) -> None:
        expected, _ = canonical_tensors(record, [layer.ffn_kind for layer in layers],
                                        [layer.attn_kind for layer in layers])
        experts_last = bool(header["flags"] & FLAG_EXPERTS_LAST)
        cursors = {False: tables_end, True: tables_end}  # by "is an expert's" (1.9: apart)
        first_expert = None
        for i in range(max(len(expected), len(actual))):
            offset = header["tensor_table_offset"] + TENSOR_ENTRY_SIZE * i
            if i >= len(actual) or i >= len(expected) or actual[i][0].key != expected[i].key:
                what = expected[i].describe() if i < len(expected) else "no entry"
                raise self.fail(f"tensor #{i}: expected {what}", Status.E_BAD_TENSOR_TABLE.c_name, offset)
            self.check_reserved(offset + TENSOR_RESERVED, offset + TENSOR_ENTRY_SIZE,
                                f"tensor #{i} {expected[i].describe()}")
            lane = experts_last and actual[i][0].role in EXPERT_ROLES
            self._check_entry(header, record, i, offset, actual[i], expected[i], cursors[lane])
            cursors[lane] = actual[i][0].offset + actual[i][0].size
            if lane and first_expert is None:
                first_expert = actual[i][0].offset
        if first_expert is not None and first_expert < cursors[False]:
            raise self.fail(f"EXPERTS_LAST: the first expert block at {first_expert} is before "
                            f"the end of the other tensors' data, {cursors[False]} (3.2)",
                            Status.E_OVERLAP.c_name, 28)

    def _check_entry(self, header: dict, record: ModelRecord, index: int, offset: int,
                     actual: tuple[TensorEntry, int, tuple, tuple], want: TensorEntry,
                     cursor: int) -> None:
        """Identity is checked by the caller; then dtype, placement (3.2), shape, size (3.3)."""
        t, ndim, raw_shape, blocks = actual
        name = f"tensor #{index} {want.describe()}"
        float_only = record.attention_experts and t.role in FLOAT_WITH_ATTENTION_EXPERTS
        if not dtype_allowed(t.role, t.dtype) or (float_only and t.dtype != DTYPE_F32):
            allowed = [DTYPE_F32] if float_only else allowed_dtypes(t.role)
            raise self.fail(f"{name}: dtype {t.dtype} (this role: "
                            f"{', '.join(f'{d} = {DTYPE_NAMES[d]}' for d in allowed)})",
                            Status.E_UNSUPPORTED_DTYPE.c_name, offset + 6)
        if t.offset + t.size > header["image_size"]:
            raise self.fail(f"{name}: data [{t.offset}, {t.offset + t.size}) past image_size "
                            f"{header['image_size']}", Status.E_OUT_OF_RANGE.c_name, offset + 32)
        step = header["alignment"] if expert_block_start(t.role, record.activation) else DATA_ALIGN
        if t.offset % step:
            raise self.fail(f"{name}: offset {t.offset} is not a multiple of {step}",
                            Status.E_MISALIGNED.c_name, offset + 32)
        if t.offset < cursor:
            raise self.fail(f"{name}: data at {t.offset} overlaps bytes before {cursor}",
                            Status.E_OVERLAP.c_name, offset + 32)
        packed = -(-cursor // DATA_ALIGN) * DATA_ALIGN
        if t.role in (Role.EXPERT_UP, Role.EXPERT_DOWN) and t.offset != packed and \
                not expert_block_start(t.role, record.activation):
            raise self.fail(f"{name}: a gap in the expert block: data at {t.offset}, expected "
                            f"{packed} (3.2: gate, up, down back to back)",
                            Status.E_MISALIGNED.c_name, offset + 32)
        wanted_shape = tuple(want.shape) + (0,) * (4 - len(want.shape))
        if ndim != len(want.shape) or tuple(raw_shape) != wanted_shape:
            raise self.fail(f"{name}: ndim {ndim}, shape {tuple(raw_shape)}; expected shape "
                            f"{want.shape}", Status.E_BAD_SHAPE.c_name, offset + 8)
        if t.dtype in QUANT_DTYPES:
            self._check_blocks(name, offset, t, blocks)
        elif t.size != 4 * math.prod(want.shape):
            raise self.fail(f"{name}: size {t.size}; float32 of shape {want.shape} is "
                            f"{4 * math.prod(want.shape)}", Status.E_BAD_SHAPE.c_name, offset + 40)

    def _check_blocks(self, name: str, offset: int, t: TensorEntry, blocks: tuple[int, int]) -> None:
        rows, cols = t.shape
        want_blocks = (block_weights(t.dtype), row_blocks(cols, t.dtype))
        if tuple(blocks) != want_blocks:
            raise self.fail(f"{name}: block {blocks[0]}, row_blocks {blocks[1]}; expected "
                            f"{want_blocks[0]}, {want_blocks[1]}", Status.E_QUANT_BLOCKS.c_name,
                            offset + 48)
        size = matrix_bytes(t.dtype, rows, cols)
        if t.size != size:
            raise self.fail(f"{name}: size {t.size}; {rows} rows of {want_blocks[1]} blocks make "
                            f"{size}", Status.E_QUANT_SIZE.c_name, offset + 40)


def _field_offset(name: str) -> int | None:
    for field_name, offset, _ in HEADER_FIELDS + MODEL_RECORD_FIELDS + EXTENSION_FIELDS:
        if field_name == name:
            return offset
    return None


def _load(source: Source) -> tuple[str, np.ndarray]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "<bytes>", np.frombuffer(source, dtype=np.uint8)
    path = Path(source)
    try:
        if path.stat().st_size == 0:
            return str(path), np.zeros(0, dtype=np.uint8)
        return str(path), np.memmap(path, dtype=np.uint8, mode="r")
    except OSError as exc:
        raise ImageFormatError(f"cannot open: {exc.strerror}", status=Status.E_BAD_ARGUMENT.c_name,
                               path=path) from None


def read_image(source: Source, *, expected_fingerprint: int = 0,
               verify_data: bool = False) -> ModelImage:
    """Validate an image (a path, or its bytes) as colibri_init does, and return it.

    With verify_data, also check every tensor's data CRC-32 (colibri_verify).
    """
    name, data = _load(source)
    check = _Checker(name, data)
    header, record = check.check_fixed_header()
    end = check.check_extent(header)
    check.check_meta_crc(header, end, expected_fingerprint)
    check.check_record(header, record)
    layers = check.read_layers(header, record)
    check.check_layers(header, record, layers)
    actual = check.read_tensors(header)
    check.check_tensors(header, record, layers, actual, end)
    image = ModelImage(name, header, record, layers, [a[0] for a in actual], data)
    if verify_data:
        image.verify_data()
    return image


def fix_meta_crc(buf: bytearray) -> int:
    """Recompute meta_crc32 of an image held in `buf`, in place; return it.

    The extent comes from the header's tensor_table_offset and n_tensors
    (clipped to the buffer), so tests can craft images broken past the CRC check.
    """
    table_offset = int.from_bytes(buf[48:56], "little")
    n_tensors = int.from_bytes(buf[56:60], "little")
    end = min(len(buf), table_offset + TENSOR_ENTRY_SIZE * n_tensors)
    crc = meta_crc32(buf, end)
    buf[META_CRC_OFFSET:META_CRC_OFFSET + 4] = crc.to_bytes(4, "little")
    return crc
