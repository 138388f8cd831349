"""The super-block dtypes QK2 .. QK6 of format 1.15 (docs/format.md 3.5): the
numpy quantizer and dequantizer of exactly that layout (and the dequantizer
of QK2_R16 .. QK6_R16, 1.16, the same super-blocks in groups of 16 rows:
qk_row_groups.py).

A row is cut into super-blocks of 256 weights (the last one padded with
zeros), each eight blocks of 32. A block j has a 6-bit scale sc_j and a 6-bit
min m_j, the super-block a binary16 d and dmin, and each weight a level q in
[0, 2^b): weight = (d * sc_j) * q - dmin * m_j. Bytes of a super-block:
  0..1 d, 2..3 dmin (binary16, little-endian)
  4 + j       sc_j in bits 0..5, m_j's bits 0..1 in bits 6..7       (j < 8)
  12 + k      m_k's bits 2..5 in the low nibble, m_(k+4)'s in the high (k < 4)
  16 ..       the levels: a low part of 2 bits (b <= 3) or 4, then a high
              part of b - low bits (0, 1 or 2), each part's blocks
              interleaved (element e of 8 / w blocks in byte e of a
              32-byte chunk), docs/format.md 3.5.
So 16 + 32b bytes: b + 0.5 bits per weight, every scale included.

The quantizer chooses each block's scale and min by a search that minimizes
the block's squared error, each weight's error weighed by its importance
(1 without a calibration text; the activation energy of its input column
with one: docs/quantization.md), then rounds the eight scales and mins of a
super-block to 6 bits against d and dmin and rounds the levels anew against
the stored values.
"""

from __future__ import annotations

import numpy as np

from ..errors import OptionError
from .image_spec import BLOCK_BYTES, QBLOCK, QK_BLOCK, QK_R16_DTYPES, qk_bits
from .qk_row_groups import from_qk_row_groups

SUB = QK_BLOCK // QBLOCK  # blocks of 32 in a super-block
SCALE_MAX = 63
# The search's candidate steps: (levels + delta) / range, delta from -1 to 1.
DELTAS = np.linspace(-1.0, 1.0, 21, dtype=np.float32)


def low_bits(bits: int) -> int:
    """Bits of a level's low part: 2 for 2 and 3 bits, else 4."""
    return 2 if bits <= 3 else 4


