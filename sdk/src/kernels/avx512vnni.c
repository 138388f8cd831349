/*
 * avx512vnni.c - the avx512 table with quantized products on AVX-512 VNNI
 * (vpdpbusd: four u8 x s8 products added into each int32 lane, one
 * instruction). Its fp32 slots are avx512.c's. Only built for x86-64, with
 * avx512.c and avx2.c (Makefile KERNEL_NEEDS_avx512vnni); a port runs it only
 * on a CPU with AVX-512F, BW, VNNI, FMA and F16C
 * (ports/linux/colibri_linux_kernels.c).
 *
 * A tile is R weight rows by T tokens, R * T = 16 (row, token) pairs, pair
 * p = t * R + r in lane p of one float accumulator: per block each lane gets
 * acc = fma((float)isum, d_w * d_x, acc), the reference's steps
 * (docs/kernels.md). One zmm holds two blocks of a pair (two times 32
 * bytes). The integer sums are exact: vpdpbusd takes an unsigned operand, so
 * Q8 weights go in as w + 128 (w xor 0x80) and the accumulator starts at
 * -128 * (sum of the x in its four bytes); Q4 nibbles go in as they are, the
 * accumulator starting at -8 * that sum. Rows past the matrix and tokens past
 * n repeat the last one; their lanes are not stored.
 */
#include <immintrin.h>

#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "x86.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

enum { PAIRS = 16 };

typedef struct qtile {
    const uint8_t *w[PAIRS];        /* the tile's rows (R used) */
    const colibri_qblock *x[PAIRS]; /* its tokens (T used) */
} qtile;

VNNI static qtile tile_at(const uint8_t *w, size_t row_bytes, const colibri_qblock *x, uint32_t nb,
                          uint32_t rows_left, uint32_t tokens_left, uint32_t R, uint32_t T)
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

VNNI static void tile_store(float *out, size_t stride, __m512 acc, uint32_t rows_left,
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

VNNI static INLINE void q_tile(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                               const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                               uint32_t tokens_left, int q4, uint32_t R, uint32_t T)
{
    qtile q = tile_at(w, row_bytes, x, nb, rows_left, tokens_left, R, T);
    uint32_t block_bytes = q4 ? 18u : 34u, b = 0;
    __m512 acc = _mm512_setzero_ps();
    __m512i first, second;
    for (; b + 2u <= nb; b += 2u) {
        pair_blocks(&q, b, 1, q4, R, T, &first, &second);
        __m512 s0 = tile_scales(&q, b, block_bytes, R, T);
        __m512 s1 = tile_scales(&q, b + 1u, block_bytes, R, T);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(first), s0, acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(second), s1, acc);
    }
    if (b < nb) {
        pair_blocks(&q, b, 0, q4, R, T, &first, &second);
        __m512 s0 = tile_scales(&q, b, block_bytes, R, T);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(first), s0, acc);
    }
    tile_store(out, stride, acc, rows_left, tokens_left, R, T);
}

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
enum { DECODE_PAIRS = 32 };

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

VNNI static void decode_rows(float *out, const uint8_t *w, size_t row_bytes,
                             const colibri_qblock *x, uint32_t rows, uint32_t nb, int q4)
{
    decode_x dx;
    decode_x_load(&dx, x, nb, q4);
    for (uint32_t r = 0; r < rows; r += 16u) {
        decode_tile(out + r, w + r * row_bytes, row_bytes, &dx, x, nb, rows - r, q4);
    }
}

/* Q4 with many tokens (a prompt): a strip of sixteen rows is unpacked, a
 * chunk of blocks at a time, into the layout in which lane r of a vector is
 * row r: group g of block b holds elements 4g..4g+3 of each row as signed
 * nibble - 8, so one vpdpbusd with four of a token's x bytes broadcast adds
 * into each row's own lane and no horizontal sum is left; the unpacking is
 * paid once per strip, not once per token. vpdpbusd's unsigned operand is
 * then x + 128 (x xor 0x80), and each row's sum starts at -128 * (its sum of
 * nibble - 8 in the block): exact. A row's float sum starts at 0 and takes
 * the blocks in order, as in every kernel; between chunks it waits in out. */
enum { STRIP = 16, CHUNK_BLOCKS = 16, STRIP_MIN_TOKENS = 12 };

