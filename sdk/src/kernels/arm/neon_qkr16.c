/*
 * neon_qkr16.c - the super-block product on rows in groups of 16
 * (matmat_qkr16, format 1.16, docs/format.md 3.6) of the AArch64 tables:
 * neon's with widening multiplies (any AArch64 CPU), neondot's with SDOT
 * (COLIBRI_TARGET_DOTPROD on those functions only, as in neondot.c). The
 * contract: docs/kernels.md, "Super-blocks"; the walk over a group as
 * neon_quant.h's for Q8_R16 and Q4_R16: one group by two tokens (the last
 * one of an odd n alone), one row per lane (rows 4q .. 4q + 3 in vector q).
 *
 * A tile's 64-byte chunk holds four levels of every row of one or more
 * blocks (row i's in bytes 4i .. 4i + 3): block j's quad v (elements
 * 4v .. 4v + 3) of a part of w bits a level is chunk 8 ((w j) / 8) + v of
 * the part, at shift (w j) % 8. neondot (and neon at 2 and 4 bits) sums
 * each part of a block on its own with the field left in place: a mask
 * gives level * 2^shift (below bit 7: an int8 of at most 64), the field at
 * the top of the byte is shifted down instead (one operation either way);
 * exact shifts then take the 2^shift out and put the high part at 2^L
 * (isum = lo + hi << L). neon at 3, 5 and 6 bits makes each level whole
 * first (neon_qk.c's shift, SLI and mask), as its multiplies cost more.
 * Then the reference's two float steps, block after block, lane = row:
 * acc = fma(isum, (d * sc_j) * d_x, acc), acc = fma(-xsum, (dmin * m_j) * d_x,
 * acc). Padding rows are computed but not stored; activation blocks past the
 * row's last are not read. `bits` and T (tokens a pass, 1 or 2) are
 * constants in each instance; the block j is not (shifts by register, or
 * one copy for the field in place and one for the top field).
 */
#include <arm_neon.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "neon_quant.h"

#define DOTPROD COLIBRI_TARGET_DOTPROD

enum { ROWS = COLIBRI_QGROUP_ROWS, SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK };

/* Tile bytes (docs/format.md 3.6): the 16 d, the 16 dmin, the scale bytes
 * (block j's at 64 + 16j), the min nibbles (192 + 16 (j % 4)), the levels. */
enum { T_DMIN = 32, T_SCALE = 64, T_MIN = 192, T_LEVELS = 256, CHUNK = 64 };

/* A part of a block: adds its sums of 16 rows (sum[t][q], lane = row) by
 * T tokens' x (x[t][0]: elements 0..15, x[t][1]: 16..31) into sum, the
 * part's chunks from `chunk` (quad v at chunk + 64v), each level masked in
 * place (top 0) or shifted down from the top of its byte (top 1); w its
 * width. */
typedef void (*qkr16_part_fn)(int32x4_t sum[2][4], const uint8_t *chunk, uint8x16_t mask,
                              uint32_t top, int8x16_t x[2][2], uint32_t T, uint32_t w);

/* A table's block: the exact sums of block j of a tile's 16 rows by T
 * tokens (isum[t][q], lane = row). */
typedef void (*qkr16_isums_fn)(int32x4_t isum[2][4], const uint8_t *tile, uint32_t j,
                               int8x16_t x[2][2], uint32_t bits, uint32_t T);

/* Four levels of four rows: the field in place (raw & mask), or the top
 * field of w bits (a constant) shifted down. Either is an int8 >= 0. */
NEON_Q_INLINE int8x16_t field(uint8x16_t raw, uint8x16_t mask, uint32_t top, uint32_t w)
{
    if (top == 0u) {
        return vreinterpretq_s8_u8(vandq_u8(raw, mask));
    }
    return vreinterpretq_s8_u8(w == 1u   ? vshrq_n_u8(raw, 7)
                               : w == 2u ? vshrq_n_u8(raw, 6)
                                         : vshrq_n_u8(raw, 4));
}

