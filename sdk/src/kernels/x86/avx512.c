/*
 * avx512.c - kernels for x86-64 with AVX-512F: the sixteen canonical lanes of
 * docs/kernels.md are the sixteen floats of one zmm register. Only built for
 * x86-64 (Makefile KERNELS); the functions carry their target so the rest of
 * the core stays baseline x86-64, and a port runs this table only on a CPU
 * that has AVX-512F (ports/linux/colibri_linux_kernels.c).
 *
 * Each term is one fused multiply-add into its lane (the contract). A tail of
 * r < 16 terms is loaded with a mask (zeros past n) and fused into lanes
 * 0 .. r-1 only, which is where the canonical order puts it.
 */
#include <immintrin.h>

#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"
#include "kernels/borrowed.h"

#define AVX512 __attribute__((target("avx512f,fma")))

/* Rows of a matvec that share each load of x. */
#define ROW_BLOCK 4u

/* One canonical step of sixteen lanes: lane += w * x, fused. */
#define LANE_STEP(acc, wv, xv) _mm512_fmadd_ps(wv, xv, acc)

AVX512 static __mmask16 tail_mask(uint32_t left)
{
    return (__mmask16)((1u << left) - 1u);
}

/* The pairwise tree: lanes 0..7 += 8..15, 0..3 += 4..7, 0..1 += 2..3, 0 += 1. */
AVX512 static float lanes_reduce(__m512 lanes)
{
    __m256 l8 = _mm256_add_ps(_mm512_castps512_ps256(lanes),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lanes), 1)));
    __m128 l4 = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1));
    __m128 l2 = _mm_add_ps(l4, _mm_movehl_ps(l4, l4));
    return _mm_cvtss_f32(_mm_add_ss(l2, _mm_shuffle_ps(l2, l2, 1)));
}

AVX512 float colibri_avx512_dot(const float *a, const float *b, uint32_t n)
{
    __m512 acc = _mm512_setzero_ps();
    uint32_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        acc = LANE_STEP(acc, _mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i),
                                    _mm512_maskz_loadu_ps(m, b + i), acc, m);
    }
    return lanes_reduce(acc);
}

/* ROW_BLOCK rows at once: each 16 floats of x are loaded once for all. */
AVX512 static void rows4_avx512(float *out, const float *w, const float *x, uint32_t cols)
{
    const float *w0 = w, *w1 = w + cols, *w2 = w + 2u * (size_t)cols, *w3 = w + 3u * (size_t)cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    uint32_t i = 0;
    for (; i + 16u <= cols; i += 16u) {
        __m512 xv = _mm512_loadu_ps(x + i);
        a0 = LANE_STEP(a0, _mm512_loadu_ps(w0 + i), xv);
        a1 = LANE_STEP(a1, _mm512_loadu_ps(w1 + i), xv);
        a2 = LANE_STEP(a2, _mm512_loadu_ps(w2 + i), xv);
        a3 = LANE_STEP(a3, _mm512_loadu_ps(w3 + i), xv);
    }
    if (i < cols) {
        __mmask16 m = tail_mask(cols - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        a0 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + i), xv, a0, m);
        a1 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + i), xv, a1, m);
        a2 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + i), xv, a2, m);
        a3 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + i), xv, a3, m);
    }
    out[0] = lanes_reduce(a0);
    out[1] = lanes_reduce(a1);
    out[2] = lanes_reduce(a2);
    out[3] = lanes_reduce(a3);
}

AVX512 void colibri_avx512_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                                      uint32_t cols)
{
    uint32_t r = 0;
    for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK) {
        rows4_avx512(out + r, w + (size_t)r * cols, x, cols);
    }
    for (; r < rows; r++) {
        out[r] = colibri_avx512_dot(w + (size_t)r * cols, x, cols);
    }
}

/* Four rows by four tokens: sixteen independent sets of lanes; per step the
 * four weight vectors are loaded once and each x vector once. */
