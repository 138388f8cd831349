/*
 * avx512vnni_r16.c - the Q8_R16 and Q4_R16 slots of the avx512vnni table:
 * weights in groups of sixteen rows (colibri.h, docs/format.md 3.4), one
 * row per lane. The walk over the groups is r16.h's.
 */
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "avx512vnni.h"
#include "kernels/r16.h"

/* ---- weights in groups of 16 rows (Q8_R16, Q4_R16: colibri.h) ---------
 * A tile (block b of sixteen rows) loads as eight vectors in which lane r
 * holds four weights of row r: wv[k] the elements 4k .. 4k + 3 (Q4: the low
 * nibbles of chunk k for k < 4, the high ones of chunk k - 4 after), to be
 * multiplied with the four x bytes of dword k of the block, broadcast. Every
 * row's exact sum builds up in its own lane: no horizontal sum, no
 * transpose. The float steps are the reference's, lane = row.
 * Decode (one token): the weights go in unsigned (Q4 nibbles as they are,
 * Q8 w xor 0x80) and each block's sum starts at -bias * (sum of its x),
 * computed once per call for up to R16_CHUNK blocks; between chunks a row's
 * float sum waits in out. More tokens: the weights go in signed (nibble - 8,
 * Q8 as is) with x + 128 as the unsigned operand, each row's sum starting at
 * -128 * (its sum of the block's weights), paid once per tile for up to
 * eight tokens. */
enum { R16_CHUNK = 64, R16_TOKENS = 8 };

/* Four bytes of x as one int32 (a broadcast operand). */
static INLINE int32_t x_dword(const int8_t *q, uint32_t k)
{
    int32_t v;
    memcpy(&v, q + 4u * k, sizeof v);
    return v;
}

/* A tile's eight weight vectors, signed (sign) or unsigned (as above). */
VNNI static INLINE void r16_weights(const uint8_t *tile, int q4, int sign, __m512i *wv)
{
    const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    if (q4) {
#pragma GCC unroll 4
        for (uint32_t k = 0; k < 4u; k++) {
            __m512i v = _mm512_loadu_si512((const void *)(tile + 32u + 64u * k));
            wv[k] = _mm512_and_si512(v, low);
            wv[4u + k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            if (sign) {
                wv[k] = _mm512_sub_epi8(wv[k], eight);
                wv[4u + k] = _mm512_sub_epi8(wv[4u + k], eight);
            }
        }
        return;
    }
#pragma GCC unroll 8
    for (uint32_t k = 0; k < 8u; k++) {
        wv[k] = _mm512_loadu_si512((const void *)(tile + 32u + 64u * k));
        if (!sign) {
            wv[k] = _mm512_xor_si512(wv[k], flip);
        }
    }
}

/* The sixteen rows' scales of a tile times d_x. */
VNNI static INLINE __m512 r16_scales(const uint8_t *tile, float dx)
{
    __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)tile));
    return _mm512_mul_ps(dw, _mm512_set1_ps(dx));
}

VNNI static INLINE __mmask16 r16_keep(uint32_t rows_left)
{
    return rows_left >= COLIBRI_R16_ROWS ? (__mmask16)0xFFFF : (__mmask16)((1u << rows_left) - 1u);
}

/* init[j] = -bias * (sum of the x of block j), j < count <= R16_CHUNK:
 * sixteen blocks at a time through row_sums8, put back in block order. */
VNNI static void r16_x_inits(int32_t *init, const colibri_qblock *x, uint32_t count, int q4)
{
    const __m512i bias = _mm512_set1_epi8(q4 ? 8 : (char)0x80), zero = _mm512_setzero_si512();
    const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    for (uint32_t g = 0; 16u * g < count; g++) {
        __m512i v[8];
        for (uint32_t k = 0; k < 8u; k++) {
            uint32_t b = 16u * g + 2u * k;
            int two = b + 1u < count;
            v[k] = b < count ? _mm512_dpbusd_epi32(zero, bias,
                                                   load_pair(x[b].q, x[b + (two ? 1u : 0u)].q, two))
                             : zero;
        }
        __m512i totals = _mm512_sub_epi32(zero, row_sums8(v, 0));
        _mm512_storeu_si512((void *)(init + 16u * g), _mm512_permutexvar_epi32(order, totals));
    }
}

