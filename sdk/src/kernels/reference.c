/* reference.c - portable C reference kernels (contracts in kernels.h). */
#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"
#include "quant.h"

/* The canonical reduction (docs/kernels.md): COLIBRI_LANES partial sums,
 * term i into lane i % COLIBRI_LANES in index order (a product term with one
 * fused multiply-add), then a fixed pairwise tree. Every kernel table
 * reproduces exactly this. */
static float lanes_reduce(float *lane)
{
    for (uint32_t width = COLIBRI_LANES / 2u; width > 0; width /= 2u) {
        for (uint32_t j = 0; j < width; j++) {
            lane[j] = lane[j] + lane[j + width];
        }
    }
    return lane[0];
}

/* Sixteen named partial sums, so that the compiler keeps them in registers
 * (and may run them side by side in vector registers: the lanes are
 * independent, so that changes no bit). Whole blocks of 16 terms go through
 * them; then the tail into lanes 0, 1, ...: the same order as term i into
 * lane i % 16. */
#define LANE_TERMS(step)                                                                           \
    do {                                                                                           \
        l0 = step(l0, 0);                                                                          \
        l1 = step(l1, 1);                                                                          \
        l2 = step(l2, 2);                                                                          \
        l3 = step(l3, 3);                                                                          \
        l4 = step(l4, 4);                                                                          \
        l5 = step(l5, 5);                                                                          \
        l6 = step(l6, 6);                                                                          \
        l7 = step(l7, 7);                                                                          \
        l8 = step(l8, 8);                                                                          \
        l9 = step(l9, 9);                                                                          \
        l10 = step(l10, 10);                                                                       \
        l11 = step(l11, 11);                                                                       \
        l12 = step(l12, 12);                                                                       \
        l13 = step(l13, 13);                                                                       \
        l14 = step(l14, 14);                                                                       \
        l15 = step(l15, 15);                                                                       \
    } while (0)

#define LANES_DECLARE                                                                              \
    float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f, l4 = 0.0f, l5 = 0.0f, l6 = 0.0f, l7 = 0.0f,  \
          l8 = 0.0f, l9 = 0.0f, l10 = 0.0f, l11 = 0.0f, l12 = 0.0f, l13 = 0.0f, l14 = 0.0f,        \
          l15 = 0.0f

#define LANES_ARRAY                                                                                \
    {                                                                                              \
        l0, l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, l12, l13, l14, l15                       \
    }

_Static_assert(COLIBRI_LANES == 16u, "the reference kernels name sixteen lanes");

float colibri_reference_dot(const float *a, const float *b, uint32_t n)
{
    LANES_DECLARE;
    uint32_t i = 0;
    for (; i + COLIBRI_LANES <= n; i += COLIBRI_LANES) {
#define DOT_STEP(lane, j) colibri_fmaf(a[i + (j)], b[i + (j)], lane)
        LANE_TERMS(DOT_STEP);
#undef DOT_STEP
    }
    float lane[COLIBRI_LANES] = LANES_ARRAY;
    for (uint32_t j = 0; i + j < n; j++) {
        lane[j] = colibri_fmaf(a[i + j], b[i + j], lane[j]);
    }
    return lanes_reduce(lane);
}

static float sum_canonical(const float *x, uint32_t n)
{
    LANES_DECLARE;
    uint32_t i = 0;
    for (; i + COLIBRI_LANES <= n; i += COLIBRI_LANES) {
#define SUM_STEP(lane, j) (lane + x[i + (j)])
        LANE_TERMS(SUM_STEP);
#undef SUM_STEP
    }
    float lane[COLIBRI_LANES] = LANES_ARRAY;
    for (uint32_t j = 0; i + j < n; j++) {
        lane[j] = lane[j] + x[i + j];
    }
    return lanes_reduce(lane);
}

void colibri_reference_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                                  uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++) {
        out[r] = colibri_reference_dot(w + (size_t)r * cols, x, cols);
    }
}

/* Row by row, every token for each row: the row stays in cache. */
void colibri_reference_matmat_f32(float *out, size_t out_stride, const float *w, const float *x,
                                  uint32_t rows, uint32_t cols, uint32_t n)
{
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            out[t * out_stride + r] =
                colibri_reference_dot(w + (size_t)r * cols, x + (size_t)t * cols, cols);
        }
    }
}