typedef struct q4_chunk {
    __m512i group[CHUNK_BLOCKS][8]; /* [block][group]: lane r, 4 weights of row r */
    __m512i init[CHUNK_BLOCKS];     /* -128 * each row's sum of the block's weights */
    __m512 dw[CHUNK_BLOCKS];        /* each row's scale of the block */
} q4_chunk;

/* Blocks b0 .. b0 + count - 1 of the strip's rows (past the matrix: its last
 * row again; those lanes are not stored). */
VNNI static void q4_pack(q4_chunk *c, const uint8_t *w, size_t row_bytes, uint32_t rows_left,
                         uint32_t b0, uint32_t count)
{
    uint32_t rows_nibbles[STRIP][8];
    uint16_t h[STRIP];
    const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m512i row_start = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                                104, 112, 120),
                  ones = _mm512_set1_epi8(1);
    for (uint32_t bb = 0; bb < count; bb++) {
        for (uint32_t r = 0; r < STRIP; r++) {
            const uint8_t *blk = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes +
                                 (size_t)(b0 + bb) * 18u;
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
            h[r] = colibri_rd_u16(blk);
            _mm_storeu_si128((__m128i *)(void *)rows_nibbles[r],
                             _mm_sub_epi8(_mm_and_si128(v, low), eight));
            _mm_storeu_si128((__m128i *)(void *)(rows_nibbles[r] + 4),
                             _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low), eight));
        }
        c->dw[bb] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)h));
        __m512i wsum = _mm512_setzero_si512();
        for (uint32_t g = 0; g < 8u; g++) {
            c->group[bb][g] = _mm512_i32gather_epi32(
                _mm512_add_epi32(row_start, _mm512_set1_epi32((int)g)), rows_nibbles, 4);
            wsum = _mm512_dpbusd_epi32(wsum, ones, c->group[bb][g]);
        }
        c->init[bb] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7));
    }
}

/* Block bb of the chunk times token block xb: each row's exact sum. */
VNNI static INLINE __m512i q4_strip_block(const q4_chunk *c, uint32_t bb, const colibri_qblock *xb)
{
    int32_t xu[8]; /* x + 128, four bytes to a word */
    _mm256_storeu_si256((__m256i *)(void *)xu,
                        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)xb->q),
                                         _mm256_set1_epi8((char)0x80)));
    __m512i isum = c->init[bb];
#pragma GCC unroll 8
    for (uint32_t g = 0; g < 8u; g++) {
        isum = _mm512_dpbusd_epi32(isum, _mm512_set1_epi32(xu[g]), c->group[bb][g]);
    }
    return isum;
}

VNNI static void q4_strip(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                          const colibri_qblock *x, uint32_t nb, uint32_t rows_left, uint32_t n)
{
    q4_chunk c;
    __mmask16 keep = rows_left >= STRIP ? (__mmask16)0xFFFF : (__mmask16)((1u << rows_left) - 1u);
    for (uint32_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
        uint32_t count = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
        q4_pack(&c, w, row_bytes, rows_left, b0, count);
        for (uint32_t t = 0; t < n; t++) {
            const colibri_qblock *xt = x + (size_t)t * nb + b0;
            __m512 acc = b0 ? _mm512_maskz_loadu_ps(keep, out + t * stride) : _mm512_setzero_ps();
            for (uint32_t bb = 0; bb < count; bb++) {
                __m512 scale = _mm512_mul_ps(c.dw[bb], _mm512_set1_ps(xt[bb].d));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q4_strip_block(&c, bb, xt + bb)), scale,
                                      acc);
            }
            _mm512_mask_storeu_ps(out + t * stride, keep, acc);
        }
    }
}

/* Decode (n = 1): tiles of sixteen rows; two or three tokens: eight rows by
 * two; Q4 from twelve tokens (where the unpacking pays, measured with
 * colibri-qbench): strips of sixteen rows (above); else four rows
 * by four tokens, the rows outside, so a tile's rows stay in cache while the
 * tokens pass. */