#define TOKEN_STEP(step, acc, xv)                                                                  \
    do {                                                                                           \
        acc##0 = step(acc##0, w0v, xv);                                                            \
        acc##1 = step(acc##1, w1v, xv);                                                            \
        acc##2 = step(acc##2, w2v, xv);                                                            \
        acc##3 = step(acc##3, w3v, xv);                                                            \
    } while (0)

#define BLOCK_STEP(load, step)                                                                     \
    do {                                                                                           \
        __m512 w0v = load(w0 + i), w1v = load(w1 + i), w2v = load(w2 + i), w3v = load(w3 + i);     \
        TOKEN_STEP(step, a, load(x0 + i));                                                         \
        TOKEN_STEP(step, b, load(x1 + i));                                                         \
        TOKEN_STEP(step, c, load(x2 + i));                                                         \
        TOKEN_STEP(step, d, load(x3 + i));                                                         \
    } while (0)

#define LOAD_FULL(p) _mm512_loadu_ps(p)
#define LOAD_TAIL(p) _mm512_maskz_loadu_ps(m, p)
/* The tail's step leaves the lanes past n as they are (not even -0 -> +0). */
#define LANE_STEP_TAIL(acc, wv, xv) _mm512_mask3_fmadd_ps(wv, xv, acc, m)

AVX512 static void block4x4_avx512(float *out, size_t stride, const float *w, const float *x,
                                   uint32_t cols)
{
    const float *w0 = w, *w1 = w + cols, *w2 = w + 2u * (size_t)cols, *w3 = w + 3u * (size_t)cols;
    const float *x0 = x, *x1 = x + cols, *x2 = x + 2u * (size_t)cols, *x3 = x + 3u * (size_t)cols;
    __m512 z = _mm512_setzero_ps();
    __m512 a0 = z, a1 = z, a2 = z, a3 = z, b0 = z, b1 = z, b2 = z, b3 = z;
    __m512 c0 = z, c1 = z, c2 = z, c3 = z, d0 = z, d1 = z, d2 = z, d3 = z;
    uint32_t i = 0;
    for (; i + 16u <= cols; i += 16u) {
        BLOCK_STEP(LOAD_FULL, LANE_STEP);
    }
    if (i < cols) {
        __mmask16 m = tail_mask(cols - i);
        BLOCK_STEP(LOAD_TAIL, LANE_STEP_TAIL);
    }
    float *o0 = out, *o1 = out + stride, *o2 = out + 2u * stride, *o3 = out + 3u * stride;
    o0[0] = lanes_reduce(a0), o0[1] = lanes_reduce(a1), o0[2] = lanes_reduce(a2);
    o0[3] = lanes_reduce(a3), o1[0] = lanes_reduce(b0), o1[1] = lanes_reduce(b1);
    o1[2] = lanes_reduce(b2), o1[3] = lanes_reduce(b3), o2[0] = lanes_reduce(c0);
    o2[1] = lanes_reduce(c1), o2[2] = lanes_reduce(c2), o2[3] = lanes_reduce(c3);
    o3[0] = lanes_reduce(d0), o3[1] = lanes_reduce(d1), o3[2] = lanes_reduce(d2);
    o3[3] = lanes_reduce(d3);
}

/* Four rows by two tokens (eight sets of lanes): the pairs left over. */
#define BLOCK2_STEP(load, step)                                                                    \
    do {                                                                                           \
        __m512 w0v = load(w0 + i), w1v = load(w1 + i), w2v = load(w2 + i), w3v = load(w3 + i);     \
        TOKEN_STEP(step, a, load(x0 + i));                                                         \
        TOKEN_STEP(step, b, load(x1 + i));                                                         \
    } while (0)

