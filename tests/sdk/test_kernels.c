/*
 * test_kernels.c - every slot of every compiled kernel table against the
 * contract of docs/kernels.md, written out here a second time in plain C
 * (the "spec" functions): results must be bit-identical, on awkward lengths
 * (1 .. 1000), aligned and unaligned buffers, and inputs with NaN, infinities
 * and subnormals. The tables come from the build (KERNELS in the Makefile).
 * Prints one line per failure and "N passed, M failed".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_math.h"

#ifndef COLIBRI_TEST_KERNEL_TABLES
#define COLIBRI_TEST_KERNEL_TABLES &colibri_kernels_reference,
#endif

static const colibri_kernels *const tables[] = {COLIBRI_TEST_KERNEL_TABLES};
static const uint32_t lengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 72, 100, 1000};
/* ROWS: two blocks of four rows (the SIMD matvecs' unit) and one left over;
 * TOKENS (matmat): two blocks of four, a pair and one over. */
enum { MAX_N = 1000, ROWS = 9, TOKENS = 11, PAD = 16 };
/* DATA_NEG_TINY (-1e-30 everywhere) against DATA_POS_TINY (+1e-30): every
 * product rounds to -0, so every lane and the sum are -0, and a tail that
 * turned a lane into +0 would show. */
enum { DATA_NORMAL, DATA_NAN, DATA_INF, DATA_SUBNORMAL, DATA_NEG_TINY, DATA_KINDS, DATA_POS_TINY };

static int passed, failed;

/* ---- the contract, once more ------------------------------------------- */

/* 16 lanes, term i into lane i mod 16 (a product term fused: the C
 * library's fmaf, not the core's), then lanes 0..7 += 8..15, 0..3 += 4..7,
 * 0..1 += 2..3, 0 += 1. */
static float spec_lanes(const float *a, const float *b, uint32_t n)
{
    float lane[16] = {0.0f};
    for (uint32_t i = 0; i < n; i++) {
        lane[i % 16u] = b != NULL ? fmaf(a[i], b[i], lane[i % 16u]) : lane[i % 16u] + a[i];
    }
    for (uint32_t j = 0; j < 8; j++) {
        lane[j] = lane[j] + lane[j + 8];
    }
    for (uint32_t j = 0; j < 4; j++) {
        lane[j] = lane[j] + lane[j + 4];
    }
    lane[0] = lane[0] + lane[2];
    lane[1] = lane[1] + lane[3];
    return lane[0] + lane[1];
}

static float spec_dot(const float *a, const float *b, uint32_t n)
{
    return spec_lanes(a, b, n);
}

static void spec_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    float inv = 1.0f / colibri_sqrtf(spec_dot(x, x, n) / (float)n + eps);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = w[i] * (x[i] * inv);
    }
}

static void spec_softmax(float *x, uint32_t n)
{
    float max = x[0], sum = 0.0f;
    for (uint32_t i = 1; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    for (uint32_t i = 0; i < n; i++) {
        x[i] = colibri_expf(x[i] - max);
    }
    sum = spec_lanes(x, NULL, n);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = x[i] / sum;
    }
}

static void spec_swiglu(float *a, const float *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        a[i] = a[i] / (1.0f + colibri_expf(-a[i])) * b[i];
    }
}

static void spec_rope_apply(float *x, const float *cos_sin, uint32_t d)
{
    for (uint32_t i = 0; i < d / 2u; i++) {
        float c = cos_sin[i], s = cos_sin[d / 2u + i], x1 = x[i], x2 = x[d / 2u + i];
        x[i] = x1 * c - x2 * s;
        x[d / 2u + i] = x2 * c + x1 * s;
    }
}

/* ---- inputs -------------------------------------------------------------- */

static uint32_t rng_state = 12345u;

