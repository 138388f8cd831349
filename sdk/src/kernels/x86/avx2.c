/*
 * avx2.c - kernels for x86-64 with AVX2: the sixteen canonical lanes of
 * docs/kernels.md are two ymm registers, lanes 0..7 and 8..15. Only built for
 * x86-64 (Makefile KERNELS); the functions carry their target so the rest of
 * the core stays baseline x86-64, and a port runs this table only on a CPU
 * that has AVX2 and FMA (ports/linux/colibri_linux_kernels.c).
 *
 * Each term is one fused multiply-add into its lane (the contract), so the
 * table needs FMA as well as AVX2 (every AVX2 CPU but a few early ones has
 * it; the port checks both). A tail of r < 16 terms is loaded with a mask:
 * past n, a holds -0 and b holds +0, so lanes r..15 get fma(-0, +0, v) =
 * v + -0 = v, exactly v for every v (-0 and +0, infinities and NaN too).
 */
#include <immintrin.h>
#include <string.h>

#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"
#include "quant.h"
#include "kernels/borrowed.h"

#define AVX2 __attribute__((target("avx2,fma")))
/* The quantized kernels convert binary16 scales with F16C (the port checks
 * it too; every AVX2 CPU has it). */
#define AVX2Q __attribute__((target("avx2,fma,f16c")))

/* Rows of a matvec that share each load of x. */
#define ROW_BLOCK 4u

/* Lanes j with j < left (left may be <= 0 or >= 8). */
AVX2 static __m256i lane_mask(int32_t left)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

typedef struct lanes16 {
    __m256 lo, hi; /* lanes 0..7, 8..15 */
} lanes16;

/* The pairwise tree: lanes 0..7 += 8..15, 0..3 += 4..7, 0..1 += 2..3, 0 += 1. */
AVX2 static float lanes_reduce(lanes16 l)
{
    __m256 l8 = _mm256_add_ps(l.lo, l.hi);
    __m128 l4 = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1));
    __m128 l2 = _mm_add_ps(l4, _mm_movehl_ps(l4, l4));
    return _mm_cvtss_f32(_mm_add_ss(l2, _mm_shuffle_ps(l2, l2, 1)));
}

/* Sixteen terms a[i] * b[i] into the lanes (masks: which of them exist). */
AVX2 static lanes16 lanes_add(lanes16 l, const float *a, const float *b)
{
    l.lo = _mm256_fmadd_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b), l.lo);
    l.hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8), _mm256_loadu_ps(b + 8), l.hi);
    return l;
}

/* a[0..7] where the mask is set, -0 elsewhere. */
AVX2 static __m256 load_or_minus_zero(const float *a, __m256i mask)
{
    __m256 minus_zero = _mm256_andnot_ps(_mm256_castsi256_ps(mask), _mm256_set1_ps(-0.0f));
    return _mm256_or_ps(_mm256_maskload_ps(a, mask), minus_zero);
}

AVX2 static lanes16 lanes_add_tail(lanes16 l, const float *a, const float *b, uint32_t left)
{
    __m256i m_lo = lane_mask((int32_t)left), m_hi = lane_mask((int32_t)left - 8);
    l.lo = _mm256_fmadd_ps(load_or_minus_zero(a, m_lo), _mm256_maskload_ps(b, m_lo), l.lo);
    l.hi = _mm256_fmadd_ps(load_or_minus_zero(a + 8, m_hi), _mm256_maskload_ps(b + 8, m_hi), l.hi);
    return l;
}

AVX2 static float colibri_avx2_dot(const float *a, const float *b, uint32_t n)
{
    lanes16 l = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    uint32_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        l = lanes_add(l, a + i, b + i);
    }
    if (i < n) {
        l = lanes_add_tail(l, a + i, b + i, n - i);
    }
    return lanes_reduce(l);
}

/* ROW_BLOCK rows at once: each 16 floats of x are loaded once for all; the
 * loops over the rows unrolled, so that the eight accumulators stay in
 * registers (GCC kept them on the stack: a store-to-load chain per step). */
AVX2 static void rows4(float *out, const float *w, const float *x, uint32_t cols)
{
    lanes16 l[ROW_BLOCK];
    uint32_t i = 0;
#pragma GCC unroll 4
    for (uint32_t r = 0; r < ROW_BLOCK; r++) {
        l[r].lo = l[r].hi = _mm256_setzero_ps();
    }
    for (; i + 16u <= cols; i += 16u) {
        __m256 x_lo = _mm256_loadu_ps(x + i), x_hi = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 4
        for (uint32_t r = 0; r < ROW_BLOCK; r++) {
            const float *wr = w + (size_t)r * cols + i;
            l[r].lo = _mm256_fmadd_ps(_mm256_loadu_ps(wr), x_lo, l[r].lo);
            l[r].hi = _mm256_fmadd_ps(_mm256_loadu_ps(wr + 8), x_hi, l[r].hi);
        }
    }
#pragma GCC unroll 4
    for (uint32_t r = 0; r < ROW_BLOCK; r++) {
        if (i < cols) {
            l[r] = lanes_add_tail(l[r], w + (size_t)r * cols + i, x + i, cols - i);
        }
        out[r] = lanes_reduce(l[r]);
    }
}

