"""The quantized weight dtypes of format 1.3 (docs/format.md 3.3): which
roles may be quantized, their sizes, and the numpy quantizer and
dequantizer that write and read exactly the block layout.

Q8: per block of 32 weights of a row, a binary16 scale d and 32 int8 q;
weight = d * q. Q4: d and 16 bytes, byte j holding weight j in its low nibble
and weight j + 16 in its high nibble; weight = d * (nibble - 8). A row's last
block is padded with zero weights (Q8 q = 0, Q4 nibble 8).

Q8_R16 and Q4_R16 (format 1.8, docs/format.md 3.4) hold the same blocks in
groups of 16 rows: per group and block a tile of the 16 scales and then
64-byte chunks in which each row has 4 bytes, the layout in which a SIMD lane
is a row (colibri-convert --row-groups).

QK2 .. QK6 (format 1.15, docs/format.md 3.5): super-blocks of 256 weights at
2 .. 6 bits (quant_superblock.py); QK2_R16 .. QK6_R16 (1.16, 3.6) the same
super-blocks in groups of 16 rows (qk_row_groups.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import OptionError
from .image_spec import (
    BLOCK_BYTES,
    DTYPE_F32,
    DTYPE_Q4,
    DTYPE_Q4_R16,
    DTYPE_Q8,
    DTYPE_Q8_R16,
    DTYPE_QK2,
    DTYPE_QK6,
    GROUP_ROWS,
    QBLOCK,
    QK_DTYPES,
    QK_R16_DTYPES,
    QUANT_DTYPES,
    R16_DTYPES,
    SUPERBLOCK_DTYPES,
    Role,
    TensorEntry,
    qk_bits,
    row_blocks,
)
from .qk_row_groups import from_qk_row_groups, group_rows, to_qk_row_groups
from .quant_superblock import dequantize_qk, half_scales, quantize_qk

# colibri-convert --quant NAME -> dtype
QUANT_NAMES = {"int8": DTYPE_Q8, "int4": DTYPE_Q4,
               **{f"qk{qk_bits(d)}": d for d in QK_DTYPES}}
QK_NAMES = tuple(f"qk{qk_bits(d)}" for d in QK_DTYPES)
DTYPE_NAMES = {DTYPE_F32: "F32", DTYPE_Q8: "Q8", DTYPE_Q4: "Q4", DTYPE_Q8_R16: "Q8_R16",
               DTYPE_Q4_R16: "Q4_R16", **{d: f"QK{qk_bits(d)}" for d in QK_DTYPES},
               **{d: f"QK{qk_bits(d)}_R16" for d in QK_R16_DTYPES}}
# A dtype's twin in groups of 16 rows, and back.
IN_ROW_GROUPS = {DTYPE_Q8: DTYPE_Q8_R16, DTYPE_Q4: DTYPE_Q4_R16,
                 **dict(zip(QK_DTYPES, QK_R16_DTYPES))}
BY_ROW = {v: k for k, v in IN_ROW_GROUPS.items()}
# Quantized by default: the feed-forward matrices (routed experts, shared
# expert, dense layers), which hold nearly all of an MoE's weights.
FFN_ROLES = frozenset({Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN, Role.SHARED_GATE,
                       Role.SHARED_UP, Role.SHARED_DOWN, Role.DENSE_GATE, Role.DENSE_UP,
                       Role.DENSE_DOWN})
# With colibri-convert --quant-attention also these (and a short convolution
# layer's projections, format 1.13, or a Mamba2 layer's, 1.14: the operator in
# an attention's place), with
# --quant-embeddings the token embedding and the output projection (LM head).
ATTENTION_ROLES = frozenset({Role.ATTN_Q, Role.ATTN_K, Role.ATTN_V, Role.ATTN_O,
                             Role.ATTN_GATE, Role.CONV_IN_B, Role.CONV_IN_C, Role.CONV_IN_X,
                             Role.CONV_OUT, Role.SSM_IN_Z, Role.SSM_IN_XBC, Role.SSM_IN_DT,
                             Role.SSM_OUT, Role.SSM_IN_BETA, Role.KDA_F_A, Role.KDA_F_B,
                             Role.KDA_G_A, Role.KDA_G_B, Role.MAMBA1_X_PROJ,
                             Role.MAMBA1_DT_PROJ})
EMBEDDING_ROLES = frozenset({Role.TOKEN_EMBED, Role.LM_HEAD})
# Every role a reader accepts as Q8/Q4; routers, norms, biases and the shared
# expert's gate stay float32 (sdk/src/tensor_check.c).
QUANTIZABLE_ROLES = FFN_ROLES | ATTENTION_ROLES | EMBEDDING_ROLES
# With attention experts (format 1.11, JetMoE) each expert's rows of the stacked
# ATTN_Q and ATTN_O are read where they lie: float32 only.
FLOAT_WITH_ATTENTION_EXPERTS = frozenset({Role.ATTN_Q, Role.ATTN_O})


def quantizable(role: int) -> bool:
    return role in QUANTIZABLE_ROLES


def allowed_dtypes(role: int) -> tuple[int, ...]:
    """The dtypes a reader accepts for a role (sdk/src/tensor_check.c): row
    groups and super-blocks (row by row or in groups) for every quantizable
    matrix but the token embedding, whose rows are read one by one."""
    if not quantizable(role):
        return (DTYPE_F32,)
    if role == Role.TOKEN_EMBED:
        return (DTYPE_F32, DTYPE_Q8, DTYPE_Q4)
    return (DTYPE_F32,) + QUANT_DTYPES


def dtype_allowed(role: int, dtype: int) -> bool:
    return dtype in allowed_dtypes(role)


def in_row_groups(entries: list[TensorEntry]) -> list[TensorEntry]:
    """colibri-convert --row-groups: every Q8/Q4 or QK matrix that may be (all
    but the token embedding) in groups of 16 rows instead: Q8_R16, Q4_R16,
    QK2_R16 .. QK6_R16."""
    return [replace(e, dtype=IN_ROW_GROUPS[e.dtype])
            if e.dtype in IN_ROW_GROUPS and dtype_allowed(e.role, IN_ROW_GROUPS[e.dtype]) else e
            for e in entries]


def dtype_of(name: str | None) -> int:
    """The dtype of a --quant name (None: float32)."""
    if name is None:
        return DTYPE_F32
    if name not in QUANT_NAMES:
        raise OptionError(f"quantization {name!r}: known are {', '.join(QUANT_NAMES)}")
    return QUANT_NAMES[name]


def matrix_bytes(dtype: int, rows: int, cols: int) -> int:
    """Bytes of a [rows, cols] matrix stored as `dtype`."""
    if dtype == DTYPE_F32:
        return 4 * rows * cols
    return _stored_rows(dtype, rows) * row_blocks(cols, dtype) * BLOCK_BYTES[dtype]


def _stored_rows(dtype: int, rows: int) -> int:
    """Rows a quantized matrix stores: whole groups of 16 for the R16 dtypes."""
    return group_rows(rows) if dtype in R16_DTYPES else rows


def tensor_size(entry: TensorEntry) -> int:
    """Bytes of a tensor table entry's data (float32, or Q8/Q4 blocks)."""
    if entry.dtype in QUANT_DTYPES:
        return matrix_bytes(entry.dtype, *entry.shape)
    return 4 * math.prod(entry.shape)


