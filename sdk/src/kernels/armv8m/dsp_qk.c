/*
 * dsp_qk.c - the super-block product (matmat_qk, format 1.15,
 * docs/format.md 3.5) of the dsp table (the Arm DSP extension: SMLAD): the
 * contract is docs/kernels.md, "Super-blocks".
 *
 * `bits` at run time (the firmware's flash is small) and dsp.c's tile: two
 * rows by one token (decode) or two (prompts). A part of the levels (quant.h:
 * the format interleaves the blocks, element e of block j at byte e of its
 * chunk, bits (w j) % 8 on) gives four elements' fields a word: the word
 * rotated right by the field's shift and masked per byte; a high part's
 * word is rotated so that its field lands at bit L (2 or 4) and OR-ed in.
 * UXTB16 of that word and of it rotated by 8 make the 16-bit lanes of
 * elements 0, 2 and 1, 3 (levels < 64), SXTB16 the activations', and SMLAD
 * adds two exact products into the block's 32-bit sum; SADD16 adds the
 * activations into two 16-bit lanes (|sum| <= 16 * 127), once per token
 * and block for both rows. Then the reference's two steps on the FPU:
 * acc = fma(isum, (d * sc_j) * d_x, acc), acc = fma(-xsum, (dmin * m_j) * d_x,
 * acc). Words are loaded with memcpy (Armv7-M's LDR takes unaligned
 * addresses). Two instances of the word loop: with and without a high part.
 */
#include <arm_acle.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "quant.h"
#include "qtile.h"

#define INLINE static inline __attribute__((always_inline))

enum { SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK };

typedef struct qword2 {
    int32_t even, odd; /* elements 0, 2 and 1, 3 of four, as 16-bit lanes */
} qword2;

/* How block j's fields come out of a part's words (the same for every row
 * of a width): rotations and per-byte masks of the low and high parts. */
typedef struct qk_place {
    uint32_t low_ror, high_ror, low_mask, high_mask;
} qk_place;

/* A block's integer sums: isum[t][r] of row r and token t, xsum[t]. */
typedef struct qk_sums {
    int32_t isum[2][2], xsum[2];
} qk_sums;

static inline uint32_t load_word(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* v rotated right by s < 32 (one ROR). */
INLINE uint32_t ror(uint32_t v, uint32_t s)
{
    return v >> s | v << ((32u - s) & 31u);
}

INLINE qword2 split_signed(uint32_t v)
{
    int32_t odd;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(odd) : "r"(v));
    qword2 s = {(int32_t)__sxtb16((int8x4_t)v), odd};
    return s;
}

INLINE qword2 split_unsigned(uint32_t v)
{
    int32_t odd;
    __asm__("uxtb16 %0, %1, ror #8" : "=r"(odd) : "r"(v));
    qword2 s = {(int32_t)__uxtb16((int8x4_t)v), odd};
    return s;
}

INLINE int32_t smlad2(qword2 w, qword2 x, int32_t acc)
{
    return __smlad((int16x2_t)w.odd, (int16x2_t)x.odd,
                   __smlad((int16x2_t)w.even, (int16x2_t)x.even, acc));
}

/* Four levels (bytes) of a row: the low part's word at low, the high part's
 * at low + high_at. */
INLINE uint32_t level_word(const uint8_t *low, size_t high_at, const qk_place *p, int has_high)
{
    uint32_t v = ror(load_word(low), p->low_ror) & p->low_mask;
    if (has_high) {
        v |= ror(load_word(low + high_at), p->high_ror) & p->high_mask;
    }
    return v;
}

/* A block's sums: rows' low parts at l0, l1, tokens' q at q0, q1 (T). */
INLINE qk_sums block_sums(const uint8_t *l0, const uint8_t *l1, size_t high_at, const qk_place *p,
                          const int8_t *q0, const int8_t *q1, int has_high, uint32_t T)
{
    int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0, x0 = 0, x1 = 0;
#pragma GCC unroll 1
    for (uint32_t k = 0; k < COLIBRI_QBLOCK; k += 4u) {
        qword2 r0 = split_unsigned(level_word(l0 + k, high_at, p, has_high));
        qword2 r1 = split_unsigned(level_word(l1 + k, high_at, p, has_high));
        qword2 t0 = split_signed(load_word(q0 + k));
        s00 = smlad2(r0, t0, s00);
        s01 = smlad2(r1, t0, s01);
        x0 = (int32_t)__sadd16((int16x2_t)x0, __sadd16((int16x2_t)t0.even, (int16x2_t)t0.odd));
        if (T == 2u) {
            qword2 t1 = split_signed(load_word(q1 + k));
            s10 = smlad2(r0, t1, s10);
            s11 = smlad2(r1, t1, s11);
            x1 = (int32_t)__sadd16((int16x2_t)x1, __sadd16((int16x2_t)t1.even, (int16x2_t)t1.odd));
        }
    }
    qk_sums s = {{{s00, s01}, {s10, s11}},
                 {__smuad((int16x2_t)x0, (int16x2_t)0x00010001),
                  __smuad((int16x2_t)x1, (int16x2_t)0x00010001)}};
    return s;
}

