/*
 * avx2_quant.c - the Q8 and Q4 products of the avx2 table (matmat_q8,
 * matmat_q4; avx512 borrows them): docs/kernels.md, "Quantized products".
 * Like avx2.c, only built for x86-64; the functions carry their target (the
 * binary16 scales need F16C, which the port checks with AVX2 and FMA).
 */
#include <immintrin.h>
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "kernels/borrowed.h"
#include "kernels/x86/avx2_lanes.h"

#define AVX2Q __attribute__((target("avx2,fma,f16c")))

/* ---- quantized products (docs/kernels.md, "Quantized products") ---------
 * A tile is R weight rows by T tokens, R * T = 8 (row, token) pairs, pair
 * p = t * R + r in lane p of one float accumulator: per block each lane gets
 * acc = fma((float)isum, d_w * d_x, acc), the reference's steps. The 32
 * products of a pair's block are summed exactly in integers: Q8 as
 * pmaddubsw(|w|, sign(x, w)) (|w| <= 128, |x| <= 127: a pair of products
 * never saturates 16 bits) then pmaddwd by ones; Q4 as pmaddubsw(nibble, x)
 * - pmaddubsw(8, x) (both below 2 * 15 * 127). Rows past the matrix and
 * tokens past n repeat the last one; their lanes are not stored. */

/* The eight lanes' scales of block b: d_w of each lane's row (binary16,
 * packed four to a 64-bit word, converted, repeated T times) times d_x of
 * its token (broadcast loads). */
AVX2Q static inline __attribute__((always_inline)) __m256
tile_scales(const uint8_t *const *w, const colibri_qblock *const *x, uint32_t b, size_t block_bytes,
            uint32_t R, uint32_t T)
{
    uint64_t h[2] = {0, 0};
#pragma GCC unroll 8
    for (uint32_t r = 0; r < R; r++) {
        h[r / 4u] |= (uint64_t)colibri_rd_u16(w[r] + b * block_bytes) << (16u * (r % 4u));
    }
    __m256 dw, dx = _mm256_set1_ps(x[0][b].d);
    if (R == 8u) {
        dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)h[1], (long long)h[0]));
    } else {
        __m128 v = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h[0]));
        dw = _mm256_set_m128(v, v);
    }
    if (T == 2u) {
        dx = _mm256_blend_ps(dx, _mm256_set1_ps(x[1][b].d), 0xF0);
    }
    return _mm256_mul_ps(dw, dx);
}

typedef struct qtile {
    const uint8_t *w[8];        /* the tile's rows (R used) */
    const colibri_qblock *x[8]; /* its tokens (T used) */
} qtile;

/* Rows r0.. and tokens t0.. of the product, the last ones repeated. */
AVX2Q static qtile tile_at(const uint8_t *w, size_t row_bytes, const colibri_qblock *x, uint32_t nb,
                           uint32_t rows_left, uint32_t tokens_left, uint32_t R, uint32_t T)
{
    qtile q;
#pragma GCC unroll 8
    for (uint32_t r = 0; r < R; r++) {
        q.w[r] = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes;
    }
    for (uint32_t t = 0; t < T; t++) {
        q.x[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
    }
    return q;
}

AVX2Q static void tile_store(float *out, size_t stride, __m256 acc, uint32_t rows_left,
                             uint32_t tokens_left, uint32_t R, uint32_t T)
{
    float v[8];
    _mm256_storeu_ps(v, acc);
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        for (uint32_t r = 0; r < R && r < rows_left; r++) {
            out[t * stride + r] = v[t * R + r];
        }
    }
}

