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
 *   colibri_logf     <= 1 ulp for finite x > 0; NaN outside that domain
 *   colibri_fmaf     a * b + c rounded once, exactly as IEEE fusedMultiplyAdd
 *                    (the hardware instruction where the target has one,
 *                    colibri_fmaf_soft elsewhere: colibri_compat.h)
 *
 * NaN inputs give NaN (of unspecified payload, the same on every target).
 */
#ifndef COLIBRI_MATH_H
#define COLIBRI_MATH_H

/*
 * colibri_expf's steps, for a SIMD kernel that reproduces it lane by lane
 * (each operation rounded on its own, no fused multiply-add): for x finite
 * in (UNDERFLOW, OVERFLOW), fk = x * LOG2E, k = (int)(fk >= 0 ? fk + 0.5 :
 * fk - 0.5) (truncated), r = (x - k * LN2_HI) - k * LN2_LO, p = C7, then
 * p = p * r + C6 .. C2, y = 1 + (r + (r * r) * p), exp = y * 2^k when
 * -126 <= k <= 127. Other inputs take the scalar function.
 */
#define COLIBRI_EXPF_OVERFLOW 88.72283935546875f    /* least float whose exp overflows */
#define COLIBRI_EXPF_UNDERFLOW -103.97208404541016f /* greatest float whose exp rounds to 0 */
#define COLIBRI_EXPF_LOG2E 1.4426950408889634f
#define COLIBRI_EXPF_LN2_HI 0.693145751953125f /* 16 significant bits: k * LN2_HI exact */
#define COLIBRI_EXPF_LN2_LO 1.4286068203094173e-06f
#define COLIBRI_EXPF_C7 (1.0f / 5040.0f)
#define COLIBRI_EXPF_C6 (1.0f / 720.0f)
#define COLIBRI_EXPF_C5 (1.0f / 120.0f)
#define COLIBRI_EXPF_C4 (1.0f / 24.0f)
#define COLIBRI_EXPF_C3 (1.0f / 6.0f)
#define COLIBRI_EXPF_C2 0.5f

float colibri_sqrtf(float x);
float colibri_expf(float x);
void colibri_sincosf(float x, float *sin_out, float *cos_out);
float colibri_powf(float x, float y);
float colibri_logf(float x);
/* log(1 + exp(x)); x itself above 20 (PyTorch's threshold). */
float colibri_softplusf(float x);
/* Use colibri_fmaf (colibri_compat.h); this is its portable version. */
float colibri_fmaf_soft(float a, float b, float c);

#endif /* COLIBRI_MATH_H */
