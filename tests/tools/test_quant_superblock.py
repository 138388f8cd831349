"""The super-block quantizer and reader (format 1.15, docs/format.md 3.5):
the layout against an independent decoding written here from the spec, the
error of each width, the search against plain min/max rounding, the
importance weighting, and refusals."""
from __future__ import annotations

import numpy as np
import pytest
from colibri_tools.errors import OptionError
from colibri_tools.image.image_spec import BLOCK_BYTES, QK_DTYPES
from colibri_tools.image.quant_superblock import dequantize_qk, quantize_qk

RNG = np.random.default_rng(7)


def _field(part: np.ndarray, width: int, j: int, e: int) -> int:
    """Element e of block j in a part of `width` bits a level: byte
    32 * (width * j // 8) + e, from bit width * j % 8."""
    return (int(part[32 * (width * j // 8) + e]) >> (width * j % 8)) & ((1 << width) - 1)


def _spec_decode(data: np.ndarray, bits: int, cols: int) -> np.ndarray:
    """Weights of one row of super-blocks, element by element from
    docs/format.md 3.5 (no numpy tricks shared with the module)."""
    size = 16 + 32 * bits
    low = 2 if bits <= 3 else 4
    out = []
    for s in range(len(data) // size):
        sb = data[s * size:(s + 1) * size]
        d = float(np.frombuffer(bytes(sb[0:2]), "<f2")[0])
        dmin = float(np.frombuffer(bytes(sb[2:4]), "<f2")[0])
        for j in range(8):
            scale = sb[4 + j] & 63
            mn = (sb[4 + j] >> 6) | (((sb[12 + j % 4] >> (4 * (j // 4))) & 15) << 2)
            for e in range(32):
                q = _field(sb[16:], low, j, e)
                if bits > low:
                    q |= _field(sb[16 + 32 * low:], bits - low, j, e) << low
                out.append(np.float32(d * scale) * np.float32(q) - np.float32(dmin * mn))
    return np.array(out[:cols], dtype=np.float32)


@pytest.mark.parametrize("dtype", QK_DTYPES)
def test_layout_matches_the_spec(dtype):
    w = RNG.standard_normal((3, 300)).astype(np.float32) * 0.02
    data = quantize_qk(dtype, w)
    assert data.shape == (3, 2, BLOCK_BYTES[dtype])
    read = dequantize_qk(dtype, data, w.shape)
    for r in range(3):
        np.testing.assert_array_equal(read[r], _spec_decode(data[r].reshape(-1), dtype - 3, 300))


# Relative RMS error on Gaussian weights, measured: 0.30, 0.145, 0.071, 0.035, 0.018.
ERROR = {2: 0.32, 3: 0.16, 4: 0.08, 5: 0.04, 6: 0.02}


@pytest.mark.parametrize("dtype", QK_DTYPES)
def test_error_of_each_width(dtype):
    w = RNG.standard_normal((16, 512)).astype(np.float32)
    err = dequantize_qk(dtype, quantize_qk(dtype, w), w.shape) - w
    assert np.sqrt(np.mean(err ** 2)) <= ERROR[dtype - 3]


def _min_max_error(w: np.ndarray, bits: int) -> float:
    """Plain rounding: each block of 32 spans [min(w, 0), max w] in 2^bits levels."""
    blocks = w.reshape(-1, 32).astype(np.float64)
    lo, hi = np.minimum(blocks.min(1, keepdims=True), 0), blocks.max(1, keepdims=True)
    step = (hi - lo) / ((1 << bits) - 1)
    q = np.rint((blocks - lo) / step)
    return float(np.mean((q * step + lo - blocks) ** 2))


@pytest.mark.parametrize("dtype", QK_DTYPES[:3])
def test_search_beats_min_max_rounding(dtype):
    """Even with its scales rounded to 6 bits, the searched blocks err less
    than min/max blocks with exact float scales."""
    w = RNG.standard_normal((16, 512)).astype(np.float32)
    searched = np.mean((dequantize_qk(dtype, quantize_qk(dtype, w), w.shape) - w) ** 2)
    assert searched < 0.9 * _min_max_error(w, dtype - 3)


def test_importance_lowers_the_weighted_error():
    """Columns of skewed importance (a few hot ones, as real activations
    have): the weighted error with the importance is lower than without."""
    w = RNG.standard_normal((32, 512)).astype(np.float32)
    imp = RNG.exponential(1.0, 512) ** 3
    dtype = QK_DTYPES[1]
    plain = dequantize_qk(dtype, quantize_qk(dtype, w), w.shape) - w
    weighted = dequantize_qk(dtype, quantize_qk(dtype, w, imp), w.shape) - w
    assert np.sum(imp * weighted ** 2) < 0.9 * np.sum(imp * plain ** 2)


def test_zero_weights_and_no_importance():
    dtype = QK_DTYPES[0]
    zero = np.zeros((2, 256), np.float32)
    data = quantize_qk(dtype, zero, np.zeros(256))
    assert not data.any()
    w = RNG.standard_normal((2, 256)).astype(np.float32)
    unseen = quantize_qk(dtype, w, np.zeros(256))  # no calibration token reached it
    assert np.array_equal(unseen, quantize_qk(dtype, w))


def test_refusals():
    dtype = QK_DTYPES[2]
    with pytest.raises(OptionError, match="binary16"):
        quantize_qk(dtype, np.full((1, 256), 1e9, np.float32))
    with pytest.raises(OptionError, match="importance"):
        quantize_qk(dtype, np.ones((1, 256), np.float32), np.full(256, np.nan))
    with pytest.raises(OptionError, match="importance"):
        quantize_qk(dtype, np.ones((1, 256), np.float32), np.ones(255))
