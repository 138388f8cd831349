/*
 * quant.h - what every quantized product shares, whatever the kernel table:
 * the binary16 scales of the weight blocks and the one activation quantizer
 * (quant.c). Not kernel slots: one definition, so no table can differ.
 * The contract: docs/kernels.md, "Quantized products".
 */
#ifndef COLIBRI_QUANT_H
#define COLIBRI_QUANT_H

#include "colibri.h"
#include "colibri_compat.h"

/* Blocks of 32 in a row of cols elements. */
static inline uint32_t colibri_qblocks(uint32_t cols)
{
    return (cols + COLIBRI_QBLOCK - 1u) / COLIBRI_QBLOCK;
}

/* An IEEE binary16 value (bits h) as a float: exact for every input
 * (subnormals, infinities; NaN stays NaN), integer operations only. */
static inline float colibri_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu, bits;
    if (exponent == 0x1Fu) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0u) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0u) {
        bits = sign;
    } else { /* subnormal: mantissa * 2^-24, normalised */
        uint32_t e = 113u;
        while ((mantissa & 0x400u) == 0u) {
            mantissa <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
    }
    return colibri_f32_from_bits(bits);
}

/* The scale of a weight block (its first two bytes) as a float. */
static inline float colibri_qblock_scale(const uint8_t *block)
{
    return colibri_half_to_float(colibri_rd_u16(block));
}

/* ---- super-blocks (format 1.15, docs/format.md 3.5) --------------------- */

/* Block j's (j < 8) 6-bit scale and min: byte 4 + j holds the scale in its
 * low 6 bits and the min's low 2 bits above; byte 12 + j % 4 the min's high
 * 4 bits (low nibble for j < 4, high nibble else). */
static inline uint32_t colibri_qk_scale(const uint8_t *sb, uint32_t j)
{
    return sb[4u + j] & 0x3Fu;
}

static inline uint32_t colibri_qk_min(const uint8_t *sb, uint32_t j)
{
    return (uint32_t)(sb[4u + j] >> 6) | (((uint32_t)sb[12u + (j & 3u)] >> (4u * (j >> 2))) & 0xFu)
                                             << 2;
}

/* Bytes of one super-block row of cols weights at `bits` bits. */
static inline size_t colibri_qk_row_bytes(uint32_t cols, uint32_t bits)
{
    return (size_t)((cols + COLIBRI_QK_BLOCK - 1u) / COLIBRI_QK_BLOCK) * COLIBRI_QK_BYTES(bits);
}

/* Where byte p of row i's super-block lies in a tile of a QK R16 group
 * (format 1.16, docs/format.md 3.6): d and dmin in 2-byte columns, scales
 * and mins in 1-byte ones, levels in 4-byte ones (a 64-byte chunk each). */
static inline uint32_t colibri_qk_r16_offset(uint32_t p, uint32_t i)
{
    return p < 2u    ? 2u * i + p
           : p < 4u  ? 32u + 2u * i + (p - 2u)
           : p < 16u ? 64u + 16u * (p - 4u) + i
                     : 256u + 64u * ((p - 16u) / 4u) + 4u * i + (p - 16u) % 4u;
}

/* Element e of block j in a part of w bits a level (w = 1, 2 or 4; 32w
 * bytes, the eight blocks interleaved): bits (w j) % 8 .. + w - 1 of byte
 * 32 ((w j) / 8) + e. So a 32-byte chunk holds element e of 8 / w blocks. */
static inline uint32_t colibri_qk_field(const uint8_t *part, uint32_t w, uint32_t j, uint32_t e)
{
    return ((uint32_t)part[32u * (w * j / 8u) + e] >> (w * j % 8u)) & ((1u << w) - 1u);
}

/* Block j's 32 levels q[e] in [0, 2^bits), from byte 16 of the super-block:
 * a low part of L = 2 bits (bits <= 3) or 4, then a high part of bits - L
 * (0, 1 or 2) shifted left by L. */
static inline void colibri_qk_levels(uint8_t *q, const uint8_t *sb, uint32_t j, uint32_t bits)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    const uint8_t *hi = sb + 16u + 32u * low;
    for (uint32_t e = 0; e < COLIBRI_QBLOCK; e++) {
        uint32_t v = colibri_qk_field(sb + 16u, low, j, e);
        if (high != 0u) {
            v |= colibri_qk_field(hi, high, j, e) << low;
        }
        q[e] = (uint8_t)v;
    }
}

/*
 * Quantize one row of cols activations into ceil(cols / 32) blocks (the
 * last one zero-padded): amax = max |x_i|; amax 0: d = 0, q = 0; else
 * d = amax / 127, inv = 127 / amax and q_i = x_i * inv rounded to nearest,
 * ties to even, in [-127, 127]. A block holding a NaN or an infinity gets
 * d = NaN and q = 0 (its products are NaN). A block with amax below
 * 127 / FLT_MAX (3.7e-37) has inv = +inf: its nonzero elements get +-127.
 */
void colibri_quantize_row(colibri_qblock *out, const float *x, uint32_t cols);

/*
 * Quantize one head of n <= 2^16 floats of the int8 KV cache (format 1.15):
 * the same rule as a block of colibri_quantize_row, over the n values;
 * returns d (q_i ~ x_i / d).
 */
float colibri_quantize_head(int8_t *q, const float *x, uint32_t n);

#endif