/* The power of two a part of w bits leaves in block j's sums: its shift,
 * 0 for the field at the top of the byte (shifted down). */
static inline int32_t part_scale(uint32_t w, uint32_t j)
{
    uint32_t at = w * j % 8u;
    return at == 8u - w ? 0 : (int32_t)at;
}

/* Adds a part's sums for block j (the part's chunks from `part`). */
NEON_Q_INLINE void part_at(int32x4_t sum[2][4], const uint8_t *part, uint32_t w, uint32_t j,
                           int8x16_t x[2][2], uint32_t T, qkr16_part_fn fn)
{
    uint32_t at = w * j % 8u;
    const uint8_t *chunk = part + (size_t)(w * j / 8u) * 8u * CHUNK;
    if (at == 8u - w) {
        fn(sum, chunk, vdupq_n_u8(0), 1u, x, T, w);
    } else {
        fn(sum, chunk, vdupq_n_u8((uint8_t)(((1u << w) - 1u) << at)), 0u, x, T, w);
    }
}

/* sum[t][q] shifted by `by` (SSHL by a register; negative = right, exact
 * here: the bits shifted out are 0). */
NEON_Q_INLINE void shift_sums(int32x4_t sum[2][4], int32_t by, uint32_t T)
{
    int32x4_t v = vdupq_n_s32(by);
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            sum[t][q] = vshlq_s32(sum[t][q], v);
        }
    }
}

/* Block j's sums part by part, in one accumulator: the high part's first
 * (if any), its 2^s_hi made 2^(L + s_lo) (the low part's scale times the
 * high part's place), then the low part's added, then 2^s_lo taken out:
 * lo + hi << L, exact (|isum| 2^s_lo < 2^31). */
NEON_Q_INLINE void part_isums(int32x4_t isum[2][4], const uint8_t *tile, uint32_t j,
                              int8x16_t x[2][2], uint32_t bits, uint32_t T, qkr16_part_fn fn)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    int32_t lo_scale = part_scale(low, j);
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            isum[t][q] = vdupq_n_s32(0);
        }
    }
    if (high != 0u) {
        part_at(isum, tile + T_LEVELS + 8u * low * CHUNK, high, j, x, T, fn);
        shift_sums(isum, (int32_t)low + lo_scale - part_scale(high, j), T);
    }
    part_at(isum, tile + T_LEVELS, low, j, x, T, fn);
    shift_sums(isum, -lo_scale, T);
}

/* 16 bytes (one a row) times the rows' binary32 factors f, exactly where
 * the product is (11-bit d times a 6-bit integer). */
NEON_Q_INLINE void bytes_times(float32x4_t out[4], uint8x16_t v, const float32x4_t f[4])
{
    uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_high_u8(v);
    out[0] = vmulq_f32(f[0], vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))));
    out[1] = vmulq_f32(f[1], vcvtq_f32_u32(vmovl_high_u16(lo)));
    out[2] = vmulq_f32(f[2], vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))));
    out[3] = vmulq_f32(f[3], vcvtq_f32_u32(vmovl_high_u16(hi)));
}

/* Block j's d * sc_j and dmin * m_j of the 16 rows, lane = row: sc_j the
 * low 6 bits of the rows' byte 4 + j, m_j its top 2 bits under the nibble
 * of byte 12 + j % 4 (low for j < 4, high else). */
NEON_Q_INLINE void block_scales(float32x4_t scale[4], float32x4_t min[4], const uint8_t *tile,
                                uint32_t j, const float32x4_t d[4], const float32x4_t dmin[4])
{
    uint8x16_t head = vld1q_u8(tile + T_SCALE + 16u * j), six_bits = vdupq_n_u8(63);
    uint8x16_t nibble = vld1q_u8(tile + T_MIN + 16u * (j % 4u));
    nibble = vshlq_u8(nibble, vdupq_n_s8((int8_t)(j < 4u ? 0 : -4)));
    bytes_times(scale, vandq_u8(head, six_bits), d);
    bytes_times(min, vandq_u8(vsliq_n_u8(vshrq_n_u8(head, 6), nibble, 2), six_bits), dmin);
}

