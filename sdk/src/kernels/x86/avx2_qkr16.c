/*
 * avx2_qkr16.c - the super-block product on groups of 16 rows of the avx2
 * table (matmat_qkr16, format 1.16, docs/format.md 3.6; avx512 borrows it):
 * docs/kernels.md, "Quantized products". Like avx2.c, only built for
 * x86-64; the functions carry their target.
 *
 * One row per int32 lane, rows 0..7 in one ymm and 8..15 in another: a
 * tile's 64-byte chunk u holds four levels of each of the 16 rows (row i's
 * at 4i), so a load, a shift and a mask a part give block j's four levels
 * v (elements 4v .. 4v + 3) of eight rows, and pmaddubsw against the
 * token's four activations broadcast (level <= 63, |x| <= 128: a pair below
 * 2^14) then pmaddwd by ones give each row's four-product sum in its lane:
 * no horizontal sum, no transpose. Pairs add up in 16 bits over 8 quads
 * (bits <= 4: 8 x 2 x 15 x 128 < 2^15), 4 (5 bits) or 2 (6 bits) before
 * one pmaddwd. Each row's block sum is exact; the float steps are the
 * reference's, lane = row, in block order: acc = fma(isum, (d * sc_j) *
 * d_x, acc), acc = fma(-xsum, (dmin * m_j) * d_x, acc), the token's xsum
 * one value for every row. Decode: two blocks a step share the loads of
 * their chunks; prompts: two tokens a pass share the unpacked levels and
 * the scales, each group through all tokens while it stays in cache (as
 * r16.h walks Q8_R16). colibri-qbench (1024 x 4096, a Zen 4): 0.82 (qk3)
 * and 0.95 (qk6) ns a block at one token, row by row 2.21 and 2.78; 0.54
 * and 0.59 at eight tokens (one token a pass: about 0.83 and 0.85).
 */
#include <immintrin.h>
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "kernels/borrowed.h"
#include "kernels/r16.h"
#include "kernels/x86/avx2_lanes.h"

#define AVX2Q __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

enum { ROWS = 16, SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK, TOKENS = 2, LEVELS_AT = 256 };

/* 32 bytes of the tile at byte `at`. */
AVX2Q INLINE __m256i load32(const uint8_t *tile, uint32_t at)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)(tile + at));
}

/* v shifted right (s > 0) or left (s < 0) by |s| bits in 16-bit lanes. */
AVX2Q INLINE __m256i shift16(__m256i v, int s)
{
    return s > 0   ? _mm256_srl_epi16(v, _mm_cvtsi32_si128(s))
           : s < 0 ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(-s))
                   : v;
}

/* Block j's levels 4v .. 4v + 3 of rows 8h .. 8h + 7 (row i's at byte
 * 4 (i - 8h)): the low part of L bits from tile chunk 8 (L j div 8) + v at
 * shift L j mod 8, the high part of bits - L from chunk 8 L + 8 (H j div 8)
 * + v at H j mod 8, moved up to bit L (3.6). */
AVX2Q INLINE __m256i quad_levels(const uint8_t *tile, uint32_t j, uint32_t v, uint32_t h,
                                 uint32_t bits)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    uint32_t at = LEVELS_AT + 64u * (8u * (low * j / 8u) + v) + 32u * h;
    __m256i q = shift16(load32(tile, at), (int)(low * j % 8u));
    q = _mm256_and_si256(q, _mm256_set1_epi8((char)((1u << low) - 1u)));
    if (high == 0u) {
        return q;
    }
    at = LEVELS_AT + 64u * (8u * low + 8u * (high * j / 8u) + v) + 32u * h;
    __m256i p = shift16(load32(tile, at), (int)(high * j % 8u) - (int)low);
    return _mm256_or_si256(
        q, _mm256_and_si256(p, _mm256_set1_epi8((char)(((1u << high) - 1u) << low))));
}

/* The four activations of dword v of a block, broadcast. */
AVX2Q INLINE __m256i x_dword(const int8_t *q, uint32_t v)
{
    int32_t x;
    memcpy(&x, q + 4u * v, sizeof x);
    return _mm256_set1_epi32(x);
}

/* K blocks j0 .. j0 + K - 1 (K T <= 2: two blocks at decode share the
 * loads of their chunks) against T tokens: isum[k][t][h], the exact sums of
 * rows 8h .. 8h + 7 (lane = row) with the blocks q[k][t]; the 16-bit pairs
 * go to 32 bits every `run` quads. */
