/*
 * avx512vnni.h - what the files of the avx512vnni table share: the target
 * attribute, the tile of R rows by T tokens (R * T = 16 lanes) and its block
 * sums, and the products each file gives the table's dispatch
 * (avx512vnni.c): decode with rows read whole (avx512vnni_decode.c), Q4
 * prompts in strips of sixteen rows (avx512vnni_strip.c) and the row-group
 * slots (avx512vnni_r16.c, avx512vnni_qkr16.c). The method is in avx512vnni.c's comment.
 */
#ifndef COLIBRI_KERNELS_AVX512VNNI_H
#define COLIBRI_KERNELS_AVX512VNNI_H

#include <immintrin.h>

#include "colibri.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

/* Decode rows whole up to DECODE_PAIRS pairs of blocks (2048 columns);
 * Q4 strips of STRIP rows from STRIP_MIN_TOKENS tokens. */
enum { PAIRS = 16, DECODE_PAIRS = 32, STRIP = 16, STRIP_MIN_TOKENS = 12 };

/* One token (n = 1) through rows of nb <= 2 * DECODE_PAIRS blocks. */
VNNI void colibri_avx512vnni_decode_rows(float *out, const uint8_t *w, size_t row_bytes,
                                         const colibri_qblock *x, uint32_t rows, uint32_t nb,
                                         int q4);
/* n tokens through one strip of up to STRIP Q4 rows. */
VNNI void colibri_avx512vnni_q4_strip(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                                      const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                                      uint32_t n);
/* The Q8_R16 and Q4_R16 slots. */
VNNI void colibri_avx512vnni_matmat_q8r16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n);
VNNI void colibri_avx512vnni_matmat_q4r16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n);
/* The QK2_R16 .. QK6_R16 slot (avx512vnni_qkr16.c). */
VNNI void colibri_avx512vnni_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                          const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                          uint32_t n, uint32_t bits);

typedef struct qtile {
    const uint8_t *w[PAIRS];        /* the tile's rows (R used) */
    const colibri_qblock *x[PAIRS]; /* its tokens (T used) */
} qtile;

VNNI static inline qtile tile_at(const uint8_t *w, size_t row_bytes, const colibri_qblock *x,
                                 uint32_t nb, uint32_t rows_left, uint32_t tokens_left, uint32_t R,
                                 uint32_t T)
{
    qtile q;
    for (uint32_t r = 0; r < R; r++) {
        q.w[r] = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes;
    }
    for (uint32_t t = 0; t < T; t++) {
        q.x[t] = x + (size_t)(t < tokens_left ? t : tokens_left - 1u) * nb;
    }
    return q;
}

VNNI static inline void tile_store(float *out, size_t stride, __m512 acc, uint32_t rows_left,
                                   uint32_t tokens_left, uint32_t R, uint32_t T)
{
    float v[PAIRS];
    _mm512_storeu_ps(v, acc);
    for (uint32_t t = 0; t < T && t < tokens_left; t++) {
        for (uint32_t r = 0; r < R && r < rows_left; r++) {
            out[t * stride + r] = v[t * R + r];
        }
    }
}

/* The sixteen lanes' scales of block b: d_w of each lane's row (binary16,
 * packed four to a 64-bit word, converted and repeated T times) times d_x
 * of its token (broadcast loads, one per token). */
VNNI static INLINE __m512 tile_scales(const qtile *q, uint32_t b, size_t block_bytes, uint32_t R,
                                      uint32_t T)
{
    uint64_t h[4] = {0, 0, 0, 0};
#pragma GCC unroll 16
    for (uint32_t r = 0; r < R; r++) {
        h[r / 4u] |= (uint64_t)colibri_rd_u16(q->w[r] + b * block_bytes) << (16u * (r % 4u));
    }
    __m512 dw;
    if (R == 16u) {
        dw = _mm512_cvtph_ps(
            _mm256_set_epi64x((long long)h[3], (long long)h[2], (long long)h[1], (long long)h[0]));
    } else if (R == 8u) {
        __m256 v = _mm256_cvtph_ps(_mm_set_epi64x((long long)h[1], (long long)h[0]));
        dw = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v)));
    } else {
        dw = _mm512_broadcast_f32x4(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)h[0])));
    }
    __m512 dx = _mm512_set1_ps(q->x[0][b].d);
#pragma GCC unroll 16
    for (uint32_t t = 1; t < T; t++) {
        __mmask16 lanes = (__mmask16)(((1u << R) - 1u) << (t * R));
        dx = _mm512_mask_mov_ps(dx, lanes, _mm512_set1_ps(q->x[t][b].d));
    }
    return _mm512_mul_ps(dw, dx);
}

/* n (8 or 16) vectors of int32 partial sums -> n / 4 vectors f: 128-bit
 * lane L of f[k] holds the sums of lane L of v[4k], v[4k + 1], v[4k + 2]
 * and v[4k + 3], in that order. */