VNNI static INLINE void q_matmat(float *out, size_t stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t row_bytes = (size_t)nb * (q4 ? 18u : 34u);
    if (n == 1u && nb <= 2u * DECODE_PAIRS) {
        decode_rows(out, w, row_bytes, x, rows, nb, q4);
    } else if (n == 1u) {
        for (uint32_t r = 0; r < rows; r += 16u) {
            q_tile(out + r, stride, w + r * row_bytes, row_bytes, x, nb, rows - r, 1u, q4, 16u, 1u);
        }
    } else if (n < 4u) {
        for (uint32_t r = 0; r < rows; r += 8u) {
            for (uint32_t t = 0; t < n; t += 2u) {
                q_tile(out + t * stride + r, stride, w + r * row_bytes, row_bytes,
                       x + (size_t)t * nb, nb, rows - r, n - t, q4, 8u, 2u);
            }
        }
    } else if (q4 && n >= STRIP_MIN_TOKENS) {
        for (uint32_t r = 0; r < rows; r += STRIP) {
            q4_strip(out + r, stride, w + r * row_bytes, row_bytes, x, nb, rows - r, n);
        }
    } else {
        for (uint32_t r = 0; r < rows; r += 4u) {
            for (uint32_t t = 0; t < n; t += 4u) {
                q_tile(out + t * stride + r, stride, w + r * row_bytes, row_bytes,
                       x + (size_t)t * nb, nb, rows - r, n - t, q4, 4u, 4u);
            }
        }
    }
}

VNNI static void matmat_q8_vnni(float *out, size_t stride, const uint8_t *w,
                                const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 0);
}

VNNI static void matmat_q4_vnni(float *out, size_t stride, const uint8_t *w,
                                const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 1);
}

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
enum { R16_ROWS = 16, R16_CHUNK = 64, R16_TOKENS = 8 };

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
    return rows_left >= R16_ROWS ? (__mmask16)0xFFFF : (__mmask16)((1u << rows_left) - 1u);
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
    size_t tile_bytes = R16_ROWS * (q4 ? 18u : 34u);
    int32_t init[R16_CHUNK];
    for (uint32_t b0 = 0; b0 < nb; b0 += R16_CHUNK) {
        uint32_t count = nb - b0 < R16_CHUNK ? nb - b0 : R16_CHUNK;
        r16_x_inits(init, x + b0, count, q4);
        for (uint32_t r = 0; r < rows; r += R16_ROWS) {
            r16_decode_group(out + r, w + (size_t)(r / R16_ROWS) * nb * tile_bytes, tile_bytes, x,
                             init, b0, count, rows - r, q4);
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

VNNI static INLINE void r16_matmat(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n, int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t tile_bytes = R16_ROWS * (q4 ? 18u : 34u);
    if (n == 1u) {
        r16_decode(out, w, x, rows, nb, q4);
        return;
    }
    for (uint32_t r = 0; r < rows; r += R16_ROWS) {
        const uint8_t *group = w + (size_t)(r / R16_ROWS) * nb * tile_bytes;
        for (uint32_t t = 0; t < n;) {
            uint32_t left = n - t;
            float *o = out + t * stride + r;
            const colibri_qblock *xt = x + (size_t)t * nb;
            if (left >= 8u) {
                r16_tokens(o, stride, group, tile_bytes, xt, nb, rows - r, left, q4, 8u);
                t += 8u;
            } else if (left >= 4u) {
                r16_tokens(o, stride, group, tile_bytes, xt, nb, rows - r, left, q4, 4u);
                t += 4u;
            } else {
                r16_tokens(o, stride, group, tile_bytes, xt, nb, rows - r, left, q4, 2u);
                t += 2u;
            }
        }
    }
}

VNNI static void matmat_q8r16_vnni(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n)
{
    r16_matmat(out, stride, w, x, rows, cols, n, 0);
}

VNNI static void matmat_q4r16_vnni(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n)
{
    r16_matmat(out, stride, w, x, rows, cols, n, 1);
}

/* softmax is the reference's (NULL), as in avx512. */
const colibri_kernels colibri_kernels_avx512vnni = {
    .name = "avx512vnni",
    .dot = colibri_avx512_dot,
    .swiglu = colibri_avx512_swiglu,
    .matvec_f32 = colibri_avx512_matvec,
    .rmsnorm = colibri_avx512_rmsnorm,
    .add = colibri_avx512_add,
    .add_scaled = colibri_avx512_add_scaled,
    .rope_apply = colibri_avx512_rope_apply,
    .matmat_f32 = colibri_avx512_matmat,
    .matmat_q8 = matmat_q8_vnni,
    .matmat_q4 = matmat_q4_vnni,
    .matmat_q8r16 = matmat_q8r16_vnni,
    .matmat_q4r16 = matmat_q4r16_vnni,
};
