/*
 * avx512vnni.c - the avx512 table with quantized products on AVX-512 VNNI
 * (vpdpbusd: four u8 x s8 products added into each int32 lane, one
 * instruction). Its fp32 slots are avx512.c's (kernels/borrowed.h). Only
 * built for x86-64, with avx512.c and avx2.c (kernels/tables.mk); a port runs it only
 * on a CPU with AVX-512F, BW, VNNI, FMA and F16C
 * (ports/linux/colibri_linux_kernels.c).
 *
 * A tile is R weight rows by T tokens, R * T = 16 (row, token) pairs, pair
 * p = t * R + r in lane p of one float accumulator: per block each lane gets
 * acc = fma((float)isum, d_w * d_x, acc), the reference's steps
 * (docs/kernels.md). One zmm holds two blocks of a pair (two times 32
 * bytes). The integer sums are exact: vpdpbusd takes an unsigned operand, so
 * Q8 weights go in as w + 128 (w xor 0x80) and the accumulator starts at
 * -128 * (sum of the x in its four bytes); Q4 nibbles go in as they are, the
 * accumulator starting at -8 * that sum. Rows past the matrix and tokens past
 * n repeat the last one; their lanes are not stored.
 */
#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "avx512vnni.h"
#include "kernels/borrowed.h"

VNNI static INLINE void q_tile(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                               const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                               uint32_t tokens_left, int q4, uint32_t R, uint32_t T)
{
    qtile q = tile_at(w, row_bytes, x, nb, rows_left, tokens_left, R, T);
    uint32_t block_bytes = q4 ? 18u : 34u, b = 0;
    __m512 acc = _mm512_setzero_ps();
    __m512i first, second;
    for (; b + 2u <= nb; b += 2u) {
        pair_blocks(&q, b, 1, q4, R, T, &first, &second);
        __m512 s0 = tile_scales(&q, b, block_bytes, R, T);
        __m512 s1 = tile_scales(&q, b + 1u, block_bytes, R, T);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(first), s0, acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(second), s1, acc);
    }
    if (b < nb) {
        pair_blocks(&q, b, 0, q4, R, T, &first, &second);
        __m512 s0 = tile_scales(&q, b, block_bytes, R, T);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(first), s0, acc);
    }
    tile_store(out, stride, acc, rows_left, tokens_left, R, T);
}

/* Decode (n = 1): tiles of sixteen rows; two or three tokens: eight rows by
 * two; Q4 from twelve tokens (where the unpacking pays, measured with
 * colibri-qbench): strips of sixteen rows (above); else four rows
 * by four tokens, the rows outside, so a tile's rows stay in cache while the
 * tokens pass. */
VNNI static INLINE void q_matmat(float *out, size_t stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = (size_t)nb * (q4 ? 18u : 34u);
    if (n == 1u && nb <= 2u * DECODE_PAIRS) {
        colibri_avx512vnni_decode_rows(out, w, row_bytes, x, rows, nb, q4);
    } else if (n == 1u) {
        for (uint32_t r = 0; r < rows; r += 16u) {
            q_tile(out + r, stride, w + r * row_bytes, row_bytes, x, nb, rows - r, 1u, q4, 16u, 1u);
        }
    } else if (n < 4u) {
        for (uint32_t r = 0; r < rows; r += 8u) {
            for (uint32_t t = 0; t < n; t += 2u) {
                q_tile(out + t * stride + r, stride, w + r * row_bytes, row_bytes,
                       x + (size_t)t * nb, nb, rows - r, n - t, q4, 8u, 2u);
            }
        }
    } else if (q4 && n >= STRIP_MIN_TOKENS) {
        for (uint32_t r = 0; r < rows; r += STRIP) {
            colibri_avx512vnni_q4_strip(out + r, stride, w + r * row_bytes, row_bytes, x, nb,
                                        rows - r, n);
        }
    } else {
        for (uint32_t r = 0; r < rows; r += 4u) {
            for (uint32_t t = 0; t < n; t += 4u) {
                q_tile(out + t * stride + r, stride, w + r * row_bytes, row_bytes,
                       x + (size_t)t * nb, nb, rows - r, n - t, q4, 4u, 4u);
            }
        }
    }
}

VNNI static void colibri_avx512vnni_matmat_q8(float *out, size_t stride, const uint8_t *w,
                                              const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                              uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 0);
}

VNNI static void colibri_avx512vnni_matmat_q4(float *out, size_t stride, const uint8_t *w,
                                              const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                              uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 1);
}

/* softmax is the reference's (NULL), as in avx512. */
const colibri_kernels colibri_kernels_avx512vnni = {
    .name = "avx512vnni",
    .dot = colibri_avx512_dot,
    .swiglu = colibri_avx512_swiglu,
    .softmax = colibri_avx2_softmax,
    .matvec_f32 = colibri_avx512_matvec_f32,
    .rmsnorm = colibri_avx512_rmsnorm,
    .add = colibri_avx512_add,
    .add_scaled = colibri_avx512_add_scaled,
    .rope_apply = colibri_avx512_rope_apply,
    .matmat_f32 = colibri_avx512_matmat_f32,
    .matmat_q8 = colibri_avx512vnni_matmat_q8,
    .matmat_q4 = colibri_avx512vnni_matmat_q4,
    .matmat_q8r16 = colibri_avx512vnni_matmat_q8r16,
    .matmat_q4r16 = colibri_avx512vnni_matmat_q4r16,
    .matmat_qk = colibri_avx2_matmat_qk,
    .matmat_qkr16 = colibri_avx512vnni_matmat_qkr16,
};
