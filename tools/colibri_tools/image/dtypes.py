"""The tensor dtypes of the image format (docs/format.md 3.3 .. 3.6): their
numbers, block sizes and bytes; image_spec re-exports them."""

from __future__ import annotations

DTYPE_F32 = 0
DTYPE_Q8 = 1                    # format 1.3 (section 3.3): blocks of 32 int8 and a binary16 scale
DTYPE_Q4 = 2                    # format 1.3: blocks of 32 4-bit weights and a binary16 scale
DTYPE_Q8_R16 = 3                # format 1.8 (section 3.4): Q8 blocks in groups of 16 rows
DTYPE_Q4_R16 = 4                # format 1.8: Q4 blocks in groups of 16 rows
DTYPE_QK2 = 5                   # format 1.15 (section 3.5): super-blocks of 256 at 2 bits
DTYPE_QK6 = 9                   # .. at 6 bits (QK3, QK4, QK5 between: bits = dtype - 3)
DTYPE_QK2_R16 = 10              # format 1.16 (section 3.6): QK2 super-blocks in groups of 16 rows
DTYPE_QK6_R16 = 14              # .. QK6 (QK3_R16 .. QK5_R16 between: bits = dtype - 8)
QK_DTYPES = tuple(range(DTYPE_QK2, DTYPE_QK6 + 1))              # row by row, 2 .. 6 bits
QK_R16_DTYPES = tuple(range(DTYPE_QK2_R16, DTYPE_QK6_R16 + 1))  # in groups of 16 rows
SUPERBLOCK_DTYPES = QK_DTYPES + QK_R16_DTYPES  # every dtype of super-blocks of 256
R16_DTYPES = (DTYPE_Q8_R16, DTYPE_Q4_R16) + QK_R16_DTYPES  # every dtype in groups of 16 rows
QUANT_DTYPES = (DTYPE_Q8, DTYPE_Q4, DTYPE_Q8_R16, DTYPE_Q4_R16) + SUPERBLOCK_DTYPES
QBLOCK = 32                     # weights per block of a quantized row
QK_BLOCK = 256                  # weights per super-block (QK dtypes)
GROUP_ROWS = 16                 # rows of a group of the R16 dtypes
BLOCK_BYTES = {DTYPE_Q8: 34, DTYPE_Q4: 18,  # bytes per block (per row), scale included
               DTYPE_Q8_R16: 34, DTYPE_Q4_R16: 18,
               **{d: 16 + 32 * (d - 3) for d in QK_DTYPES},  # = COLIBRI_QK_BYTES(bits)
               **{d: 16 + 32 * (d - 8) for d in QK_R16_DTYPES}}  # the same super-blocks


def qk_bits(dtype: int) -> int:
    """The bits of a super-block dtype (QK2 .. QK6, QK2_R16 .. QK6_R16)."""
    return dtype - 8 if dtype in QK_R16_DTYPES else dtype - 3


def block_weights(dtype: int) -> int:
    """Weights per block of a quantized dtype (its tensor entry's `block`)."""
    return QK_BLOCK if dtype in SUPERBLOCK_DTYPES else QBLOCK


def row_blocks(cols: int, dtype: int = DTYPE_Q8) -> int:
    """Blocks of one quantized row of `cols` weights (the last one padded):
    of 32, or super-blocks of 256 for the QK dtypes."""
    return -(-cols // block_weights(dtype))
