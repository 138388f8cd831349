/*
 * neon_r16.c - the Q8_R16 and Q4_R16 slots of the neon table (AArch64
 * Advanced SIMD without the dot-product extension: a Raspberry Pi 4's
 * Cortex-A72): weights in groups of sixteen rows (colibri.h, docs/format.md
 * 3.4), one row per int32 lane. The walk over the groups is r16.h's.
 *
 * A tile's 64-byte chunk k is four registers of four rows each, four
 * weights of a row side by side (Q8: elements 4k .. 4k + 3; Q4: the low
 * nibbles those, the high ones 16 + 4k ..). Against x's word k repeated in
 * every lane: SMULL and SMULL2 give the sixteen products as int16 (at most
 * 128 x 127), ADDP adds them in pairs (at most 2 x 16256: no overflow), and
 * SADALP adds each row's two pairs into its own int32 lane. Every row's
 * block sum is exact; the float steps are the reference's, lane = row.
 */
#include <arm_neon.h>
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "kernels/r16.h"
#include "neon_quant.h"

/* acc[q] (rows 4q .. 4q + 3) += each row's four weights of w[q] times xw. */
static inline void r16_mul_add(int32x4_t *acc, const int8x16_t *w, int8x16_t xw)
{
#pragma GCC unroll 4
    for (uint32_t q = 0; q < 4u; q++) {
        int16x8_t lo = vmull_s8(vget_low_s8(w[q]), vget_low_s8(xw));
        int16x8_t hi = vmull_high_s8(w[q], xw);
        acc[q] = vpadalq_s16(acc[q], vpaddq_s16(lo, hi));
    }
}

/* x word j (bytes 4j .. 4j + 3 of the block) in every lane. */
static inline int8x16_t x_word(const colibri_qblock *xb, uint32_t j)
{
    int32_t v;
    memcpy(&v, xb->q + 4u * j, sizeof v);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* One tile (block b of 16 rows) times T tokens' blocks: the 16 exact sums
 * of each (inlined into each pass, where q4 and T are constants). */
static inline __attribute__((always_inline)) void r16_tile_sums(const uint8_t *tile,
                                                                const colibri_qblock *const *xb,
                                                                int q4, uint32_t T,
                                                                int32x4_t sum[2][4])
{
    const uint8_t *c = tile + 2u * COLIBRI_R16_ROWS;
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            sum[t][q] = vdupq_n_s32(0);
        }
    }
    for (uint32_t k = 0; k < (q4 ? 4u : 8u); k++) {
        int8x16_t w[4], high[4];
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            uint8x16_t raw = vld1q_u8(c + 64u * k + 16u * q);
            if (q4) {
                int8x16_t eight = vdupq_n_s8(8);
                w[q] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);
                high[q] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
            } else {
                w[q] = vreinterpretq_s8_u8(raw);
            }
        }
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
            r16_mul_add(sum[t], w, x_word(xb[t], k));
            if (q4) {
                r16_mul_add(sum[t], high, x_word(xb[t], 4u + k));
            }
        }
    }
}

/* r16.h's pass, one for Q8 and one for Q4 (q4 a constant in each). */
static uint32_t r16_pass_q8(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                            const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                            uint32_t tokens_left, int q4)
{
    (void)q4;
    return neon_r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 0,
                         r16_tile_sums);
}

static uint32_t r16_pass_q4(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                            const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                            uint32_t tokens_left, int q4)
{
    (void)q4;
    return neon_r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 1,
                         r16_tile_sums);
}

void colibri_neon_matmat_q8r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 0, r16_pass_q8);
}

void colibri_neon_matmat_q4r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 1, r16_pass_q4);
}
