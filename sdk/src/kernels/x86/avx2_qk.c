/*
 * avx2_qk.c - the super-block product of the avx2 table (matmat_qk, format
 * 1.15; avx512 and avx512vnni borrow it): docs/kernels.md, "Quantized
 * products". Like avx2.c, only built for x86-64; the functions carry their
 * target.
 *
 * Eight rows and one token at a time. Per row and super-block, each block's
 * 32 levels are unpacked to bytes (a load, a shift and a mask a part: the
 * format interleaves the blocks) and its exact sum with the activations
 * taken (pmaddubsw: level <= 63, |x| <= 127, a pair below 2^15; pmaddwd by
 * ones), eight blocks to a vector (lane = block), with the blocks' scales
 * d * sc and mins dmin * m (exact products). An 8 x 8 transpose turns them
 * to lane = row, and the float steps run in block order: per block
 * acc = fma(isum, scale * d_x, acc), acc = fma(-xsum, min * d_x, acc), the
 * reference's. Rows past the matrix repeat the last one, blocks past the
 * row's last (in its last super-block) the last block; neither is used.
 */
#include <immintrin.h>
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "kernels/borrowed.h"
#include "kernels/x86/avx2_lanes.h"

#define AVX2Q __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

enum { SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK, TILE_ROWS = 8 };

/* Block j's fields of a part of w bits a level (quant.h: the blocks
 * interleaved, element e in byte e of a 32-byte chunk): a shift and a mask. */
AVX2Q INLINE __m256i part_fields(const uint8_t *part, uint32_t w, uint32_t j)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(part + 32u * (w * j / 8u)));
    __m256i shifted = _mm256_srl_epi16(v, _mm_cvtsi32_si128((int)(w * j % 8u)));
    return _mm256_and_si256(shifted, _mm256_set1_epi8((char)((1u << w) - 1u)));
}

/* Block j's 32 levels (docs/format.md 3.5), element e in byte e. */
AVX2Q INLINE __m256i levels(const uint8_t *sb, uint32_t j, uint32_t bits)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    __m256i q = part_fields(sb + 16, low, j);
    if (high == 0u) {
        return q;
    }
    __m256i h = part_fields(sb + 16u + 32u * low, high, j);
    return _mm256_or_si256(q, _mm256_sll_epi16(h, _mm_cvtsi32_si128((int)low)));
}

/* A super-block's eight scales d * sc_j and mins dmin * m_j (lane = block),
 * from its first 16 bytes: sc_j = byte 4 + j & 63, m_j = byte 4 + j >> 6 |
 * (byte 12 + j % 4 >> 4 (j / 4) & 15) << 2; d and dmin by F16C (exact). */
AVX2Q INLINE void superblock_scales(__m256 *scale, __m256 *min, const uint8_t *sb)
{
    __m128i head = _mm_loadu_si128((const __m128i *)(const void *)sb);
    __m256i first = _mm256_cvtepu8_epi32(_mm_srli_si128(head, 4));
    __m128i pick = _mm_setr_epi8(12, 13, 14, 15, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i high = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(head, pick));
    high = _mm256_and_si256(_mm256_srlv_epi32(high, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi32(15));
    __m256i sc = _mm256_and_si256(first, _mm256_set1_epi32(63));
    __m256i mn = _mm256_or_si256(_mm256_srli_epi32(first, 6), _mm256_slli_epi32(high, 2));
    __m128 halves = _mm_cvtph_ps(head); /* d, dmin, ... */
    __m256 d = _mm256_broadcastss_ps(halves);
    __m256 dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(halves));
    *scale = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
    *min = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(mn));
}

/* One row's super-block against the token's blocks xq[0 .. 8): the exact
 * sums (lane = block; blocks past count repeat block count - 1), the
 * blocks' scales and mins as floats. */
AVX2Q INLINE void row_superblock(__m256 *isum, __m256 *scale, __m256 *min, const uint8_t *sb,
                                 const __m256i *xq, uint32_t count, uint32_t bits)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i part[SUB];
