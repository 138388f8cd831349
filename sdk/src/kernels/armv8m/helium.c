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
#include "kernels/borrowed.h"
#include "kernels/r16.h"
#include "quant.h"
#include "qtile.h"

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

static float colibri_helium_dot(const float *a, const float *b, uint32_t n)
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

static void colibri_helium_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                                      uint32_t rows, uint32_t cols, uint32_t n)
{
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * stride + r] =
                colibri_helium_dot(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

static void colibri_helium_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                                      uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++) {
        out[r] = colibri_helium_dot(w + (size_t)r * cols, x, cols);
    }
}

/* Element-wise slots: four at a time with a predicated last group; every
 * element gets the same operations as in the reference. */
static void colibri_helium_rmsnorm(float *out, const float *x, const float *w, uint32_t n,
                                   float eps)
{
    float32x4_t inv =
        vdupq_n_f32(1.0f / colibri_sqrtf(colibri_helium_dot(x, x, n) / (float)n + eps));
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        float32x4_t v = vmulq_f32(vldrwq_z_f32(w + i, p), vmulq_f32(vldrwq_z_f32(x + i, p), inv));
        vstrwq_p_f32(out + i, v, p);
    }
}

static void colibri_helium_add(float *y, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        vstrwq_p_f32(y + i, vaddq_f32(vldrwq_z_f32(y + i, p), vldrwq_z_f32(x + i, p)), p);
    }
}

static void colibri_helium_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    float32x4_t sv = vdupq_n_f32(s);
    for (uint32_t i = 0; i < n; i += 4u) {
        mve_pred16_t p = vctp32q(n - i);
        float32x4_t v = vaddq_f32(vldrwq_z_f32(y + i, p), vmulq_f32(vldrwq_z_f32(x + i, p), sv));
        vstrwq_p_f32(y + i, v, p);
    }
}

static void colibri_helium_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
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

/* ---- quantized products (docs/kernels.md, "Quantized products") ---------
 * A tile is two weight rows by one token (decode) or two (prompts): each
 * block of a row is loaded once for both tokens. A block's 32 products of a
 * pair are summed exactly by two VMLADAVA (sixteen int8 products added into
 * a 32-bit scalar); then acc = fma((float)isum, d_w * d_x, acc) on the FPU,
 * the reference's steps. Four weight and two token vectors use six of the
 * eight Q registers.
 *
 * Rows in groups of 16 (Q8_R16, Q4_R16: colibri.h, docs/format.md 3.4) go
 * the same way: MVE has no dot product into 32-bit lanes, so the row, not
 * the lane, stays the unit, and a row's bytes, four to a 64-byte chunk of
 * its tile, are gathered into the by-row order (VLDRB gather, offsets
 * r16_offsets: element e of the row is byte 64 (e / 4) + e % 4 past the
 * row's first). One instruction like a contiguous load; on a Cortex-M55 a
 * gather takes a beat per element, so a load costs about four times the
 * cycles (docs/kernels.md). */

typedef struct qrow {
    int8x16_t lo, hi; /* elements 0..15, 16..31 */
} qrow;

/* Where a tile's two rows are: block b of row i has its binary16 scale at
 * scale[i] + b * step and its quants at quants[i] + b * step. */
typedef struct qrows {
    const uint8_t *scale[2], *quants[2];
    size_t step;
} qrows;

static const uint8_t r16_offsets[16] = {0,   1,   2,   3,   64,  65,  66,  67,
                                        128, 129, 130, 131, 192, 193, 194, 195};

/* The 16 bytes of a row from q: contiguous, or gathered from an R16 tile. */
static int8x16_t row_bytes(const uint8_t *q, int r16, uint8x16_t offsets)
{
    return r16 ? vldrbq_gather_offset_s8((const int8_t *)q, offsets) : vldrbq_s8((const int8_t *)q);
}

/* Q8: the 32 elements; an R16 row's elements 16..31 are four chunks on. */
static qrow load_q8(const uint8_t *q, int r16, uint8x16_t offsets)
{
    qrow v = {row_bytes(q, r16, offsets), row_bytes(q + (r16 ? 256 : 16), r16, offsets)};
    return v;
}

/* Q4 byte j: element j in the low nibble, j + 16 in the high one; minus 8 */
static qrow load_q4(const uint8_t *q, int r16, uint8x16_t offsets)
{
    uint8x16_t raw = vreinterpretq_u8_s8(row_bytes(q, r16, offsets));
    qrow v = {vsubq_n_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), 8),
              vsubq_n_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), 8)};
    return v;
}

/* A block's binary16 scale as a float with the FPU's VCVTB (exact, every
 * binary16 value; 2 instructions where the integer conversion takes ~10). */
static float block_scale(const uint8_t *scale)
{
    uint16_t bits = colibri_rd_u16(scale);
    __extension__ _Float16 h; /* ACLE's IEEE half of every Helium CPU */
    memcpy(&h, &bits, sizeof h);
    return (float)h;
}

