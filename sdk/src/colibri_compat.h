/*
 * colibri_compat.h - the one place where the core meets the compiler and the
 * C library. Every #if of the core lives here.
 *
 * The core needs from the C library only memcpy/memset (string.h); its
 * elementary functions are its own (colibri_math.h), so no libm decides
 * the bits of a result.
 */
#ifndef COLIBRI_COMPAT_H
#define COLIBRI_COMPAT_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The image stores little-endian integers and floats, and tensor data is
 * used in place as float arrays: the core runs on little-endian targets only
 * (every Arm profile we ship, and x86-64). */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Colibri uses model images in place and needs a little-endian target"
#endif
#endif

_Static_assert(sizeof(float) == 4, "IEEE-754 binary32 float required");
/* Every float operation rounds to binary32 (no wider intermediates): the
 * activation quantizer's rounding (quant.c) and every result rely on it. */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "Colibri needs FLT_EVAL_METHOD == 0 (binary32 arithmetic, e.g. SSE, not x87)"
#endif
_Static_assert(sizeof(uint64_t) == 8, "64-bit integers required");
/* Field arithmetic (field25519.c) shifts negative limbs right: arithmetic. */
_Static_assert((-8 >> 1) == -4, "arithmetic right shift of negative integers required");

/* Programmer errors (not data errors) are checked with COLIBRI_ASSERT; a
 * release build compiles them out. Data errors always get a status. */
#if defined(COLIBRI_ENABLE_ASSERT)
#define COLIBRI_ASSERT(cond)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)
#else
#define COLIBRI_ASSERT(cond) ((void)0)
#endif

/* Little-endian field readers: byte-wise, so neither alignment nor host
 * endianness matters for header and table fields. */
static inline uint16_t colibri_rd_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t colibri_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t colibri_rd_u64(const uint8_t *p)
{
    return (uint64_t)colibri_rd_u32(p) | ((uint64_t)colibri_rd_u32(p + 4) << 32);
}

/* The float whose IEEE binary32 encoding is bits, and back. */
static inline float colibri_f32_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint32_t colibri_f32_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline float colibri_rd_f32(const uint8_t *p)
{
    return colibri_f32_from_bits(colibri_rd_u32(p));
}

/* 1 if the n bytes at a and b are equal, else 0; the time does not depend
 * on where they differ (digests, signatures). */
static inline int colibri_bytes_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint32_t diff = 0;
    for (size_t i = 0; i < n; i++) {
        diff |= (uint32_t)(a[i] ^ b[i]);
    }
    return (int)(1u & ((diff - 1u) >> 8));
}

/* Bit test that does not depend on <math.h> classification macros. */
static inline int colibri_is_finite(float value)
{
    return (colibri_f32_bits(value) & 0x7F800000u) != 0x7F800000u;
}

/* a * b + c with one rounding, the step of the canonical dot product
 * (docs/kernels.md): the FPU's fused multiply-add where the compiler says it
 * is fast (AArch64, Armv7E-M/Armv8-M with an FPU, x86-64 built with FMA),
 * else the exact portable version (the soft-float Cortex-M3, baseline
 * x86-64). Both give the same bits. */
float colibri_fmaf_soft(float a, float b, float c);
#if defined(__FP_FAST_FMAF)
#define colibri_fmaf(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define colibri_fmaf(a, b, c) colibri_fmaf_soft((a), (b), (c))
#endif

/* The attribute of the functions that use the AArch64 dot-product
 * extension (kernels/neondot.c): none where the whole build already has it
 * (-mcpu=cortex-a78ae, say: an "arch=" attribute would then take features
 * away and stop inlining), else Armv8.2-A with it, the target GCC's
 * arm_neon.h gives vdotq_s32. */
#if defined(__ARM_FEATURE_DOTPROD)
#define COLIBRI_TARGET_DOTPROD
#else
#define COLIBRI_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

#endif /* COLIBRI_COMPAT_H */
