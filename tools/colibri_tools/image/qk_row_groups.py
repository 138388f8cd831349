"""The super-blocks in groups of 16 rows, QK2_R16 .. QK6_R16 (format 1.16,
docs/format.md 3.6): the permutation between a matrix's row-by-row QK
super-blocks (quant_superblock.py) and its tiles, and back.

Rows are taken 16 at a time (the last group padded with all-zero rows); a
group is one tile per super-block column s, holding super-block s of each
of its 16 rows, 16 * (16 + 32b) bytes. Byte p of row i's super-block lies
at tile byte
  2i + p                       p = 0, 1 (d)
  32 + 2i + p - 2              p = 2, 3 (dmin)
  64 + 16 (p - 4) + i          p = 4 .. 15 (scales and mins)
  256 + 64u + 4i + t           p = 16 + 4u + t (levels, t < 4)
so a tile is the 16 d, the 16 dmin, the 12 scale bytes of the 16 rows byte
by byte, then 64-byte chunks holding 4 level bytes of each row.
"""

from __future__ import annotations

import functools

import numpy as np

from .dtypes import BLOCK_BYTES, GROUP_ROWS, qk_bits


@functools.cache
def tile_offsets(bits: int) -> np.ndarray:
    """[16 * (16 + 32b)]: the tile byte of byte p of row i's super-block, at
    i * (16 + 32b) + p (docs/format.md 3.6's table)."""
    width = 16 + 32 * bits
    i = np.arange(GROUP_ROWS)[:, None]
    p = np.arange(width)[None, :]
    u, t = (p - 16) // 4, (p - 16) % 4
    at = np.select([p < 2, p < 4, p < 16], [2 * i + p, 32 + 2 * i + p - 2, 64 + 16 * (p - 4) + i],
                   256 + 64 * u + 4 * i + t)
    at = at.reshape(-1)
    at.flags.writeable = False
    return at


@functools.cache
def tile_sources(bits: int) -> np.ndarray:
    """The inverse of tile_offsets: for tile byte k, the byte i * (16 + 32b) + p
    of the group's 16 super-blocks it holds."""
    order = np.argsort(tile_offsets(bits))
    order.flags.writeable = False
    return order


def group_rows(rows: int) -> int:
    """Rows a matrix in groups of 16 stores: `rows` rounded up to 16."""
    return -(-rows // GROUP_ROWS) * GROUP_ROWS


def to_qk_row_groups(dtype: int, superblocks: np.ndarray) -> np.ndarray:
    """[rows, nsb, 16 + 32b] row-by-row super-blocks -> the flat bytes of the
    tiles (group after group, tile s after tile s - 1), zero padding rows."""
    rows, nsb, width = superblocks.shape
    assert width == BLOCK_BYTES[dtype], (dtype, width)
    padded = np.zeros((group_rows(rows), nsb, width), dtype=np.uint8)
    padded[:rows] = superblocks
    groups = padded.reshape(-1, GROUP_ROWS, nsb, width).transpose(0, 2, 1, 3)
    groups = groups.reshape(-1, nsb, GROUP_ROWS * width)  # [g, s, row i's bytes at i * width]
    return np.take(groups, tile_sources(qk_bits(dtype)), axis=2).reshape(-1)


def from_qk_row_groups(dtype: int, data: bytes | np.ndarray, rows: int, nsb: int) -> np.ndarray:
    """The inverse of to_qk_row_groups: [rows, nsb, 16 + 32b] super-blocks
    (the padding rows dropped)."""
    width = BLOCK_BYTES[dtype]
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    tiles = np.asarray(raw, dtype=np.uint8).reshape(-1, nsb, GROUP_ROWS * width)
    groups = np.take(tiles, tile_offsets(qk_bits(dtype)), axis=2)
    groups = groups.reshape(-1, nsb, GROUP_ROWS, width).transpose(0, 2, 1, 3)
    return groups.reshape(-1, nsb, width)[:rows]