def assign_dtypes(entries: list[TensorEntry], quant: str | None, attention: bool = False,
                  embeddings: bool = False) -> list[TensorEntry]:
    """The entries with the dtype `quant` gives the feed-forward matrices (with
    `attention` the attention projections, with `embeddings` the token
    embedding and LM head too; under int4 K, V and the head Q8, under qk2 ..
    qk5 QK6: shared_roles; the token embedding never QK: _embedding_dtype);
    the rest float32."""
    dtype = dtype_of(quant)
    roles = (FFN_ROLES | (ATTENTION_ROLES if attention else frozenset())
             | (EMBEDDING_ROLES if embeddings else frozenset()))
    if dtype == DTYPE_F32:
        return list(entries)
    if any(e.role == Role.ATTN_ROUTER for e in entries):  # attention experts' q, o: float32
        roles -= FLOAT_WITH_ATTENTION_EXPERTS
    shared = shared_roles(entries)
    return [replace(e, dtype=_role_dtype(dtype, e.role, e.role in shared))
            if e.role in roles else e for e in entries]


def _role_dtype(dtype: int, role: int, shared: bool) -> int:
    """The dtype of a quantized matrix under --quant `dtype`: shared ones
    (shared_roles) Q8 under int4 and QK6 under qk2 .. qk5 (llama.cpp's K-quant
    files keep their output Q6_K alike), the token embedding Q8 under a QK
    dtype: its rows are read one by one, not through a product, and each
    token's row is the whole residual stream's start (Q4 there was most of
    qk4's KL on a trained model: docs/quantization.md)."""
    if role == Role.TOKEN_EMBED and dtype in QK_DTYPES:
        return DTYPE_Q8
    if shared and dtype == DTYPE_Q4:
        return DTYPE_Q8
    return DTYPE_QK6 if shared and DTYPE_QK2 <= dtype < DTYPE_QK6 else dtype


