/*
 * avx2_r16.c - the Q8_R16 and Q4_R16 slots of the avx2 table: weights in
 * groups of sixteen rows (colibri.h, docs/format.md 3.4), one row per int32
 * lane, rows 0..7 in one ymm and 8..15 in another. The walk over the groups
 * is r16.h's.
 *
 * Chunk k of a tile holds four weights of each row; they meet the four x
 * bytes of the block's dword k, broadcast, in pmaddubsw (unsigned x signed
 * -> pairs of 16-bit sums) and pmaddwd by ones (-> the row's four-product
 * sum in its lane): no horizontal sum, no transpose. Q8: |w| against
 * sign(x, w) (at most 2 x 128 x 127 per pair: no saturation), a pmaddwd per
 * chunk. Q4: the nibbles as they are against x (at most 2 x 15 x 127 per
 * pair, so the eight products of a block add up in 16 bits before one
 * pmaddwd), less 8 x (the block's sum of x), the same for every row. Every
 * row's block sum is exact; the float steps are the reference's, lane = row:
 * acc = fma((float)isum, d_w * d_x, acc) in block order.
 */
#include <immintrin.h>
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "kernels/borrowed.h"
#include "kernels/r16.h"

#define AVX2Q __attribute__((target("avx2,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

enum { R16_TOKENS = 2 };

/* The block's four x bytes of dword k, broadcast. */
AVX2Q static INLINE __m256i x_dword(const int8_t *q, uint32_t k)
{
    int32_t v;
    memcpy(&v, q + 4u * k, sizeof v);
    return _mm256_set1_epi32(v);
}

/* 8 x (sum of the block's 32 x), exact. */
AVX2Q static INLINE int32_t q4_bias(const int8_t *q)
{
    __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(8),
                                         _mm256_loadu_si256((const __m256i *)(const void *)q));
    __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Half h (rows 8h .. 8h + 7) of a Q8 tile against one token's block. */
AVX2Q static INLINE __m256i q8_half(const uint8_t *tile, uint32_t h, const int8_t *q)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (uint32_t k = 0; k < 8u; k++) {
        __m256i w =
            _mm256_loadu_si256((const __m256i *)(const void *)(tile + 32u + 64u * k + 32u * h));
        __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x_dword(q, k), w));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
    }
    return isum;
}

/* Half h of a Q4 tile against one token's block (bias: q4_bias of it). */
AVX2Q static INLINE __m256i q4_half(const uint8_t *tile, uint32_t h, const int8_t *q, int32_t bias)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256i pairs = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (uint32_t k = 0; k < 4u; k++) {
        __m256i v =
            _mm256_loadu_si256((const __m256i *)(const void *)(tile + 32u + 64u * k + 32u * h));
        __m256i lo = _mm256_and_si256(v, low);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(lo, x_dword(q, k)));
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(hi, x_dword(q, 4u + k)));
    }
    __m256i isum = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    return _mm256_sub_epi32(isum, _mm256_set1_epi32(bias));
}

/* T tokens (those past tokens_left: the last one again, not stored) through
 * one whole group. */
AVX2Q static INLINE void r16_tokens(float *out, size_t stride, const uint8_t *group,
                                    size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                    uint32_t rows_left, uint32_t tokens_left, int q4, uint32_t T)
{
    const colibri_qblock *xt[R16_TOKENS];
    __m256 acc[R16_TOKENS][2];
    for (uint32_t t = 0; t < T; t++) {
        xt[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    }
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *tile = group + (size_t)b * tile_bytes;
        __m256 dw[2] = {
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)tile)),
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tile + 16)))};
#pragma GCC unroll 2
        for (uint32_t t = 0; t < T; t++) {
            const int8_t *q = xt[t][b].q;
            int32_t bias = q4 ? q4_bias(q) : 0;
            __m256 dx = _mm256_set1_ps(xt[t][b].d);
#pragma GCC unroll 2
            for (uint32_t h = 0; h < 2u; h++) {
                __m256i isum = q4 ? q4_half(tile, h, q, bias) : q8_half(tile, h, q);
                acc[t][h] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw[h], dx), acc[t][h]);
            }
        }
    }
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        float v[COLIBRI_R16_ROWS];
        _mm256_storeu_ps(v, acc[t][0]);
        _mm256_storeu_ps(v + 8, acc[t][1]);
        uint32_t keep = rows_left < COLIBRI_R16_ROWS ? rows_left : COLIBRI_R16_ROWS;
        memcpy(out + t * stride, v, keep * sizeof(float));
    }
}

/* One token a pass (decode), else two (r16.h's walk); q4 a constant in each
 * of the two passes below, so that neither carries the other's branch and
 * registers through its loop (Q8 prompt: 0.63 -> 0.61 ns per block). */
AVX2Q static INLINE uint32_t r16_pass(float *out, size_t stride, const uint8_t *group,
                                      size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                      uint32_t rows_left, uint32_t tokens_left, int q4)
{
    if (tokens_left >= 2u) {
        r16_tokens(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, q4, 2u);
        return 2u;
    }
    r16_tokens(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, q4, 1u);
    return 1u;
}

AVX2Q static uint32_t r16_pass_q8(float *out, size_t stride, const uint8_t *group,
                                  size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                  uint32_t rows_left, uint32_t tokens_left, int q4)
{
    (void)q4;
    return r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 0);
}

AVX2Q static uint32_t r16_pass_q4(float *out, size_t stride, const uint8_t *group,
                                  size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                  uint32_t rows_left, uint32_t tokens_left, int q4)
{
    (void)q4;
    return r16_pass(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, 1);
}

AVX2Q void colibri_avx2_matmat_q8r16(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 0, r16_pass_q8);
}

AVX2Q void colibri_avx2_matmat_q4r16(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 1, r16_pass_q4);
}