VNNI static INLINE void quarter_sums(const __m512i *v, uint32_t n, __m512i *f)
{
    __m512i e[8];
#pragma GCC unroll 8
    for (uint32_t k = 0; k < n / 2u; k++) {
        e[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                                _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
    }
#pragma GCC unroll 4
    for (uint32_t k = 0; k < n / 4u; k++) {
        f[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(e[2 * k], e[2 * k + 1]),
                                _mm512_unpackhi_epi64(e[2 * k], e[2 * k + 1]));
    }
}

/* Two such f -> the block totals of their eight vectors: lanes 0-3 the
 * first block of v[0..3] (a vector holds two blocks), 4-7 their second
 * block, 8-15 the same for v[4..7]. Q8: a vector's first block is in its
 * 128-bit lanes 0 and 1; Q4: in 0 and 2 (load_nibbles). */
VNNI static INLINE __m512i block_totals(__m512i f0, __m512i f1, int q4)
{
    if (q4) {
        return _mm512_add_epi32(_mm512_shuffle_i32x4(f0, f1, _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i32x4(f0, f1, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return _mm512_add_epi32(_mm512_shuffle_i32x4(f0, f1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(f0, f1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Sixteen vectors of int32 partial sums, blocks b and b + 1 each -> the
 * sixteen totals of block b and of block b + 1 (lane p from vector p). */
VNNI static INLINE void isum16(const __m512i *d, int q4, __m512i *first, __m512i *second)
{
    __m512i f[4];
    quarter_sums(d, 16u, f);
    __m512i g0 = block_totals(f[0], f[1], q4), g1 = block_totals(f[2], f[3], q4);
    *first = _mm512_shuffle_i32x4(g0, g1, _MM_SHUFFLE(2, 0, 2, 0));
    *second = _mm512_shuffle_i32x4(g0, g1, _MM_SHUFFLE(3, 1, 3, 1));
}

/* 32 bytes at a and, if two, 32 at b: one zmm (the high half zero if not). */
VNNI static INLINE __m512i load_pair(const void *a, const void *b, int two)
{
    __m512i lo = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)a));
    return two ? _mm512_inserti64x4(lo, _mm256_loadu_si256((const __m256i *)b), 1) : lo;
}

/* Q4: 16 bytes of block b (and b + 1) -> their nibbles in 128-bit lanes:
 * b's low nibbles (elements 0..15), b + 1's, b's high ones (16..31), b + 1's
 * (one broadcast instead of three inserts; x is put in the same order). */
VNNI static INLINE __m512i load_nibbles(const uint8_t *a, const uint8_t *b, int two)
{
    __m128i va = _mm_loadu_si128((const __m128i *)(const void *)a);
    __m128i vb = two ? _mm_loadu_si128((const __m128i *)(const void *)b) : _mm_setzero_si128();
    __m512i v = _mm512_broadcast_i64x4(_mm256_inserti128_si256(_mm256_castsi128_si256(va), vb, 1));
    /* 128-bit lanes 2 and 3 (16-bit elements 16..31) shifted down */
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xFFFF0000u, v, 4);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

/* Blocks b and b + 1 (only b if !two) of a tile: their exact sums. */
VNNI static INLINE void pair_blocks(const qtile *q, uint32_t b, int two, int q4, uint32_t R,
                                    uint32_t T, __m512i *first, __m512i *second)
{
    __m512i wv[PAIRS], init[PAIRS], d[PAIRS];
    const __m512i bias = _mm512_set1_epi8(q4 ? 8 : (char)0x80), zero = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (uint32_t r = 0; r < R; r++) {
        if (q4) {
            const uint8_t *blk = q->w[r] + b * 18u + 2u;
            wv[r] = load_nibbles(blk, blk + 18, two);
        } else {
            const uint8_t *blk = q->w[r] + b * 34u + 2u;
            wv[r] = _mm512_xor_si512(load_pair(blk, blk + 34, two), bias);
        }
    }
#pragma GCC unroll 16
    for (uint32_t t = 0; t < T; t++) {
        __m512i xq = load_pair(q->x[t][b].q, q->x[t][b + (two ? 1u : 0u)].q, two);
        if (q4) { /* halves of b, of b + 1 -> as load_nibbles orders them */
            xq = _mm512_shuffle_i32x4(xq, xq, _MM_SHUFFLE(3, 1, 2, 0));
        }
        init[t] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, xq));
#pragma GCC unroll 16
        for (uint32_t r = 0; r < R; r++) {
            d[t * R + r] = _mm512_dpbusd_epi32(init[t], wv[r], xq);
        }
    }
    isum16(d, q4, first, second);
}

/* Eight pairs of one row (vectors of dpbusd sums, blocks as pair_blocks
 * lays them out) -> its sixteen block sums, block 2i + k of the group in
 * lane GROUP_LANE[2i + k] (block_totals' order). */
static const uint8_t GROUP_LANE[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

VNNI static INLINE __m512i row_sums8(const __m512i *v, int q4)
{
    __m512i f[2];
    quarter_sums(v, 8u, f);
    return block_totals(f[0], f[1], q4);
}

#endif
