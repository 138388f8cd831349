/*
 * x86.h - the x86-64 tables' functions that another table reuses: avx512
 * takes avx2's quantized kernels, avx512vnni avx512's fp32 ones (the
 * Makefile builds a table's file with those it needs, KERNEL_NEEDS_*).
 * Each carries its own target attribute; the contracts are colibri.h's.
 */
#ifndef COLIBRI_KERNELS_X86_H
#define COLIBRI_KERNELS_X86_H

#include "colibri.h"

/* avx2.c (AVX2, FMA, F16C) */
void colibri_avx2_matmat_q8(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n);
void colibri_avx2_matmat_q4(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n);

/* avx512.c (AVX-512F, FMA) */
float colibri_avx512_dot(const float *a, const float *b, uint32_t n);
void colibri_avx512_matvec(float *out, const float *w, const float *x, uint32_t rows,
                           uint32_t cols);
void colibri_avx512_matmat(float *out, size_t stride, const float *w, const float *x, uint32_t rows,
                           uint32_t cols, uint32_t n);
void colibri_avx512_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
void colibri_avx512_add(float *y, const float *x, uint32_t n);
void colibri_avx512_add_scaled(float *y, const float *x, float s, uint32_t n);
void colibri_avx512_rope_apply(float *x, const float *cos_sin, uint32_t head_dim);
void colibri_avx512_swiglu(float *a, const float *b, uint32_t n);

#endif