/* One Q8 block of a tile: the eight pairs' exact sums. */
AVX2Q static inline __attribute__((always_inline)) __m256i q8_block(const qtile *q, uint32_t b,
                                                                    uint32_t R, uint32_t T)
{
    __m256i raw[8], mag[8], xq[8], part[8];
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (uint32_t r = 0; r < R; r++) {
        raw[r] = _mm256_loadu_si256((const __m256i *)(const void *)(q->w[r] + b * 34u + 2u));
        mag[r] = _mm256_abs_epi8(raw[r]);
    }
#pragma GCC unroll 8
    for (uint32_t t = 0; t < T; t++) {
        xq[t] = _mm256_loadu_si256((const __m256i *)(const void *)q->x[t][b].q);
#pragma GCC unroll 8
        for (uint32_t r = 0; r < R; r++) {
            __m256i prod = _mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(xq[t], raw[r]));
            part[t * R + r] = _mm256_madd_epi16(prod, ones);
        }
    }
    return isum8(part);
}

/* One Q4 block of a tile. */
AVX2Q static inline __attribute__((always_inline)) __m256i q4_block(const qtile *q, uint32_t b,
                                                                    uint32_t R, uint32_t T)
{
    __m256i nib[8], part[8];
    const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
    const __m256i eight = _mm256_set1_epi8(8);
#pragma GCC unroll 8
    for (uint32_t r = 0; r < R; r++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(q->w[r] + b * 18u + 2u));
        __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
        nib[r] = _mm256_and_si256(both, low);
    }
#pragma GCC unroll 8
    for (uint32_t t = 0; t < T; t++) {
        __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)q->x[t][b].q);
        __m256i bias = _mm256_maddubs_epi16(eight, xq);
#pragma GCC unroll 8
        for (uint32_t r = 0; r < R; r++) {
            __m256i prod = _mm256_sub_epi16(_mm256_maddubs_epi16(nib[r], xq), bias);
            part[t * R + r] = _mm256_madd_epi16(prod, ones);
        }
    }
    return isum8(part);
}

/* One tile through every block, written to out. */
AVX2Q static inline __attribute__((always_inline)) void
q_tile(float *out, size_t stride, const uint8_t *w, size_t row_bytes, const colibri_qblock *x,
       uint32_t nb, uint32_t rows_left, uint32_t tokens_left, int q4, uint32_t R, uint32_t T)
{
    qtile q = tile_at(w, row_bytes, x, nb, rows_left, tokens_left, R, T);
    uint32_t block_bytes = q4 ? 18u : 34u;
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b = 0; b < nb; b++) {
        __m256i isum = q4 ? q4_block(&q, b, R, T) : q8_block(&q, b, R, T);
        __m256 s = tile_scales(q.w, q.x, b, block_bytes, R, T);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), s, acc);
    }
    tile_store(out, stride, acc, rows_left, tokens_left, R, T);
}

/* ---- decode: the rows of a tile read whole, one after the other ---------
 * Eight rows interleaved block by block make eight short streams, which an
 * AMD EPYC served from DRAM at about a third of one sequential stream's rate
 * (docs/kernels.md). So for one token each row's blocks are reduced to their
 * exact sums, eight blocks at a time (isum8: lane = block), and wait with
 * their scales in [block][row] arrays until the tile's last row is read;
 * then the float steps run in block order, lane = row: the sums and steps of
 * q_tile, bit for bit. Rows are taken DECODE_CHUNK blocks at a time. */
enum { DECODE_CHUNK = 64 };

/* The eight int32 partials of one row's block b against the token. */
AVX2Q static inline __attribute__((always_inline)) __m256i
row_block(const uint8_t *row, const colibri_qblock *x, uint32_t b, int q4)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)x[b].q);
    if (q4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(row + b * 18u + 2u));
        __m256i nib =
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
        __m256i prod = _mm256_sub_epi16(_mm256_maddubs_epi16(nib, xq),
                                        _mm256_maddubs_epi16(_mm256_set1_epi8(8), xq));
        return _mm256_madd_epi16(prod, ones);
    }
    __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(row + b * 34u + 2u));
    __m256i prod = _mm256_maddubs_epi16(_mm256_abs_epi8(raw), _mm256_sign_epi8(xq, raw));
    return _mm256_madd_epi16(prod, ones);
}

/* Blocks b0 .. b0 + count - 1 of one row: its exact sums and its scales
 * (binary16, converted) in block order, sums[j] and scales[j]; past count,
 * the last block again (not used). */
