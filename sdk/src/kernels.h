/*
 * kernels.h - the reference kernels (kernels/reference.c), which the table
 * colibri_kernels_reference points at, and two helpers that are not slots of
 * a table (they run once per token, not in an inner loop). The forward pass
 * calls kernels through model->kernels; the contract of each slot is in
 * colibri.h and docs/kernels.md.
 */
#ifndef COLIBRI_KERNELS_H
#define COLIBRI_KERNELS_H

#include <stdint.h>

#include "colibri.h"

/* Partial sums of the canonical reduction order (docs/kernels.md). */
#define COLIBRI_LANES 16u

/* out[r] = sum_c w[r * cols + c] * x[c], r < rows. out must not alias x. */
void colibri_reference_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                                  uint32_t cols);

/* out[t * out_stride + r] = dot(w row r, x row t), r < rows, t < n. */
void colibri_reference_matmat_f32(float *out, size_t out_stride, const float *w, const float *x,
                                  uint32_t rows, uint32_t cols, uint32_t n);

/* Quantized weights times quantized activations (colibri.h, docs/kernels.md):
 * out[t * out_stride + r] = the block-by-block dot of weight row r with
 * activation row t. */
void colibri_reference_matmat_q8(float *out, size_t out_stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n);
void colibri_reference_matmat_q4(float *out, size_t out_stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n);
/* The same with the weights in groups of 16 rows (Q8_R16, Q4_R16). */
void colibri_reference_matmat_q8r16(float *out, size_t out_stride, const uint8_t *w,
                                    const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                    uint32_t n);
void colibri_reference_matmat_q4r16(float *out, size_t out_stride, const uint8_t *w,
                                    const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                    uint32_t n);
/* The same with super-block weights of `bits` bits (QK2 .. QK6). */
void colibri_reference_matmat_qk(float *out, size_t out_stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 uint32_t bits);
/* The same in groups of 16 rows (QK2_R16 .. QK6_R16). */
void colibri_reference_matmat_qkr16(float *out, size_t out_stride, const uint8_t *w,
                                    const colibri_qblock *x, uint32_t rows, uint32_t cols,
                                    uint32_t n, uint32_t bits);

/* sum_i a[i] * b[i], in the canonical order (16 lanes, then a pairwise tree). */
float colibri_reference_dot(const float *a, const float *b, uint32_t n);

/* out[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)); out may alias x. */
void colibri_reference_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);

/* LayerNorm with bias (not a table slot: the same code under every table):
 * d = x - mean(x); out[i] = d[i] / sqrt(mean(d^2) + eps) * w[i] + b[i]; out
 * may alias x. */
void colibri_reference_layernorm(float *out, const float *x, const float *w, const float *b,
                                 uint32_t n, float eps);

/* gpt-oss's clamped SwiGLU (not a table slot): g = min(a[i], limit),
 * u = clamp(b[i], -limit, limit), a[i] = (u + 1) * (g * sigmoid(g * alpha)). */
void colibri_reference_swiglu_clamped(float *a, const float *b, uint32_t n, float limit,
                                      float alpha);

/* x[i] = exp(x[i] - max) / sum, in place. n >= 1. */
void colibri_reference_softmax(float *x, uint32_t n);

/* a[i] = silu(a[i]) * b[i] (SwiGLU), silu(v) = v / (1 + exp(-v)). */
void colibri_reference_swiglu(float *a, const float *b, uint32_t n);

/* y[i] += x[i]. */
void colibri_reference_add(float *y, const float *x, uint32_t n);

/* y[i] += x[i] * s. */
void colibri_reference_add_scaled(float *y, const float *x, float s, uint32_t n);

/* 1 / (1 + exp(-v)). */
float colibri_reference_sigmoid(float v);

/* cos_sin[0 .. d/2) = cos(pos * f_i), cos_sin[d/2 .. d) = sin(pos * f_i),
 * f_i = 1 / theta^(2i/d): the Hugging Face default RoPE. */
void colibri_reference_rope_table(float *cos_sin, uint32_t pos, uint32_t head_dim, float theta);

/* Rotate one head vector by the table (rotate-half convention). */
void colibri_reference_rope_apply(float *x, const float *cos_sin, uint32_t head_dim);

#endif
