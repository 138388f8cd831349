/*
 * neondot.c - the neon table with quantized products on the Armv8.2-A
 * dot-product extension (SDOT: four int8 products added into each int32
 * lane; Cortex-A76 and later, e.g. a Raspberry Pi 5 or a Jetson Orin, not
 * the Pi 4's Cortex-A72). Its fp32 slots are neon.c's (built with it,
 * kernels/tables.mk; kernels/borrowed.h). Only the functions here carry the
 * extension (COLIBRI_TARGET_DOTPROD, colibri_compat.h); the Linux port runs
 * the table only where the kernel reports it (HWCAP_ASIMDDP,
 * ports/linux/colibri_linux_kernels.c); a board names it only for a CPU that
 * has it.
 */
#include <arm_neon.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "kernels/r16.h"
#include "neon_quant.h"

#define DOTPROD COLIBRI_TARGET_DOTPROD

/* One block's sums of four rows by one token: two SDOTs per row, exact. */
DOTPROD static inline int32x4_t row_isum_dot(int8x16_t wlo, int8x16_t whi, int8x16_t xlo,
                                             int8x16_t xhi)
{
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), wlo, xlo), whi, xhi);
}

DOTPROD static inline __attribute__((always_inline)) int32x4_t
isum_dot(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi)
{
    return neon_isum4(
        row_isum_dot(w->lo[0], w->hi[0], xlo, xhi), row_isum_dot(w->lo[1], w->hi[1], xlo, xhi),
        row_isum_dot(w->lo[2], w->hi[2], xlo, xhi), row_isum_dot(w->lo[3], w->hi[3], xlo, xhi));
}

DOTPROD static void colibri_neondot_matmat_q8(float *out, size_t stride, const uint8_t *w,
                                              const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                              uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 0, isum_dot);
}

DOTPROD static void colibri_neondot_matmat_q4(float *out, size_t stride, const uint8_t *w,
                                              const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                              uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 1, isum_dot);
}

/* ---- weights in groups of 16 rows (Q8_R16, Q4_R16: colibri.h) ---------
 * A tile's 64-byte chunk k is four registers of four rows each, lane = row,
 * four weights of that row per lane (Q8: elements 4k .. 4k + 3; Q4: the
 * low nibbles those, the high ones 16 + 4k ..): one SDOT by element (x's
 * word k) adds four products into each row's own lane, so no pairwise sums
 * are left; the float steps are the reference's, lane = row. */
/* Chunk k's weights for x words j (w) and, Q4 only, j + 4 (w_high). */
DOTPROD static inline void r16_chunk(const uint8_t *chunk, int q4, int8x16_t *w, int8x16_t *w_high)
{
#pragma GCC unroll 4
    for (uint32_t q = 0; q < 4u; q++) {
        if (q4) {
            uint8x16_t raw = vld1q_u8(chunk + 16u * q);
            int8x16_t eight = vdupq_n_s8(8);
            w[q] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);
            w_high[q] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
        } else {
            w[q] = vld1q_s8((const int8_t *)(chunk + 16u * q));
        }
    }
}

/* acc[q] += the dot of each lane of w[q] with x word `lane` of xv. */
#define R16_SDOT(acc, w, xv, lane)                                                                 \
    do {                                                                                           \
        _Pragma("GCC unroll 4") for (uint32_t q_ = 0; q_ < 4u; q_++)                               \
        {                                                                                          \
            (acc)[q_] = vdotq_laneq_s32((acc)[q_], (w)[q_], (xv), (lane));                         \
        }                                                                                          \
    } while (0)

/* Chunk k of a Q8 tile (x word `lane` of x0 or x1: xv) for each token; of
 * a Q4 tile (x0 and x1 word k). The chunk is loaded once for the tokens. */
#define R16_Q8_CHUNK(sum, c, xv, k, lane, T)                                                       \
    do {                                                                                           \
        int8x16_t w_[4], unused_[4];                                                               \
        r16_chunk((c) + 64u * (k), 0, w_, unused_);                                                \
        _Pragma("GCC unroll 2") for (uint32_t t_ = 0; t_ < (T); t_++)                              \
        {                                                                                          \
            R16_SDOT(sum[t_], w_, xv[t_], lane);                                                   \
        }                                                                                          \
    } while (0)
