/*
 * neon.h - the neon table's fp32 functions, which neondot (the same table
 * with SDOT quantized products) points at too (the Makefile builds
 * neondot.c with neon.c, KERNEL_NEEDS_neondot). Contracts: colibri.h.
 */
#ifndef COLIBRI_KERNELS_NEON_H
#define COLIBRI_KERNELS_NEON_H

#include "colibri.h"

float colibri_neon_dot(const float *a, const float *b, uint32_t n);
void colibri_neon_matvec(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols);
void colibri_neon_matmat(float *out, size_t stride, const float *w, const float *x, uint32_t rows,
                         uint32_t cols, uint32_t n);
void colibri_neon_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
void colibri_neon_add(float *y, const float *x, uint32_t n);
void colibri_neon_add_scaled(float *y, const float *x, float s, uint32_t n);
void colibri_neon_rope_apply(float *x, const float *cos_sin, uint32_t head_dim);

#endif
