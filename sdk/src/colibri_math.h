/*
 * colibri_math.h - elementary functions of the core (colibri_math.c).
 *
 * The core uses no C library math: results depend only on IEEE-754 basic
 * operations, so x86-64, AArch64, Cortex-M with an FPU and soft-float
 * Cortex-M give the same bits. Accuracy, measured against glibc's libm over
 * sweeps of the domains (tests/sdk/test_math.c):
 *
 *   colibri_sqrtf    correctly rounded (every input)
 *   colibri_expf     <= 1 ulp; overflow to +inf, underflow to 0, subnormals
 *   colibri_sincosf  <= 1 ulp for |x| < 2^27 (every RoPE angle: positions
 *                    < 2^24 times frequencies <= 1); deterministic beyond
 *   colibri_powf     <= 1 ulp for finite x > 0; NaN outside that domain
 *   colibri_fmaf     a * b + c rounded once, exactly as IEEE fusedMultiplyAdd
 *                    (the hardware instruction where the target has one,
 *                    colibri_fmaf_soft elsewhere: colibri_compat.h)
 *
 * NaN inputs give NaN (of unspecified payload, the same on every target).
 */
#ifndef COLIBRI_MATH_H
#define COLIBRI_MATH_H

float colibri_sqrtf(float x);
float colibri_expf(float x);
void colibri_sincosf(float x, float *sin_out, float *cos_out);
float colibri_powf(float x, float y);
/* Use colibri_fmaf (colibri_compat.h); this is its portable version. */
float colibri_fmaf_soft(float a, float b, float c);

#endif /* COLIBRI_MATH_H */
