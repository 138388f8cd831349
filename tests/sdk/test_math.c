/*
 * test_math.c - the core's elementary functions (sdk/src/colibri_math.c)
 * against the host C library's, an independent implementation: sqrtf must
 * match bit for bit (both are correctly rounded), expf, sinf, cosf, powf and logf
 * within 1 ulp, over a sweep of every 97th float pattern (44 million inputs)
 * and the special cases. Prints one line per failure and "N passed, M failed".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "colibri_math.h"

static int passed, failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Position of a float on the number line, in ulps (-0 == +0). */
static int64_t ordinal(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u >> 31) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}

/* ulps between a and b; both NaN is 0, one NaN is "infinitely far". */
static int64_t ulps(float a, float b)
{
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    }
    int64_t d = ordinal(a) - ordinal(b);
    return d < 0 ? -d : d;
}

struct worst {
    int64_t ulps;
    float at;
};

static void note(struct worst *w, float got, float want, float x)
{
    int64_t d = ulps(got, want);
    if (d > w->ulps) {
        w->ulps = d;
        w->at = x;
    }
}

static void test_sweep(void)
{
    struct worst sq = {0, 0}, ex = {0, 0}, si = {0, 0}, co = {0, 0};
    for (uint64_t u = 0; u < 0x100000000ull; u += 97) {
        float x = from_bits((uint32_t)u);
        note(&sq, colibri_sqrtf(x), sqrtf(x), x);
        note(&ex, colibri_expf(x), expf(x), x);
        if (!(fabsf(x) >= 134217728.0f)) { /* |x| < 2^27 and NaN */
            float s, c;
            colibri_sincosf(x, &s, &c);
            note(&si, s, sinf(x), x);
            note(&co, c, cosf(x), x);
        }
    }
    CHECK(sq.ulps == 0, "sqrtf differs at %a", sq.at);
    CHECK(ex.ulps <= 1, "expf %lld ulp at %a", (long long)ex.ulps, ex.at);
    CHECK(si.ulps <= 1, "sinf %lld ulp at %a", (long long)si.ulps, si.at);
    CHECK(co.ulps <= 1, "cosf %lld ulp at %a", (long long)co.ulps, co.at);
}

/* powf as RoPE uses it (theta^(2i/d), theta in [1, 1e7]) and beyond. */
static void test_pow(void)
{
    struct worst w = {0, 0};
    for (uint32_t i = 0; i < 4000000u; i++) {
        float base = 1.0f + (float)i * 2.5f, e = (float)(i % 1024u) / 1024.0f;
        note(&w, colibri_powf(base, e), powf(base, e), base);
        float small = from_bits(0x00800000u + i * 523u), y = (float)(i % 77u) * 0.25f - 9.0f;
        note(&w, colibri_powf(small, y), powf(small, y), small);
    }
    CHECK(w.ulps <= 1, "powf %lld ulp at base %a", (long long)w.ulps, w.at);
}

/* logf over every 97th positive finite float (Llama 4's temperature takes
 * log(1 + n) of whole n). */
static void test_log(void)
{
    struct worst w = {0, 0};
    for (uint32_t u = 1; u < 0x7F800000u; u += 97u) {
        float x = from_bits(u);
        note(&w, colibri_logf(x), logf(x), x);
    }
    for (uint32_t n = 0; n < 1000000u; n++) {
        note(&w, colibri_logf(1.0f + (float)n), logf(1.0f + (float)n), (float)n);
    }
    CHECK(w.ulps <= 1, "logf %lld ulp at %a", (long long)w.ulps, w.at);
    CHECK(colibri_logf(1.0f) == 0.0f && isnan(colibri_logf(0.0f)), "log exact, domain");
    CHECK(isnan(colibri_logf(-1.0f)) && isnan(colibri_logf(from_bits(0x7F800000u))), "log domain");
}