void colibri_reference_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    float inv = 1.0f / colibri_sqrtf(colibri_reference_dot(x, x, n) / (float)n + eps);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = w[i] * (x[i] * inv);
    }
}

void colibri_reference_layernorm(float *out, const float *x, const float *w, const float *b,
                                 uint32_t n, float eps)
{
    float mean = sum_canonical(x, n) / (float)n, inv;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = x[i] - mean;
    }
    inv = 1.0f / colibri_sqrtf(colibri_reference_dot(out, out, n) / (float)n + eps);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = out[i] * inv * w[i] + b[i];
    }
}

void colibri_reference_swiglu_clamped(float *a, const float *b, uint32_t n, float limit,
                                      float alpha)
{
    for (uint32_t i = 0; i < n; i++) {
        float g = a[i] < limit ? a[i] : limit;
        float u = b[i] < -limit ? -limit : (b[i] < limit ? b[i] : limit);
        a[i] = (u + 1.0f) * (g * colibri_reference_sigmoid(g * alpha));
    }
}

void colibri_reference_softmax(float *x, uint32_t n)
{
    float max = x[0], sum;
    for (uint32_t i = 1; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    for (uint32_t i = 0; i < n; i++) {
        x[i] = colibri_expf(x[i] - max);
    }
    sum = sum_canonical(x, n);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = x[i] / sum;
    }
}

float colibri_reference_sigmoid(float v)
{
    return 1.0f / (1.0f + colibri_expf(-v));
}

void colibri_reference_swiglu(float *a, const float *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        a[i] = a[i] / (1.0f + colibri_expf(-a[i])) * b[i];
    }
}

void colibri_reference_add(float *y, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        y[i] = y[i] + x[i];
    }
}

void colibri_reference_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        y[i] = y[i] + x[i] * s;
    }
}

void colibri_reference_rope_table(float *cos_sin, uint32_t pos, uint32_t head_dim, float theta)
{
    uint32_t half = head_dim / 2u;
    for (uint32_t i = 0; i < half; i++) {
        float exponent = (float)(2u * i) / (float)head_dim;
        float inv_freq = 1.0f / colibri_powf(theta, exponent);
        float angle = (float)pos * inv_freq;
        colibri_sincosf(angle, &cos_sin[half + i], &cos_sin[i]);
    }
}

void colibri_reference_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u;
    for (uint32_t i = 0; i < half; i++) {
        float c = cos_sin[i], s = cos_sin[half + i];
        float x1 = x[i], x2 = x[half + i];
        x[i] = x1 * c - x2 * s;
        x[half + i] = x2 * c + x1 * s;
    }
}

/* ---- quantized products (docs/kernels.md, "Quantized products") -------- */

/* One block's exact integer sum of products: block (or tile) at w, row i of
 * its group (0 row by row). Q8 row by row: element e at 2 + e. */
static int32_t isum_q8(const uint8_t *w, uint32_t i, const int8_t *xq)
{
    int32_t sum = 0;
    (void)i;
    for (uint32_t e = 0; e < COLIBRI_QBLOCK; e++) {
        sum += (int32_t)(int8_t)w[2u + e] * xq[e];
    }
    return sum;
}

/* Q4 row by row: byte j holds element j (low nibble) and j + 16 (high). */
static int32_t isum_q4(const uint8_t *w, uint32_t i, const int8_t *xq)
{
    int32_t sum = 0;
    (void)i;
    for (uint32_t j = 0; j < COLIBRI_QBLOCK / 2u; j++) {
        sum += ((int32_t)(w[2u + j] & 0x0Fu) - 8) * xq[j];
        sum += ((int32_t)(w[2u + j] >> 4) - 8) * xq[j + 16u];
    }
    return sum;
}

/* Q8 in groups of 16 rows (colibri.h): row i's element 4k + j at
 * 32 + 64k + 4i + j of the tile (four bytes of the row, chunk after chunk). */
