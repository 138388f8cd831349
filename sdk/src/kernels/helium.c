/*
 * helium.c - kernels for Armv8.1-M with the M-profile Vector Extension
 * (Helium, MVE with floating point: Cortex-M55, Cortex-M85): the sixteen
 * canonical lanes of docs/kernels.md are four float32x4 Q registers, lanes
 * 0..3, 4..7, 8..11, 12..15. Built only for such a CPU (a board's
 * `kernels = ["helium"]`, which -mcpu=cortex-m55 allows); a firmware fixes
 * its table at compile time.
 *
 * Each term is one fused multiply-add into its lane (vfmaq_f32: the
 * contract). A tail of r < 16 terms uses tail predication (vctp32q): the
 * predicated vfmaq_m leaves the lanes past n as they are.
 * MVE has eight Q registers: four hold the lanes, so a matvec goes one row
 * at a time.
 */
#include <arm_mve.h>

#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"

typedef struct lanes16 {
    float32x4_t l0, l1, l2, l3; /* lanes 0..3, 4..7, 8..11, 12..15 */
} lanes16;

/* The pairwise tree: lanes 0..7 += 8..15, 0..3 += 4..7, 0..1 += 2..3, 0 += 1. */
static float lanes_reduce(lanes16 l)
{
    float32x4_t four = vaddq_f32(vaddq_f32(l.l0, l.l2), vaddq_f32(l.l1, l.l3));
    float a = vgetq_lane_f32(four, 0) + vgetq_lane_f32(four, 2);
    float b = vgetq_lane_f32(four, 1) + vgetq_lane_f32(four, 3);
    return a + b;
}

/* Lanes j < left get a[j] * b[j] fused in; the others stay as they are. */
static float32x4_t lane_step_tail(float32x4_t acc, const float *a, const float *b, uint32_t left)
{
    mve_pred16_t p = vctp32q(left);
    return vfmaq_m_f32(acc, vldrwq_z_f32(a, p), vldrwq_z_f32(b, p), p);
}

static uint32_t left_after(uint32_t left, uint32_t used)
{
    return left > used ? left - used : 0u;
}

/*
 * Whole blocks of 16 terms: per block 8 post-incrementing loads, 4 fused
 * multiply-adds and the loop's subtract and branch (14 instructions; the
 * compiler's own loop from intrinsics takes 19, for want of post-increment
 * addressing). q4 and q5 hold the loaded terms; blocks >= 1.
 */
static lanes16 lanes_blocks(lanes16 l, const float **pa, const float **pb, uint32_t blocks)
{
    const float *a = *pa, *b = *pb;
    __asm__ volatile("1:\n\t"
                     "vldrw.u32 q4, [%[a]], #16\n\t"
                     "vldrw.u32 q5, [%[b]], #16\n\t"
                     "vfma.f32 %q[l0], q4, q5\n\t"
                     "vldrw.u32 q4, [%[a]], #16\n\t"
                     "vldrw.u32 q5, [%[b]], #16\n\t"
                     "vfma.f32 %q[l1], q4, q5\n\t"
                     "vldrw.u32 q4, [%[a]], #16\n\t"
                     "vldrw.u32 q5, [%[b]], #16\n\t"
                     "vfma.f32 %q[l2], q4, q5\n\t"
                     "vldrw.u32 q4, [%[a]], #16\n\t"
                     "vldrw.u32 q5, [%[b]], #16\n\t"
                     "vfma.f32 %q[l3], q4, q5\n\t"
                     "subs %[n], %[n], #1\n\t"
                     "bne 1b"
                     : [a] "+r"(a), [b] "+r"(b), [n] "+r"(blocks), [l0] "+w"(l.l0), [l1] "+w"(l.l1),
                       [l2] "+w"(l.l2), [l3] "+w"(l.l3)
                     :
                     : "d8", "d9", "d10", "d11", "memory", "cc");
    *pa = a;
    *pb = b;
    return l;
}

static float dot_helium(const float *a, const float *b, uint32_t n)
{
    float32x4_t z = vdupq_n_f32(0.0f);
    lanes16 l = {z, z, z, z};
    uint32_t blocks = n / 16u;
    if (blocks > 0) {
        l = lanes_blocks(l, &a, &b, blocks);
    }
    uint32_t r = n % 16u;
    if (r != 0) {
        l.l0 = lane_step_tail(l.l0, a, b, r);
        l.l1 = lane_step_tail(l.l1, a + 4, b + 4, left_after(r, 4));
        l.l2 = lane_step_tail(l.l2, a + 8, b + 8, left_after(r, 8));
        l.l3 = lane_step_tail(l.l3, a + 12, b + 12, left_after(r, 12));
    }
    return lanes_reduce(l);
}

static void matmat_helium(float *out, size_t stride, const float *w, const float *x, uint32_t rows,
                          uint32_t cols, uint32_t n)
{
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * stride + r] = dot_helium(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

static void matvec_helium(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++) {
        out[r] = dot_helium(w + (size_t)r * cols, x, cols);
    }
}

/* Element-wise slots: four at a time with a predicated last group; every
 * element gets the same operations as in the reference. */
static void rmsnorm_helium(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    float32x4_t inv = vdupq_n_f32(1.0f / colibri_sqrtf(dot_helium(x, x, n) / (float)n + eps));
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        float32x4_t v = vmulq_f32(vldrwq_z_f32(w + i, p), vmulq_f32(vldrwq_z_f32(x + i, p), inv));
        vstrwq_p_f32(out + i, v, p);
    }
}

static void add_helium(float *y, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        vstrwq_p_f32(y + i, vaddq_f32(vldrwq_z_f32(y + i, p), vldrwq_z_f32(x + i, p)), p);
    }
}

static void add_scaled_helium(float *y, const float *x, float s, uint32_t n)
{
    float32x4_t sv = vdupq_n_f32(s);
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        float32x4_t v = vaddq_f32(vldrwq_z_f32(y + i, p), vmulq_f32(vldrwq_z_f32(x + i, p), sv));
        vstrwq_p_f32(y + i, v, p);
    }
}

static void rope_apply_helium(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u;
    for (uint32_t i = 0; i < half; i += 4u) {
        mve_pred16_t p = vctp32q(half - i);
        float32x4_t c = vldrwq_z_f32(cos_sin + i, p), s = vldrwq_z_f32(cos_sin + half + i, p);
        float32x4_t a = vldrwq_z_f32(x + i, p), b = vldrwq_z_f32(x + half + i, p);
        vstrwq_p_f32(x + i, vsubq_f32(vmulq_f32(a, c), vmulq_f32(b, s)), p);
        vstrwq_p_f32(x + half + i, vaddq_f32(vmulq_f32(b, c), vmulq_f32(a, s)), p);
    }
}

/* softmax and swiglu are the reference's (NULL): their cost is exp, which
 * this table does not reimplement. */
const colibri_kernels colibri_kernels_helium = {
    .name = "helium",
    .dot = dot_helium,
    .matvec_f32 = matvec_helium,
    .rmsnorm = rmsnorm_helium,
    .add = add_helium,
    .add_scaled = add_scaled_helium,
    .rope_apply = rope_apply_helium,
    .matmat_f32 = matmat_helium,
};
