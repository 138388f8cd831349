/*
 * neon_quant.h - the quantized products of the AArch64 tables, shared by
 * neon.c (Advanced SIMD only: the Cortex-A72 of a Raspberry Pi 4) and
 * neondot.c (with the dot-product extension, SDOT: Cortex-A76 and later),
 * and neon_r16.c, which differ only in how one block's integer sums are
 * made (the isum or tile_sums function each passes in; all exact).
 *
 * A tile is four weight rows by T <= 2 tokens; lane r of token t's float
 * accumulator is the pair (row r, token t): per block it gets
 * acc = fma((float)isum, d_w * d_x, acc), the reference's steps
 * (docs/kernels.md). Rows past the matrix and tokens past n repeat the last
 * one; their lanes are not stored.
 */
#ifndef COLIBRI_KERNELS_NEON_QUANT_H
#define COLIBRI_KERNELS_NEON_QUANT_H

#include <arm_neon.h>

#include "colibri_compat.h"
#include "quant.h"

#define NEON_Q_INLINE static inline __attribute__((always_inline))

/* One block of four rows: int8 elements 0..15 and 16..31 of each. */
typedef struct neon_qrows {
    int8x16_t lo[4], hi[4];
} neon_qrows;

/* The four rows' exact sums with one token's block (x elements 0..15, 16..31). */
typedef int32x4_t (*neon_isum_fn)(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi);

/* Four int32x4 vectors of partial sums -> their four totals, vector r in lane r. */
NEON_Q_INLINE int32x4_t neon_isum4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d)
{
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

NEON_Q_INLINE neon_qrows neon_load_rows(const uint8_t *const *w, uint32_t b, int q4)
{
    neon_qrows v;
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        if (q4) { /* byte j: element j low, element j + 16 high; minus 8 */
            uint8x16_t raw = vld1q_u8(w[r] + b * COLIBRI_Q4_BLOCK_BYTES + 2u);
            int8x16_t eight = vdupq_n_s8(8);
            v.lo[r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);
            v.hi[r] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
        } else {
            const uint8_t *q = w[r] + b * COLIBRI_Q8_BLOCK_BYTES + 2u;
            v.lo[r] = vld1q_s8((const int8_t *)q);
            v.hi[r] = vld1q_s8((const int8_t *)q + 16);
        }
    }
    return v;
}

/* The four rows' block scales as floats (binary16 -> binary32 is exact):
 * each loaded into its lane, then one FCVTL. */
NEON_Q_INLINE float32x4_t neon_row_scales(const uint8_t *const *w, size_t offset)
{
    uint16x4_t h = vdup_n_u16(0);
    h = vld1_lane_u16((const uint16_t *)(const void *)(w[0] + offset), h, 0);
    h = vld1_lane_u16((const uint16_t *)(const void *)(w[1] + offset), h, 1);
    h = vld1_lane_u16((const uint16_t *)(const void *)(w[2] + offset), h, 2);
    h = vld1_lane_u16((const uint16_t *)(const void *)(w[3] + offset), h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* Four rows by T tokens (T a constant where this is inlined: 1 or 2, so the
 * accumulators and the block's rows stay in registers). */
NEON_Q_INLINE void neon_q_tile(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                               const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                               uint32_t tokens_left, int q4, uint32_t T, neon_isum_fn isum)
{
    const uint8_t *wr[4];
    const colibri_qblock *xt[2];
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    size_t block_bytes = q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES;
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        wr[r] = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes;
    }
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
        xt[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
    }
    for (uint32_t b = 0; b < nb; b++) {
        neon_qrows rows = neon_load_rows(wr, b, q4);
        float32x4_t dw = neon_row_scales(wr, b * block_bytes);
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
            const colibri_qblock *xb = xt[t] + b;
            int32x4_t s = isum(&rows, vld1q_s8(xb->q), vld1q_s8(xb->q + 16));
            float32x4_t scale = vmulq_n_f32(dw, xb->d);
            acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(s), scale);
        }
    }
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        float v[4];
        vst1q_f32(v, acc[t]);
        for (uint32_t r = 0; r < 4u && r < rows_left; r++) {
            out[t * stride + r] = v[r];
        }
    }
}