def shared_roles(entries: list[TensorEntry]) -> frozenset[int]:
    """The roles stored Q8 under int4 (when quantized at all): the matrices
    whose output everything after them shares, so their error is not diluted:
    the key and value projections (every query head of a group reads the
    same keys and values) and the matrix the logits come from (the LM head,
    or with tied embeddings the token embedding). They are a few percent of
    an MoE's weights. llama.cpp's Q4_0 files make the same choice for an
    8-expert model (K and V Q8_0, the output Q6_K); docs/quantization.md has
    the measurement."""
    head = Role.LM_HEAD if any(e.role == Role.LM_HEAD for e in entries) else Role.TOKEN_EMBED
    return frozenset({Role.ATTN_K, Role.ATTN_V, head})


def _blocks(w: np.ndarray) -> np.ndarray:
    """[rows, cols] -> [rows, nb, 32] float32, the last block zero-padded."""
    rows, cols = w.shape
    nb = row_blocks(cols)
    padded = np.zeros((rows, nb * QBLOCK), dtype=np.float32)
    padded[:, :cols] = w
    return padded.reshape(rows, nb, QBLOCK)


def _half_scales(d: np.ndarray, what: str) -> np.ndarray:
    return half_scales(d, what, "block", 127)


def _q8(blocks: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    amax = np.max(np.abs(blocks), axis=2)
    d16 = _half_scales(amax / np.float32(127), what)
    d = d16.astype(np.float32)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d != 0, np.round(blocks / np.where(d != 0, d, 1)), 0)
    return d16, np.clip(q, -127, 127).astype(np.int8)


def _q4(blocks: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """d = (the weight of largest magnitude, signed) / -8, so that weight
    maps to nibble 0 exactly (llama.cpp's Q4_0 rule)."""
    at = np.argmax(np.abs(blocks), axis=2)[..., None]
    signed_max = np.take_along_axis(blocks, at, axis=2)[..., 0]
    d16 = _half_scales(signed_max / np.float32(-8) + np.float32(0), what)  # no -0 scale
    d = d16.astype(np.float32)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d != 0, np.round(blocks / np.where(d != 0, d, 1)), 0) + 8
    q = np.clip(q, 0, 15).astype(np.uint8)
    return d16, q[..., :16] | (q[..., 16:] << 4)


