/*
 * colibri_math.c - the core's elementary functions, written here so that the
 * same inputs give the same bits on every target: only IEEE-754 +, -, *, /
 * and integer operations, which every FPU, soft-float library (libgcc) and
 * compiler round the same way (no contraction: the core is built with
 * -ffp-contract=off). No C library math is used, so no libm version, soft-float
 * variant or toolchain choice can change a result. Contracts and measured
 * accuracy: colibri_math.h.
 */
#include "colibri_compat.h"
#include "colibri_math.h"

#define F32_QNAN 0x7FC00000u
#define F32_INF 0x7F800000u

static double f64_from_bits(uint64_t bits)
{
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* 2^k as a float, for k in [-126, 127]. */
static float f32_pow2(int32_t k)
{
    return colibri_f32_from_bits((uint32_t)(k + 127) << 23);
}

/* 2^k as a double, for k in [-1022, 1023]. */
static double f64_pow2(int32_t k)
{
    return f64_from_bits((uint64_t)(k + 1023) << 52);
}

/* Nearest integer of a double (halves away from zero); |v| < 2^31. */
static int32_t nearest_int(double v)
{
    return (int32_t)(v >= 0.0 ? v + 0.5 : v - 0.5);
}

/* ---- square root: bit by bit on the integer significand, exact ---------- */

/* floor(sqrt(n)) for n < 2^62. */
static uint64_t isqrt_u64(uint64_t n)
{
    uint64_t root = 0, bit = (uint64_t)1 << 62;
    while (bit > n) {
        bit >>= 2;
    }
    while (bit != 0) {
        if (n >= root + bit) {
            n -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return root;
}

float colibri_sqrtf(float x)
{
    uint32_t ix = colibri_f32_bits(x);
    if ((ix & 0x7FFFFFFFu) == 0 || ix == F32_INF) {
        return x; /* +-0, +inf */
    }
    if ((ix >> 31) != 0 || (ix & F32_INF) == F32_INF) {
        return colibri_f32_from_bits(F32_QNAN); /* negative, NaN */
    }
    int32_t e = (int32_t)(ix >> 23);
    uint64_t m = ix & 0x7FFFFFu;
    if (e == 0) { /* subnormal: normalise */
        e = 1;
        while ((m & 0x800000u) == 0) {
            m <<= 1;
            e--;
        }
    } else {
        m |= 0x800000u;
    }
    /* x = m * 2^(e - 150), m in [2^23, 2^24). Make the exponent even. */
    int32_t unbiased = e - 127;
    if ((unbiased & 1) != 0) {
        m <<= 1;
        unbiased -= 1;
    }
    /* sqrt(x) = sqrt(m * 2^23) * 2^(unbiased/2 - 23): 24 bits and one more
     * for rounding. sqrt of an integer is never exactly halfway. */
    uint64_t q = isqrt_u64(m << 25);
    uint32_t rounded = (uint32_t)((q + 1u) >> 1);
    uint32_t bits = ((uint32_t)(unbiased / 2 + 127) << 23) + rounded - 0x800000u;
    return colibri_f32_from_bits(bits);
}

/* ---- exp: float only, k ln2 + r, degree-7 Taylor polynomial ------------- */

float colibri_expf(float x)
{
    if (x != x) {
        return x;
    }
    if (x >= COLIBRI_EXPF_OVERFLOW) {
        return colibri_f32_from_bits(F32_INF);
    }
    if (x <= COLIBRI_EXPF_UNDERFLOW) {
        return 0.0f;
    }
    float fk = x * COLIBRI_EXPF_LOG2E;
    int32_t k = (int32_t)(fk >= 0.0f ? fk + 0.5f : fk - 0.5f);
    float kf = (float)k;
    float r = (x - kf * COLIBRI_EXPF_LN2_HI) - kf * COLIBRI_EXPF_LN2_LO;
    float p = COLIBRI_EXPF_C7;
    p = p * r + COLIBRI_EXPF_C6;
    p = p * r + COLIBRI_EXPF_C5;
    p = p * r + COLIBRI_EXPF_C4;
    p = p * r + COLIBRI_EXPF_C3;
    p = p * r + COLIBRI_EXPF_C2;
    float y = 1.0f + (r + (r * r) * p);
    if (k > 127) {
        return (y * 2.0f) * f32_pow2(k - 1);
    }
    if (k < -126) {
        return (y * f32_pow2(k + 100)) * f32_pow2(-100); /* one rounding to subnormal */
    }
    return y * f32_pow2(k);
}

/* ---- sin and cos: reduction by pi/2 and Taylor series, in double --------- */

/* pi/2 in three parts; the first two have 26 significant bits, so k * part
 * is exact for |k| < 2^27 (|x| < 2.1e8: every RoPE angle the core makes). */
#define PIO2_1 1.5707963407039642
#define PIO2_2 -1.3909067675399456e-08
#define PIO2_3 6.123233995736766e-17
#define TWO_OVER_PI 0.6366197723675814

static double sin_poly(double r)
{
    double r2 = r * r, p = 1.0 / 1307674368000.0; /* 1/15! */
    p = p * r2 - 1.0 / 6227020800.0;              /* 1/13! */
    p = p * r2 + 1.0 / 39916800.0;                /* 1/11! */
    p = p * r2 - 1.0 / 362880.0;                  /* 1/9! */
    p = p * r2 + 1.0 / 5040.0;
    p = p * r2 - 1.0 / 120.0;
    p = p * r2 + 1.0 / 6.0;
    return r - r * r2 * p;
}

static double cos_poly(double r)
{
    double r2 = r * r, p = 1.0 / 20922789888000.0; /* 1/16! */
    p = p * r2 - 1.0 / 87178291200.0;              /* 1/14! */
    p = p * r2 + 1.0 / 479001600.0;                /* 1/12! */
    p = p * r2 - 1.0 / 3628800.0;                  /* 1/10! */
    p = p * r2 + 1.0 / 40320.0;
    p = p * r2 - 1.0 / 720.0;
    p = p * r2 + 1.0 / 24.0;
    p = p * r2 - 0.5;
    return 1.0 + r2 * p;
}

void colibri_sincosf(float x, float *sin_out, float *cos_out)
{
    if (!colibri_is_finite(x)) {
        *sin_out = *cos_out = colibri_f32_from_bits(F32_QNAN);
        return;
    }
    double xd = x;
    double fk = xd * TWO_OVER_PI;
    /* Past 2^30 the angle is far outside the exact reduction; it stays
     * deterministic (quadrant from the low bits of a clamped k). */
    if (fk > 1073741824.0 || fk < -1073741824.0) {
        fk = fk > 0.0 ? 1073741824.0 : -1073741824.0;
    }
    int32_t k = nearest_int(fk);
    double kd = (double)k;
    double r = ((xd - kd * PIO2_1) - kd * PIO2_2) - kd * PIO2_3;
    double s = sin_poly(r), c = cos_poly(r);
    switch ((uint32_t)k & 3u) {
    case 0:
        *sin_out = (float)s;
        *cos_out = (float)c;
        break;
    case 1:
        *sin_out = (float)c;
        *cos_out = (float)-s;
        break;
    case 2:
        *sin_out = (float)-s;
        *cos_out = (float)-c;
        break;
    default:
        *sin_out = (float)-c;
        *cos_out = (float)s;
        break;
    }
}

/* ---- pow for a positive base: exp(y log x), in double -------------------- */

#define LN2_HI 0.6931471806019545 /* 32 significant bits: k * LN2_HI exact */
#define LN2_LO -4.2009150726810846e-11
#define LOG2E 1.4426950408889634
#define SQRT2 1.4142135623730951

/* log(x) for finite x > 0: x = m 2^e, m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| < 0.172. */
static double log_positive(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int32_t e = (int32_t)((bits >> 52) & 0x7FFu);
    if (e == 0) { /* subnormal double (not reached from a float) */
        x *= f64_pow2(54);
        memcpy(&bits, &x, sizeof bits);
        e = (int32_t)((bits >> 52) & 0x7FFu) - 54;
    }
    e -= 1023;
    double m = f64_from_bits((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
    if (m > SQRT2) {
        m *= 0.5;
        e += 1;
    }
    static const double inv_odd[12] = {1.0,        1.0 / 3.0,  1.0 / 5.0,  1.0 / 7.0,
                                       1.0 / 9.0,  1.0 / 11.0, 1.0 / 13.0, 1.0 / 15.0,
                                       1.0 / 17.0, 1.0 / 19.0, 1.0 / 21.0, 1.0 / 23.0};
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double p = inv_odd[11];
    for (int32_t n = 10; n >= 0; n--) {
        p = p * s2 + inv_odd[n];
    }
    double ed = (double)e;
    return ed * LN2_HI + (2.0 * s * p + ed * LN2_LO);
}

/* exp(z) for |z| < 105 in double: z = k ln2 + r, Taylor to degree 13. */
static double exp_double(double z)
{
    int32_t k = nearest_int(z * LOG2E);
    double kd = (double)k;
    double r = (z - kd * LN2_HI) - kd * LN2_LO;
    static const double inv_n[14] = {0.0,        1.0,        1.0 / 2.0,  1.0 / 3.0, 1.0 / 4.0,
                                     1.0 / 5.0,  1.0 / 6.0,  1.0 / 7.0,  1.0 / 8.0, 1.0 / 9.0,
                                     1.0 / 10.0, 1.0 / 11.0, 1.0 / 12.0, 1.0 / 13.0};
    double p = 1.0; /* 1 + r/1 (1 + r/2 (1 + ... (1 + r/13))) */
    for (int32_t n = 13; n >= 1; n--) {
        p = 1.0 + p * (r * inv_n[n]);
    }
    return p * f64_pow2(k);
}

float colibri_powf(float x, float y)
{
    uint32_t ix = colibri_f32_bits(x);
    if ((ix >> 31) != 0 || ix == 0 || (ix & F32_INF) == F32_INF || y != y) {
        return colibri_f32_from_bits(F32_QNAN); /* outside the domain: x finite > 0 */
    }
    double z = (double)y * log_positive((double)x);
    if (z >= 89.0) {
        return colibri_f32_from_bits(F32_INF);
    }
    if (z <= -104.0) {
        return 0.0f;
    }
    return (float)exp_double(z);
}

float colibri_logf(float x)
{
    uint32_t ix = colibri_f32_bits(x);
    if ((ix >> 31) != 0 || ix == 0 || (ix & F32_INF) == F32_INF) {
        return colibri_f32_from_bits(F32_QNAN); /* outside the domain: x finite > 0 */
    }
    return (float)log_positive((double)x);
}

/* ---- fused multiply-add, exactly rounded, from double operations -------- */

static uint64_t f64_bits(double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Whether s lies exactly halfway between two adjacent floats (counting the
 * fixed 2^-149 spacing of subnormal floats). Bit tests only: no 64-bit
 * integer conversion, which a 32-bit target would call a library for. */
static int float_midpoint(double s)
{
    uint64_t bits = f64_bits(s);
    int32_t exponent = (int32_t)((bits >> 52) & 0x7FFu) - 1023;
    if (exponent >= -126) { /* a normal float: 29 of the 52 fraction bits are dropped */
        return (bits & 0x1FFFFFFFu) == 0x10000000u;
    }
    /* Subnormal range: s = (k + 1/2) 2^-149, i.e. v = |s| 2^150 an odd integer. */
    uint64_t v = f64_bits(s * f64_pow2(150)) & 0x7FFFFFFFFFFFFFFFu; /* exact; v < 2^24 */
    int32_t e = (int32_t)(v >> 52) - 1023;
    if (e < 0 || e > 52) {
        return 0; /* |v| < 1 (or zero): not an odd integer */
    }
    uint64_t below = (UINT64_C(1) << (52 - e)) - 1u; /* fraction bits below the units bit */
    uint64_t units = e == 0 ? 1u : (v >> (52 - e)) & 1u;
    return (v & below) == 0u && units == 1u;
}

/*
 * a * b + c rounded once. The product is exact in double (24 + 24 bits) and
 * the sum is rounded once to double. Rounding that double to float gives the
 * right answer unless the double sits exactly on a float midpoint (no
 * midpoint can lie strictly between the exact sum and its nearest double:
 * midpoints are doubles). Only then is the error of the double sum needed
 * (Knuth's TwoSum); if the sum was inexact, one step of the double towards
 * the exact value breaks the tie the way the exact value does.
 */
float colibri_fmaf_soft(float a, float b, float c)
{
    double p = (double)a * (double)b, z = (double)c, s = p + z;
    if (!float_midpoint(s)) {
        return (float)s;
    }
    double bv = s - p, err = (p - (s - bv)) + (z - bv);
    if (err != err || err == 0.0) {
        return (float)s; /* exact, or NaN/infinite */
    }
    uint64_t bits = f64_bits(s);
    bits = ((s > 0.0) == (err > 0.0)) ? bits + 1u : bits - 1u; /* away from / towards zero */
    return (float)f64_from_bits(bits);
}

/* log1p(exp(v)) from a log of w = 1 + u, corrected by u / (w - 1). */
float colibri_softplusf(float v)
{
    float u, w;
    if (v > 20.0f) {
        return v;
    }
    u = colibri_expf(v);
    w = 1.0f + u;
    return w == 1.0f ? u : colibri_logf(w) * (u / (w - 1.0f));
}
