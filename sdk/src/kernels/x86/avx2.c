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

#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"
#include "kernels/borrowed.h"

#define AVX2 __attribute__((target("avx2,fma")))

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
    .matmat_q8 = colibri_avx2_matmat_q8, /* avx2_quant.c */
    .matmat_q4 = colibri_avx2_matmat_q4,
    .matmat_q8r16 = colibri_avx2_matmat_q8r16, /* avx2_r16.c */
    .matmat_q4r16 = colibri_avx2_matmat_q4r16,
    .matmat_qk = colibri_avx2_matmat_qk,
    .matmat_qkr16 = colibri_avx2_matmat_qkr16, /* avx2_qkr16.c */
};