AVX2 static void colibri_avx2_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                                         uint32_t cols)
{
    uint32_t r = 0;
    for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK) {
        rows4(out + r, w + (size_t)r * cols, x, cols);
    }
    for (; r < rows; r++) {
        out[r] = colibri_avx2_dot(w + (size_t)r * cols, x, cols);
    }
}

/* Blocks of four rows, every token through each block while it is in cache. */
AVX2 static void colibri_avx2_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                                         uint32_t rows, uint32_t cols, uint32_t n)
{
    uint32_t r = 0;
    if (n == 1u) { /* one token: each row read whole, one stream (the rows' order in memory) */
        for (; r < rows; r++) {
            out[r] = colibri_avx2_dot(w + (size_t)r * cols, x, cols);
        }
        return;
    }
    for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK) {
        for (uint32_t t = 0; t < n; t++) {
            rows4(out + t * stride + r, w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
    for (; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * stride + r] =
                colibri_avx2_dot(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

/* Element-wise slots: eight at a time, the rest one by one; every element
 * gets the same operations as in the reference. */
AVX2 static void colibri_avx2_rmsnorm(float *out, const float *x, const float *w, uint32_t n,
                                      float eps)
{
    float inv = 1.0f / colibri_sqrtf(colibri_avx2_dot(x, x, n) / (float)n + eps);
    __m256 inv_v = _mm256_set1_ps(inv);
    uint32_t i = 0;
    for (; i + 8u <= n; i += 8u) {
        __m256 v =
            _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), inv_v));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++) {
        out[i] = w[i] * (x[i] * inv);
    }
}

AVX2 static void colibri_avx2_add(float *y, const float *x, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 8u <= n; i += 8u) {
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    }
    for (; i < n; i++) {
        y[i] = y[i] + x[i];
    }
}

AVX2 static void colibri_avx2_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    __m256 sv = _mm256_set1_ps(s);
    uint32_t i = 0;
    for (; i + 8u <= n; i += 8u) {
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) {
        y[i] = y[i] + x[i] * s;
    }
}

AVX2 static void colibri_avx2_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u, i = 0;
    for (; i + 8u <= half; i += 8u) {
        __m256 c = _mm256_loadu_ps(cos_sin + i), s = _mm256_loadu_ps(cos_sin + half + i);
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + half + i);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(x + half + i, _mm256_add_ps(_mm256_mul_ps(b, c), _mm256_mul_ps(a, s)));
    }
    for (; i < half; i++) {
        float c = cos_sin[i], s = cos_sin[half + i], a = x[i], b = x[half + i];
        x[i] = a * c - b * s;
        x[half + i] = b * c + a * s;
    }
}

/* colibri_expf on eight lanes, step for step (colibri_math.h); lanes
 * outside the plain range (NaN, overflow, underflow, a subnormal or huge
 * scale) are recomputed by the scalar function, so every bit agrees. */
AVX2 static __m256 exp8(__m256 x)
{
    __m256 fk = _mm256_mul_ps(x, _mm256_set1_ps(COLIBRI_EXPF_LOG2E));
    __m256 half = _mm256_set1_ps(0.5f);
    __m256 up = _mm256_cmp_ps(fk, _mm256_setzero_ps(), _CMP_GE_OQ);
    __m256i k =
        _mm256_cvttps_epi32(_mm256_blendv_ps(_mm256_sub_ps(fk, half), _mm256_add_ps(fk, half), up));
    __m256 kf = _mm256_cvtepi32_ps(k);
    __m256 r =
        _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(COLIBRI_EXPF_LN2_HI))),
                      _mm256_mul_ps(kf, _mm256_set1_ps(COLIBRI_EXPF_LN2_LO)));
    __m256 p = _mm256_set1_ps(COLIBRI_EXPF_C7);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXPF_C6));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXPF_C5));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXPF_C4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXPF_C3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXPF_C2));
    __m256 y = _mm256_add_ps(_mm256_set1_ps(1.0f),
                             _mm256_add_ps(r, _mm256_mul_ps(_mm256_mul_ps(r, r), p)));
    __m256i bias = _mm256_add_epi32(k, _mm256_set1_epi32(127));
    __m256 result = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(bias, 23)));
    __m256i k_ok = _mm256_andnot_si256(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(127)),
                                       _mm256_cmpgt_epi32(k, _mm256_set1_epi32(-127)));
    __m256 plain = _mm256_and_ps(
        _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(COLIBRI_EXPF_OVERFLOW), _CMP_LT_OQ),
                      _mm256_cmp_ps(x, _mm256_set1_ps(COLIBRI_EXPF_UNDERFLOW), _CMP_GT_OQ)),
        _mm256_castsi256_ps(k_ok));
    int mask = _mm256_movemask_ps(plain);
    if (mask != 0xFF) {
        float lanes[8], out[8];
        _mm256_storeu_ps(lanes, x);
        _mm256_storeu_ps(out, result);
        for (int j = 0; j < 8; j++) {
            out[j] = (mask >> j) & 1 ? out[j] : colibri_expf(lanes[j]);
        }
        result = _mm256_loadu_ps(out);
    }
    return result;
}