AVX512 static void block4x2_avx512(float *out, size_t stride, const float *w, const float *x,
                                   uint32_t cols)
{
    const float *w0 = w, *w1 = w + cols, *w2 = w + 2u * (size_t)cols, *w3 = w + 3u * (size_t)cols;
    const float *x0 = x, *x1 = x + cols;
    __m512 z = _mm512_setzero_ps();
    __m512 a0 = z, a1 = z, a2 = z, a3 = z, b0 = z, b1 = z, b2 = z, b3 = z;
    uint32_t i = 0;
    for (; i + 16u <= cols; i += 16u) {
        BLOCK2_STEP(LOAD_FULL, LANE_STEP);
    }
    if (i < cols) {
        __mmask16 m = tail_mask(cols - i);
        BLOCK2_STEP(LOAD_TAIL, LANE_STEP_TAIL);
    }
    float *o0 = out, *o1 = out + stride;
    o0[0] = lanes_reduce(a0), o0[1] = lanes_reduce(a1), o0[2] = lanes_reduce(a2);
    o0[3] = lanes_reduce(a3), o1[0] = lanes_reduce(b0), o1[1] = lanes_reduce(b1);
    o1[2] = lanes_reduce(b2), o1[3] = lanes_reduce(b3);
}

/* Blocks of four rows; within one, blocks of four tokens, then a pair, then
 * one (the rows stay in cache while the tokens pass). */
AVX512 void colibri_avx512_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                                      uint32_t rows, uint32_t cols, uint32_t n)
{
    uint32_t r = 0;
    if (n == 1u) { /* one token: each row read whole, one stream (the rows' order in memory) */
        for (; r < rows; r++) {
            out[r] = colibri_avx512_dot(w + (size_t)r * cols, x, cols);
        }
        return;
    }
    for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK) {
        const float *wr = w + (size_t)r * cols;
        uint32_t t = 0;
        for (; t + 4u <= n; t += 4u) {
            block4x4_avx512(out + t * stride + r, stride, wr, x + (size_t)t * cols, cols);
        }
        if (t + 2u <= n) {
            block4x2_avx512(out + t * stride + r, stride, wr, x + (size_t)t * cols, cols);
            t += 2u;
        }
        if (t < n) {
            rows4_avx512(out + t * stride + r, wr, x + (size_t)t * cols, cols);
        }
    }
    for (; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * stride + r] =
                colibri_avx512_dot(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

AVX512 void colibri_avx512_rmsnorm(float *out, const float *x, const float *w, uint32_t n,
                                   float eps)
{
    __m512 inv = _mm512_set1_ps(1.0f / colibri_sqrtf(colibri_avx512_dot(x, x, n) / (float)n + eps));
    for (uint32_t i = 0; i < n; i += 16u) {
        __mmask16 m = n - i >= 16u ? (__mmask16)0xFFFFu : tail_mask(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i),
                                 _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
        _mm512_mask_storeu_ps(out + i, m, v);
    }
}

AVX512 void colibri_avx512_add(float *y, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 16u) {
        __mmask16 m = n - i >= 16u ? (__mmask16)0xFFFFu : tail_mask(n - i);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

AVX512 void colibri_avx512_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    __m512 sv = _mm512_set1_ps(s);
    for (uint32_t i = 0; i < n; i += 16u) {
        __mmask16 m = n - i >= 16u ? (__mmask16)0xFFFFu : tail_mask(n - i);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i),
                                 _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

AVX512 void colibri_avx512_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u;
    const float *cs = cos_sin, *sn = cos_sin + half;
    float *x1 = x, *x2 = x + half;
    for (uint32_t i = 0; i < half; i += 16u) {
        __mmask16 m = half - i >= 16u ? (__mmask16)0xFFFFu : tail_mask(half - i);
        __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
        __m512 a = _mm512_maskz_loadu_ps(m, x1 + i), b = _mm512_maskz_loadu_ps(m, x2 + i);
        _mm512_mask_storeu_ps(x1 + i, m, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(x2 + i, m, _mm512_add_ps(_mm512_mul_ps(b, c), _mm512_mul_ps(a, s)));
    }
}

/* colibri_expf on sixteen lanes, step for step (colibri_math.h); lanes
 * outside the plain range (NaN, overflow, underflow, a subnormal or huge
 * scale) are recomputed by the scalar function, so every bit agrees. */
AVX512 static __m512 exp16_avx512(__m512 x)
{
    __m512 fk = _mm512_mul_ps(x, _mm512_set1_ps(COLIBRI_EXPF_LOG2E));
    __mmask16 up = _mm512_cmp_ps_mask(fk, _mm512_setzero_ps(), _CMP_GE_OQ);
    __m512 half = _mm512_set1_ps(0.5f);
    __m512 rounded = _mm512_mask_add_ps(_mm512_sub_ps(fk, half), up, fk, half);
    __m512i k = _mm512_cvttps_epi32(rounded);
    __m512 kf = _mm512_cvtepi32_ps(k);
    __m512 r =
        _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(kf, _mm512_set1_ps(COLIBRI_EXPF_LN2_HI))),
                      _mm512_mul_ps(kf, _mm512_set1_ps(COLIBRI_EXPF_LN2_LO)));
    __m512 p = _mm512_set1_ps(COLIBRI_EXPF_C7);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXPF_C6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXPF_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXPF_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXPF_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXPF_C2));
    __m512 y = _mm512_add_ps(_mm512_set1_ps(1.0f),
                             _mm512_add_ps(r, _mm512_mul_ps(_mm512_mul_ps(r, r), p)));
    __m512i bias = _mm512_add_epi32(k, _mm512_set1_epi32(127));
    __m512 result = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(bias, 23)));
    __mmask16 plain = _mm512_cmp_ps_mask(x, _mm512_set1_ps(COLIBRI_EXPF_OVERFLOW), _CMP_LT_OQ) &
                      _mm512_cmp_ps_mask(x, _mm512_set1_ps(COLIBRI_EXPF_UNDERFLOW), _CMP_GT_OQ) &
                      _mm512_cmpge_epi32_mask(k, _mm512_set1_epi32(-126)) &
                      _mm512_cmple_epi32_mask(k, _mm512_set1_epi32(127));
    if (plain != 0xFFFFu) {
        float lanes[16], out[16];
        _mm512_storeu_ps(lanes, x);
        _mm512_storeu_ps(out, result);
        for (uint32_t j = 0; j < 16u; j++) {
            out[j] = (plain >> j) & 1u ? out[j] : colibri_expf(lanes[j]);
        }
        result = _mm512_loadu_ps(out);
    }
    return result;
}

