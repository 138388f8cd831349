/*
 * avx512vnni_qkr16.c - the QK_R16 slot of the avx512vnni table (matmat_qkr16,
 * format 1.16): super-blocks in groups of sixteen rows (docs/format.md 3.6),
 * one row per lane, as avx512vnni_r16.c does for Q8_R16 and Q4_R16.
 *
 * A tile is super-block s of sixteen rows. Block j's 32 levels of the
 * sixteen rows are eight 64-byte vectors, vector v holding weights 4v ..
 * 4v + 3 of row r in lane r: one load, a shift and a mask per part (the
 * high part shifted up and merged by one ternary-logic op). The levels are
 * unsigned (< 64) and the activations int8, VPDPBUSD's operands as they are:
 * eight VPDPBUSD with the token's four bytes v broadcast give each row's
 * exact block sum in its own lane (no horizontal sum). The float steps are
 * the reference's, lane = row: acc = fma(isum, (d * sc_j) * d_x, acc), then
 * acc = fma(-xsum, (dmin * m_j) * d_x, acc), block after block.
 *
 * The levels of a block, once unpacked, serve up to eight tokens. The
 * blocks go in chunks of CHUNK_TILES super-blocks: per chunk, the tokens'
 * block sums xsum once, then every group of rows, each row's float sum
 * waiting in out between chunks.
 */
#include <string.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "avx512vnni.h"
#include "kernels/r16.h"

enum {
    SUB = COLIBRI_QK_BLOCK / COLIBRI_QBLOCK,
    CHUNK_TILES = 8,
    MAX_TOKENS = 8,
    PREFETCH_BYTES = 6144
};

/* Four bytes of x as one int32 (a broadcast operand). */
static INLINE int32_t x_dword(const int8_t *q, uint32_t k)
{
    int32_t v;
    memcpy(&v, q + 4u * k, sizeof v);
    return v;
}

/* Block j's fields of the part of w bits whose 64-byte chunks start at
 * tile chunk `first`, for weights 4v .. 4v + 3 of the 16 rows, moved from
 * bit (w j) mod 8 of each byte to bit `to` (one 16-bit shift: the bits it
 * carries across a byte boundary fall outside the field's place). */
VNNI static INLINE __m512i part_chunk(const uint8_t *tile, uint32_t first, uint32_t w, uint32_t j,
                                      uint32_t v, uint32_t to)
{
    const uint8_t *at = tile + 256u + 64u * (8u * (first + w * j / 8u) + v);
    __m512i raw = _mm512_loadu_si512((const void *)at);
    uint32_t from = w * j % 8u;
    return from >= to ? _mm512_srli_epi16(raw, from - to) : _mm512_slli_epi16(raw, to - from);
}

/* Block j's eight level vectors (docs/format.md 3.5, 3.6): a low part of L
 * bits, then the high part's bits - L above it. */
VNNI static INLINE void block_levels(__m512i *lv, const uint8_t *tile, uint32_t j, uint32_t bits)
{
    uint32_t low = bits <= 3u ? 2u : 4u, high = bits - low;
    const __m512i low_mask = _mm512_set1_epi8((char)((1u << low) - 1u));
    const __m512i high_mask = _mm512_set1_epi8((char)(((1u << high) - 1u) << low));
#pragma GCC unroll 8
    for (uint32_t v = 0; v < 8u; v++) {
        __m512i q = part_chunk(tile, 0u, low, j, v, 0u);
        if (high == 0u) {
            lv[v] = _mm512_and_si512(q, low_mask);
            continue;
        }
        __m512i h = _mm512_and_si512(part_chunk(tile, low, high, j, v, low), high_mask);
        lv[v] = _mm512_ternarylogic_epi32(q, h, low_mask, 0xEC); /* (q & low_mask) | h */
    }
}

/* Block j's scales d * sc_j and mins dmin * m_j of the sixteen rows (exact
 * products of the binary16 d, dmin and the 6-bit fields). */
VNNI static INLINE void block_scales(__m512 *scale, __m512 *min, const uint8_t *tile, uint32_t j)
{
    __m512i field = _mm512_cvtepu8_epi32(
        _mm_loadu_si128((const __m128i *)(const void *)(tile + 64u + 16u * j)));
    __m512i nibbles = _mm512_cvtepu8_epi32(
        _mm_loadu_si128((const __m128i *)(const void *)(tile + 192u + 16u * (j % 4u))));
    __m512i sc = _mm512_and_si512(field, _mm512_set1_epi32(63));
    __m512i high =
        _mm512_and_si512(_mm512_srli_epi32(nibbles, 4u * (j / 4u)), _mm512_set1_epi32(15));
    __m512i mn = _mm512_or_si512(_mm512_srli_epi32(field, 6), _mm512_slli_epi32(high, 2));
    __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)tile));
    __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(tile + 32)));
    *scale = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
    *min = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(mn));
}

/* The exact sum of a block's 32 activations. */
VNNI static INLINE int32_t block_xsum(const int8_t *q)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)q);
    __m256i s =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    return _mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1);
}

/* What a chunk of blocks shares between its groups: the T tokens' blocks
 * and their -xsum as floats, block b of the chunk at b. */
typedef struct chunk {
    const colibri_qblock *x[MAX_TOKENS];
    float neg_xsum[MAX_TOKENS][CHUNK_TILES * SUB];
    uint32_t blocks; /* in the chunk, <= CHUNK_TILES * SUB */
} chunk;