static int32_t isum_q8r16(const uint8_t *w, uint32_t i, const int8_t *xq)
{
    int32_t sum = 0;
    for (uint32_t k = 0; k < COLIBRI_QBLOCK / 4u; k++) {
        const uint8_t *four = w + 32u + 64u * k + 4u * i;
        for (uint32_t j = 0; j < 4u; j++) {
            sum += (int32_t)(int8_t)four[j] * xq[4u * k + j];
        }
    }
    return sum;
}

/* Q4 in groups of 16 rows: the byte of elements 4k + j (low nibble) and
 * 16 + 4k + j (high) at 32 + 64k + 4i + j. */
static int32_t isum_q4r16(const uint8_t *w, uint32_t i, const int8_t *xq)
{
    int32_t sum = 0;
    for (uint32_t k = 0; k < COLIBRI_QBLOCK / 8u; k++) {
        const uint8_t *four = w + 32u + 64u * k + 4u * i;
        for (uint32_t j = 0; j < 4u; j++) {
            sum += ((int32_t)(four[j] & 0x0Fu) - 8) * xq[4u * k + j];
            sum += ((int32_t)(four[j] >> 4) - 8) * xq[4u * k + j + 16u];
        }
    }
    return sum;
}

/* Row i of a group of G rows (G = 1: row by row; its blocks, or tiles, at
 * w, G * block_bytes apart, row i's scale at 2i of each):
 * acc = fma((float)isum, d_w * d_x, acc), block by block in order. */
#define QUANT_DOT(name, isum, G, block_bytes)                                                      \
    static float name(const uint8_t *w, uint32_t i, const colibri_qblock *x, uint32_t nb)          \
    {                                                                                              \
        float acc = 0.0f;                                                                          \
        for (uint32_t b = 0; b < nb; b++, w += (G) * (block_bytes)) {                              \
            float s = colibri_qblock_scale(w + 2u * i) * x[b].d;                                   \
            acc = colibri_fmaf((float)isum(w, i, x[b].q), s, acc);                                 \
        }                                                                                          \
        return acc;                                                                                \
    }

QUANT_DOT(dot_q8, isum_q8, 1u, COLIBRI_Q8_BLOCK_BYTES)
QUANT_DOT(dot_q4, isum_q4, 1u, COLIBRI_Q4_BLOCK_BYTES)
QUANT_DOT(dot_q8r16, isum_q8r16, COLIBRI_QGROUP_ROWS, COLIBRI_Q8_BLOCK_BYTES)
QUANT_DOT(dot_q4r16, isum_q4r16, COLIBRI_QGROUP_ROWS, COLIBRI_Q4_BLOCK_BYTES)

/* out[t * out_stride + r] = the row r by token t dot, for every row and
 * token; row r is row r % G of group r / G. */
#define QUANT_MATMAT(name, dot, G, block_bytes)                                                    \
    void name(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,            \
              uint32_t rows, uint32_t cols, uint32_t n)                                            \
    {                                                                                              \
        uint32_t nb = colibri_qblocks(cols);                                                       \
        for (uint32_t r = 0; r < rows; r++) {                                                      \
            const uint8_t *group = w + (size_t)(r / (G)) * nb * (G) * (block_bytes);               \
            for (uint32_t t = 0; t < n; t++) {                                                     \
                out[t * out_stride + r] = dot(group, r % (G), x + (size_t)t * nb, nb);             \
            }                                                                                      \
        }                                                                                          \
    }

QUANT_MATMAT(colibri_reference_matmat_q8, dot_q8, 1u, COLIBRI_Q8_BLOCK_BYTES)
QUANT_MATMAT(colibri_reference_matmat_q4, dot_q4, 1u, COLIBRI_Q4_BLOCK_BYTES)
QUANT_MATMAT(colibri_reference_matmat_q8r16, dot_q8r16, COLIBRI_QGROUP_ROWS, COLIBRI_Q8_BLOCK_BYTES)
QUANT_MATMAT(colibri_reference_matmat_q4r16, dot_q4r16, COLIBRI_QGROUP_ROWS, COLIBRI_Q4_BLOCK_BYTES)

/* A super-block sb (QK2 .. QK6) by its count <= 8 activation blocks x:
 * per block j, acc = fma(isum, (d * scale_j) * d_x, acc); acc = fma(-xsum,
 * (dmin * min_j) * d_x, acc), where isum = sum q_e q_x,e and xsum = sum
 * q_x,e are exact. Returns acc. */