AVX2Q static inline __attribute__((always_inline)) void
row_sums(int32_t *sums, float *scales, const uint8_t *row, const colibri_qblock *x, uint32_t b0,
         uint32_t count, int q4)
{
    uint32_t block_bytes = q4 ? 18u : 34u;
    for (uint32_t j = 0; j < count; j += 8u) {
        __m256i part[8];
        uint64_t h[2] = {0, 0}; /* four binary16 to a word: no store to reload */
#pragma GCC unroll 8
        for (uint32_t k = 0; k < 8u; k++) {
            uint32_t b = b0 + (j + k < count ? j + k : count - 1u);
            part[k] = row_block(row, x, b, q4);
            h[k / 4u] |= (uint64_t)colibri_rd_u16(row + b * block_bytes) << (16u * (k % 4u));
        }
        _mm256_storeu_si256((__m256i *)(void *)(sums + j), isum8(part));
        _mm256_storeu_ps(scales + j,
                         _mm256_cvtph_ps(_mm_set_epi64x((long long)h[1], (long long)h[0])));
    }
}

/* One token through up to eight rows: each row's sums and scales, then the
 * float steps in block order, lane = row (8 x 8 transposes). */
AVX2Q static void q_decode_tile(float *out, const uint8_t *w, size_t row_bytes,
                                const colibri_qblock *x, uint32_t nb, uint32_t rows_left, int q4)
{
    int32_t sums[8][DECODE_CHUNK];
    float scales[8][DECODE_CHUNK];
    uint32_t rows = rows_left < 8u ? rows_left : 8u;
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b0 = 0; b0 < nb; b0 += DECODE_CHUNK) {
        uint32_t count = nb - b0 < DECODE_CHUNK ? nb - b0 : DECODE_CHUNK;
        for (uint32_t r = 0; r < 8u; r++) { /* rows past the matrix: the last again */
            row_sums(sums[r], scales[r], w + (r < rows ? r : rows - 1u) * row_bytes, x, b0, count,
                     q4);
        }
        for (uint32_t j = 0; j < count; j += 8u) {
            __m256 isum[8], dw[8];
            for (uint32_t r = 0; r < 8u; r++) {
                isum[r] = _mm256_cvtepi32_ps(
                    _mm256_loadu_si256((const __m256i *)(const void *)(sums[r] + j)));
                dw[r] = _mm256_loadu_ps(scales[r] + j);
            }
            transpose8(isum);
            transpose8(dw);
            for (uint32_t k = 0; k < 8u && j + k < count; k++) {
                __m256 s = _mm256_mul_ps(dw[k], _mm256_set1_ps(x[b0 + j + k].d));
                acc = _mm256_fmadd_ps(isum[k], s, acc);
            }
        }
    }
    float v[8];
    _mm256_storeu_ps(v, acc);
    memcpy(out, v, rows * sizeof(float));
}

/* Decode (n = 1): q_decode_tile, eight rows at a time; prompts: four rows by
 * two tokens, the rows outside, so a tile's rows stay in cache while the
 * tokens pass. */
AVX2Q static inline __attribute__((always_inline)) void
q_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x, uint32_t rows,
         uint32_t cols, uint32_t n, int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = (size_t)nb * (q4 ? 18u : 34u);
    if (n == 1u) {
        for (uint32_t r = 0; r < rows; r += 8u) {
            q_decode_tile(out + r, w + r * row_bytes, row_bytes, x, nb, rows - r, q4);
        }
        return;
    }
    for (uint32_t r = 0; r < rows; r += 4u) {
        for (uint32_t t = 0; t < n; t += 2u) {
            q_tile(out + t * stride + r, stride, w + r * row_bytes, row_bytes, x + (size_t)t * nb,
                   nb, rows - r, n - t, q4, 4u, 2u);
        }
    }
}

AVX2Q void colibri_avx2_matmat_q8(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 0);
}

AVX2Q void colibri_avx2_matmat_q4(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 1);
}
