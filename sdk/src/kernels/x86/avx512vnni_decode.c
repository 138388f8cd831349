/*
 * avx512vnni_decode.c - one token through Q8/Q4 rows of up to 2048 columns
 * (avx512vnni.h DECODE_PAIRS), the rows of a tile read whole, one after the
 * other (docs/kernels.md). Same sums and float steps as avx512vnni.c's
 * q_tile, bit for bit.
 */
#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "avx512vnni.h"

/* Decode (one token) of rows up to DECODE_PAIRS pairs of blocks long: the
 * sixteen rows of a tile are read one whole row after the other, the order
 * they lie in memory. Each row's blocks are reduced to their sixteen exact
 * sums per group of sixteen blocks (row_sums8: lane = block) and wait in
 * `sums` until the last row is read; a transpose then puts block b of all
 * sixteen rows in one vector (lane = row) for the float steps, in block
 * order, as in q_tile. Reading the rows interleaved (q_tile: two blocks of
 * each row in turn) makes sixteen short streams, which on an AMD EPYC came
 * from DRAM at a third to a half of the rate of one sequential stream
 * (docs/kernels.md); reading part rows in turn was no better, nor was a
 * software prefetch of the next tile, and gathers (of the sums, of the
 * scales) cost more than the transpose. From the caches a block costs more
 * than in q_tile (the sums go through memory). The results are q_tile's,
 * bit for bit: the same exact sums, the same float steps in the same order. */
typedef struct decode_x {
    __m512i xq[DECODE_PAIRS];   /* the token's blocks of each pair, as pair_blocks loads them */
    __m512i init[DECODE_PAIRS]; /* -bias * (sum of x) per group of four bytes */
} decode_x;

VNNI static void decode_x_load(decode_x *dx, const colibri_qblock *x, uint32_t nb, int q4)
{
    const __m512i bias = _mm512_set1_epi8(q4 ? 8 : (char)0x80), zero = _mm512_setzero_si512();
    for (uint32_t p = 0; 2u * p < nb; p++) {
        uint32_t b = 2u * p;
        __m512i xq = load_pair(x[b].q, x[b + (b + 1u < nb ? 1u : 0u)].q, b + 1u < nb);
        if (q4) {
            xq = _mm512_shuffle_i32x4(xq, xq, _MM_SHUFFLE(3, 1, 2, 0));
        }
        dx->xq[p] = xq;
        dx->init[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, xq));
    }
}

/* The dpbusd sums of pair p of a row (blocks 2p and 2p + 1; only 2p if
 * !two). */
VNNI static INLINE __m512i decode_pair(const uint8_t *row, const decode_x *dx, uint32_t p, int two,
                                       int q4)
{
    __m512i wv;
    if (q4) {
        const uint8_t *blk = row + p * 36u + 2u;
        wv = load_nibbles(blk, blk + 18, two);
    } else {
        const uint8_t *blk = row + p * 68u + 2u;
        wv = _mm512_xor_si512(load_pair(blk, blk + 34, two), _mm512_set1_epi8((char)0x80));
    }
    return _mm512_dpbusd_epi32(dx->init[p], wv, dx->xq[p]);
}

/* One row's block sums, sixteen blocks at a time, into sums[group][lane]:
 * whole groups without a test per pair, then the last, part group. */
VNNI static INLINE void decode_row(__m512i (*sums)[PAIRS], uint32_t lane, const uint8_t *row,
                                   const decode_x *dx, uint32_t nb, int q4)
{
    uint32_t g = 0;
    for (; 16u * g + 16u <= nb; g++) {
        __m512i v[8];
#pragma GCC unroll 8
        for (uint32_t k = 0; k < 8u; k++) {
            v[k] = decode_pair(row, dx, 8u * g + k, 1, q4);
        }
        sums[g][lane] = row_sums8(v, q4);
    }
    if (16u * g < nb) {
        __m512i v[8];
        for (uint32_t k = 0; k < 8u; k++) {
            uint32_t p = 8u * g + k; /* pairs past the row: no sum */
            v[k] = 2u * p < nb ? decode_pair(row, dx, p, 2u * p + 1u < nb, q4)
                               : _mm512_setzero_si512();
        }
        sums[g][lane] = row_sums8(v, q4);
    }
}

/* c[k] = lane k of r[0 .. 15], in lanes 0 .. 15: a 16 x 16 transpose. */
VNNI static INLINE void transpose16(const __m512i *r, __m512i *c)
{
    __m512i t[16], u[16];
#pragma GCC unroll 8
    for (uint32_t i = 0; i < 8u; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (uint32_t i = 0; i < 4u; i++) { /* u[4i + k], 128-bit lane L: column 4L + k, rows 4i.. */
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (uint32_t k = 0; k < 4u; k++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i x1 = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i y0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i y1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
        c[k] = _mm512_shuffle_i32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0));
        c[4 + k] = _mm512_shuffle_i32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1));
        c[8 + k] = _mm512_shuffle_i32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0));
        c[12 + k] = _mm512_shuffle_i32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

VNNI static void decode_tile(float *out, const uint8_t *w, size_t row_bytes, const decode_x *dx,
                             const colibri_qblock *x, uint32_t nb, uint32_t rows_left, int q4)
{
    __m512i sums[DECODE_PAIRS / 8u][PAIRS]; /* [group of 16 blocks][row] */
    qtile q = tile_at(w, row_bytes, x, nb, rows_left, 1u, 16u, 1u);
    uint32_t block_bytes = q4 ? 18u : 34u;
    __m512 acc = _mm512_setzero_ps();
    for (uint32_t r = 0; r < 16u; r++) {
        decode_row(sums, r, q.w[r], dx, nb, q4);
    }
    for (uint32_t g = 0; 16u * g < nb; g++) {
        __m512i col[16]; /* col[GROUP_LANE[j]]: block 16g + j of every row */
        transpose16(sums[g], col);
        for (uint32_t j = 0; j < 16u && 16u * g + j < nb; j++) {
            uint32_t b = 16u * g + j;
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(col[GROUP_LANE[j]]),
                                  tile_scales(&q, b, block_bytes, 16u, 1u), acc);
        }
    }
    tile_store(out, 1u, acc, rows_left, 1u, 16u, 1u);
}

VNNI void colibri_avx512vnni_decode_rows(float *out, const uint8_t *w, size_t row_bytes,
                                         const colibri_qblock *x, uint32_t rows, uint32_t nb,
                                         int q4)
{
    decode_x dx;
    decode_x_load(&dx, x, nb, q4);
    for (uint32_t r = 0; r < rows; r += 16u) {
        decode_tile(out + r, w + r * row_bytes, row_bytes, &dx, x, nb, rows - r, q4);
    }
}
