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
 *
 * Super-blocks in groups of 16 rows (matmat_qkr16, format 1.16, 3.6) go
 * through the same instances: a row's four level bytes of a word are side
 * by side in an R16 tile too, 64 bytes from its next word instead of 4, and
 * its d, dmin, scales and mins 16 times as far apart (qk_rows says where).
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

/* Where a tile's two rows are: row k's first super-block has d at d[k]
 * (dmin 2g bytes on), its scale and min bytes (byte 4 of 3.5 on) at sc[k],
 * g bytes apart, and its level words (bytes 16 + 4u ..) at lv[k], 4g bytes
 * apart; its next super-block is step bytes on. By row g = 1, in an R16
 * tile g = 16 (docs/format.md 3.6). */
typedef struct qk_rows {
    const uint8_t *d[2], *sc[2], *lv[2];
    size_t step;
    uint32_t g;
} qk_rows;

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

/* A block's sums: rows' low parts at l0, l1 (words gap bytes apart),
 * tokens' q at q0, q1 (T). Row 1's words are read at l0 + l1_at (one
 * register fewer in the loop). */
INLINE qk_sums block_sums(const uint8_t *l0, const uint8_t *l1, size_t high_at, uint32_t gap,
                          const qk_place *p, const int8_t *q0, const int8_t *q1, int has_high,
                          uint32_t T)
{
    int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0, x0 = 0, x1 = 0;
    ptrdiff_t l1_at = l1 - l0;
#pragma GCC unroll 1
    for (uint32_t k = 0; k < COLIBRI_QBLOCK; k += 4u, l0 += gap) {
        qword2 r0 = split_unsigned(level_word(l0, high_at, p, has_high));
        qword2 r1 = split_unsigned(level_word(l0 + l1_at, high_at, p, has_high));
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

/* A super-block's d and dmin (2g bytes on) as floats (quant.h's exact
 * conversion; one copy of it). */
static void __attribute__((noinline)) d_dmin(float dm[2], const uint8_t *d_at, uint32_t g)
{
    dm[0] = colibri_qblock_scale(d_at);
    dm[1] = colibri_qblock_scale(d_at + 2u * g);
}

/* Block j's scale d * sc_j and min dmin * m_j (from sc, bytes g apart:
 * byte 4 + j: sc_j | (m_j & 3) << 6; byte 12 + j % 4: m_j >> 2, low nibble
 * for j < 4). */
INLINE void scale_min(float sm[2], const uint8_t *sc, uint32_t g, uint32_t j, float d, float dmin)
{
    uint32_t byte = sc[g * j];
    uint32_t top = ((uint32_t)sc[g * (8u + (j & 3u))] >> (4u * (j >> 2))) & 0xFu;
    sm[0] = d * (float)(byte & 0x3Fu);
    sm[1] = dmin * (float)(byte >> 6 | top << 2);
}

INLINE float step(float acc, int32_t isum, int32_t xsum, const float sm[2], float dx)
{
    acc = colibri_fmaf((float)isum, sm[0] * dx, acc);
    return colibri_fmaf((float)-xsum, sm[1] * dx, acc);
}

/* Rows w (rows of them real) by tokens x0, x1 (T) through every block; a
 * 32-byte level chunk is 8 level words. */
INLINE void qk_tile(float *out, size_t stride, const qk_rows *w, const colibri_qblock *x0,
                    const colibri_qblock *x1, uint32_t nb, uint32_t bits, uint32_t rows,
                    int has_high, uint32_t T)
{
    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* a<token><row> */
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low, g = w->g, chunk = 32u * g;
    float dm0[2] = {0.0f, 0.0f}, dm1[2] = {0.0f, 0.0f};
    size_t at = 0; /* the super-block's bytes past the first one's */
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t j = b % SUB;
        if (j == 0u) {
            at = (b / SUB) * w->step;
            d_dmin(dm0, w->d[0] + at, g);
            d_dmin(dm1, w->d[1] + at, g);
        }
        uint32_t low_at = chunk * (low * j / 8u);
        size_t high_at = chunk * (low + high * j / 8u) - low_at;
        qk_place p = {low * j % 8u, (high * j % 8u + 32u - low) % 32u,
                      ((1u << low) - 1u) * 0x01010101u, (((1u << high) - 1u) << low) * 0x01010101u};
        const uint8_t *l0 = w->lv[0] + at + low_at, *l1 = w->lv[1] + at + low_at;
        qk_sums s = block_sums(l0, l1, high_at, 4u * g, &p, x0[b].q, x1[b].q, has_high, T);
        float sm0[2], sm1[2];
        scale_min(sm0, w->sc[0] + at, g, j, dm0[0], dm0[1]);
        scale_min(sm1, w->sc[1] + at, g, j, dm1[0], dm1[1]);
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
static void qk_tile_low(float *out, size_t stride, const qk_rows *w, const colibri_qblock *x0,
                        const colibri_qblock *x1, uint32_t nb, uint32_t bits, uint32_t rows,
                        uint32_t T)
{
    qk_tile(out, stride, w, x0, x1, nb, bits, rows, 0, T);
}

static void qk_tile_high(float *out, size_t stride, const qk_rows *w, const colibri_qblock *x0,
                         const colibri_qblock *x1, uint32_t nb, uint32_t bits, uint32_t rows,
                         uint32_t T)
{
    qk_tile(out, stride, w, x0, x1, nb, bits, rows, 1, T);
}

/* Row i of the tile at t (3.6; by row: t the super-block, i = 0, g = 1). */
static void qk_row_at(qk_rows *w, int k, const uint8_t *t, uint32_t i, uint32_t g)
{
    w->d[k] = t + 2u * i, w->sc[k] = t + 4u * g + i, w->lv[k] = t + 16u * g + 4u * i;
}

/* Both layouts: rows in pairs (of one R16 group: 16 is even), g = 1 by row
 * (a row of super-blocks), 16 in groups (a group of tiles). */
static void qk_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits, uint32_t g)
{
    uint32_t nb = colibri_qblocks(cols);
    qk_rows tile = {.step = (size_t)g * COLIBRI_QK_BYTES(bits), .g = g};
    size_t rows_bytes = (nb + SUB - 1u) / SUB * tile.step; /* g rows' */
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t r1 = rows - r >= 2u ? r + 1u : r;
        qk_row_at(&tile, 0, w + r / g * rows_bytes, r % g, g);
        qk_row_at(&tile, 1, w + r1 / g * rows_bytes, r1 % g, g);
        for (uint32_t t = 0; t < n; t += 2u) {
            uint32_t T = n - t >= 2u ? 2u : 1u;
            const colibri_qblock *x0 = x + (size_t)t * nb, *x1 = x0 + (T - 1u) * nb;
            if (bits == 2u || bits == 4u) { /* direct calls: no pointer for the stack bound */
                qk_tile_low(out + t * stride + r, stride, &tile, x0, x1, nb, bits, r1 - r + 1u, T);
            } else {
                qk_tile_high(out + t * stride + r, stride, &tile, x0, x1, nb, bits, r1 - r + 1u, T);
            }
        }
    }
}

void colibri_dsp_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                           uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    qk_matmat(out, stride, w, x, rows, cols, n, bits, 1u);
}

void colibri_dsp_matmat_qkr16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                              uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    qk_matmat(out, stride, w, x, rows, cols, n, bits, COLIBRI_QGROUP_ROWS);
}
