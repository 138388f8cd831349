/* reference.c - portable C reference kernels (contracts in kernels.h). */
#include "colibri_compat.h"
#include "colibri_math.h"
#include "kernels.h"

/* The canonical reduction (docs/kernels.md): COLIBRI_LANES partial sums,
 * term i into lane i % COLIBRI_LANES in index order, then a fixed pairwise
 * tree. Every kernel table reproduces exactly this. */
static float lanes_reduce(float *lane)
{
    for (uint32_t width = COLIBRI_LANES / 2u; width > 0; width /= 2u) {
        for (uint32_t j = 0; j < width; j++) {
            lane[j] = lane[j] + lane[j + width];
        }
    }
    return lane[0];
}

float colibri_k_dot(const float *a, const float *b, uint32_t n)
{
    float lane[COLIBRI_LANES] = {0.0f};
    for (uint32_t i = 0; i < n; i++) {
        lane[i % COLIBRI_LANES] = lane[i % COLIBRI_LANES] + a[i] * b[i];
    }
    return lanes_reduce(lane);
}

static float sum_canonical(const float *x, uint32_t n)
{
    float lane[COLIBRI_LANES] = {0.0f};
    for (uint32_t i = 0; i < n; i++) {
        lane[i % COLIBRI_LANES] = lane[i % COLIBRI_LANES] + x[i];
    }
    return lanes_reduce(lane);
}

void colibri_k_matvec(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++) {
        out[r] = colibri_k_dot(w + (size_t)r * cols, x, cols);
    }
}

void colibri_k_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    float inv = 1.0f / colibri_sqrtf(colibri_k_dot(x, x, n) / (float)n + eps);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = w[i] * (x[i] * inv);
    }
}

void colibri_k_softmax(float *x, uint32_t n)
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

float colibri_k_sigmoid(float v)
{
    return 1.0f / (1.0f + colibri_expf(-v));
}

void colibri_k_swiglu(float *a, const float *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        a[i] = a[i] / (1.0f + colibri_expf(-a[i])) * b[i];
    }
}

void colibri_k_add(float *y, const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        y[i] = y[i] + x[i];
    }
}

void colibri_k_add_scaled(float *y, const float *x, float s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        y[i] = y[i] + x[i] * s;
    }
}

void colibri_k_rope_table(float *cos_sin, uint32_t pos, uint32_t head_dim, float theta)
{
    uint32_t half = head_dim / 2u;
    for (uint32_t i = 0; i < half; i++) {
        float exponent = (float)(2u * i) / (float)head_dim;
        float inv_freq = 1.0f / colibri_powf(theta, exponent);
        float angle = (float)pos * inv_freq;
        colibri_sincosf(angle, &cos_sin[half + i], &cos_sin[i]);
    }
}

void colibri_k_rope_apply(float *x, const float *cos_sin, uint32_t head_dim)
{
    uint32_t half = head_dim / 2u;
    for (uint32_t i = 0; i < half; i++) {
        float c = cos_sin[i], s = cos_sin[half + i];
        float x1 = x[i], x2 = x[half + i];
        x[i] = x1 * c - x2 * s;
        x[half + i] = x2 * c + x1 * s;
    }
}

const colibri_kernels colibri_kernels_reference = {
    .name = "reference",
    .dot = colibri_k_dot,
    .matvec_f32 = colibri_k_matvec,
    .rmsnorm = colibri_k_rmsnorm,
    .softmax = colibri_k_softmax,
    .swiglu = colibri_k_swiglu,
    .add = colibri_k_add,
    .add_scaled = colibri_k_add_scaled,
    .rope_apply = colibri_k_rope_apply,
};