/* The tile's 16 binary16 values at `at` as floats (FCVTL: exact). */
NEON_Q_INLINE void halves(float32x4_t f[4], const uint8_t *at)
{
#pragma GCC unroll 4
    for (uint32_t q = 0; q < 4u; q++) {
        f[q] = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(at + 8u * q)));
    }
}

/* -(sum of a block's 32 q) as a float (exact: |sum| <= 4096). */
NEON_Q_INLINE float neg_xsum(const int8x16_t x[2])
{
    return (float)-vaddlvq_s16(vpadalq_s8(vpaddlq_s8(x[0]), x[1]));
}

/* Block j of a tile by T tokens' blocks xb: the reference's float steps. */
NEON_Q_INLINE void tile_block(float32x4_t acc[2][4], const uint8_t *tile, uint32_t j,
                              const colibri_qblock *const *xb, const float32x4_t d[4],
                              const float32x4_t dmin[4], uint32_t bits, uint32_t T,
                              qkr16_isums_fn isums)
{
    int8x16_t x[2][2];
    int32x4_t isum[2][4];
    float32x4_t scale[4], min[4];
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
        x[t][0] = vld1q_s8(xb[t]->q);
        x[t][1] = vld1q_s8(xb[t]->q + 16);
    }
    isums(isum, tile, j, x, bits, T);
    block_scales(scale, min, tile, j, d, dmin);
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
        float dx = xb[t]->d;
        float32x4_t nx = vdupq_n_f32(neg_xsum(x[t]));
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            acc[t][q] = vfmaq_f32(acc[t][q], vcvtq_f32_s32(isum[t][q]), vmulq_n_f32(scale[q], dx));
            acc[t][q] = vfmaq_f32(acc[t][q], nx, vmulq_n_f32(min[q], dx));
        }
    }
}

/* One group (rows_left of its rows real) by T tokens (1 or 2), tile after
 * tile, block after block. */
NEON_Q_INLINE void qkr16_group(float *out, size_t stride, const uint8_t *group,
                               const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                               uint32_t bits, uint32_t T, qkr16_isums_fn fn)
{
    float32x4_t acc[2][4];
#pragma GCC unroll 2
    for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
        for (uint32_t q = 0; q < 4u; q++) {
            acc[t][q] = vdupq_n_f32(0.0f);
        }
    }
    for (uint32_t b0 = 0; b0 < nb; b0 += SUB) {
        const uint8_t *tile = group + (size_t)(b0 / SUB) * ROWS * COLIBRI_QK_BYTES(bits);
        float32x4_t d[4], dmin[4];
        halves(d, tile);
        halves(dmin, tile + T_DMIN);
        for (uint32_t j = 0; j < SUB && b0 + j < nb; j++) {
            const colibri_qblock *xb[2] = {x + b0 + j, x + (size_t)(T - 1u) * nb + b0 + j};
            tile_block(acc, tile, j, xb, d, dmin, bits, T, fn);
        }
    }
    for (uint32_t t = 0; t < T; t++) {
        float v[ROWS];
        for (uint32_t q = 0; q < 4u; q++) {
            vst1q_f32(v + 4u * q, acc[t][q]);
        }
        for (uint32_t r = 0; r < ROWS && r < rows_left; r++) {
            out[t * stride + r] = v[r];
        }
    }
}

/* Every group, each with all n tokens, two at a time (a copy for one and
 * for two), so a group stays in cache while the tokens pass. */
NEON_Q_INLINE void qkr16_matmat(float *out, size_t stride, const uint8_t *w,
                                const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                uint32_t bits, qkr16_isums_fn fn)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t group_bytes = (size_t)((nb + SUB - 1u) / SUB) * ROWS * COLIBRI_QK_BYTES(bits);
    for (uint32_t r = 0; r < rows; r += ROWS) {
        const uint8_t *group = w + (size_t)(r / ROWS) * group_bytes;
        uint32_t t = 0;
        for (; t + 2u <= n; t += 2u) {
            qkr16_group(out + t * stride + r, stride, group, x + (size_t)t * nb, nb, rows - r, bits,
                        2u, fn);
        }
        for (; t < n; t++) {
            qkr16_group(out + t * stride + r, stride, group, x + (size_t)t * nb, nb, rows - r, bits,
                        1u, fn);
        }
    }
}

