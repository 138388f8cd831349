/*
 * helium_qk.c - the super-block product (matmat_qk, format 1.15,
 * docs/format.md 3.5) of the helium table (Armv8.1-M MVE, Cortex-M55): the
 * contract is docs/kernels.md, "Super-blocks".
 *
 * One instance for every width (`bits` at run time: the firmware's flash is
 * small) and the tile of helium.c's Q8/Q4 products: two rows by one token
 * (decode) or two (prompts), the float steps on the FPU in scalar
 * accumulators. Per super-block and row, the eight blocks' scales d * sc_j
 * and mins dmin * m_j are made four blocks a vector (exact products of
 * normal or zero binary32 values: MVE's flush of subnormals cannot act).
 * Per block and row, each part of the levels is two 16-byte loads of its
 * chunk (quant.h: the format interleaves the blocks) and two shifts by a
 * register a vector, left to drop the bits above the block's field, right
 * to put it at bit 0; a high part is added times 2^L (VMLA by a scalar):
 * 32 bytes of levels < 64, which are int8 too. Then
 * VMLADAVA sums them exactly with the token's q, VADDVA sums the q (once
 * per token and block), and per (row, token) the reference's two steps:
 * acc = fma(isum, scale * d_x, acc), acc = fma(-xsum, min * d_x, acc).
 *
 * Super-blocks in groups of 16 rows (matmat_qkr16, format 1.16, 3.6) go
 * through the same tile, a super-block at a time: each of its two rows'
 * super-blocks is first put back in its by-row order (3.5) in a buffer on
 * the stack, by VLDRB gathers: the 16 head bytes (d, dmin, scales and mins)
 * with one, every 16 level bytes (four bytes of each of four 64-byte
 * chunks: r16_offsets) with another. So the by-row loop stays as it is, and
 * a chunk is gathered once, not once for each block it holds (a gather
 * takes a beat a byte on a Cortex-M55, about four times a 16-byte load).
 */
#include <arm_mve.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "quant.h"
#include "qtile.h"

enum { SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK };

/* A row's current super-block: its eight blocks' scales and mins. */
typedef struct qk_head {
    float scale[SUB], min[SUB];
} qk_head;

typedef struct qk_levels {
    int8x16_t lo, hi; /* elements 0..15, 16..31 */
} qk_levels;

/* Where block j's fields are, the same for every row of a width: the low
 * and high parts' chunks (bytes past the super-block's start) and the left
 * shifts that put each field at the top of its byte. */
typedef struct qk_place {
    uint32_t low_at, high_at;
    int32_t low_up, high_up;
} qk_place;

/* A binary16 as a float by the FPU's VCVTB (exact, every value). */
static float half_value(const uint8_t *p)
{
    uint16_t bits = colibri_rd_u16(p);
    __extension__ _Float16 h;
    memcpy(&h, &bits, sizeof h);
    return (float)h;
}

/* Bytes 4 + j: sc_j | (m_j & 3) << 6; byte 12 + j % 4: m_j >> 2 in the low
 * (j < 4) or high nibble. */
static void qk_head_of(qk_head *h, const uint8_t *sb)
{
    float d = half_value(sb), dmin = half_value(sb + 2);
    uint32x4_t six = vdupq_n_u32(63u);
    uint32x4_t first = vldrbq_u32(sb + 4), second = vldrbq_u32(sb + 8), top = vldrbq_u32(sb + 12);
    uint32x4_t m0 = vandq_u32(vsliq_n_u32(vshrq_n_u32(first, 6), top, 2), six);
    uint32x4_t m1 = vsliq_n_u32(vshrq_n_u32(second, 6), vshrq_n_u32(top, 4), 2);
    vst1q_f32(h->scale, vmulq_n_f32(vcvtq_f32_u32(vandq_u32(first, six)), d));
    vst1q_f32(h->scale + 4, vmulq_n_f32(vcvtq_f32_u32(vandq_u32(second, six)), d));
    vst1q_f32(h->min, vmulq_n_f32(vcvtq_f32_u32(m0), dmin));
    vst1q_f32(h->min + 4, vmulq_n_f32(vcvtq_f32_u32(m1), dmin));
}

