/*
 * colibri_zephyr_math.h - forced into the core's compilation (-include) with
 * CONFIG_COLIBRI_MATH_TOOLCHAIN_LIBM. Zephyr's minimal libc declares no
 * expf/powf/sinf/cosf, so the core's math hook (sdk/src/colibri_compat.h,
 * COLIBRI_MATH_OVERRIDE) points at the toolchain's newlib libm, linked by
 * cmake/colibri_libm.cmake. sqrtf is the compiler's builtin: with
 * -fno-math-errno one correctly rounded VSQRT on cores with an FPU.
 */
#ifndef COLIBRI_ZEPHYR_MATH_H
#define COLIBRI_ZEPHYR_MATH_H

#define COLIBRI_MATH_OVERRIDE 1

float expf(float x);
float powf(float x, float y);
float sinf(float x);
float cosf(float x);
float sqrtf(float x);

#define COLIBRI_SQRTF(x) __builtin_sqrtf(x)
#define COLIBRI_EXPF(x) expf(x)
#define COLIBRI_POWF(x, y) powf((x), (y))
#define COLIBRI_SINF(x) sinf(x)
#define COLIBRI_COSF(x) cosf(x)

#endif