#pragma GCC unroll 8
    for (uint32_t k = 0; k < SUB; k++) {
        uint32_t j = k < count ? k : count - 1u;
        part[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(levels(sb, j, bits), xq[j]), ones);
    }
    *isum = _mm256_cvtepi32_ps(isum8(part));
    superblock_scales(scale, min, sb);
}

/* The token's blocks b0 .. b0 + count (their q, and each one's -sum q as a
 * float), blocks past count repeating the last. */
AVX2Q INLINE void token_blocks(__m256i *xq, float *neg_xsum, const colibri_qblock *x,
                               uint32_t count)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
    for (uint32_t k = 0; k < SUB; k++) {
        uint32_t j = k < count ? k : count - 1u;
        xq[k] = _mm256_loadu_si256((const __m256i *)(const void *)x[j].q);
        __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xq[k]), ones);
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_hadd_epi32(h, h);
        neg_xsum[k] = (float)-_mm_cvtsi128_si32(_mm_hadd_epi32(h, h));
    }
}

/* One token through up to eight rows (rows_left of them), lane = row. */
AVX2Q INLINE void qk_tile(float *out, const uint8_t *w, size_t row_bytes, const colibri_qblock *x,
                          uint32_t nb, uint32_t rows_left, uint32_t bits)
{
    uint32_t rows = rows_left < TILE_ROWS ? rows_left : TILE_ROWS;
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b0 = 0; b0 < nb; b0 += SUB) {
        uint32_t count = nb - b0 < SUB ? nb - b0 : SUB;
        size_t at = (size_t)(b0 / SUB) * COLIBRI_QK_BYTES(bits);
        __m256i xq[SUB];
        float neg_xsum[SUB];
        __m256 isum[TILE_ROWS], scale[TILE_ROWS], min[TILE_ROWS];
        token_blocks(xq, neg_xsum, x + b0, count);
        for (uint32_t r = 0; r < TILE_ROWS; r++) {
            const uint8_t *row = w + (size_t)(r < rows ? r : rows - 1u) * row_bytes;
            row_superblock(&isum[r], &scale[r], &min[r], row + at, xq, count, bits);
        }
        transpose8(isum);
        transpose8(scale);
        transpose8(min);
        for (uint32_t k = 0; k < count; k++) {
            __m256 dx = _mm256_set1_ps(x[b0 + k].d);
            acc = _mm256_fmadd_ps(isum[k], _mm256_mul_ps(scale[k], dx), acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(neg_xsum[k]), _mm256_mul_ps(min[k], dx), acc);
        }
    }
    float v[TILE_ROWS];
    _mm256_storeu_ps(v, acc);
    memcpy(out, v, rows * sizeof(float));
}

/* Tiles of eight rows, each through every token while its rows stay in
 * cache; `bits` a constant in each instance (the shifts and masks fold). */
AVX2Q INLINE void qk_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = colibri_qk_row_bytes(cols, bits);
    for (uint32_t r = 0; r < rows; r += TILE_ROWS) {
        for (uint32_t t = 0; t < n; t++) {
            qk_tile(out + t * stride + r, w + r * row_bytes, row_bytes, x + (size_t)t * nb, nb,
                    rows - r, bits);
        }
    }
}

#define QK_MATMAT(b)                                                                               \
    AVX2Q static void qk_matmat_##b(float *out, size_t stride, const uint8_t *w,                   \
                                    const colibri_qblock *x, uint32_t rows, uint32_t cols,         \
                                    uint32_t n)                                                    \
    {                                                                                              \
        qk_matmat(out, stride, w, x, rows, cols, n, b##u);                                         \
    }
QK_MATMAT(2)
QK_MATMAT(3)
QK_MATMAT(4)
QK_MATMAT(5)
QK_MATMAT(6)

AVX2Q void colibri_avx2_matmat_qk(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                  uint32_t bits)
{
    static void (*const by_bits[5])(float *, size_t, const uint8_t *, const colibri_qblock *,
                                    uint32_t, uint32_t, uint32_t) = {
        qk_matmat_2, qk_matmat_3, qk_matmat_4, qk_matmat_5, qk_matmat_6};
    by_bits[bits - 2u](out, stride, w, x, rows, cols, n);
}