/* A part's field at bit 0: its byte shifted left by up (the field on top,
 * the bits above it gone), then right by 8 - width. */
static inline uint8x16_t field(const uint8_t *chunk, int32_t up, uint32_t width)
{
    return vshlq_r_u8(vshlq_r_u8(vldrbq_u8(chunk), up), (int32_t)width - 8);
}

/* Block (place) of the super-block at sb: its 32 levels, a high part's
 * field added times 2^low (VMLA by a scalar: the fields do not overlap). */
static inline qk_levels levels_of(const uint8_t *sb, const qk_place *p, uint32_t low, uint32_t high)
{
    uint8x16_t lo = field(sb + p->low_at, p->low_up, low);
    uint8x16_t hi = field(sb + p->low_at + 16u, p->low_up, low);
    if (high != 0u) {
        uint8_t times = (uint8_t)(1u << low);
        lo = vmlaq_n_u8(lo, field(sb + p->high_at, p->high_up, high), times);
        hi = vmlaq_n_u8(hi, field(sb + p->high_at + 16u, p->high_up, high), times);
    }
    qk_levels v = {vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)};
    return v;
}

/* One (row, token) pair's two steps for a block. */
static inline float qk_step(float acc, qk_levels w, int8x16_t xlo, int8x16_t xhi, float scale,
                            float min, float dx, int32_t neg_xsum)
{
    int32_t isum = vmladavaq_s8(vmladavq_s8(w.lo, xlo), w.hi, xhi);
    acc = colibri_fmaf((float)isum, scale * dx, acc);
    return colibri_fmaf((float)neg_xsum, min * dx, acc);
}

/* Rows w0, w1 by tokens x0, x1 (T) through nb blocks, into a[token][row]. */
static void __attribute__((noinline))
qk_tile(float a[2][2], const uint8_t *w0, const uint8_t *w1, const colibri_qblock *x0,
        const colibri_qblock *x1, uint32_t nb, uint32_t bits, uint32_t T)
{
    float a00 = a[0][0], a01 = a[0][1], a10 = a[1][0], a11 = a[1][1]; /* a<token><row> */
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    size_t sb_bytes = COLIBRI_QK_BYTES(bits);
    qk_head h0, h1;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t j = b % SUB;
        const uint8_t *sb0 = w0 + (b / SUB) * sb_bytes, *sb1 = w1 + (b / SUB) * sb_bytes;
        if (j == 0u) {
            qk_head_of(&h0, sb0);
            qk_head_of(&h1, sb1);
        }
        qk_place p = {16u + 32u * (low * j / 8u), 16u + 32u * low + 32u * (high * j / 8u),
                      (int32_t)(8u - low - low * j % 8u), (int32_t)(8u - high - high * j % 8u)};
        qk_levels r0 = levels_of(sb0, &p, low, high), r1 = levels_of(sb1, &p, low, high);
        int8x16_t xlo = vldrbq_s8(x0[b].q), xhi = vldrbq_s8(x0[b].q + 16);
        int32_t neg = -vaddvaq_s8(vaddvq_s8(xlo), xhi);
        a00 = qk_step(a00, r0, xlo, xhi, h0.scale[j], h0.min[j], x0[b].d, neg);
        a01 = qk_step(a01, r1, xlo, xhi, h1.scale[j], h1.min[j], x0[b].d, neg);
        if (T == 2u) {
            xlo = vldrbq_s8(x1[b].q), xhi = vldrbq_s8(x1[b].q + 16);
            neg = -vaddvaq_s8(vaddvq_s8(xlo), xhi);
            a10 = qk_step(a10, r0, xlo, xhi, h0.scale[j], h0.min[j], x1[b].d, neg);
            a11 = qk_step(a11, r1, xlo, xhi, h1.scale[j], h1.min[j], x1[b].d, neg);
        }
    }
    a[0][0] = a00, a[0][1] = a01, a[1][0] = a10, a[1][1] = a11;
}