def _padded(w: np.ndarray) -> np.ndarray:
    """[rows, cols] -> [rows, super-blocks, 8, 32] float32, zeros past cols."""
    rows, cols = w.shape
    nsb = -(-cols // QK_BLOCK)
    out = np.zeros((rows, nsb * QK_BLOCK), dtype=np.float32)
    out[:, :cols] = w
    return out.reshape(rows, nsb, SUB, QBLOCK)


def _fit(w: np.ndarray, a: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weighted least-squares (s, c) of w ~ s * q + c, with c <= 0 (the
    stored min is -c >= 0) and s >= 0, per block (float64)."""
    sa = a.sum(-1)
    sq = (a * q).sum(-1)
    sqq = (a * q * q).sum(-1)
    sw = (a * w).sum(-1)
    sqw = (a * q * w).sum(-1)
    det = sa * sqq - sq * sq
    ok = det > 1e-30 * np.maximum(sa * sqq, 1e-300)
    safe = np.where(ok, det, 1.0)
    s = np.where(ok, (sa * sqw - sq * sw) / safe, 0.0)
    c = np.where(ok, (sqq * sw - sq * sqw) / safe, 0.0)
    pinned = c > 0  # the min would be negative: fit s alone with c = 0
    s = np.where(pinned, sqw / np.where(sqq > 0, sqq, 1.0), s)
    c = np.where(pinned, 0.0, c)
    return np.maximum(s, 0.0), c


def block_scales(w: np.ndarray, a: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per block (last axis 32) the float scale s >= 0 and min m >= 0 (weight
    ~ s * q - m, q in [0, 2^bits)) of least weighted squared error among the
    search's candidates."""
    nmax = (1 << bits) - 1
    w64, a64 = w.astype(np.float64), a.astype(np.float64)
    lo = np.minimum(w64.min(-1), 0.0)
    span = w64.max(-1) - lo
    live = span > 0
    best_s = np.where(live, span / nmax, 0.0)
    best_c = lo.copy()
    best_err = _error(w64, a64, best_s, best_c, nmax)
    inv_span = np.where(live, 1.0 / np.where(live, span, 1.0), 0.0)
    for delta in DELTAS:
        iscale = (nmax + float(delta)) * inv_span
        q = np.clip(np.rint((w64 - lo[..., None]) * iscale[..., None]), 0, nmax)
        s, c = _fit(w64, a64, q)
        err = _error(w64, a64, s, c, nmax)
        better = live & (err < best_err)
        best_s = np.where(better, s, best_s)
        best_c = np.where(better, c, best_c)
        best_err = np.where(better, err, best_err)
    return best_s, np.maximum(-best_c, 0.0)  # no -0: a zero block stores zero bytes


def _levels(w: np.ndarray, s: np.ndarray, m: np.ndarray, nmax: int) -> np.ndarray:
    """The nearest levels of w for weight = s * q - m (s = 0: level 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((w + m[..., None]) / np.where(s > 0, s, 1.0)[..., None])
    return np.where(s[..., None] > 0, np.clip(q, 0, nmax), 0)


def _error(w: np.ndarray, a: np.ndarray, s: np.ndarray, c: np.ndarray, nmax: int) -> np.ndarray:
    q = _levels(w, s, -c, nmax)
    return (a * (s[..., None] * q + c[..., None] - w) ** 2).sum(-1)


def half_scales(values: np.ndarray, what: str, unit: str = "super-block",
                levels: int = SCALE_MAX) -> np.ndarray:
    """Scales as binary16, or an OptionError naming the weights too large for
    them (a scale of 65504 times `levels`); quant.py's blocks use it too."""
    with np.errstate(over="ignore"):  # an overflow is reported below
        h = values.astype(np.float16)
    if not np.all(np.isfinite(h)):
        raise OptionError(f"{what}: a {unit}'s scale does not fit binary16 (weights above "
                          f"{65504 * levels:.3g})")
    return h


def _six_bits(values: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Per super-block: the binary16 step (largest value / 63) and each
    block's value in steps, rounded to [0, 63]."""
    step16 = half_scales(values.max(-1) / SCALE_MAX, what)
    step = step16.astype(np.float64)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.rint(values / np.where(step > 0, step, 1.0))
    return step16, np.where(step > 0, np.clip(k, 0, SCALE_MAX), 0).astype(np.uint8)


def _pack_part(v: np.ndarray, width: int) -> np.ndarray:
    """[..., 8, 32] fields of `width` bits (1, 2, 4) -> [..., 32 * width]
    bytes: element e of block j at byte 32 (width j // 8) + e, shift
    width j % 8 (the eight blocks interleaved)."""
    per = 8 // width  # blocks a 32-byte chunk holds
    v = v.astype(np.uint8).reshape(*v.shape[:-2], width, per, 32)
    shifts = (np.arange(per, dtype=np.uint8) * width)[:, None]
    return np.bitwise_or.reduce(v << shifts, axis=-2).reshape(*v.shape[:-3], 32 * width)


def _unpack_part(p: np.ndarray, width: int) -> np.ndarray:
    """[..., 32 * width] bytes -> [..., 8, 32] fields (int32)."""
    per = 8 // width
    chunks = p.astype(np.int32).reshape(*p.shape[:-1], width, 1, 32)
    shifts = (np.arange(per) * width)[:, None]
    fields = (chunks >> shifts) & ((1 << width) - 1)
    return fields.reshape(*p.shape[:-1], 8, 32)


def pack_levels(q: np.ndarray, bits: int) -> np.ndarray:
    """[..., 8, 32] levels of a super-block -> [..., 32 * bits] bytes: the
    low part, then the high part (docs/format.md 3.5)."""
    low = low_bits(bits)
    parts = [_pack_part(q & ((1 << low) - 1), low)]
    if bits > low:
        parts.append(_pack_part(q >> low, bits - low))
    return np.concatenate(parts, axis=-1)


def unpack_levels(p: np.ndarray, bits: int) -> np.ndarray:
    """[..., 32 * bits] bytes -> [..., 8, 32] levels (int32)."""
    low = low_bits(bits)
    q = _unpack_part(p[..., :32 * low], low)
    if bits > low:
        q |= _unpack_part(p[..., 32 * low:], bits - low) << low
    return q


def _scale_bytes(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """[..., 8] scales and mins (6 bits) -> [..., 12] bytes."""
    first = sc | (mn & 3) << 6
    high = mn >> 2
    return np.concatenate([first, high[..., :4] | high[..., 4:] << 4], axis=-1).astype(np.uint8)


def quantize_qk(dtype: int, w: np.ndarray, importance: np.ndarray | None = None,
                what: str = "tensor") -> np.ndarray:
    """[rows, cols] float32 (and optionally the importance of each column,
    [cols], or of each weight, [rows, cols]) -> [rows, super-blocks, 16 + 32b]
    uint8, row by row (for a QK_R16 dtype too: qk_row_groups tiles them)."""
    bits = qk_bits(dtype)
    nmax = (1 << bits) - 1
    blocks = _padded(w)
    a = np.ones_like(blocks) if importance is None else _importance(importance, w.shape)
    s, m = block_scales(blocks, a, bits)
    d16, sc = _six_bits(s, what)
    dmin16, mn = _six_bits(m, what)
    scale = d16.astype(np.float32)[..., None] * sc.astype(np.float32)  # exact, as the kernels
    low = dmin16.astype(np.float32)[..., None] * mn.astype(np.float32)
    q = _levels(blocks, scale.astype(np.float64), low.astype(np.float64), nmax).astype(np.uint8)
    out = np.empty((*blocks.shape[:2], BLOCK_BYTES[dtype]), dtype=np.uint8)
    out[..., 0:2] = d16.astype("<f2")[..., None].view(np.uint8)
    out[..., 2:4] = dmin16.astype("<f2")[..., None].view(np.uint8)
    out[..., 4:16] = _scale_bytes(sc, mn)
    out[..., 16:] = pack_levels(q, bits)
    return out


def _importance(importance: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    imp = np.asarray(importance, dtype=np.float32)
    if imp.ndim == 1 and imp.shape[0] == shape[1]:
        imp = np.broadcast_to(imp, shape)
    if imp.shape != tuple(shape) or not np.all(np.isfinite(imp)) or np.any(imp < 0):
        raise OptionError(f"importance of shape {imp.shape} for a {shape} matrix: finite, >= 0")
    if not np.any(imp > 0):  # a matrix no calibration token reached: unit weights
        return _padded(np.ones(shape, dtype=np.float32))
    # A column never seen (zero energy) keeps a small weight: its error still counts.
    return _padded(np.maximum(imp, np.float32(1e-6) * np.float32(imp.mean())))


def qk_values(dtype: int, data: bytes | np.ndarray, shape: tuple[int, int]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scale [rows, nb], min [rows, nb] as float32 d * sc and dmin * m, q
    [rows, nb, 32] int32) of a QK matrix (row by row, or QK_R16 tiles), nb =
    its blocks of 32 with padding."""
    rows, cols = shape
    bits = qk_bits(dtype)
    if dtype in QK_R16_DTYPES:  # the tiles of 16 rows back to rows (format 1.16)
        sb = from_qk_row_groups(dtype, data, rows, -(-cols // QK_BLOCK))
    else:
        sb = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    sb = sb.reshape(rows, -1, BLOCK_BYTES[dtype]).astype(np.int32)
    d = np.ascontiguousarray(sb[..., 0:4].astype(np.uint8)).view("<f2").astype(np.float32)
    first, high = sb[..., 4:12], sb[..., 12:16]
    sc = first & 63
    mn = (first >> 6) | np.concatenate([high & 15, high >> 4], axis=-1) << 2
    scale = (d[..., 0:1] * sc.astype(np.float32)).reshape(rows, -1)
    low = (d[..., 1:2] * mn.astype(np.float32)).reshape(rows, -1)
    q = unpack_levels(sb[..., 16:], bits)
    return scale, low, q.reshape(rows, -1, QBLOCK)


def dequantize_qk(dtype: int, data: bytes | np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The float32 weights of a QK matrix: (d * sc) * q - dmin * m."""
    rows, cols = shape
    scale, low, q = qk_values(dtype, data, shape)
    w = scale[..., None] * q.astype(np.float32) - low[..., None]
    return w.reshape(rows, -1)[:, :cols].astype(np.float32)