def quantize(dtype: int, w: np.ndarray, what: str = "tensor",
             importance: np.ndarray | None = None) -> bytes:
    """The bytes of a [rows, cols] float matrix as Q8 or Q4 blocks (row after
    row, each row's blocks in order), or as QK super-blocks (`importance`:
    their search's weights, quant_superblock.quantize_qk); an R16 dtype's
    in groups of 16 rows."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise OptionError(f"{what}: only matrices are quantized, not shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise OptionError(f"{what}: weights are not all finite")
    if dtype in SUPERBLOCK_DTYPES:
        out = quantize_qk(dtype, w, importance, what)
    else:
        out = _blocks_of(dtype, w, what)
    return (to_row_groups(dtype, out) if dtype in R16_DTYPES else out).tobytes()


def _blocks_of(dtype: int, w: np.ndarray, what: str) -> np.ndarray:
    """[rows, cols] -> [rows, nb, block bytes]: the Q8 or Q4 blocks, row by row."""
    blocks = _blocks(w)
    d16, payload = (_q8 if BY_ROW.get(dtype, dtype) == DTYPE_Q8 else _q4)(blocks, what)
    rows, nb, _ = blocks.shape
    out = np.empty((rows, nb, BLOCK_BYTES[dtype]), dtype=np.uint8)
    out[..., :2] = d16.astype("<f2").view(np.uint8).reshape(rows, nb, 2)
    out[..., 2:] = payload.view(np.uint8)
    return out


def to_row_groups(dtype: int, blocks: np.ndarray) -> np.ndarray:
    """[rows, nb, block bytes] blocks (row after row) -> the R16 layout, flat:
    per group of 16 rows (the last padded with zero rows) and block a tile of
    the 16 scales and then chunks k of 64 bytes, row i's bytes 2 + 4k .. 2 +
    4k + 3 of its block at 4i (docs/format.md 3.4); QK_R16's tiles:
    qk_row_groups.py (3.6)."""
    if dtype in QK_R16_DTYPES:
        return to_qk_row_groups(dtype, blocks)
    rows, nb, width = blocks.shape
    padded = np.zeros((_stored_rows(dtype, rows), nb, width), dtype=np.uint8)
    padded[..., 2:] = 0x88 if BY_ROW[dtype] == DTYPE_Q4 else 0  # zero weights
    padded[:rows] = blocks
    groups = padded.reshape(-1, GROUP_ROWS, nb, width).transpose(0, 2, 1, 3)  # [g, nb, 16, w]
    chunks = groups[..., 2:].reshape(*groups.shape[:3], -1, 4).transpose(0, 1, 3, 2, 4)
    tiles = np.concatenate([groups[..., :2].reshape(*groups.shape[:2], -1),
                            chunks.reshape(*groups.shape[:2], -1)], axis=2)
    return np.ascontiguousarray(tiles).reshape(-1)


def from_row_groups(dtype: int, data: np.ndarray, rows: int, nb: int) -> np.ndarray:
    """The inverse of to_row_groups: [rows, nb, block bytes]."""
    if dtype in QK_R16_DTYPES:
        return from_qk_row_groups(dtype, data, rows, nb)
    width = BLOCK_BYTES[dtype]
    tiles = np.asarray(data, dtype=np.uint8).reshape(-1, nb, GROUP_ROWS * width)
    scales = tiles[..., :2 * GROUP_ROWS].reshape(*tiles.shape[:2], GROUP_ROWS, 2)
    chunks = tiles[..., 2 * GROUP_ROWS:].reshape(*tiles.shape[:2], -1, GROUP_ROWS, 4)
    payload = chunks.transpose(0, 1, 3, 2, 4).reshape(*tiles.shape[:2], GROUP_ROWS, -1)
    blocks = np.concatenate([scales, payload], axis=3).transpose(0, 2, 1, 3)
    return blocks.reshape(-1, nb, width)[:rows]


def _split(dtype: int, data: bytes | np.ndarray, rows: int, cols: int) -> tuple[np.ndarray,
                                                                                  np.ndarray]:
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    if dtype in R16_DTYPES:
        blocks = from_row_groups(dtype, raw, rows, row_blocks(cols))
    else:
        blocks = raw.reshape(rows, row_blocks(cols), BLOCK_BYTES[dtype])
    d = np.ascontiguousarray(blocks[..., :2]).view("<f2")[..., 0].astype(np.float32)
    return d, blocks[..., 2:]


def quantized_values(dtype: int, data: bytes | np.ndarray,
                     shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(scales [rows, nb] float32, q [rows, nb, 32] int: the signed levels)."""
    rows, cols = shape
    d, payload = _split(dtype, data, rows, cols)
    if BY_ROW.get(dtype, dtype) == DTYPE_Q8:
        return d, payload.view(np.int8).astype(np.int32)
    low, high = payload & 0x0F, payload >> 4
    return d, np.concatenate([low, high], axis=2).astype(np.int32) - 8