/* Where a row's super-block bytes are in an R16 tile, past row 0's (3.6):
 * its 16 head bytes (d 2i, dmin 32 + 2i, byte 4 + k at 64 + 16k + i) at
 * r16_head + i * r16_head_row, element e of 16 consecutive level bytes at
 * r16_offsets[e] past the first (four bytes of each of four chunks). */
static const uint8_t r16_head[16] = {0,   1,   32,  33,  64,  80,  96,  112,
                                     128, 144, 160, 176, 192, 208, 224, 240};
static const uint8_t r16_head_row[16] = {2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const uint8_t r16_offsets[16] = {0,   1,   2,   3,   64,  65,  66,  67,
                                        128, 129, 130, 131, 192, 193, 194, 195};

/* Row i's super-block of the tile at t in its by-row order (3.5), to sb. */
static void qk_from_r16(uint8_t *sb, const uint8_t *t, uint32_t i, uint32_t bits)
{
    uint8x16_t head = vmlaq_n_u8(vldrbq_u8(r16_head), vldrbq_u8(r16_head_row), (uint8_t)i);
    uint8x16_t offsets = vldrbq_u8(r16_offsets);
    vstrbq_u8(sb, vldrbq_gather_offset_u8(t, head));
    for (uint32_t k = 0; k < 2u * bits; k++) { /* 32 * bits level bytes */
        vstrbq_u8(sb + 16u + 16u * k,
                  vldrbq_gather_offset_u8(t + 256u + 4u * i + 256u * k, offsets));
    }
}

/* Rows two by two (in groups of 16: a pair is in one group, 16 being even)
 * by tokens two by two: by row (3.5) the tile goes through a row's blocks
 * at once; R16 (3.6) a super-block at a time, the two rows' put back in
 * their by-row order first. */
static void qk_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits, int r16)
{
    uint32_t nb = colibri_qblocks(cols), g = r16 ? COLIBRI_QGROUP_ROWS : 1u;
    uint32_t span = r16 ? SUB : nb; /* blocks a qk_tile */
    size_t tile_bytes = g * COLIBRI_QK_BYTES(bits), g_bytes = (nb + SUB - 1u) / SUB * tile_bytes;
    uint8_t sb[2][COLIBRI_QK_BYTES(6u)];
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t r1 = rows - r >= 2u ? r + 1u : r;
        const uint8_t *w0 = w + r / g * g_bytes, *w1 = w + r1 / g * g_bytes;
        for (uint32_t t = 0; t < n; t += 2u) {
            uint32_t T = n - t >= 2u ? 2u : 1u;
            const colibri_qblock *x0 = x + (size_t)t * nb, *x1 = x0 + (T - 1u) * nb;
            float a[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
            for (uint32_t b = 0; b < nb; b += span) {
                if (r16) {
                    qk_from_r16(sb[0], w0 + b / SUB * tile_bytes, r % g, bits);
                    qk_from_r16(sb[1], w0 + b / SUB * tile_bytes, r1 % g, bits);
                }
                qk_tile(a, r16 ? sb[0] : w0, r16 ? sb[1] : w1, x0 + b, x1 + b,
                        nb - b < span ? nb - b : span, bits, T);
            }
            colibri_qtile_store(out + t * stride + r, stride, r1 - r + 1u, T, a[0][0], a[0][1],
                                a[1][0], a[1][1]);
        }
    }
}

void colibri_helium_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                              uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    qk_matmat(out, stride, w, x, rows, cols, n, bits, 0);
}

void colibri_helium_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 uint32_t bits)
{
    qk_matmat(out, stride, w, x, rows, cols, n, bits, 1);
}