/* a = a / (1 + exp(-a)) * b, sixteen at a time (masked at the end). */
AVX512 void colibri_avx512_swiglu(float *a, const float *b, uint32_t n)
{
    __m512 one = _mm512_set1_ps(1.0f);
    __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
    for (uint32_t i = 0; i < n; i += 16u) {
        __mmask16 m = n - i >= 16u ? (__mmask16)0xFFFFu : tail_mask(n - i);
        __m512 av = _mm512_maskz_loadu_ps(m, a + i);
        __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(av), sign));
        __m512 e = exp16_avx512(neg);
        __m512 v = _mm512_mul_ps(_mm512_div_ps(av, _mm512_add_ps(one, e)),
                                 _mm512_maskz_loadu_ps(m, b + i));
        _mm512_mask_storeu_ps(a + i, m, v);
    }
}

const colibri_kernels colibri_kernels_avx512 = {
    .name = "avx512",
    .dot = colibri_avx512_dot,
    .swiglu = colibri_avx512_swiglu,
    .matvec_f32 = colibri_avx512_matvec_f32,
    .rmsnorm = colibri_avx512_rmsnorm,
    .add = colibri_avx512_add,
    .add_scaled = colibri_avx512_add_scaled,
    .rope_apply = colibri_avx512_rope_apply,
    .matmat_f32 = colibri_avx512_matmat_f32,
    /* softmax and the quantized products: avx2's (the VNNI ones: avx512vnni.c) */
    .softmax = colibri_avx2_softmax,
    .matmat_q8 = colibri_avx2_matmat_q8,
    .matmat_q4 = colibri_avx2_matmat_q4,
    .matmat_q8r16 = colibri_avx2_matmat_q8r16,
    .matmat_q4r16 = colibri_avx2_matmat_q4r16,
    .matmat_qk = colibri_avx2_matmat_qk,
    .matmat_qkr16 = colibri_avx2_matmat_qkr16,
};
