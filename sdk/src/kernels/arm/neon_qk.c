/*
 * neon_qk.c - the super-block product (matmat_qk, format 1.15, docs/format.md
 * 3.5) of the AArch64 tables: neon's with widening multiplies (any AArch64
 * CPU), neondot's with SDOT (COLIBRI_TARGET_DOTPROD on those functions only,
 * as in neondot.c). The contract: docs/kernels.md, "Super-blocks".
 *
 * Tiles of four rows by T <= 2 tokens, as neon_quant.h's: lane r of token
 * t's float accumulator is the pair (row r, token t). Per super-block, the
 * four rows' 16-byte heads are transposed to one row a lane and the eight
 * blocks' scales d * sc_j and mins dmin * m_j made lane = row (exact
 * products). Per block, each row's 32 levels are unpacked to bytes: the
 * format interleaves the eight blocks (quant.h), so a part's 32-byte chunk
 * is loaded at the first block it holds and shifted right by the part's
 * width for each next one; the low part's field masked, a high part's
 * inserted above it (SLI). Their exact sum with the token's int8 q follows
 * (levels <= 63 are int8 too), and the token's sum of q, once per block and
 * tile. Then the reference's two float steps, block after block:
 * acc = fma(isum, scale * d_x, acc), acc = fma(-xsum, min * d_x, acc). Rows
 * past the matrix and tokens past n repeat the last one (their lanes are
 * not stored); activation blocks past the row's last are not read. `bits`
 * and T are constants in each instance (the shifts and masks fold).
 */
#include <arm_neon.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "neon_quant.h"

#define DOTPROD COLIBRI_TARGET_DOTPROD

enum { SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK };

/* A super-block's eight blocks of four rows: scale d * sc_j and min
 * dmin * m_j, lane = row. */
typedef struct qk_scales {
    float32x4_t scale[SUB], min[SUB];
} qk_scales;

/* The four rows' block sums with one token's block (x elements 0..15, 16..31). */
typedef int32x4_t (*qk_isum_fn)(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi);

/* The heads (first 16 bytes) of four super-blocks, word k of row r in lane
 * r of h[k] (loaded as bytes, then a 4 x 4 transpose). */
NEON_Q_INLINE void heads4(uint32x4_t *h, const uint8_t *const *sb)
{
    uint32x4_t a = vreinterpretq_u32_u8(vld1q_u8(sb[0])), b = vreinterpretq_u32_u8(vld1q_u8(sb[1]));
    uint32x4_t c = vreinterpretq_u32_u8(vld1q_u8(sb[2])), d = vreinterpretq_u32_u8(vld1q_u8(sb[3]));
    uint64x2_t ab0 = vreinterpretq_u64_u32(vtrn1q_u32(a, b));
    uint64x2_t ab1 = vreinterpretq_u64_u32(vtrn2q_u32(a, b));
    uint64x2_t cd0 = vreinterpretq_u64_u32(vtrn1q_u32(c, d));
    uint64x2_t cd1 = vreinterpretq_u64_u32(vtrn2q_u32(c, d));
    h[0] = vreinterpretq_u32_u64(vtrn1q_u64(ab0, cd0));
    h[1] = vreinterpretq_u32_u64(vtrn1q_u64(ab1, cd1));
    h[2] = vreinterpretq_u32_u64(vtrn2q_u64(ab0, cd0));
    h[3] = vreinterpretq_u32_u64(vtrn2q_u64(ab1, cd1));
}

/* Byte j (a constant) of each 32-bit lane. */
NEON_Q_INLINE uint32x4_t byte_of(uint32x4_t v, uint32_t j)
{
    uint32x4_t ff = vdupq_n_u32(0xFFu);
    return j == 0u   ? vandq_u32(v, ff)
           : j == 1u ? vandq_u32(vshrq_n_u32(v, 8), ff)
           : j == 2u ? vandq_u32(vshrq_n_u32(v, 16), ff)
                     : vshrq_n_u32(v, 24);
}

