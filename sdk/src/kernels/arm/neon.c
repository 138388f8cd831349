/*
 * neon.c - kernels for AArch64 Advanced SIMD (NEON, part of every AArch64
 * CPU): the sixteen canonical lanes of docs/kernels.md are four float32x4
 * registers, lanes 0..3, 4..7, 8..11, 12..15. Built for AArch64 only
 * (Makefile AARCH64_KERNELS, a board's `kernels`).
 *
 * Each term is one fused multiply-add into its lane (vfmaq_f32: the
 * contract). A tail of r < 16 terms is copied into padded blocks and added as
 * one more step: past n, a holds -0 and b +0, so lanes r..15 get
 * fma(-0, +0, v) = v + -0 = v, exactly v for every v (-0 included).
 */
#include <arm_neon.h>

#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"
#include "kernels/borrowed.h"
#include "neon_quant.h"

/* Rows of a matvec that share each load of x. */
#define ROW_BLOCK 4u

typedef struct lanes16 {
    float32x4_t l0, l1, l2, l3; /* lanes 0..3, 4..7, 8..11, 12..15 */
} lanes16;

static lanes16 lanes_zero(void)
{
    float32x4_t z = vdupq_n_f32(0.0f);
    lanes16 l = {z, z, z, z};
    return l;
}

/* The pairwise tree: lanes 0..7 += 8..15, 0..3 += 4..7, 0..1 += 2..3, 0 += 1. */
static float lanes_reduce(lanes16 l)
{
    float32x4_t lo = vaddq_f32(l.l0, l.l2), hi = vaddq_f32(l.l1, l.l3);
    float32x4_t four = vaddq_f32(lo, hi);
    float32x2_t two = vadd_f32(vget_low_f32(four), vget_high_f32(four));
    return vget_lane_f32(two, 0) + vget_lane_f32(two, 1);
}

/* Sixteen terms a[i] * b[i] into the lanes. */
static lanes16 lanes_add(lanes16 l, const float *a, const float *b)
{
    l.l0 = vfmaq_f32(l.l0, vld1q_f32(a), vld1q_f32(b));
    l.l1 = vfmaq_f32(l.l1, vld1q_f32(a + 4), vld1q_f32(b + 4));
    l.l2 = vfmaq_f32(l.l2, vld1q_f32(a + 8), vld1q_f32(b + 8));
    l.l3 = vfmaq_f32(l.l3, vld1q_f32(a + 12), vld1q_f32(b + 12));
    return l;
}

/* The last r < 16 terms, padded to a whole step with (-0) * (+0). */
static lanes16 lanes_add_tail(lanes16 l, const float *a, const float *b, uint32_t r)
{
    float pa[16], pb[16] = {0.0f};
    for (uint32_t j = 0; j < 16u; j++) {
        pa[j] = -0.0f;
    }
    memcpy(pa, a, r * sizeof(float));
    memcpy(pb, b, r * sizeof(float));
    return lanes_add(l, pa, pb);
}

float colibri_neon_dot(const float *a, const float *b, uint32_t n)
{
    lanes16 l = lanes_zero();
    uint32_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        l = lanes_add(l, a + i, b + i);
    }
    if (i < n) {
        l = lanes_add_tail(l, a + i, b + i, n - i);
    }
    return lanes_reduce(l);
}

/* ROW_BLOCK rows at once: each 16 floats of x are loaded once for all four
 * (16 accumulator and 4 x registers of the 32; the row loops unrolled, or
 * GCC 12 keeps the accumulators on the stack). */
static void rows4_neon(float *out, size_t stride, const float *w, const float *x, uint32_t cols)
{
    lanes16 l[ROW_BLOCK];
    const float *wr[ROW_BLOCK];
#pragma GCC unroll 4
    for (uint32_t r = 0; r < ROW_BLOCK; r++) {
        l[r] = lanes_zero();
        wr[r] = w + (size_t)r * cols;
    }
    /* pointers that step, not offsets from a 32-bit index: no address
     * arithmetic per row in the loop */
    const float *xi = x, *end = x + cols / 16u * 16u;
    for (; xi != end; xi += 16) {
        float32x4x4_t xv = vld1q_f32_x4(xi); /* one LD1 of four registers */
#pragma GCC unroll 4
        for (uint32_t r = 0; r < ROW_BLOCK; r++) {
            float32x4x4_t wv = vld1q_f32_x4(wr[r]);
            l[r].l0 = vfmaq_f32(l[r].l0, wv.val[0], xv.val[0]);
            l[r].l1 = vfmaq_f32(l[r].l1, wv.val[1], xv.val[1]);
            l[r].l2 = vfmaq_f32(l[r].l2, wv.val[2], xv.val[2]);
            l[r].l3 = vfmaq_f32(l[r].l3, wv.val[3], xv.val[3]);
            wr[r] += 16;
        }
    }
    uint32_t rest = cols % 16u;
#pragma GCC unroll 4
    for (uint32_t r = 0; r < ROW_BLOCK; r++) {
        if (rest != 0) {
            l[r] = lanes_add_tail(l[r], wr[r], end, rest);
        }
        out[r * stride] = lanes_reduce(l[r]);
    }
}

