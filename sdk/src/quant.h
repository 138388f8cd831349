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

/*
 * Quantize one row of cols activations into ceil(cols / 32) blocks (the
 * last one zero-padded): amax = max |x_i|; amax 0: d = 0, q = 0; else
 * d = amax / 127, inv = 127 / amax and q_i = x_i * inv rounded to nearest,
 * ties to even, in [-127, 127]. A block holding a NaN or an infinity gets
 * d = NaN and q = 0 (its products are NaN). A block with amax below
 * 127 / FLT_MAX (3.7e-37) has inv = +inf: its nonzero elements get +-127.
 */
void colibri_quantize_row(colibri_qblock *out, const float *x, uint32_t cols);

#endif