/* A super-block's d and dmin as floats (quant.h's exact conversion; one
 * copy of it). */
static void __attribute__((noinline)) d_dmin(float dm[2], const uint8_t *sb)
{
    dm[0] = colibri_qblock_scale(sb);
    dm[1] = colibri_qblock_scale(sb + 2);
}

/* Block j's scale d * sc_j and min dmin * m_j (bytes 4 + j: sc_j |
 * (m_j & 3) << 6; byte 12 + j % 4: m_j >> 2, low nibble for j < 4). */
INLINE void scale_min(float sm[2], const uint8_t *sb, uint32_t j, float d, float dmin)
{
    uint32_t byte = sb[4u + j], top = ((uint32_t)sb[12u + (j & 3u)] >> (4u * (j >> 2))) & 0xFu;
    sm[0] = d * (float)(byte & 0x3Fu);
    sm[1] = dmin * (float)(byte >> 6 | top << 2);
}

INLINE float step(float acc, int32_t isum, int32_t xsum, const float sm[2], float dx)
{
    acc = colibri_fmaf((float)isum, sm[0] * dx, acc);
    return colibri_fmaf((float)-xsum, sm[1] * dx, acc);
}

/* Rows w0, w1 (rows of them real) by tokens x0, x1 (T) through every block. */
INLINE void qk_tile(float *out, size_t stride, const uint8_t *w0, const uint8_t *w1,
                    const colibri_qblock *x0, const colibri_qblock *x1, uint32_t nb, uint32_t bits,
                    uint32_t rows, int has_high, uint32_t T)
{
    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* a<token><row> */
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    size_t sb_bytes = COLIBRI_QK_BYTES(bits);
    float dm0[2] = {0.0f, 0.0f}, dm1[2] = {0.0f, 0.0f};
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t j = b % SUB;
        const uint8_t *sb0 = w0 + (b / SUB) * sb_bytes, *sb1 = w1 + (b / SUB) * sb_bytes;
        if (j == 0u) {
            d_dmin(dm0, sb0);
            d_dmin(dm1, sb1);
        }
        uint32_t low_at = 16u + 32u * (low * j / 8u);
        size_t high_at = 16u + 32u * low + 32u * (high * j / 8u) - low_at;
        qk_place p = {low * j % 8u, (high * j % 8u + 32u - low) % 32u,
                      ((1u << low) - 1u) * 0x01010101u, (((1u << high) - 1u) << low) * 0x01010101u};
        qk_sums s =
            block_sums(sb0 + low_at, sb1 + low_at, high_at, &p, x0[b].q, x1[b].q, has_high, T);
        float sm0[2], sm1[2];
        scale_min(sm0, sb0, j, dm0[0], dm0[1]);
        scale_min(sm1, sb1, j, dm1[0], dm1[1]);
        a00 = step(a00, s.isum[0][0], s.xsum[0], sm0, x0[b].d);
        a01 = step(a01, s.isum[0][1], s.xsum[0], sm1, x0[b].d);
        if (T == 2u) {
            a10 = step(a10, s.isum[1][0], s.xsum[1], sm0, x1[b].d);
            a11 = step(a11, s.isum[1][1], s.xsum[1], sm1, x1[b].d);
        }
    }
    colibri_qtile_store(out, stride, rows, T, a00, a01, a10, a11);
}

/* The instances: a high part or none, one token or two. */
static void qk_tile_low(float *out, size_t stride, const uint8_t *w0, const uint8_t *w1,
                        const colibri_qblock *x0, const colibri_qblock *x1, uint32_t nb,
                        uint32_t bits, uint32_t rows, uint32_t T)
{
    qk_tile(out, stride, w0, w1, x0, x1, nb, bits, rows, 0, T);
}

static void qk_tile_high(float *out, size_t stride, const uint8_t *w0, const uint8_t *w1,
                         const colibri_qblock *x0, const colibri_qblock *x1, uint32_t nb,
                         uint32_t bits, uint32_t rows, uint32_t T)
{
    qk_tile(out, stride, w0, w1, x0, x1, nb, bits, rows, 1, T);
}

void colibri_dsp_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                           uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = colibri_qk_row_bytes(cols, bits);
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t rows_here = rows - r >= 2u ? 2u : 1u;
        const uint8_t *w0 = w + r * row_bytes, *w1 = w0 + (rows_here - 1u) * row_bytes;
        for (uint32_t t = 0; t < n; t += 2u) {
            uint32_t T = n - t >= 2u ? 2u : 1u;
            const colibri_qblock *x0 = x + (size_t)t * nb, *x1 = x0 + (T - 1u) * nb;
            float *o = out + t * stride + r;
            if (bits == 2u || bits == 4u) {
                qk_tile_low(o, stride, w0, w1, x0, x1, nb, bits, rows_here, T);
            } else {
                qk_tile_high(o, stride, w0, w1, x0, x1, nb, bits, rows_here, T);
            }
        }
    }
}