/* Blocks of four rows, every token through each block while it is in cache. */
void colibri_neon_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                             uint32_t rows, uint32_t cols, uint32_t n)
{
    uint32_t r = 0;
    for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK) {
        for (uint32_t t = 0; t < n; t++) {
            rows4_neon(out + t * stride + r, 1, w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
    for (; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * stride + r] =
                colibri_neon_dot(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

void colibri_neon_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                             uint32_t cols)
{
    colibri_neon_matmat_f32(out, rows, w, x, rows, cols, 1);
}

/* Element-wise slots: four at a time, the rest one by one; every element
 * gets the same operations as in the reference. */
void colibri_neon_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    float inv = 1.0f / colibri_sqrtf(colibri_neon_dot(x, x, n) / (float)n + eps);
    float32x4_t inv_v = vdupq_n_f32(inv);
    uint32_t i = 0;
    for (; i + 4u <= n; i += 4u) {
        vst1q_f32(out + i, vmulq_f32(vld1q_f32(w + i), vmulq_f32(vld1q_f32(x + i), inv_v)));
    }
    for (; i < n; i++) {
        out[i] = w[i] * (x[i] * inv);
    }
}

void colibri_neon_add(float *y, const float *x, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 4u <= n; i += 4u) {
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    }
    for (; i < n; i++) {
        y[i] = y[i] + x[i];
    }
}

void colibri_neon_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    float32x4_t sv = vdupq_n_f32(s);
    uint32_t i = 0;
    for (; i + 4u <= n; i += 4u) {
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(vld1q_f32(x + i), sv)));
    }
    for (; i < n; i++) {
        y[i] = y[i] + x[i] * s;
    }
}

void colibri_neon_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u, i = 0;
    for (; i + 4u <= half; i += 4u) {
        float32x4_t c = vld1q_f32(cos_sin + i), s = vld1q_f32(cos_sin + half + i);
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + half + i);
        vst1q_f32(x + i, vsubq_f32(vmulq_f32(a, c), vmulq_f32(b, s)));
        vst1q_f32(x + half + i, vaddq_f32(vmulq_f32(b, c), vmulq_f32(a, s)));
    }
    for (; i < half; i++) {
        float c = cos_sin[i], s = cos_sin[half + i], a = x[i], b = x[half + i];
        x[i] = a * c - b * s;
        x[half + i] = b * c + a * s;
    }
}

/* Quantized products (neon_quant.h): one block's sums of four rows by one
 * token with widening multiplies. vmull_s8 and vmlal_high_s8 put the
 * products of elements i and i + 8 in one 16-bit lane (at most
 * 2 * 128 * 127, no overflow), vpadalq_s16 adds lane pairs into 32 bits. */
NEON_Q_INLINE int32x4_t row_isum(int8x16_t wlo, int8x16_t whi, int8x16_t xlo, int8x16_t xhi)
{
    int16x8_t lo = vmlal_high_s8(vmull_s8(vget_low_s8(wlo), vget_low_s8(xlo)), wlo, xlo);
    int16x8_t hi = vmlal_high_s8(vmull_s8(vget_low_s8(whi), vget_low_s8(xhi)), whi, xhi);
    return vpadalq_s16(vpaddlq_s16(lo), hi);
}

NEON_Q_INLINE int32x4_t isum_widening(const neon_qrows *w, int8x16_t xlo, int8x16_t xhi)
{
    return neon_isum4(
        row_isum(w->lo[0], w->hi[0], xlo, xhi), row_isum(w->lo[1], w->hi[1], xlo, xhi),
        row_isum(w->lo[2], w->hi[2], xlo, xhi), row_isum(w->lo[3], w->hi[3], xlo, xhi));
}

static void colibri_neon_matmat_q8(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 0, isum_widening);
}