/* One instance per table and width: `bits` a constant in each. */
#define QKR16_MATMAT(table, attr, b, fn)                                                           \
    attr static void table##_qkr16_##b(float *out, size_t stride, const uint8_t *w,                \
                                       const colibri_qblock *x, uint32_t rows, uint32_t cols,      \
                                       uint32_t n)                                                 \
    {                                                                                              \
        qkr16_matmat(out, stride, w, x, rows, cols, n, b##u, fn);                                  \
    }

/* The instance for `bits` (2 .. 6), called directly (as neon_qk.c's). */
#define QKR16_BY_BITS(table, bits, ...)                                                            \
    do {                                                                                           \
        switch (bits) {                                                                            \
        case 2u: table##_qkr16_2(__VA_ARGS__); break;                                              \
        case 3u: table##_qkr16_3(__VA_ARGS__); break;                                              \
        case 4u: table##_qkr16_4(__VA_ARGS__); break;                                              \
        case 5u: table##_qkr16_5(__VA_ARGS__); break;                                              \
        default: table##_qkr16_6(__VA_ARGS__); break;                                              \
        }                                                                                          \
    } while (0)

/* ---- neon: widening multiplies --------------------------------------------
 * Per vector of four rows, half block and token (x word k = quad 4h + k,
 * in every lane): SMULL and three SMLALs (low halves: rows 4q, 4q + 1),
 * SMULL2 and three SMLAL2s (rows 4q + 2, 4q + 3) put four products in each
 * int16 lane (levels in place or whole <= 63, |x| <= 128: at most 32256),
 * SADDLP or SADALP widen them to int32 pairs, ADDP makes the rows' sums.
 * The vectors of rows are a loop (the registers hold one at a time).
 * Widths 2 and 4 go in place as neondot's parts; 3, 5 and 6 make each
 * level whole (the low field shifted down, the high one inserted above it
 * with SLI, a mask: four operations, not a second part's multiplies). */
enum { IN_PLACE, TOP, WHOLE };

/* Where a vector of levels comes from: quad 0's chunk of the low part and
 * (WHOLE) of the high part, the mask, the shifts (WHOLE: by register,
 * negative = right) and the widths. */
typedef struct level_src {
    const uint8_t *lo, *hi;
    uint8x16_t mask;
    int8x16_t lo_by, hi_by;
    uint32_t w, low;
} level_src;

/* The levels at byte `off` of the chunks (mode a constant). */
NEON_Q_INLINE int8x16_t src_levels(const level_src *s, size_t off, int mode)
{
    if (mode != WHOLE) {
        return field(vld1q_u8(s->lo + off), s->mask, mode == TOP, s->w);
    }
    uint8x16_t lo = vshlq_u8(vld1q_u8(s->lo + off), s->lo_by);
    uint8x16_t hi = vshlq_u8(vld1q_u8(s->hi + off), s->hi_by);
    lo = s->low == 2u ? vsliq_n_u8(lo, hi, 2) : vsliq_n_u8(lo, hi, 4);
    return vreinterpretq_s8_u8(vandq_u8(lo, s->mask));
}

/* x word k of a half block, in every lane. */
NEON_Q_INLINE int8x16_t x_word(int8x16_t half, uint32_t k)
{
    int32x4_t v = vreinterpretq_s32_s8(half);
    return vreinterpretq_s8_s32(k == 0u   ? vdupq_laneq_s32(v, 0)
                                : k == 1u ? vdupq_laneq_s32(v, 1)
                                : k == 2u ? vdupq_laneq_s32(v, 2)
                                          : vdupq_laneq_s32(v, 3));
}

/* One token's products of a quad's levels with x word xw, added into a
 * (rows 4q, 4q + 1) and b (4q + 2, 4q + 3); the first quad (k 0) sets them. */
NEON_Q_INLINE void mul_quad(int16x8_t *a, int16x8_t *b, int8x16_t lev, int8x16_t xw, uint32_t k)
{
    *a = k == 0u ? vmull_s8(vget_low_s8(lev), vget_low_s8(xw))
                 : vmlal_s8(*a, vget_low_s8(lev), vget_low_s8(xw));
    *b = k == 0u ? vmull_high_s8(lev, xw) : vmlal_high_s8(*b, lev, xw);
}

/* The 16 rows' sums of the levels s gives with one token's x: vector after
 * vector (a loop), the halves' int16 sums paired into int32 and added. */
NEON_Q_INLINE void widening_token(int32x4_t sum[4], const level_src *s, int mode, int8x16_t x[2])
{
#pragma GCC unroll 1
    for (uint32_t q = 0; q < 4u; q++) {
        int32x4_t pa, pb;
#pragma GCC unroll 2
        for (uint32_t h = 0; h < 2u; h++) {
            int16x8_t a, b;
#pragma GCC unroll 4
            for (uint32_t k = 0; k < 4u; k++) {
                mul_quad(&a, &b, src_levels(s, (4u * h + k) * CHUNK + 16u * q, mode),
                         x_word(x[h], k), k);
            }
            pa = h == 0u ? vpaddlq_s16(a) : vpadalq_s16(pa, a);
            pb = h == 0u ? vpaddlq_s16(b) : vpadalq_s16(pb, b);
        }
        sum[q] = vpaddq_s32(pa, pb);
    }
}

/* The same with two tokens, each level made once for both: half block
 * after half block (its eight x words in registers, not sixteen), vector
 * after vector (a loop), the second half's sums added to the first's. */
NEON_Q_INLINE void widening_tokens(int32x4_t sum[2][4], const level_src *s, int mode,
                                   int8x16_t x[2][2])
{
#pragma GCC unroll 2
    for (uint32_t h = 0; h < 2u; h++) {
        int8x16_t xw[2][4];
#pragma GCC unroll 4
        for (uint32_t k = 0; k < 4u; k++) {
            xw[0][k] = x_word(x[0][h], k);
            xw[1][k] = x_word(x[1][h], k);
        }
#pragma GCC unroll 1
        for (uint32_t q = 0; q < 4u; q++) {
            int16x8_t a[2], b[2];
#pragma GCC unroll 4
            for (uint32_t k = 0; k < 4u; k++) {
                int8x16_t lev = src_levels(s, (4u * h + k) * CHUNK + 16u * q, mode);
                mul_quad(&a[0], &b[0], lev, xw[0][k], k);
                mul_quad(&a[1], &b[1], lev, xw[1][k], k);
            }
#pragma GCC unroll 2
            for (uint32_t t = 0; t < 2u; t++) {
                int32x4_t half = vpaddq_s32(vpaddlq_s16(a[t]), vpaddlq_s16(b[t]));
                sum[t][q] = h == 0u ? half : vaddq_s32(sum[t][q], half);
            }
        }
    }
}

/* T (a constant) tokens' sums. */
NEON_Q_INLINE void widening_sums(int32x4_t sum[2][4], const level_src *s, int mode,
                                 int8x16_t x[2][2], uint32_t T)
{
    if (T == 1u) {
        widening_token(sum[0], s, mode, x[0]);
    } else {
        widening_tokens(sum, s, mode, x);
    }
}

/* Block j's sums: widths 2 and 4 in place (2^shift taken out after) or the
 * top field shifted down, the others with the levels whole. neon's table. */
NEON_Q_INLINE void isums_widening(int32x4_t isum[2][4], const uint8_t *tile, uint32_t j,
                                  int8x16_t x[2][2], uint32_t bits, uint32_t T)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low, at = low * j % 8u;
    level_src s = {.lo = tile + T_LEVELS + (size_t)(low * j / 8u) * 8u * CHUNK, .w = low};
    if (high == 0u && at == 8u - low) {
        widening_sums(isum, &s, TOP, x, T);
    } else if (high == 0u) {
        s.mask = vdupq_n_u8((uint8_t)(((1u << low) - 1u) << at));
        widening_sums(isum, &s, IN_PLACE, x, T);
        shift_sums(isum, -(int32_t)at, T);
    } else {
        s.hi = tile + T_LEVELS + (size_t)(8u * low + 8u * (high * j / 8u)) * CHUNK;
        s.mask = vdupq_n_u8((uint8_t)((1u << bits) - 1u));
        s.lo_by = vdupq_n_s8((int8_t)(0 - (int32_t)at));
        s.hi_by = vdupq_n_s8((int8_t)(0 - (int32_t)(high * j % 8u)));
        s.low = low;
        widening_sums(isum, &s, WHOLE, x, T);
    }
}

