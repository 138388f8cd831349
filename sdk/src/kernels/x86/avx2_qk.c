/*
 * avx2_qk.c - the super-block product of the avx2 table (matmat_qk, format
 * 1.15; avx512 and avx512vnni borrow it): docs/kernels.md, "Quantized
 * products". Like avx2.c, only built for x86-64; the functions carry their
 * target.
 *
 * Eight rows and one token at a time. Per row and super-block, each block's
 * 32 levels are unpacked to bytes and its exact sum with the activations
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

#define AVX2Q __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

enum { SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK, TILE_ROWS = 8 };

/* The 32 crumbs of 8 bytes at p: byte e = (p[e % 8] >> 2 (e / 8)) & 3. */
AVX2Q INLINE __m256i crumbs(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    __m256i shifted =
        _mm256_srlv_epi64(_mm256_set1_epi64x((long long)v), _mm256_set_epi64x(6, 4, 2, 0));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(3));
}

/* The 32 nibbles of 16 bytes at p: byte e < 16 the low nibble of p[e], byte
 * e >= 16 the high nibble of p[e - 16]. */
AVX2Q INLINE __m256i nibbles(const uint8_t *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

/* The 32 bits of the little-endian word at p as bytes 0 or `one`. */
AVX2Q INLINE __m256i bit_plane(const uint8_t *p, uint8_t one)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), spread);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8((char)one));
}

/* Block j's 32 levels (docs/format.md 3.5), element e in byte e. */
AVX2Q INLINE __m256i levels(const uint8_t *sb, uint32_t j, uint32_t bits)
{
    const uint8_t *p = colibri_qk_levels_at(sb, j, bits);
    if (bits <= 3u) {
        __m256i low = crumbs(p);
        return bits == 2u ? low : _mm256_or_si256(low, bit_plane(p + 8, 4));
    }
    __m256i low = nibbles(p);
    if (bits == 4u) {
        return low;
    }
    __m256i high = bits == 5u ? bit_plane(p + 16, 16) : _mm256_slli_epi16(crumbs(p + 16), 4);
    return _mm256_or_si256(low, high);
}

/* Eight vectors of eight int32 partial sums -> one of the eight totals. */
AVX2Q INLINE __m256i sums8(const __m256i *p)
{
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* v[i] lane j <- v[j] lane i (8 x 8). */
AVX2Q INLINE void transpose8(__m256 *v)
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* One row's super-block against the token's blocks xq[0 .. 8): the exact
 * sums (lane = block; blocks past count repeat block count - 1), the
 * blocks' scales and mins as floats. */
AVX2Q INLINE void row_superblock(__m256 *isum, __m256 *scale, __m256 *min, const uint8_t *sb,
                                 const __m256i *xq, uint32_t count, uint32_t bits)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i part[SUB];
    int32_t sc[SUB], mn[SUB];
#pragma GCC unroll 8
    for (uint32_t k = 0; k < SUB; k++) {
        uint32_t j = k < count ? k : count - 1u;
        part[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(levels(sb, j, bits), xq[j]), ones);
        sc[k] = (int32_t)colibri_qk_scale(sb, j);
        mn[k] = (int32_t)colibri_qk_min(sb, j);
    }
    *isum = _mm256_cvtepi32_ps(sums8(part));
    __m256 d = _mm256_set1_ps(colibri_half_to_float(colibri_rd_u16(sb)));
    __m256 dmin = _mm256_set1_ps(colibri_half_to_float(colibri_rd_u16(sb + 2u)));
    *scale = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)sc)));
    *min = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)mn)));
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
AVX2Q static void qk_tile(float *out, const uint8_t *w, size_t row_bytes, const colibri_qblock *x,
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
 * cache. */
AVX2Q void colibri_avx2_matmat_qk(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                  uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes =
        (size_t)((cols + COLIBRI_QK_BLOCK - 1u) / COLIBRI_QK_BLOCK) * COLIBRI_QK_BYTES(bits);
    for (uint32_t r = 0; r < rows; r += TILE_ROWS) {
        for (uint32_t t = 0; t < n; t++) {
            qk_tile(out + t * stride + r, w + r * row_bytes, row_bytes, x + (size_t)t * nb, nb,
                    rows - r, bits);
        }
    }
}
