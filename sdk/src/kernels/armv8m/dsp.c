/*
 * dsp.c - quantized products on the Arm DSP extension (Armv7E-M and
 * Armv8-M Mainline with DSP: Cortex-M4, M7, M33, M55; the STM32H7 boards'
 * Cortex-M7), whose SMLAD adds two 16 x 16-bit products to a 32-bit sum in
 * one instruction. Only matmat_q8/q4: the fp32 slots are the reference's
 * (NULL). Built for such a CPU only (a board's `kernels`); a firmware fixes
 * its table at compile time.
 *
 * Four int8 elements in a word: SXTB16 gives elements 0 and 2 as two 16-bit
 * lanes, SXTB16 of the word rotated by 8 elements 1 and 3; SMLAD of the
 * weights' and the activations' lanes adds two exact products (|w x| <=
 * 128 * 127) into the block's 32-bit sum. A tile is two rows by one or two
 * tokens: each weight word is loaded and split once for both tokens. Then
 * acc = fma((float)isum, d_w * d_x, acc) on the FPU, the reference's steps
 * (docs/kernels.md). Words are loaded with memcpy (blocks are 2-byte
 * aligned; Armv7-M's LDR takes unaligned addresses).
 */
#include <arm_acle.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "qtile.h"

typedef struct qword2 {
    int32_t even, odd; /* elements 0, 2 and 1, 3 of four, as 16-bit lanes */
} qword2;

static inline uint32_t load_word(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* SXTB16 of v and of v rotated by 8 (one instruction: the rotation is an
 * operand of SXTB16, which the ACLE intrinsic does not expose). */
#define INLINE static inline __attribute__((always_inline))

INLINE qword2 split(uint32_t v)
{
    int32_t odd;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(odd) : "r"(v));
    qword2 s = {(int32_t)__sxtb16((int8x4_t)v), odd};
    return s;
}

/* Word j (elements 4j .. 4j+3) of a block's 32 weights as signed bytes. */
INLINE uint32_t weight_word(const uint8_t *block, int q4, uint32_t j)
{
    if (!q4) {
        return load_word(block + 2u + 4u * j);
    }
    /* Q4: byte i holds element i (low nibble) and i + 16 (high); minus 8 */
    uint32_t v = load_word(block + 2u + 4u * (j % 4u));
    v = j < 4u ? v & 0x0F0F0F0Fu : (v >> 4) & 0x0F0F0F0Fu;
    return (uint32_t)__ssub8((int8x4_t)v, (int8x4_t)0x08080808);
}

INLINE int32_t smlad2(qword2 w, qword2 x, int32_t acc)
{
    return __smlad((int16x2_t)w.odd, (int16x2_t)x.odd,
                   __smlad((int16x2_t)w.even, (int16x2_t)x.even, acc));
}

/* Rows w0, w1 by tokens x0, x1 (T of them) through every block. */
INLINE void q_tile_dsp(float *out, size_t stride, const uint8_t *w0, const uint8_t *w1,
                       const colibri_qblock *x0, const colibri_qblock *x1, uint32_t nb, int q4,
                       uint32_t rows, uint32_t T)
{
    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* a<token><row> */
    size_t step = q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES;
    for (uint32_t b = 0; b < nb; b++, w0 += step, w1 += step) {
        int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
#pragma GCC unroll 8
        for (uint32_t j = 0; j < 8u; j++) {
            qword2 r0 = split(weight_word(w0, q4, j)), r1 = split(weight_word(w1, q4, j));
            qword2 t0 = split(load_word(x0[b].q + 4u * j));
            s00 = smlad2(r0, t0, s00);
            s01 = smlad2(r1, t0, s01);
            if (T == 2u) {
                qword2 t1 = split(load_word(x1[b].q + 4u * j));
                s10 = smlad2(r0, t1, s10);
                s11 = smlad2(r1, t1, s11);
            }
        }
        float d0 = colibri_qblock_scale(w0), d1 = colibri_qblock_scale(w1);
        a00 = colibri_fmaf((float)s00, d0 * x0[b].d, a00);
        a01 = colibri_fmaf((float)s01, d1 * x0[b].d, a01);
        if (T == 2u) {
            a10 = colibri_fmaf((float)s10, d0 * x1[b].d, a10);
            a11 = colibri_fmaf((float)s11, d1 * x1[b].d, a11);
        }
    }
    colibri_qtile_store(out, stride, rows, T, a00, a01, a10, a11);
}

INLINE void q_matmat_dsp(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                         uint32_t rows, uint32_t cols, uint32_t n, int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = (size_t)nb * (q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES);
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t rows_here = rows - r >= 2u ? 2u : 1u;
        const uint8_t *w0 = w + r * row_bytes, *w1 = w0 + (rows_here - 1u) * row_bytes;
        for (uint32_t t = 0; t < n; t += 2u) {
            uint32_t T = n - t >= 2u ? 2u : 1u;
            const colibri_qblock *x0 = x + (size_t)t * nb;
            if (T == 2u) { /* (two copies: T a constant in each) */
                q_tile_dsp(out + t * stride + r, stride, w0, w1, x0, x0 + nb, nb, q4, rows_here,
                           2u);
            } else {
                q_tile_dsp(out + t * stride + r, stride, w0, w1, x0, x0, nb, q4, rows_here, 1u);
            }
        }
    }
}

static void colibri_dsp_matmat_q8(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat_dsp(out, stride, w, x, rows, cols, n, 0);
}

static void colibri_dsp_matmat_q4(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat_dsp(out, stride, w, x, rows, cols, n, 1);
}

const colibri_kernels colibri_kernels_dsp = {
    .name = "dsp",
    .matmat_q8 = colibri_dsp_matmat_q8,
    .matmat_q4 = colibri_dsp_matmat_q4,
};