/* Tiles of four rows by one token (decode) or two (prompts), the rows
 * outside, so a tile's rows stay in cache while the tokens pass. */
NEON_Q_INLINE void neon_q_matmat(float *out, size_t stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 int q4, neon_isum_fn isum)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = (size_t)nb * (q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES);
    for (uint32_t r = 0; r < rows; r += 4u) {
        for (uint32_t t = 0; t < n; t += 2u) {
            float *o = out + t * stride + r;
            const colibri_qblock *xt = x + (size_t)t * nb;
            if (n == 1u) { /* (two copies: T a constant in each) */
                neon_q_tile(o, stride, w + r * row_bytes, row_bytes, xt, nb, rows - r, n - t, q4,
                            1u, isum);
            } else {
                neon_q_tile(o, stride, w + r * row_bytes, row_bytes, xt, nb, rows - r, n - t, q4,
                            2u, isum);
            }
        }
    }
}

/* ---- weights in groups of 16 rows (Q8_R16, Q4_R16) ------------------------
 * One group (rows_left of its 16 rows real) by T tokens (1 or 2), tile
 * after tile: tile_sums (the table's: each row's exact sum of the tile with
 * each token, lane = row; a tile's weights loaded and unpacked once for
 * both tokens) then the reference's float steps, lane = row; r16.h's pass.
 * q4 and T constants where this is inlined (each table has a pass for Q8
 * and one for Q4, each with a copy for one and for two tokens), the loops
 * unrolled: the sums stay in registers. */
typedef void (*neon_r16_sums_fn)(const uint8_t *tile, const colibri_qblock *const *xb, int q4,
                                 uint32_t T, int32x4_t sum[2][4]);

NEON_Q_INLINE void neon_r16_group(float *out, size_t stride, const uint8_t *group,
                                  size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                  uint32_t rows_left, int q4, uint32_t T,
                                  neon_r16_sums_fn tile_sums)
{
    float32x4_t acc[2][4];
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            acc[t][q] = vdupq_n_f32(0.0f);
        }
    }
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *tile = group + (size_t)b * tile_bytes;
        const colibri_qblock *xb[2] = {x + b, x + (size_t)(T - 1u) * nb + b};
        int32x4_t sum[2][4];
        tile_sums(tile, xb, q4, T, sum);
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            uint16x4_t h = vld1_u16((const uint16_t *)(const void *)(tile + 8u * q));
            float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(h));
#pragma GCC unroll 2
            for (uint32_t t = 0; t < T; t++) {
                float32x4_t scale = vmulq_n_f32(dw, xb[t]->d);
                acc[t][q] = vfmaq_f32(acc[t][q], vcvtq_f32_s32(sum[t][q]), scale);
            }
        }
    }
    for (uint32_t t = 0; t < T; t++) {
        float v[16];
        for (uint32_t q = 0; q < 4u; q++) {
            vst1q_f32(v + 4u * q, acc[t][q]);
        }
        for (uint32_t r = 0; r < 16u && r < rows_left; r++) {
            out[t * stride + r] = v[r];
        }
    }
}

/* r16.h's pass for one or two tokens: the group by the first tokens_left
 * (two copies, T a constant in each); returns the tokens it took. */
NEON_Q_INLINE uint32_t neon_r16_pass(float *out, size_t stride, const uint8_t *group,
                                     size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                     uint32_t rows_left, uint32_t tokens_left, int q4,
                                     neon_r16_sums_fn tile_sums)
{
    if (tokens_left >= 2u) {
        neon_r16_group(out, stride, group, tile_bytes, x, nb, rows_left, q4, 2u, tile_sums);
        return 2u;
    }
    neon_r16_group(out, stride, group, tile_bytes, x, nb, rows_left, q4, 1u, tile_sums);
    return 1u;
}

#endif