QKR16_MATMAT(neon, , 2, isums_widening)
QKR16_MATMAT(neon, , 3, isums_widening)
QKR16_MATMAT(neon, , 4, isums_widening)
QKR16_MATMAT(neon, , 5, isums_widening)
QKR16_MATMAT(neon, , 6, isums_widening)

void colibri_neon_matmat_qkr16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    QKR16_BY_BITS(neon, bits, out, stride, w, x, rows, cols, n);
}

/* ---- neondot: SDOT by element -------------------------------------------
 * A chunk is four vectors of four rows (LD1 of four registers), each level
 * made once for both tokens; one SDOT by element (x word v) adds a row's
 * four products into its own lane, eight a part, vector and token, no
 * pairwise sums left. */
DOTPROD static inline __attribute__((always_inline)) int32x4_t
sdot_word(int32x4_t acc, int8x16_t lev, int8x16_t half, uint32_t k)
{
    return k == 0u   ? vdotq_laneq_s32(acc, lev, half, 0)
           : k == 1u ? vdotq_laneq_s32(acc, lev, half, 1)
           : k == 2u ? vdotq_laneq_s32(acc, lev, half, 2)
                     : vdotq_laneq_s32(acc, lev, half, 3);
}

DOTPROD static inline __attribute__((always_inline)) void
part_dot(int32x4_t sum[2][4], const uint8_t *chunk, uint8x16_t mask, uint32_t top,
         int8x16_t x[2][2], uint32_t T, uint32_t w)
{
#pragma GCC unroll 8
    for (uint32_t v = 0; v < 8u; v++) {
        uint8x16x4_t raw = vld1q_u8_x4(chunk + v * CHUNK);
        int8x16_t lev[4] = {field(raw.val[0], mask, top, w), field(raw.val[1], mask, top, w),
                            field(raw.val[2], mask, top, w), field(raw.val[3], mask, top, w)};
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
#pragma GCC unroll 4
            for (uint32_t q = 0; q < 4u; q++) {
                sum[t][q] = sdot_word(sum[t][q], lev[q], x[t][v / 4u], v % 4u);
            }
        }
    }
}

DOTPROD static inline __attribute__((always_inline)) void isums_dot(int32x4_t isum[2][4],
                                                                    const uint8_t *tile, uint32_t j,
                                                                    int8x16_t x[2][2],
                                                                    uint32_t bits, uint32_t T)
{
    part_isums(isum, tile, j, x, bits, T, part_dot);
}

QKR16_MATMAT(neondot, DOTPROD, 2, isums_dot)
QKR16_MATMAT(neondot, DOTPROD, 3, isums_dot)
QKR16_MATMAT(neondot, DOTPROD, 4, isums_dot)
QKR16_MATMAT(neondot, DOTPROD, 5, isums_dot)
QKR16_MATMAT(neondot, DOTPROD, 6, isums_dot)

void colibri_neondot_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                  uint32_t bits)
{
    QKR16_BY_BITS(neondot, bits, out, stride, w, x, rows, cols, n);
}