#define R16_Q4_CHUNK(sum, c, x0, x1, k, T)                                                         \
    do {                                                                                           \
        int8x16_t w_[4], high_[4];                                                                 \
        r16_chunk((c) + 64u * (k), 1, w_, high_);                                                  \
        _Pragma("GCC unroll 2") for (uint32_t t_ = 0; t_ < (T); t_++)                              \
        {                                                                                          \
            R16_SDOT(sum[t_], w_, x0[t_], k);                                                      \
            R16_SDOT(sum[t_], high_, x1[t_], k);                                                   \
        }                                                                                          \
    } while (0)

/* One tile (block b of 16 rows) times T tokens' blocks: the 16 exact sums
 * of each (inlined into each pass, where q4 and T are constants). */
DOTPROD static inline __attribute__((always_inline)) void
r16_tile_sums(const uint8_t *tile, const colibri_qblock *const *xb, int q4, uint32_t T,
              int32x4_t sum[2][4])
{
    int8x16_t x0[2], x1[2];
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
        x0[t] = vld1q_s8(xb[t]->q);
        x1[t] = vld1q_s8(xb[t]->q + 16);
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            sum[t][q] = vdupq_n_s32(0);
        }
    }
    const uint8_t *c = tile + 2u * COLIBRI_R16_ROWS;
    if (q4) { /* chunk k: elements 4k.. (x0 word k) and 16 + 4k.. (x1 word k) */
        R16_Q4_CHUNK(sum, c, x0, x1, 0, T);
        R16_Q4_CHUNK(sum, c, x0, x1, 1, T);
        R16_Q4_CHUNK(sum, c, x0, x1, 2, T);
        R16_Q4_CHUNK(sum, c, x0, x1, 3, T);
        return;
    }
    R16_Q8_CHUNK(sum, c, x0, 0, 0, T);
    R16_Q8_CHUNK(sum, c, x0, 1, 1, T);
    R16_Q8_CHUNK(sum, c, x0, 2, 2, T);
    R16_Q8_CHUNK(sum, c, x0, 3, 3, T);
    R16_Q8_CHUNK(sum, c, x1, 4, 0, T);
    R16_Q8_CHUNK(sum, c, x1, 5, 1, T);
    R16_Q8_CHUNK(sum, c, x1, 6, 2, T);
    R16_Q8_CHUNK(sum, c, x1, 7, 3, T);
}

/* r16.h's pass, one for Q8 and one for Q4 (q4 a constant in each). */
DOTPROD static uint32_t r16_pass_q8(float *out, size_t stride, const uint8_t *group,
                                    size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                    uint32_t rows_left, uint32_t tokens_left, int q4)
{
    (void)q4;
    return neon_r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 0,
                         r16_tile_sums);
}

DOTPROD static uint32_t r16_pass_q4(float *out, size_t stride, const uint8_t *group,
                                    size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                    uint32_t rows_left, uint32_t tokens_left, int q4)
{
    (void)q4;
    return neon_r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 1,
                         r16_tile_sums);
}

DOTPROD static void colibri_neondot_matmat_q8r16(float *out, size_t stride, const uint8_t *w,
                                                 const colibri_qblock *x, uint32_t rows,
                                                 uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 0, r16_pass_q8);
}

DOTPROD static void colibri_neondot_matmat_q4r16(float *out, size_t stride, const uint8_t *w,
                                                 const colibri_qblock *x, uint32_t rows,
                                                 uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 1, r16_pass_q4);
}

/* softmax is the reference's (NULL), as in neon. */
const colibri_kernels colibri_kernels_neondot = {
    .name = "neondot",
    .dot = colibri_neon_dot,
    .matvec_f32 = colibri_neon_matvec_f32,
    .rmsnorm = colibri_neon_rmsnorm,
    .add = colibri_neon_add,
    .add_scaled = colibri_neon_add_scaled,
    .rope_apply = colibri_neon_rope_apply,
    .swiglu = colibri_neon_swiglu,
    .matmat_f32 = colibri_neon_matmat_f32,
    .matmat_q8 = colibri_neondot_matmat_q8,
    .matmat_q4 = colibri_neondot_matmat_q4,
    .matmat_q8r16 = colibri_neondot_matmat_q8r16,
    .matmat_q4r16 = colibri_neondot_matmat_q4r16,
    .matmat_qk = colibri_neondot_matmat_qk,       /* neon_qk.c */
    .matmat_qkr16 = colibri_neondot_matmat_qkr16, /* neon_qkr16.c */
};