static void test_special_values(void)
{
    float inf = from_bits(0x7F800000u), nan = from_bits(0x7FC00000u), s, c;
    CHECK(colibri_sqrtf(4.0f) == 2.0f && colibri_sqrtf(inf) == inf, "sqrt exact values");
    CHECK(isnan(colibri_sqrtf(-1.0f)) && isnan(colibri_sqrtf(nan)), "sqrt domain");
    CHECK(signbit(colibri_sqrtf(-0.0f)) && colibri_sqrtf(-0.0f) == 0.0f, "sqrt(-0) = -0");
    CHECK(colibri_expf(0.0f) == 1.0f && colibri_expf(-inf) == 0.0f, "exp exact values");
    CHECK(colibri_expf(89.0f) == inf && colibri_expf(inf) == inf, "exp overflow");
    CHECK(colibri_expf(-104.0f) == 0.0f && isnan(colibri_expf(nan)), "exp underflow, NaN");
    CHECK(colibri_expf(-100.0f) == expf(-100.0f), "exp subnormal result");
    CHECK(colibri_expf(88.72283f) == expf(88.72283f), "exp near overflow");
    colibri_sincosf(0.0f, &s, &c);
    CHECK(s == 0.0f && c == 1.0f, "sincos(0)");
    colibri_sincosf(inf, &s, &c);
    CHECK(isnan(s) && isnan(c), "sincos(inf)");
    CHECK(colibri_powf(10000.0f, 0.0f) == 1.0f && colibri_powf(4.0f, 0.5f) == 2.0f, "pow exact");
    CHECK(isnan(colibri_powf(-2.0f, 2.0f)) && isnan(colibri_powf(0.0f, 1.0f)), "pow domain");
    CHECK(colibri_powf(1e30f, 2.0f) == inf && colibri_powf(1e-30f, 2.0f) == 0.0f, "pow range");
}

static int same_bits(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static uint32_t fma_rng = 2463534242u;

static uint32_t next_u32(void)
{
    fma_rng ^= fma_rng << 13;
    fma_rng ^= fma_rng >> 17;
    fma_rng ^= fma_rng << 5;
    return fma_rng;
}

/* Sums that a naive double computation rounds twice: x + h(1 - 2^-30)
 * (h = half an ulp of x) rounds in double to the midpoint x + h, which the
 * float rounding then sends to the even neighbour instead of down to x. */
static void test_fma_midpoints(void)
{
    int bad = 0;
    for (uint32_t i = 0; i < 200000u; i++) {
        uint32_t exp = 1u + next_u32() % 253u, frac = next_u32() & 0x7FFFFFu;
        float x = from_bits((next_u32() & 0x80000000u) | (exp << 23) | frac);
        if (exp < 26u) {
            x = from_bits(frac | 1u); /* a subnormal: h = 2^-150 */
            exp = 1u;
        }
        int h_exp = (int)exp - 127 - 24; /* h = 2^h_exp (2^-150 for a subnormal x) */
        float a = ldexpf(1.0f + ldexpf(1.0f, -15), -60);
        float b = ldexpf(1.0f - ldexpf(1.0f, -15), 60 + h_exp) * ((next_u32() & 1u) ? 1.0f : -1.0f);
        bad += !same_bits(colibri_fmaf_soft(a, b, x), fmaf(a, b, x));
    }
    CHECK(bad == 0, "fma on double-rounding midpoints equals the host fmaf");
}

/* Random bit patterns (every class: zero, subnormal, normal, inf, NaN). */
static void test_fma_random(void)
{
    int bad = 0;
    for (uint32_t i = 0; i < 4000000u; i++) {
        float a = from_bits(next_u32()), b = from_bits(next_u32()), c = from_bits(next_u32());
        if ((i & 3u) == 0u) { /* products near c's magnitude: cancellation */
            c = -a * b * (1.0f + (float)(next_u32() % 7u) * 0x1p-23f);
        }
        bad += !same_bits(colibri_fmaf_soft(a, b, c), fmaf(a, b, c));
    }
    CHECK(bad == 0, "fma on random operands equals the host fmaf");
}

int main(void)
{
    test_fma_midpoints();
    test_fma_random();
    test_special_values();
    test_pow();
    test_log();
    test_sweep();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