/* Blocks b0 .. b0 + count - 1 of one group, one token. */
VNNI static void r16_decode_group(float *out, const uint8_t *group, size_t tile_bytes,
                                  const colibri_qblock *x, const int32_t *init, uint32_t b0,
                                  uint32_t count, uint32_t rows_left, int q4)
{
    __mmask16 keep = r16_keep(rows_left);
    __m512 acc = b0 ? _mm512_maskz_loadu_ps(keep, out) : _mm512_setzero_ps();
    for (uint32_t j = 0; j < count; j++) {
        uint32_t b = b0 + j;
        const uint8_t *tile = group + (size_t)b * tile_bytes;
        __m512i wv[8], isum = _mm512_set1_epi32(init[j]);
        r16_weights(tile, q4, 0, wv);
#pragma GCC unroll 8
        for (uint32_t k = 0; k < 8u; k++) {
            isum = _mm512_dpbusd_epi32(isum, wv[k], _mm512_set1_epi32(x_dword(x[b].q, k)));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), r16_scales(tile, x[b].d), acc);
    }
    _mm512_mask_storeu_ps(out, keep, acc);
}

VNNI static void r16_decode(float *out, const uint8_t *w, const colibri_qblock *x, uint32_t rows,
                            uint32_t nb, int q4)
{
    size_t tile_bytes = colibri_r16_tile_bytes(q4);
    int32_t init[R16_CHUNK];
    for (uint32_t b0 = 0; b0 < nb; b0 += R16_CHUNK) {
        uint32_t count = nb - b0 < R16_CHUNK ? nb - b0 : R16_CHUNK;
        r16_x_inits(init, x + b0, count, q4);
        for (uint32_t r = 0; r < rows; r += COLIBRI_R16_ROWS) {
            r16_decode_group(out + r, colibri_r16_group(w, r, nb, tile_bytes), tile_bytes, x, init,
                             b0, count, rows - r, q4);
        }
    }
}

/* T tokens (tokens past tokens_left: the last one again, not stored)
 * through one whole group. */
VNNI static INLINE void r16_tokens(float *out, size_t stride, const uint8_t *group,
                                   size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                   uint32_t rows_left, uint32_t tokens_left, int q4, uint32_t T)
{
    const colibri_qblock *xt[R16_TOKENS];
    __m512 acc[R16_TOKENS];
    const __m512i ones = _mm512_set1_epi8(1);
    for (uint32_t t = 0; t < T; t++) {
        xt[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
        acc[t] = _mm512_setzero_ps();
    }
    for (uint32_t b = 0; b < nb; b++) {
        const uint8_t *tile = group + (size_t)b * tile_bytes;
        __m512i wv[8], wsum = _mm512_setzero_si512();
        r16_weights(tile, q4, 1, wv);
#pragma GCC unroll 8
        for (uint32_t k = 0; k < 8u; k++) {
            wsum = _mm512_dpbusd_epi32(wsum, ones, wv[k]);
        }
        __m512i init = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7));
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)tile));
#pragma GCC unroll 8
        for (uint32_t t = 0; t < T; t++) {
            int32_t xu[8]; /* x + 128, four bytes to a word */
            _mm256_storeu_si256(
                (__m256i *)(void *)xu,
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)xt[t][b].q),
                                 _mm256_set1_epi8((char)0x80)));
            __m512i isum = init;
#pragma GCC unroll 8
            for (uint32_t k = 0; k < 8u; k++) {
                isum = _mm512_dpbusd_epi32(isum, _mm512_set1_epi32(xu[k]), wv[k]);
            }
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(xt[t][b].d)), acc[t]);
        }
    }
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        _mm512_mask_storeu_ps(out + t * stride, r16_keep(rows_left), acc[t]);
    }
}

/* Prompts: eight, four or two tokens a pass (r16.h's walk). */
VNNI static uint32_t r16_pass(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                              const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                              uint32_t tokens_left, int q4)
{
    if (tokens_left >= 8u) {
        r16_tokens(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, q4, 8u);
        return 8u;
    }
    if (tokens_left >= 4u) {
        r16_tokens(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, q4, 4u);
        return 4u;
    }
    r16_tokens(out, stride, group, tile_bytes, x, nb, rows_left, tokens_left, q4, 2u);
    return 2u;
}

VNNI static INLINE void r16_matmat(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n, int q4)
{
    if (n == 1u) {
        r16_decode(out, w, x, rows, colibri_qblocks(cols), q4);
        return;
    }
    colibri_r16_walk(out, stride, w, x, rows, cols, n, q4, r16_pass);
}

VNNI void colibri_avx512vnni_matmat_q8r16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n)
{
    r16_matmat(out, stride, w, x, rows, cols, n, 0);
}

VNNI void colibri_avx512vnni_matmat_q4r16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n)
{
    r16_matmat(out, stride, w, x, rows, cols, n, 1);
}