/* A head's word 0 holds d and dmin; byte j of words 1 and 2 sc_j |
 * (m_j & 3) << 6 and sc_(4 + j) | ...; byte j of word 3 the high 4 bits of
 * m_j (low nibble) and of m_(4 + j) (high nibble). The eight sc and m bytes
 * are made at once per byte, then taken out one block a vector. binary16 to
 * binary32 by FCVTL is exact (a NaN stays NaN, quieted; a product with one
 * is NaN either way). */
NEON_Q_INLINE void qk_scales4(qk_scales *s, const uint8_t *const *sb)
{
    uint32x4_t h[4];
    heads4(h, sb);
    float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(h[0])));
    float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(h[0], 16)));
    uint8x16_t first = vreinterpretq_u8_u32(h[1]), second = vreinterpretq_u8_u32(h[2]);
    uint8x16_t top = vreinterpretq_u8_u32(h[3]), six_bits = vdupq_n_u8(63);
    uint32x4_t sc[2] = {vreinterpretq_u32_u8(vandq_u8(first, six_bits)),
                        vreinterpretq_u32_u8(vandq_u8(second, six_bits))};
    uint32x4_t mn[2] = {
        vreinterpretq_u32_u8(vandq_u8(vsliq_n_u8(vshrq_n_u8(first, 6), top, 2), six_bits)),
        vreinterpretq_u32_u8(vsliq_n_u8(vshrq_n_u8(second, 6), vshrq_n_u8(top, 4), 2))};
#pragma GCC unroll 8
    for (uint32_t j = 0; j < SUB; j++) {
        s->scale[j] = vmulq_f32(d, vcvtq_f32_u32(byte_of(sc[j / 4u], j % 4u)));
        s->min[j] = vmulq_f32(dmin, vcvtq_f32_u32(byte_of(mn[j / 4u], j % 4u)));
    }
}

/* v >> w, w (1, 2 or 4) a constant. */
NEON_Q_INLINE uint8x16_t shift_right(uint8x16_t v, uint32_t w)
{
    return w == 1u ? vshrq_n_u8(v, 1) : w == 2u ? vshrq_n_u8(v, 2) : vshrq_n_u8(v, 4);
}

/* high << low | the low part's bits below low (SLI; low a constant). */
NEON_Q_INLINE uint8x16_t insert_high(uint8x16_t low_part, uint8x16_t high_part, uint32_t low)
{
    return low == 2u ? vsliq_n_u8(low_part, high_part, 2) : vsliq_n_u8(low_part, high_part, 4);
}

/* A part of w bits a level (quant.h: element e of block j at byte
 * 32 (w j / 8) + e, shift w j % 8; the part at byte `at` of the
 * super-block) at block j, the four rows' 32 bytes each (v[r][0]: elements
 * 0..15, v[r][1]: 16..31), block j's field in the low w bits: a chunk's
 * first block loads it, the next ones shift the previous block's right. */
NEON_Q_INLINE void part_step(uint8x16_t v[4][2], const uint8_t *const *sb, size_t at, uint32_t w,
                             uint32_t j)
{
    size_t chunk = at + 32u * (w * j / 8u);
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        if (w * j % 8u == 0u) {
            v[r][0] = vld1q_u8(sb[r] + chunk);
            v[r][1] = vld1q_u8(sb[r] + chunk + 16u);
        } else {
            v[r][0] = shift_right(v[r][0], w);
            v[r][1] = shift_right(v[r][1], w);
        }
    }
}

/* The four rows' levels of the current block (the parts at it): the low
 * part's field, the high part's (if any) inserted above, masked to `bits`.
 * Levels < 64 are int8 too. */