static void colibri_neon_matmat_q4(float *out, size_t stride, const uint8_t *w,
                                   const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                   uint32_t n)
{
    neon_q_matmat(out, stride, w, x, rows, cols, n, 1, isum_widening);
}

/* colibri_expf on four lanes, step for step (colibri_math.h: separate
 * multiplies and adds, no fused ones); lanes outside the plain range (NaN,
 * overflow, underflow, a subnormal or huge scale) are recomputed by the
 * scalar function, so every bit agrees. */
static float32x4_t exp4(float32x4_t x)
{
    float32x4_t fk = vmulq_n_f32(x, COLIBRI_EXPF_LOG2E);
    float32x4_t half = vdupq_n_f32(0.5f);
    uint32x4_t up = vcgeq_f32(fk, vdupq_n_f32(0.0f));
    int32x4_t k = vcvtq_s32_f32(vbslq_f32(up, vaddq_f32(fk, half), vsubq_f32(fk, half)));
    float32x4_t kf = vcvtq_f32_s32(k);
    float32x4_t r = vsubq_f32(vsubq_f32(x, vmulq_n_f32(kf, COLIBRI_EXPF_LN2_HI)),
                              vmulq_n_f32(kf, COLIBRI_EXPF_LN2_LO));
    float32x4_t p = vdupq_n_f32(COLIBRI_EXPF_C7);
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXPF_C6));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXPF_C5));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXPF_C4));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXPF_C3));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXPF_C2));
    float32x4_t y = vaddq_f32(vdupq_n_f32(1.0f), vaddq_f32(r, vmulq_f32(vmulq_f32(r, r), p)));
    int32x4_t bias = vaddq_s32(k, vdupq_n_s32(127));
    float32x4_t result = vmulq_f32(y, vreinterpretq_f32_s32(vshlq_n_s32(bias, 23)));
    uint32x4_t plain =
        vandq_u32(vandq_u32(vcltq_f32(x, vdupq_n_f32(COLIBRI_EXPF_OVERFLOW)),
                            vcgtq_f32(x, vdupq_n_f32(COLIBRI_EXPF_UNDERFLOW))),
                  vandq_u32(vcleq_s32(k, vdupq_n_s32(127)), vcgtq_s32(k, vdupq_n_s32(-127))));
    if (vminvq_u32(plain) != UINT32_MAX) {
        float lanes[4], out[4];
        uint32_t ok[4];
        vst1q_f32(lanes, x);
        vst1q_f32(out, result);
        vst1q_u32(ok, plain);
        for (uint32_t j = 0; j < 4u; j++) {
            out[j] = ok[j] ? out[j] : colibri_expf(lanes[j]);
        }
        result = vld1q_f32(out);
    }
    return result;
}

/* a = a / (1 + exp(-a)) * b, four at a time, the rest one by one. */
void colibri_neon_swiglu(float *a, const float *b, uint32_t n)
{
    float32x4_t one = vdupq_n_f32(1.0f);
    uint32_t i = 0;
    for (; i + 4u <= n; i += 4u) {
        float32x4_t av = vld1q_f32(a + i);
        float32x4_t e = exp4(vnegq_f32(av));
        vst1q_f32(a + i, vmulq_f32(vdivq_f32(av, vaddq_f32(one, e)), vld1q_f32(b + i)));
    }
    for (; i < n; i++) {
        a[i] = a[i] / (1.0f + colibri_expf(-a[i])) * b[i];
    }
}

/* softmax is the reference's (NULL): a router's few scores and attention's
 * positions, little of a token's work. */
const colibri_kernels colibri_kernels_neon = {
    .name = "neon",
    .dot = colibri_neon_dot,
    .matvec_f32 = colibri_neon_matvec_f32,
    .rmsnorm = colibri_neon_rmsnorm,
    .add = colibri_neon_add,
    .add_scaled = colibri_neon_add_scaled,
    .rope_apply = colibri_neon_rope_apply,
    .swiglu = colibri_neon_swiglu,
    .matmat_f32 = colibri_neon_matmat_f32,
    .matmat_q8 = colibri_neon_matmat_q8,
    .matmat_q4 = colibri_neon_matmat_q4,
    .matmat_q8r16 = colibri_neon_matmat_q8r16, /* neon_r16.c */
    .matmat_q4r16 = colibri_neon_matmat_q4r16,
    .matmat_qk = colibri_neon_matmat_qk,       /* neon_qk.c */
    .matmat_qkr16 = colibri_neon_matmat_qkr16, /* neon_qkr16.c */
};