def dequantize(dtype: int, data: bytes | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 weights of a Q8/Q4 tensor: d * q, one float32 product each
    (a QK or QK_R16 one: quant_superblock.dequantize_qk)."""
    if dtype in SUPERBLOCK_DTYPES:
        return dequantize_qk(dtype, data, shape)
    rows, cols = shape
    d, q = quantized_values(dtype, data, shape)
    w = (d[..., None] * q.astype(np.float32)).astype(np.float32)
    return w.reshape(rows, -1)[:, :cols]


def first_bad_scale(dtype: int, data: np.ndarray) -> int | None:
    """Byte offset (in the tensor's data) of the first binary16 scale that is
    infinite or NaN; None when all are finite or the dtype has none. The
    scales open each block (Q8, Q4: d; QK: d, dmin) or each tile of 16 rows
    (Q8_R16, Q4_R16: 16 d; QK_R16: 16 d, 16 dmin), padding rows included."""
    if dtype not in QUANT_DTYPES:
        return None
    rows = GROUP_ROWS if dtype in R16_DTYPES else 1
    per_tile = rows * (2 if dtype in SUPERBLOCK_DTYPES else 1)
    tile = BLOCK_BYTES[dtype] * rows
    raw = np.asarray(data, dtype=np.uint8).reshape(-1, tile)[:, :2 * per_tile]
    halves = raw.reshape(-1, per_tile, 2).astype(np.uint16)
    bad = np.flatnonzero(((halves[..., 0] | (halves[..., 1] << 8)) & 0x7C00) == 0x7C00)
    return int(bad[0] // per_tile * tile + 2 * (bad[0] % per_tile)) if bad.size else None


def weights_name(tensors: list[TensorEntry]) -> str:
    """The --quant name of the dtype of an image's quantized matrices: fp32,
    int8, int4, or mixed (both)."""
    names = {QUANT_NAMES[n]: n for n in QUANT_NAMES}
    found = {names[BY_ROW.get(t.dtype, t.dtype)] for t in tensors if t.dtype in QUANT_DTYPES}
    return found.pop() if len(found) == 1 else "mixed" if found else "fp32"


def mixed_dtypes(entries: list[TensorEntry], int8_experts: set[tuple[int, int]],
                 attention: bool = False, embeddings: bool = False) -> list[TensorEntry]:
    """colibri-convert --quant mixed: the experts in `int8_experts` ((layer,
    expert) pairs: those a calibration text uses most) Q8, the other experts
    Q4; the shared expert and dense layers (and, when asked, attention and
    embeddings) Q8."""
    q8 = assign_dtypes(entries, "int8", attention, embeddings)
    expert_roles = {Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN}
    return [replace(e, dtype=DTYPE_Q4) if e.role in expert_roles
            and (e.layer, e.expert) not in int8_experts else e for e in q8]


def most_used_experts(counts: np.ndarray, share: float) -> set[tuple[int, int]]:
    """Per MoE layer (a row of counts[layer, expert] with any token), the
    ceil(share * n_experts) experts that took the most tokens (ties: the lower
    index)."""
    if not 0.0 <= share <= 1.0:
        raise OptionError(f"--int8-share {share}: must be 0 .. 1")
    chosen = set()
    for layer, row in enumerate(counts):
        if row.sum() == 0:
            continue
        keep = math.ceil(share * len(row))
        order = sorted(range(len(row)), key=lambda e: (-int(row[e]), e))
        chosen |= {(layer, e) for e in order[:keep]}
    return chosen