AVX2Q INLINE void blocks_isums(__m256i (*isum)[TOKENS][2], const uint8_t *tile,
                               const int8_t *(*q)[TOKENS], uint32_t j0, uint32_t K, uint32_t bits,
                               uint32_t T)
{
    const uint32_t run = bits <= 4u ? 8u : bits == 5u ? 4u : 2u;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i pairs[2][TOKENS][2];
    for (uint32_t k = 0; k < K; k++) {
        for (uint32_t t = 0; t < T; t++) {
            for (uint32_t h = 0; h < 2u; h++) {
                isum[k][t][h] = pairs[k][t][h] = _mm256_setzero_si256();
            }
        }
    }
#pragma GCC unroll 8
    for (uint32_t v = 0; v < 8u; v++) {
#pragma GCC unroll 2
        for (uint32_t k = 0; k < K; k++) {
            __m256i lv[2] = {quad_levels(tile, j0 + k, v, 0, bits),
                             quad_levels(tile, j0 + k, v, 1, bits)};
#pragma GCC unroll 2
            for (uint32_t t = 0; t < T; t++) {
                __m256i xv = x_dword(q[k][t], v);
#pragma GCC unroll 2
                for (uint32_t h = 0; h < 2u; h++) {
                    __m256i *p = &pairs[k][t][h], m = _mm256_maddubs_epi16(lv[h], xv);
                    *p = v % run == 0u ? m : _mm256_add_epi16(*p, m);
                    __asm__("" : "+x"(*p)); /* a chain per accumulator, no spilled tree */
                    if (v % run == run - 1u) {
                        isum[k][t][h] =
                            _mm256_add_epi32(isum[k][t][h], _mm256_madd_epi16(*p, ones));
                        *p = _mm256_setzero_si256();
                    }
                }
            }
        }
    }
}

/* The tile's 6-bit scales sc[j][i] and mins mn[j][i] of its 16 rows, 32
 * bytes at a time: sc_j = byte 64 + 16j + i & 63, m_j = that byte >> 6 |
 * (byte 192 + 16 (j % 4) + i >> 4 (j / 4) & 15) << 2 (3.5, 3.6). */
AVX2Q INLINE void tile_scales(uint8_t (*sc)[ROWS], uint8_t (*mn)[ROWS], const uint8_t *tile)
{
    const __m256i m63 = _mm256_set1_epi8(63), m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
#pragma GCC unroll 4
    for (uint32_t c = 0; c < SUB / 2u; c++) { /* blocks 2c, 2c + 1 */
        __m256i b = load32(tile, 64u + 32u * c), k = load32(tile, 192u + 32u * (c % 2u));
        k = _mm256_and_si256(c < 2u ? k : _mm256_srli_epi16(k, 4), m15);
        __m256i m = _mm256_and_si256(_mm256_srli_epi16(b, 6), m3);
        m = _mm256_or_si256(m, _mm256_slli_epi16(k, 2));
        _mm256_storeu_si256((__m256i *)(void *)sc[2u * c], _mm256_and_si256(b, m63));
        _mm256_storeu_si256((__m256i *)(void *)mn[2u * c], m);
    }
}

/* Eight bytes from p as int32 lanes, converted (exact) and scaled by f. */
AVX2Q INLINE __m256 scaled_bytes(const uint8_t *p, __m256 f)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm256_mul_ps(f, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)));
}

/* -sum q of a token's blocks x[0 .. 8) as floats (exact; blocks past count
 * repeat block count - 1, never used). */
AVX2Q INLINE void token_sums(float *neg_xsum, const colibri_qblock *x, uint32_t count)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
    __m256i part[SUB];
#pragma GCC unroll 8
    for (uint32_t k = 0; k < SUB; k++) {
        const int8_t *q = x[k < count ? k : count - 1u].q;
        __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)q);
        part[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xq), ones);
    }
    __m256 sums = _mm256_cvtepi32_ps(isum8(part));
    _mm256_storeu_ps(neg_xsum, _mm256_sub_ps(_mm256_setzero_ps(), sums));
}

/* What a tile's blocks share: d and dmin of rows 8h .. 8h + 7 (F16C:
 * exact), the 6-bit scales and mins, each token's -xsum per block. */
typedef struct tile_consts {
    __m256 d[2], dmin[2];
    uint8_t sc[SUB][ROWS], mn[SUB][ROWS];
    float neg_xsum[TOKENS][SUB];
} tile_consts;

/* Block j's float steps, lane = row, for T tokens: acc = fma(isum, (d *
 * sc_j) * d_x, acc), then acc = fma(-xsum, (dmin * m_j) * d_x, acc). */
AVX2Q INLINE void block_steps(__m256 (*acc)[2], __m256i (*isum)[2], const tile_consts *c,
                              const colibri_qblock *const *xs, uint32_t j, uint32_t T)
{
#pragma GCC unroll 2
    for (uint32_t h = 0; h < 2u; h++) {
        __m256 scale = scaled_bytes(c->sc[j] + 8u * h, c->d[h]);
        __m256 min = scaled_bytes(c->mn[j] + 8u * h, c->dmin[h]);
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
            __m256 dx = _mm256_set1_ps(xs[t][j].d);
            acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][h]), _mm256_mul_ps(scale, dx),
                                        acc[t][h]);
            acc[t][h] = _mm256_fmadd_ps(_mm256_broadcast_ss(&c->neg_xsum[t][j]),
                                        _mm256_mul_ps(min, dx), acc[t][h]);
        }
    }
}