/* a = a / (1 + exp(-a)) * b, eight at a time, the rest one by one. */
AVX2 static void colibri_avx2_swiglu(float *a, const float *b, uint32_t n)
{
    __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    uint32_t i = 0;
    for (; i + 8u <= n; i += 8u) {
        __m256 av = _mm256_loadu_ps(a + i);
        __m256 e = exp8(_mm256_xor_ps(av, sign));
        _mm256_storeu_ps(
            a + i, _mm256_mul_ps(_mm256_div_ps(av, _mm256_add_ps(one, e)), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++) {
        a[i] = a[i] / (1.0f + colibri_expf(-a[i])) * b[i];
    }
}

/* The reference's steps: the sequential max, exp(x - max) into the sixteen
 * canonical lanes (plain adds), the tree, then every x divided by the sum. */
AVX2 void colibri_avx2_softmax(float *x, uint32_t n)
{
    float max = x[0], lane[16];
    for (uint32_t i = 1; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    __m256 mv = _mm256_set1_ps(max);
    lanes16 l = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    uint32_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
        _mm256_storeu_ps(x + i, lo);
        _mm256_storeu_ps(x + i + 8, hi);
        l.lo = _mm256_add_ps(l.lo, lo);
        l.hi = _mm256_add_ps(l.hi, hi);
    }
    _mm256_storeu_ps(lane, l.lo);
    _mm256_storeu_ps(lane + 8, l.hi);
    for (uint32_t j = 0; i + j < n; j++) {
        x[i + j] = colibri_expf(x[i + j] - max);
        lane[j] = lane[j] + x[i + j];
    }
    l.lo = _mm256_loadu_ps(lane);
    l.hi = _mm256_loadu_ps(lane + 8);
    __m256 sum = _mm256_set1_ps(lanes_reduce(l));
    for (i = 0; i + 8u <= n; i += 8u) {
        _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), sum));
    }
    for (; i < n; i++) {
        x[i] = x[i] / _mm256_cvtss_f32(sum);
    }
}

/* ---- quantized products (docs/kernels.md, "Quantized products") ---------
 * A tile is R weight rows by T tokens, R * T = 8 (row, token) pairs, pair
 * p = t * R + r in lane p of one float accumulator: per block each lane gets
 * acc = fma((float)isum, d_w * d_x, acc), the reference's steps. The 32
 * products of a pair's block are summed exactly in integers: Q8 as
 * pmaddubsw(|w|, sign(x, w)) (|w| <= 128, |x| <= 127: a pair of products
 * never saturates 16 bits) then pmaddwd by ones; Q4 as pmaddubsw(nibble, x)
 * - pmaddubsw(8, x) (both below 2 * 15 * 127). Rows past the matrix and
 * tokens past n repeat the last one; their lanes are not stored. */

/* Eight vectors of eight int32 partial sums -> one vector of the eight
 * totals, vector p in lane p. */
AVX2Q static inline __attribute__((always_inline)) __m256i isum8(const __m256i *p)
{
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

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

/* v[i] lane j <- v[j] lane i (8 x 8). */
AVX2Q static inline __attribute__((always_inline)) void transpose8(__m256 *v)
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

const colibri_kernels colibri_kernels_avx2 = {
    .name = "avx2",
    .dot = colibri_avx2_dot,
    .matvec_f32 = colibri_avx2_matvec_f32,
    .rmsnorm = colibri_avx2_rmsnorm,
    .add = colibri_avx2_add,
    .add_scaled = colibri_avx2_add_scaled,
    .rope_apply = colibri_avx2_rope_apply,
    .softmax = colibri_avx2_softmax,
    .swiglu = colibri_avx2_swiglu,
    .matmat_f32 = colibri_avx2_matmat_f32,
    .matmat_q8 = colibri_avx2_matmat_q8,
    .matmat_q4 = colibri_avx2_matmat_q4,
    .matmat_q8r16 = colibri_avx2_matmat_q8r16, /* avx2_r16.c */
    .matmat_q4r16 = colibri_avx2_matmat_q4r16,
};