static float superblock_dot(const uint8_t *sb, const colibri_qblock *x, uint32_t count,
                            uint32_t bits, float acc)
{
    for (uint32_t j = 0; j < count; j++) {
        uint8_t q[COLIBRI_QBLOCK];
        int32_t isum = 0, xsum = 0;
        colibri_qk_levels(q, sb, j, bits);
        for (uint32_t e = 0; e < COLIBRI_QBLOCK; e++) {
            isum += (int32_t)q[e] * x[j].q[e];
            xsum += x[j].q[e];
        }
        float scale = colibri_qblock_scale(sb) * (float)colibri_qk_scale(sb, j);
        float min = colibri_half_to_float(colibri_rd_u16(sb + 2u)) * (float)colibri_qk_min(sb, j);
        acc = colibri_fmaf((float)isum, scale * x[j].d, acc);
        acc = colibri_fmaf((float)-xsum, min * x[j].d, acc);
    }
    return acc;
}

/* The blocks of super-block s of a row of nb blocks. */
static uint32_t superblock_count(uint32_t nb, uint32_t s)
{
    uint32_t left = nb - s * 8u;
    return left < 8u ? left : 8u;
}

void colibri_reference_matmat_qk(float *out, size_t out_stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols), nsb = (nb + 7u) / 8u;
    size_t row_bytes = colibri_qk_row_bytes(cols, bits);
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t t = 0; t < n; t++) {
            float acc = 0.0f;
            for (uint32_t s = 0; s < nsb; s++) {
                const uint8_t *sb = w + r * row_bytes + (size_t)s * COLIBRI_QK_BYTES(bits);
                acc = superblock_dot(sb, x + (size_t)t * nb + s * 8u, superblock_count(nb, s), bits,
                                     acc);
            }
            out[t * out_stride + r] = acc;
        }
    }
}

/* The same on QK R16 groups: row i of a tile gathered back to its
 * super-block (colibri_qk_r16_offset), then as above. */
void colibri_reference_matmat_qkr16(float *out, size_t out_stride, const uint8_t *w,
                                    const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                    uint32_t n, uint32_t bits)
{
    uint32_t nb = colibri_qblocks(cols), nsb = (nb + 7u) / 8u, bytes = COLIBRI_QK_BYTES(bits);
    for (uint32_t r = 0; r < rows; r++) {
        const uint8_t *group =
            w + (size_t)(r / COLIBRI_QGROUP_ROWS) * nsb * COLIBRI_QGROUP_ROWS * bytes;
        for (uint32_t t = 0; t < n; t++) {
            float acc = 0.0f;
            for (uint32_t s = 0; s < nsb; s++) {
                const uint8_t *tile = group + (size_t)s * COLIBRI_QGROUP_ROWS * bytes;
                uint8_t sb[COLIBRI_QK_BYTES(6u)];
                for (uint32_t p = 0; p < bytes; p++) {
                    sb[p] = tile[colibri_qk_r16_offset(p, r % COLIBRI_QGROUP_ROWS)];
                }
                acc = superblock_dot(sb, x + (size_t)t * nb + s * 8u, superblock_count(nb, s), bits,
                                     acc);
            }
            out[t * out_stride + r] = acc;
        }
    }
}

const colibri_kernels colibri_kernels_reference = {
    .name = "reference",
    .dot = colibri_reference_dot,
    .matvec_f32 = colibri_reference_matvec_f32,
    .rmsnorm = colibri_reference_rmsnorm,
    .softmax = colibri_reference_softmax,
    .swiglu = colibri_reference_swiglu,
    .add = colibri_reference_add,
    .add_scaled = colibri_reference_add_scaled,
    .rope_apply = colibri_reference_rope_apply,
    .matmat_f32 = colibri_reference_matmat_f32,
    .matmat_q8 = colibri_reference_matmat_q8,
    .matmat_q4 = colibri_reference_matmat_q4,
    .matmat_q8r16 = colibri_reference_matmat_q8r16,
    .matmat_q4r16 = colibri_reference_matmat_q4r16,
    .matmat_qk = colibri_reference_matmat_qk,
    .matmat_qkr16 = colibri_reference_matmat_qkr16,
};