NEON_Q_INLINE neon_qrows levels4(uint8x16_t low_part[4][2], uint8x16_t high_part[4][2],
                                 uint32_t bits)
{
    uint32_t low = bits <= 3u ? 2u : 4u;
    uint8x16_t mask = vdupq_n_u8((uint8_t)((1u << bits) - 1u));
    neon_qrows q;
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        uint8x16_t a = low_part[r][0], b = low_part[r][1];
        if (bits != low) {
            a = insert_high(a, high_part[r][0], low);
            b = insert_high(b, high_part[r][1], low);
        }
        q.lo[r] = vreinterpretq_s8_u8(vandq_u8(a, mask));
        q.hi[r] = vreinterpretq_s8_u8(vandq_u8(b, mask));
    }
    return q;
}

/* -(sum of a block's 32 q) as a float (exact: |sum| <= 4096). */
NEON_Q_INLINE float neg_xsum(int8x16_t xlo, int8x16_t xhi)
{
    return (float)-vaddlvq_s16(vpadalq_s8(vpaddlq_s8(xlo), xhi));
}

/* One super-block's blocks b0 .. b0 + count - 1 of four rows (their heads
 * at sb) by T tokens (xt: the tokens' first blocks), into acc. */
NEON_Q_INLINE void qk_superblock(float32x4_t *acc, const uint8_t *const *sb,
                                 const colibri_qblock *const *xt, uint32_t b0, uint32_t count,
                                 uint32_t bits, uint32_t T, qk_isum_fn isum)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    uint8x16_t low_part[4][2], high_part[4][2];
    qk_scales s;
    qk_scales4(&s, sb);
    part_step(low_part, sb, 16u, low, 0u); /* block 0 loads the parts */
    if (high != 0u) {
        part_step(high_part, sb, 16u + 32u * low, high, 0u);
    }
    for (uint32_t j = 0; j < count; j++) {
        if (j != 0u) {
            part_step(low_part, sb, 16u, low, j);
        }
        if (j != 0u && high != 0u) {
            part_step(high_part, sb, 16u + 32u * low, high, j);
        }
        neon_qrows rows = levels4(low_part, high_part, bits);
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
            const colibri_qblock *xb = xt[t] + b0 + j;
            int8x16_t xlo = vld1q_s8(xb->q), xhi = vld1q_s8(xb->q + 16);
            float32x4_t sum = vcvtq_f32_s32(isum(&rows, xlo, xhi));
            acc[t] = vfmaq_f32(acc[t], sum, vmulq_n_f32(s.scale[j], xb->d));
            acc[t] =
                vfmaq_f32(acc[t], vdupq_n_f32(neg_xsum(xlo, xhi)), vmulq_n_f32(s.min[j], xb->d));
        }
    }
}

/* Four rows (rows_left of them real) by T tokens (tokens_left real). */
NEON_Q_INLINE void qk_tile(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                           const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                           uint32_t tokens_left, uint32_t bits, uint32_t T, qk_isum_fn isum)
{
    const uint8_t *wr[4];
    const colibri_qblock *xt[2];
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        wr[r] = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes;
    }
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
        xt[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
    }
    for (uint32_t b0 = 0; b0 < nb; b0 += SUB) {
        const uint8_t *sb[4];
        size_t at = (size_t)(b0 / SUB) * COLIBRI_QK_BYTES(bits);
#pragma GCC unroll 4
        for (uint32_t r = 0; r < 4u; r++) {
            sb[r] = wr[r] + at;
        }
        qk_superblock(acc, sb, xt, b0, nb - b0 < SUB ? nb - b0 : SUB, bits, T, isum);
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
NEON_Q_INLINE void qk_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                             uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits,
                             qk_isum_fn isum)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = colibri_qk_row_bytes(cols, bits);
    for (uint32_t r = 0; r < rows; r += 4u) {
        for (uint32_t t = 0; t < n; t += 2u) {
            float *o = out + t * stride + r;
            const colibri_qblock *xt = x + (size_t)t * nb;
            if (n == 1u) { /* (two copies: T a constant in each) */
                qk_tile(o, stride, w + r * row_bytes, row_bytes, xt, nb, rows - r, n - t, bits, 1u,
                        isum);
            } else {
                qk_tile(o, stride, w + r * row_bytes, row_bytes, xt, nb, rows - r, n - t, bits, 2u,
                        isum);
            }
        }
    }
}