static float next_float(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(int32_t)(rng_state >> 8) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void fill(float *v, uint32_t n, int kind)
{
    for (uint32_t i = 0; i < n; i++) {
        v[i] = next_float();
    }
    if (kind == DATA_NAN) {
        v[n / 2u] = from_bits(0x7FC00000u);
    } else if (kind == DATA_INF) {
        v[n - 1u] = from_bits(0x7F800000u);
    } else if (kind == DATA_SUBNORMAL) {
        for (uint32_t i = 0; i < n; i += 2u) {
            v[i] = from_bits(0x00000001u + i * 977u);
        }
    } else if (kind == DATA_NEG_TINY || kind == DATA_POS_TINY) {
        for (uint32_t i = 0; i < n; i++) {
            v[i] = kind == DATA_NEG_TINY ? -1e-30f : 1e-30f;
        }
    }
}

/* What the second operand of a product is filled with. */
static int partner_kind(int kind)
{
    return kind == DATA_SUBNORMAL ? kind : kind == DATA_NEG_TINY ? DATA_POS_TINY : DATA_NORMAL;
}

/* Same bits, or both NaN (NaN payloads are not part of the contract). */
static int same(const float *a, const float *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int a_nan = a[i] != a[i], b_nan = b[i] != b[i];
        if (a_nan != b_nan || (!a_nan && memcmp(&a[i], &b[i], sizeof a[i]) != 0)) {
            return 0;
        }
    }
    return 1;
}

static void check(int ok, const colibri_kernels *k, const char *slot, uint32_t n, uint32_t shift,
                  int kind)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s.%s n=%u shift=%u data=%d\n", k->name, slot, n, shift, kind);
    }
}

/* Buffers 64-byte aligned; `shift` floats in (shift 1: 4-byte aligned only). */
static _Alignas(64) float buf_a[MAX_N * ROWS + PAD], buf_b[MAX_N + PAD],
    buf_c[MAX_N * TOKENS + PAD];
static _Alignas(64) float got[MAX_N + PAD], want[MAX_N + PAD];

static void test_reductions(const colibri_kernels *k, uint32_t n, uint32_t shift, int kind)
{
    float *a = buf_a + shift, *b = buf_b + shift, *w = buf_c + shift;
    fill(a, n * ROWS, kind);
    fill(b, n, partner_kind(kind));
    fill(w, n, DATA_NORMAL);
    float d_got = k->dot(a, b, n), d_want = spec_dot(a, b, n);
    check(same(&d_got, &d_want, 1), k, "dot", n, shift, kind);
    k->matvec_f32(got, a, b, ROWS, n);
    for (uint32_t r = 0; r < ROWS; r++) {
        want[r] = spec_dot(a + r * n, b, n);
    }
    check(same(got, want, ROWS), k, "matvec_f32", n, shift, kind);
    k->rmsnorm(got, a, w, n, 1e-5f);
    spec_rmsnorm(want, a, w, n, 1e-5f);
    check(same(got, want, n), k, "rmsnorm", n, shift, kind);
    memcpy(got, a, n * sizeof(float));
    memcpy(want, a, n * sizeof(float));
    k->softmax(got, n);
    spec_softmax(want, n);
    check(same(got, want, n), k, "softmax", n, shift, kind);
}

/* TOKENS tokens through ROWS rows; the output rows are OUT_STRIDE apart,
 * and the gap must stay untouched. */
enum { OUT_STRIDE = ROWS + 3 };

static void test_matmat(const colibri_kernels *k, uint32_t n, uint32_t shift, int kind)
{
    float *w = buf_a + shift, *x = buf_c + shift;
    fill(w, n * ROWS, kind);
    fill(x, n * TOKENS, partner_kind(kind));
    for (uint32_t i = 0; i < TOKENS * OUT_STRIDE; i++) {
        got[i] = want[i] = (float)i;
    }
    k->matmat_f32(got, OUT_STRIDE, w, x, ROWS, n, TOKENS);
    for (uint32_t t = 0; t < TOKENS; t++) {
        for (uint32_t r = 0; r < ROWS; r++) {
            want[t * OUT_STRIDE + r] = spec_dot(w + r * n, x + t * n, n);
        }
    }
    check(same(got, want, TOKENS * OUT_STRIDE), k, "matmat_f32", n, shift, kind);
}