static float pair_step(float acc, qrow w, float dw, const colibri_qblock *x)
{
    int32_t isum = vmladavaq_s8(vmladavq_s8(w.lo, vldrbq_s8(x->q)), w.hi, vldrbq_s8(x->q + 16));
    return colibri_fmaf((float)isum, dw * x->d, acc);
}

/* Rows w by tokens x0, x1 (T of them) through every block; their bytes
 * contiguous (by row) or spread over the tile's chunks (r16). Inlined where
 * q4 and r16 are constants (what keeps the by-row loop as short as before). */
static inline __attribute__((always_inline)) void q_tile(float *out, size_t stride, const qrows *w,
                                                         const colibri_qblock *x0,
                                                         const colibri_qblock *x1, uint32_t nb,
                                                         int q4, int r16, uint32_t rows, uint32_t T)
{
    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f; /* a<token><row> */
    uint8x16_t offsets = vldrbq_u8(r16_offsets);
    for (uint32_t b = 0; b < nb; b++) {
        size_t at = (size_t)b * w->step;
        const uint8_t *q0 = w->quants[0] + at, *q1 = w->quants[1] + at;
        qrow r0 = q4 ? load_q4(q0, r16, offsets) : load_q8(q0, r16, offsets);
        qrow r1 = q4 ? load_q4(q1, r16, offsets) : load_q8(q1, r16, offsets);
        float d0 = block_scale(w->scale[0] + at), d1 = block_scale(w->scale[1] + at);
        a00 = pair_step(a00, r0, d0, x0 + b);
        a01 = pair_step(a01, r1, d1, x0 + b);
        if (T == 2u) {
            a10 = pair_step(a10, r0, d0, x1 + b);
            a11 = pair_step(a11, r1, d1, x1 + b);
        }
    }
    colibri_qtile_store(out, stride, rows, T, a00, a01, a10, a11);
}

static void q_matmat(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                     uint32_t rows, uint32_t cols, uint32_t n, int q4)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t step = q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES;
    size_t row_bytes = (size_t)nb * step;
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t rows_here = rows - r >= 2u ? 2u : 1u;
        const uint8_t *w0 = w + r * row_bytes, *w1 = w0 + (rows_here - 1u) * row_bytes;
        qrows tile = {{w0, w1}, {w0 + 2, w1 + 2}, step};
        for (uint32_t t = 0; t < n; t += 2u) {
            uint32_t T = n - t >= 2u ? 2u : 1u;
            const colibri_qblock *x0 = x + (size_t)t * nb;
            q_tile(out + t * stride + r, stride, &tile, x0, x0 + (T - 1u) * nb, nb, q4, 0,
                   rows_here, T);
        }
    }
}

/* r16.h's pass: one group's rows, two by two, by one or two tokens. */
static uint32_t r16_pass(float *out, size_t stride, const uint8_t *group, size_t tile_bytes,
                         const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                         uint32_t tokens_left, int q4)
{
    uint32_t rows = rows_left < COLIBRI_R16_ROWS ? rows_left : COLIBRI_R16_ROWS;
    uint32_t T = tokens_left >= 2u ? 2u : 1u;
    const uint8_t *chunks = group + 2u * COLIBRI_R16_ROWS;
    for (uint32_t r = 0; r < rows; r += 2u) {
        uint32_t r1 = rows - r >= 2u ? r + 1u : r;
        qrows tile = {
            {group + 2u * r, group + 2u * r1}, {chunks + 4u * r, chunks + 4u * r1}, tile_bytes};
        q_tile(out + r, stride, &tile, x, x + (T - 1u) * nb, nb, q4, 1, r1 - r + 1u, T);
    }
    return T;
}

static void matmat_q8_helium(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                             uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 0);
}

static void matmat_q4_helium(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                             uint32_t rows, uint32_t cols, uint32_t n)
{
    q_matmat(out, stride, w, x, rows, cols, n, 1);
}

static void matmat_q8r16_helium(float *out, size_t stride, const uint8_t *w,
                                const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 0, r16_pass);
}

static void matmat_q4r16_helium(float *out, size_t stride, const uint8_t *w,
                                const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n)
{
    colibri_r16_walk(out, stride, w, x, rows, cols, n, 1, r16_pass);
}

/* softmax and swiglu are the reference's (NULL): their cost is exp, which
 * this table does not reimplement. */
const colibri_kernels colibri_kernels_helium = {
    .name = "helium",
    .dot = colibri_helium_dot,
    .matvec_f32 = colibri_helium_matvec_f32,
    .rmsnorm = colibri_helium_rmsnorm,
    .add = colibri_helium_add,
    .add_scaled = colibri_helium_add_scaled,
    .rope_apply = colibri_helium_rope_apply,
    .matmat_f32 = colibri_helium_matmat_f32,
    .matmat_q8 = matmat_q8_helium,
    .matmat_q4 = matmat_q4_helium,
    .matmat_q8r16 = matmat_q8r16_helium,
    .matmat_q4r16 = matmat_q4r16_helium,
    .matmat_qk = colibri_helium_matmat_qk,
    .matmat_qkr16 = colibri_helium_matmat_qkr16,
};