/* One tile (a super-block of the 16 rows: count <= 8 blocks) against T
 * tokens' blocks xs[t][0 .. count): acc[t][h] of rows 8h .. 8h + 7, block
 * after block, K = 2 / T blocks a step (a block past count: its sums taken
 * with block j0's activations, not used). */
AVX2Q INLINE void tile_tokens(__m256 (*acc)[2], const uint8_t *tile,
                              const colibri_qblock *const *xs, uint32_t count, uint32_t bits,
                              uint32_t T)
{
    const uint32_t K = 2u / T;
    tile_consts c;
    for (uint32_t t = 0; t < T; t++) {
        token_sums(c.neg_xsum[t], xs[t], count);
    }
    for (uint32_t h = 0; h < 2u; h++) {
        c.d[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tile + 16u * h)));
        c.dmin[h] =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tile + 32u + 16u * h)));
    }
    tile_scales(c.sc, c.mn, tile);
#pragma GCC unroll 8
    for (uint32_t j0 = 0; j0 < SUB; j0 += K) {
        if (j0 >= count) {
            break;
        }
        const int8_t *q[2][TOKENS];
        __m256i isum[2][TOKENS][2];
        const uint8_t *levels = tile;
        __asm__ volatile("" : "+r"(levels)); /* reload chunks, not keep them from step to step */
        for (uint32_t k = 0; k < K; k++) {
            for (uint32_t t = 0; t < T; t++) {
                q[k][t] = xs[t][j0 + k < count ? j0 + k : j0].q;
            }
        }
        colibri_qkr16_prefetch(tile, bits, j0, K);
        blocks_isums(isum, levels, q, j0, K, bits, T);
        block_steps(acc, isum[0], &c, xs, j0, T);
        if (K == 2u && j0 + 1u < count) {
            block_steps(acc, isum[1], &c, xs, j0 + 1u, T);
        }
    }
}

/* T tokens (those past tokens_left: the last one again, not stored) through
 * one whole group of nb blocks a row; rows past rows_left not stored. */
AVX2Q INLINE void group_tokens(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                               const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                               uint32_t tokens_left, uint32_t bits, uint32_t T)
{
    const colibri_qblock *xt[TOKENS];
    __m256 acc[TOKENS][2];
    for (uint32_t t = 0; t < T; t++) {
        xt[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    }
    for (uint32_t b0 = 0; b0 < nb; b0 += SUB) {
        const colibri_qblock *xs[TOKENS];
        for (uint32_t t = 0; t < T; t++) {
            xs[t] = xt[t] + b0;
        }
        uint32_t count = nb - b0 < SUB ? nb - b0 : SUB;
        tile_tokens(acc, group + (size_t)(b0 / SUB) * tile_bytes, xs, count, bits, T);
    }
    uint32_t keep = rows_left < ROWS ? rows_left : ROWS;
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        float v[ROWS];
        _mm256_storeu_ps(v, acc[t][0]);
        _mm256_storeu_ps(v + 8, acc[t][1]);
        memcpy(out + t * stride, v, keep * sizeof(float));
    }
}

/* Every group, each through all n tokens two at a time (one when one is
 * left) while it stays in cache; `bits` a constant in each instance (the
 * shifts and masks fold). */
AVX2Q INLINE void qkr16_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols), nsb = (nb + SUB - 1u) / SUB;
    size_t tile_bytes = ROWS * COLIBRI_QK_BYTES(bits);
    for (uint32_t r = 0; r < rows; r += ROWS) {
        const uint8_t *group = w + (size_t)(r / ROWS) * nsb * tile_bytes;
        uint32_t t = 0;
        for (; t + TOKENS <= n; t += TOKENS) {
            group_tokens(out + t * stride + r, stride, group, tile_bytes, x + (size_t)t * nb, nb,
                         rows - r, n - t, bits, TOKENS);
        }
        if (t < n) {
            group_tokens(out + t * stride + r, stride, group, tile_bytes, x + (size_t)t * nb, nb,
                         rows - r, n - t, bits, 1u);
        }
    }
}

#define QKR16_MATMAT(b)                                                                            \
    AVX2Q static void qkr16_matmat_##b(float *out, size_t stride, const uint8_t *w,                \
                                       const colibri_qblock *x, uint32_t rows, uint32_t cols,      \
                                       uint32_t n)                                                 \
    {                                                                                              \
        qkr16_matmat(out, stride, w, x, rows, cols, n, b##u);                                      \
    }
QKR16_MATMAT(2)
QKR16_MATMAT(3)
QKR16_MATMAT(4)
QKR16_MATMAT(5)
QKR16_MATMAT(6)

AVX2Q void colibri_avx2_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n, uint32_t bits)
{
    static void (*const by_bits[5])(float *, size_t, const uint8_t *, const colibri_qblock *,
                                    uint32_t, uint32_t, uint32_t) = {
        qkr16_matmat_2, qkr16_matmat_3, qkr16_matmat_4, qkr16_matmat_5, qkr16_matmat_6};
    by_bits[bits - 2u](out, stride, w, x, rows, cols, n);
}