static void test_elementwise(const colibri_kernels *k, uint32_t n, uint32_t shift, int kind)
{
    float *x = buf_b + shift, *cs = buf_c + shift;
    fill(x, n, kind);
    fill(got, n, DATA_NORMAL);
    memcpy(want, got, n * sizeof(float));
    k->swiglu(got, x, n);
    spec_swiglu(want, x, n);
    check(same(got, want, n), k, "swiglu", n, shift, kind);
    k->add(got, x, n);
    for (uint32_t i = 0; i < n; i++) {
        want[i] = want[i] + x[i];
    }
    check(same(got, want, n), k, "add", n, shift, kind);
    k->add_scaled(got, x, -0.75f, n);
    for (uint32_t i = 0; i < n; i++) {
        want[i] = want[i] + x[i] * -0.75f;
    }
    check(same(got, want, n), k, "add_scaled", n, shift, kind);
    uint32_t d = n & ~1u;
    if (d > 0) {
        fill(cs, d, DATA_NORMAL);
        k->rope_apply(got, cs, d);
        spec_rope_apply(want, cs, d);
        check(same(got, want, d), k, "rope_apply", d, shift, kind);
    }
}

/* swiglu's exp over its whole range: overflow, underflow, subnormal and
 * huge scales, NaN and infinities, so a SIMD exp's fallbacks are checked. */
static void test_swiglu_range(const colibri_kernels *k)
{
    enum { N = 1000 };
    for (uint32_t i = 0; i < N; i++) {
        got[i] = -110.0f + 220.0f * (float)i / (float)N + (float)(i % 7u) * 0.013f;
        buf_b[i] = 1.0f + (float)(i % 5u) * 0.25f;
    }
    got[3] = from_bits(0x7FC00000u), got[5] = from_bits(0x7F800000u);
    got[7] = from_bits(0xFF800000u), got[9] = 88.72283935546875f, got[11] = -87.4f;
    got[13] = 103.97f, got[15] = -0.0f;
    memcpy(want, got, N * sizeof(float));
    k->swiglu(got, buf_b, N);
    spec_swiglu(want, buf_b, N);
    check(same(got, want, N), k, "swiglu(range)", N, 0, DATA_NORMAL);
}

int main(void)
{
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        if (colibri_linux_kernels(tables[t]->name) != tables[t]) {
            printf("%s: skipped, this CPU cannot run it\n", tables[t]->name);
            continue;
        }
        colibri_kernels resolved = *tables[t]; /* NULL slots: the reference's */
        const colibri_kernels *ref = &colibri_kernels_reference, *k = &resolved;
        resolved.dot = resolved.dot ? resolved.dot : ref->dot;
        resolved.matvec_f32 = resolved.matvec_f32 ? resolved.matvec_f32 : ref->matvec_f32;
        resolved.rmsnorm = resolved.rmsnorm ? resolved.rmsnorm : ref->rmsnorm;
        resolved.softmax = resolved.softmax ? resolved.softmax : ref->softmax;
        resolved.swiglu = resolved.swiglu ? resolved.swiglu : ref->swiglu;
        resolved.add = resolved.add ? resolved.add : ref->add;
        resolved.add_scaled = resolved.add_scaled ? resolved.add_scaled : ref->add_scaled;
        resolved.rope_apply = resolved.rope_apply ? resolved.rope_apply : ref->rope_apply;
        resolved.matmat_f32 = resolved.matmat_f32 ? resolved.matmat_f32 : ref->matmat_f32;
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
            for (uint32_t shift = 0; shift < 2; shift++) {
                for (int kind = 0; kind < DATA_KINDS; kind++) {
                    test_reductions(k, lengths[i], shift, kind);
                    test_elementwise(k, lengths[i], shift, kind);
                    test_matmat(k, lengths[i], shift, kind);
                }
            }
        }
        test_swiglu_range(k);
        printf("%s: checked\n", k->name);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