/* One instance per table and width: `bits` a constant in each. */
#define QK_MATMAT(table, attr, b, isum)                                                            \
    attr static void table##_qk##b(float *out, size_t stride, const uint8_t *w,                    \
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,          \
                                   uint32_t n)                                                     \
    {                                                                                              \
        qk_matmat(out, stride, w, x, rows, cols, n, b##u, isum);                                   \
    }

/* The instance for `bits` (2 .. 6), called directly (no pointer: the
 * firmware's static stack bound resolves every call). */
#define QK_BY_BITS(table, bits, ...)                                                               \
    do {                                                                                           \
        switch (bits) {                                                                            \
        case 2u: table##_qk2(__VA_ARGS__); break;                                                  \
        case 3u: table##_qk3(__VA_ARGS__); break;                                                  \
        case 4u: table##_qk4(__VA_ARGS__); break;                                                  \
        case 5u: table##_qk5(__VA_ARGS__); break;                                                  \
        default: table##_qk6(__VA_ARGS__); break;                                                  \
        }                                                                                          \
    } while (0)

/* ---- neon: widening multiplies --------------------------------------------
 * SMULL, SMLAL2, SMLAL, SMLAL2 put four products in each int16 lane (at
 * most 4 x 63 x 128 = 32256: no overflow), SADDLP pairs them into int32,
 * three ADDPs make the four rows' totals, lane = row. */
NEON_Q_INLINE int32x4_t row_isum(int8x16_t lo, int8x16_t hi, int8x16_t xlo, int8x16_t xhi)
{
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(xlo));
    p = vmlal_high_s8(p, lo, xlo);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(xhi));
    return vpaddlq_s16(vmlal_high_s8(p, hi, xhi));
}

NEON_Q_INLINE int32x4_t isum_widening(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi)
{
    return neon_isum4(
        row_isum(w->lo[0], w->hi[0], xlo, xhi), row_isum(w->lo[1], w->hi[1], xlo, xhi),
        row_isum(w->lo[2], w->hi[2], xlo, xhi), row_isum(w->lo[3], w->hi[3], xlo, xhi));
}

QK_MATMAT(neon, , 2, isum_widening)
QK_MATMAT(neon, , 3, isum_widening)
QK_MATMAT(neon, , 4, isum_widening)
QK_MATMAT(neon, , 5, isum_widening)
QK_MATMAT(neon, , 6, isum_widening)

void colibri_neon_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    QK_BY_BITS(neon, bits, out, stride, w, x, rows, cols, n);
}

/* ---- neondot: SDOT ----------------------------------------------------------
 * Two SDOTs a row (four products into each int32 lane), three ADDPs. */
DOTPROD static inline __attribute__((always_inline)) int32x4_t
isum_dot(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi)
{
    int32x4_t s[4];
#pragma GCC unroll 4
    for (uint32_t r = 0; r < 4u; r++) {
        s[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w->lo[r], xlo), w->hi[r], xhi);
    }
    return neon_isum4(s[0], s[1], s[2], s[3]);
}

QK_MATMAT(neondot, DOTPROD, 2, isum_dot)
QK_MATMAT(neondot, DOTPROD, 3, isum_dot)
QK_MATMAT(neondot, DOTPROD, 4, isum_dot)
QK_MATMAT(neondot, DOTPROD, 5, isum_dot)
QK_MATMAT(neondot, DOTPROD, 6, isum_dot)

void colibri_neondot_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    QK_BY_BITS(neondot, bits, out, stride, w, x, rows, cols, n);
}
