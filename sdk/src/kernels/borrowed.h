/*
 * borrowed.h - where every kernel table's slots come from: the one place
 * that says which slots a table takes from another table and which it
 * leaves NULL (NULL = the reference's, filled in by colibri_init). The
 * tables, their files and the files they borrow from are listed in
 * tables.mk; every slot function is named colibri_<table>_<slot>.
 *
 *   table       own slots                       borrowed                        NULL
 *   reference   all                             -                               -
 *   avx2        all                             -                               -
 *   avx512      fp32                            softmax, q8, q4, q8r16, q4r16,  -
 *                                               qk, qkr16 from avx2
 *   avx512vnni  q8, q4, q8r16, q4r16            fp32 from avx512, softmax, qk   -
 *                                               from avx2
 *   neon        fp32, q8, q4, q8r16, q4r16, qk, -                               softmax
 *               qkr16
 *   neondot     q8, q4, q8r16, q4r16, qk, qkr16 fp32 from neon                  softmax
 *   helium      fp32 (no swiglu), q8, q4,       -                               softmax, swiglu
 *               q8r16, q4r16, qk, qkr16
 *   dsp         q8, q4, q8r16, q4r16, qk, qkr16 -                               every fp32 slot
 *
 * "fp32" = dot, matvec_f32, matmat_f32, rmsnorm, add, add_scaled,
 * rope_apply and swiglu; the quantized slots are matmat_q8, matmat_q4,
 * matmat_q8r16, matmat_q4r16, matmat_qk and matmat_qkr16 (NULL, the
 * reference's, where a row above does not name qk or qkr16; avx2's "all"
 * includes qkr16). Each function carries its own target
 * attribute; the contracts are colibri.h's and docs/kernels.md's.
 */
#ifndef COLIBRI_KERNELS_BORROWED_H
#define COLIBRI_KERNELS_BORROWED_H

#include "colibri.h"

/* x86/avx2.c, avx2_quant.c and avx2_r16.c (AVX2, FMA, F16C), borrowed by avx512. */
void colibri_avx2_softmax(float *x, uint32_t n);
void colibri_avx2_matmat_q8(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n);
void colibri_avx2_matmat_q4(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n);
void colibri_avx2_matmat_q8r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n);
void colibri_avx2_matmat_q4r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n);
/* x86/avx2_qk.c, borrowed by avx512 and avx512vnni. */
void colibri_avx2_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
/* x86/avx2_qkr16.c (QK R16 groups, lane = row), borrowed by avx512. */
void colibri_avx2_matmat_qkr16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);

/* x86/avx512.c (AVX-512F, FMA), borrowed by avx512vnni. */
float colibri_avx512_dot(const float *a, const float *b, uint32_t n);
void colibri_avx512_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                               uint32_t cols);
void colibri_avx512_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                               uint32_t rows, uint32_t cols, uint32_t n);
void colibri_avx512_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
void colibri_avx512_add(float *y, const float *x, uint32_t n);
void colibri_avx512_add_scaled(float *y, const float *x, float s, uint32_t n);
void colibri_avx512_rope_apply(float *x, const float *cos_sin, uint32_t head_dim);
void colibri_avx512_swiglu(float *a, const float *b, uint32_t n);

/* arm/neon.c (AArch64 Advanced SIMD), borrowed by neondot. */
float colibri_neon_dot(const float *a, const float *b, uint32_t n);
void colibri_neon_matvec_f32(float *out, const float *w, const float *x, uint32_t rows,
                             uint32_t cols);
void colibri_neon_matmat_f32(float *out, size_t stride, const float *w, const float *x,
                             uint32_t rows, uint32_t cols, uint32_t n);
void colibri_neon_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
void colibri_neon_add(float *y, const float *x, uint32_t n);
void colibri_neon_add_scaled(float *y, const float *x, float s, uint32_t n);
void colibri_neon_rope_apply(float *x, const float *cos_sin, uint32_t head_dim);
void colibri_neon_swiglu(float *a, const float *b, uint32_t n);
/* arm/neon_r16.c, the neon table's (neondot has its own). */
void colibri_neon_matmat_q8r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n);
void colibri_neon_matmat_q4r16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n);
/* arm/neon_qk.c, both tables' super-block products (neondot's with SDOT). */
void colibri_neon_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                            uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
void colibri_neondot_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
/* arm/neon_qkr16.c, the same on rows in groups of 16 (QK2_R16 .. QK6_R16). */
void colibri_neon_matmat_qkr16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                               uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
void colibri_neondot_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                  const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                  uint32_t bits);

/* armv8m/helium_qk.c and dsp_qk.c, the Cortex-M tables' super-block products
 * (by row and in groups of 16 rows). */
void colibri_helium_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                              uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
void colibri_helium_matmat_qkr16(float *out, size_t stride, const uint8_t *w,
                                 const colibri_qblock *x, uint32_t rows, uint32_t cols, uint32_t n,
                                 uint32_t bits);
void colibri_dsp_matmat_qk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                           uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
void colibri_dsp_matmat_qkr16(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                              uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);

#endif
