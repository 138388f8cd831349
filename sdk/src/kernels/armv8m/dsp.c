/*
 * dsp.c - quantized products on the Arm DSP extension (Armv7E-M and
 * Armv8-M Mainline with DSP: Cortex-M4, M7, M33, M55; the STM32H7 boards'
 * Cortex-M7), whose SMLAD adds two 16 x 16-bit products to a 32-bit sum in
 * one instruction. Only the quantized products (matmat_q8/q4 and their
 * row-group forms q8r16/q4r16): the fp32 slots are the reference's (NULL).
 * Built for such a CPU only (a board's `kernels`); a firmware fixes its
 * table at compile time.
 *
 * Four int8 elements in a word: SXTB16 gives elements 0 and 2 as two 16-bit
 * lanes, SXTB16 of the word rotated by 8 elements 1 and 3; SMLAD of the
 * weights' and the activations' lanes adds two exact products (|w x| <=
 * 128 * 127) into the block's 32-bit sum. A tile is two rows by one or two
 * tokens: each weight word is loaded and split once for both tokens. Then
 * acc = fma((float)isum, d_w * d_x, acc) on the FPU, the reference's steps
 * (docs/kernels.md). Words are loaded with memcpy (blocks are 2-byte
 * aligned; Armv7-M's LDR takes unaligned addresses).
 *
 * Rows in groups of 16 (Q8_R16, Q4_R16: colibri.h, docs/format.md 3.4) keep
 * a row's four bytes of each 64-byte chunk side by side: the same words,
 * 64 bytes apart instead of 4, and the scales at the tile's start. The same
 * tile reads them (qrows says where), instruction for instruction.
 */
#include <arm_acle.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "kernels/r16.h"
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

/* Word j (elements 4j .. 4j+3) of a block's 32 weights as signed bytes;
 * the block's words are gap bytes apart (4 by row, 64 in a row group). */
INLINE uint32_t weight_word(const uint8_t *quants, int q4, uint32_t gap, uint32_t j)
{
    if (!q4) {
        return load_word(quants + gap * j);
    }
    /* Q4: byte i holds element i (low nibble) and i + 16 (high); minus 8 */
    uint32_t v = load_word(quants + gap * (j % 4u));
    v = j < 4u ? v & 0x0F0F0F0Fu : (v >> 4) & 0x0F0F0F0Fu;
    return (uint32_t)__ssub8((int8x4_t)v, (int8x4_t)0x08080808);
}

INLINE int32_t smlad2(qword2 w, qword2 x, int32_t acc)
{
    return __smlad((int16x2_t)w.odd, (int16x2_t)x.odd,
                   __smlad((int16x2_t)w.even, (int16x2_t)x.even, acc));
}

/* Where a tile's two rows are: block b of row i has its binary16 scale at
 * scale[i] + b * step, its first word at quants[i] + b * step and the
 * others gap bytes apart. */
typedef struct qrows {
    const uint8_t *scale[2], *quants[2];
    size_t step;
    uint32_t gap;
} qrows;

/* Rows w by tokens x0, x1 (T of them) through every block. */
INLINE void q_tile_dsp(float *out, size_t stride, qrows w, const colibri_qblock *x0,
                       const colibri_qblock *x1, uint32_t nb, int q4, uint32_t rows, uint32_t T)
{
    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* a<token><row> */
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *w0 = w.quants[0] + b * w.step, *w1 = w.quants[1] + b * w.step;
        int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
#pragma GCC unroll 8
        for (uint32_t j = 0; j < 8u; j++) {
            qword2 r0 = split(weight_word(w0, q4, w.gap, j));
            qword2 r1 = split(weight_word(w1, q4, w.gap, j));
            qword2 t0 = split(load_word(x0[b].q + 4u * j));
            s00 = smlad2(r0, t0, s00);
            s01 = smlad2(r1, t0, s01);
            if (T == 2u) {
                qword2 t1 = split(load_word(x1[b].q + 4u * j));
                s10 = smlad2(r0, t1, s10);
                s11 = smlad2(r1, t1, s11);
            }
        }
        float d0 = colibri_qblock_scale(w.scale[0] + b * w.step);
        float d1 = colibri_qblock_scale(w.scale[1] + b * w.step);
        a00 = colibri_fmaf((float)s00, d0 * x0[b].d, a00);
        a01 = colibri_fmaf((float)s01, d1 * x0[b].d, a01);
        if (T == 2u) {
            a10 = colibri_fmaf((float)s10, d0 * x1[b].d, a10);
            a11 = colibri_fmaf((float)s11, d1 * x1[b].d, a11);
        }
    }
    colibri_qtile_store(out, stride, rows, T, a00, a01, a10, a11);
}

/* The tile w by every token, two at a time. */
INLINE void q_tokens_dsp(float *out, size_t stride, qrows w, const colibri_qblock *x, uint32_t nb,
                         int q4, uint32_t rows, uint32_t n)
{
    for (uint32_t t = 0; t < n; t += 2u) {
        const colibri_qblock *x0 = x + (size_t)t * nb;
        if (n - t >= 2u) { /* (two copies: T a constant in each) */
            q_tile_dsp(out + t * stride, stride, w, x0, x0 + nb, nb, q4, rows, 2u);
        } else {
            q_tile_dsp(out + t * stride, stride, w, x0, x0, nb, q4, rows, 1u);
        }
    }
}

INLINE void q_matmat_dsp(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                         uint32_t rows, uint32_t cols, uint32_t n, int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t step = q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES;
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t rows_here = rows - r >= 2u ? 2u : 1u;
        const uint8_t *w0 = w + r * nb * step, *w1 = w0 + (rows_here - 1u) * nb * step;
        qrows tile = {{w0, w1}, {w0 + 2, w1 + 2}, step, 4u};
        q_tokens_dsp(out + r, stride, tile, x, nb, q4, rows_here, n);
    }
}

/* r16.h's pass: one group's rows, two by two, by every token. */
static uint32_t r16_pass(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                         const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                         uint32_t tokens_left, int q4)
{
    uint32_t rows = rows_left < COLIBRI_R16_ROWS ? rows_left : COLIBRI_R16_ROWS;
    const uint8_t *chunks = group + 2u * COLIBRI_R16_ROWS;
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t r1 = rows - r >= 2u ? r + 1u : r;
        qrows tile = {{group + 2u * r, group + 2u * r1},
                      {chunks + 4u * r, chunks + 4u * r1},
                      tile_bytes,
                      64u};
        if (q4) {
            q_tokens_dsp(out + r, stride, tile, x, nb, 1, r1 - r + 1u, tokens_left);
        } else {
            q_tokens_dsp(out + r, stride, tile, x, nb, 0, r1 - r + 1u, tokens_left);
        }
    }
    return tokens_left;
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

static void colibri_dsp_matmat_q8r16(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 0, r16_pass);
}

static void colibri_dsp_matmat_q4r16(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 1, r16_pass);
}

const colibri_kernels colibri_kernels_dsp = {
    .name = "dsp",
    .matmat_q8 = colibri_dsp_matmat_q8,
    .matmat_q4 = colibri_dsp_matmat_q4,
    .matmat_q8r16 = colibri_dsp_matmat_q8r16,
    .matmat_q4r16 = colibri_dsp_matmat_q4r16,
    .matmat_qk = colibri_dsp_matmat_qk,
    .matmat_qkr16 = colibri_dsp_matmat_qkr16,
};