/* One block of one group by T tokens: acc[t] takes the block's two steps. */
VNNI static INLINE void block_tokens(__m512 *acc, const uint8_t *tile, const chunk *c, uint32_t b,
                                     uint32_t j, uint32_t bits, uint32_t T)
{
    __m512i lv[8];
    __m512 scale, min;
    block_levels(lv, tile, j, bits);
    block_scales(&scale, &min, tile, j);
#pragma GCC unroll 8
    for (uint32_t t = 0; t < T; t++) {
        const colibri_qblock *xb = c->x[t] + b;
        __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (uint32_t v = 0; v < 8u; v++) {
            isum = _mm512_dpbusd_epi32(isum, lv[v], _mm512_set1_epi32(x_dword(xb->q, v)));
        }
        __m512 dx = _mm512_set1_ps(xb->d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(scale, dx), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(c->neg_xsum[t][b]), _mm512_mul_ps(min, dx), acc[t]);
    }
}

VNNI static INLINE __mmask16 rows_kept(uint32_t rows_left)
{
    return rows_left >= COLIBRI_R16_ROWS ? (__mmask16)0xFFFF : (__mmask16)((1u << rows_left) - 1u);
}

/* The chunk's tiles of one group (tiles: its first) by T tokens; first:
 * the chunk is the row's first (else the sums so far are in out). */
VNNI static INLINE void group_chunk(float *out, size_t stride, const uint8_t *tiles,
                                    size_t tile_bytes, const chunk *c, uint32_t rows_left,
                                    int first, uint32_t bits, uint32_t T)
{
    __mmask16 keep = rows_kept(rows_left);
    __m512 acc[MAX_TOKENS];
    for (uint32_t t = 0; t < T; t++) {
        acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep, out + t * stride);
    }
    for (uint32_t s = 0; SUB * s < c->blocks; s++) {
        const uint8_t *tile = tiles + (size_t)s * tile_bytes;
#pragma GCC unroll 8
        for (uint32_t j = 0; j < SUB; j++) {
            if (SUB * s + j >= c->blocks) {
                break;
            }
            colibri_qkr16_prefetch(tile, bits, j, 1u);
            block_tokens(acc, tile, c, SUB * s + j, j, bits, T);
        }
    }
    for (uint32_t t = 0; t < T; t++) {
        _mm512_mask_storeu_ps(out + t * stride, keep, acc[t]);
    }
}

/* T tokens (x: the first's nb blocks) through every group, chunk by chunk. */
VNNI static INLINE void tokens_pass(float *out, size_t stride, const uint8_t *w,
                                    const colibri_qblock *x, uint32_t rows, uint32_t nb,
                                    uint32_t bits, uint32_t T)
{
    uint32_t nsb = (nb + SUB - 1u) / SUB;
    size_t tile_bytes = COLIBRI_R16_ROWS * COLIBRI_QK_BYTES(bits);
    chunk c;
    for (uint32_t t = 0; t < T; t++) {
        c.x[t] = x + (size_t)t * nb;
    }
    for (uint32_t s0 = 0; s0 < nsb; s0 += CHUNK_TILES) {
        uint32_t b0 = SUB * s0;
        c.blocks = nb - b0 < CHUNK_TILES * SUB ? nb - b0 : CHUNK_TILES * SUB;
        for (uint32_t t = 0; t < T; t++) {
            c.x[t] = x + (size_t)t * nb + b0;
            for (uint32_t b = 0; b < c.blocks; b++) {
                c.neg_xsum[t][b] = (float)-block_xsum(c.x[t][b].q);
            }
        }
        for (uint32_t r = 0; r < rows; r += COLIBRI_R16_ROWS) {
            const uint8_t *group = w + (size_t)(r / COLIBRI_R16_ROWS) * nsb * tile_bytes;
            group_chunk(out + r, stride, group + (size_t)s0 * tile_bytes, tile_bytes, &c, rows - r,
                        s0 == 0u, bits, T);
        }
    }
}

/* Eight tokens a pass, then four, two, one; `bits` a constant in each
 * instance (the shifts and masks fold). */
VNNI static INLINE void qkr16_matmat(float *out, size_t stride, const uint8_t *w,
                                     const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                     uint32_t n, uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols);
    for (uint32_t t = 0; t < n;) {
        const colibri_qblock *xt = x + (size_t)t * nb;
        float *o = out + t * stride;
        if (n - t >= 8u) {
            tokens_pass(o, stride, w, xt, rows, nb, bits, 8u), t += 8u;
        } else if (n - t >= 4u) {
            tokens_pass(o, stride, w, xt, rows, nb, bits, 4u), t += 4u;
        } else if (n - t >= 2u) {
            tokens_pass(o, stride, w, xt, rows, nb, bits, 2u), t += 2u;
        } else {
            tokens_pass(o, stride, w, xt, rows, nb, bits, 1u), t += 1u;
        }
    }
}

#define QKR16_MATMAT(b)                                                                            \
    VNNI static void qkr16_matmat_##b(float *out, size_t stride, const uint8_t *w,                 \
                                      const colibri_qblock *x, uint32_t rows, uint32_t cols,       \
                                      uint32_t n)                                                  \
    {                                                                                              \
        qkr16_matmat(out, stride, w, x, rows, cols, n, b##u);                                      \
    }
QKR16_MATMAT(2)
QKR16_MATMAT(3)
QKR16_MATMAT(4)
QKR16_MATMAT(5)
QKR16_MATMAT(6)

VNNI void colibri_avx512vnni_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n, uint32_t bits)
{
    switch (bits) {
    case 2u: qkr16_matmat_2(out, stride, w, x, rows, cols, n); break;
    case 3u: qkr16_matmat_3(out, stride, w, x, rows, cols, n); break;
    case 4u: qkr16_matmat_4(out, stride, w, x, rows, cols, n); break;
    case 5u: qkr16_matmat_5(out, stride, w, x, rows, cols, n); break;
    default: qkr16_matmat_6(out, stride, w, x, rows, cols, n); break;
    }
}
