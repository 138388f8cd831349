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
#include "colibri_math.h"
#include "quant.h"

#ifndef COLIBRI_TEST_KERNEL_TABLES
#define COLIBRI_TEST_KERNEL_TABLES &colibri_kernels_reference,
#endif

static const colibri_kernels *const tables[] = {COLIBRI_TEST_KERNEL_TABLES};

/* 1 if this CPU can run the table; 1 if the table's fp32 slots keep
 * subnormals here (both defined per platform). */
int table_runs_here(const colibri_kernels *table);
int fp32_subnormals_kept(const colibri_kernels *table);
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
        printf("FAIL %s.%s n=%u shift=%u data=%d\n", k->name, slot, (unsigned)n, (unsigned)shift,
               kind);
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

/* ---- quantized products: the contract of QUANT_SPEC / docs/kernels.md,
 * from dense integer matrices and the C library (ldexpf, rintf, fmaf) ---- */

enum {
    QK = 32,
    Q_MAX_COLS = 2080,
    Q_MAX_NB = (Q_MAX_COLS + QK - 1) / QK,
    Q_ROWS = 33,
    Q_TOKENS = 17
};
/* rows 1..9 and, past the SIMD tiles (8 and 16 rows), 16, 17 and 33;
 * tokens 1..5 (every tile shape and a last partial one), 8 and 9 (tiles in
 * a row), 12 and 17 (the AVX-512 VNNI Q4 strips, from 12 tokens) */
static const uint32_t q_rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33};
static const uint32_t q_tokens[] = {1, 2, 3, 4, 5, 8, 9, 12, 17};
enum { Q8 = 0, Q4 = 1 };
/* How the blocks are laid out: row after row, or in groups of 16 rows (R16). */
enum { BY_ROW = 0, R16 = 1, G = 16 };

/* binary16 bits h by the formula of IEEE 754 (not the core's bit moves). */
static float spec_half(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float mag = e == 0x1F ? (m != 0 ? NAN : INFINITY)
                : e == 0  ? ldexpf((float)m, -24)
                          : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000u) ? -mag : mag;
}

/* Activation blocks by the spec: amax, two divisions, rintf (ties to even
 * in the default rounding mode), NaN/infinity: d = NaN, q = 0. */
static void spec_quantize(float *d, int8_t *q, const float *x, uint32_t cols)
{
    for (uint32_t b = 0; b * QK < cols; b++) {
        float amax = 0.0f, v[QK];
        int finite = 1;
        for (uint32_t i = 0; i < QK; i++) {
            v[i] = b * QK + i < cols ? x[b * QK + i] : 0.0f;
            finite = finite && isfinite(v[i]);
            amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        }
        d[b] = !finite ? NAN : amax == 0.0f ? 0.0f : amax / 127.0f;
        float inv = finite && amax != 0.0f ? 127.0f / amax : 0.0f;
        for (uint32_t i = 0; i < QK; i++) {
            float r = rintf(v[i] * inv);
            r = r != r ? 0.0f : r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
            q[b * QK + i] = (int8_t)r;
        }
    }
}

/* Weights as the test keeps them: integer values (Q4: already minus 8) and
 * one binary16 scale per block; qpack() lays them out as the format does. */
typedef struct qweights {
    int kind;
    uint32_t rows, cols, nb;
    int16_t v[Q_ROWS][Q_MAX_NB * QK];
    uint16_t h[Q_ROWS][Q_MAX_NB];
} qweights;

static size_t qblock_bytes(int kind)
{
    return kind == Q8 ? 34u : 18u;
}

/* R16 (colibri.h): tile (group g, block b) = 16 scales, then chunks of 64
 * bytes, row i's 4 bytes of chunk k at 4i. Padding rows: all bytes 0xFF (a
 * NaN scale), which no output may show. */
static void qpack_r16(uint8_t *out, const qweights *w)
{
    size_t bytes = qblock_bytes(w->kind), groups = (w->rows + G - 1) / G;
    memset(out, 0xFF, groups * G * w->nb * bytes);
    for (uint32_t r = 0; r < w->rows; r++) {
        for (uint32_t b = 0; b < w->nb; b++) {
            uint8_t *tile = out + ((r / G) * w->nb + b) * G * bytes;
            const int16_t *v = &w->v[r][b * QK];
            uint32_t i = r % G;
            tile[2 * i] = (uint8_t)(w->h[r][b] & 0xFF),
                     tile[2 * i + 1] = (uint8_t)(w->h[r][b] >> 8);
            for (uint32_t e = 0; e < (w->kind == Q8 ? 32u : 16u); e++) {
                tile[32 + 64 * (e / 4) + 4 * i + e % 4] =
                    w->kind == Q8 ? (uint8_t)(int8_t)v[e]
                                  : (uint8_t)((v[e] + 8) | ((v[e + 16] + 8) << 4));
            }
        }
    }
}

static void qpack(uint8_t *out, const qweights *w)
{
    size_t bytes = qblock_bytes(w->kind);
    for (uint32_t r = 0; r < w->rows; r++) {
        for (uint32_t b = 0; b < w->nb; b++) {
            uint8_t *blk = out + (r * w->nb + b) * bytes;
            const int16_t *v = &w->v[r][b * QK];
            blk[0] = (uint8_t)(w->h[r][b] & 0xFF), blk[1] = (uint8_t)(w->h[r][b] >> 8);
            for (uint32_t j = 0; j < (w->kind == Q8 ? 32u : 16u); j++) {
                blk[2 + j] = w->kind == Q8 ? (uint8_t)(int8_t)v[j]
                                           : (uint8_t)((v[j] + 8) | ((v[j + 16] + 8) << 4));
            }
        }
    }
}

/* acc = fmaf((float)isum, half(d_w) * d_x, acc), isum summed in 64 bits. */
static float spec_qdot(const qweights *w, uint32_t r, const float *d, const int8_t *q)
{
    float acc = 0.0f;
    for (uint32_t b = 0; b < w->nb; b++) {
        int64_t isum = 0;
        for (uint32_t i = 0; i < QK; i++) {
            isum += (int64_t)w->v[r][b * QK + i] * q[b * QK + i];
        }
        acc = fmaf((float)isum, spec_half(w->h[r][b]) * d[b], acc);
    }
    return acc;
}

static uint16_t next_u16(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (uint16_t)(rng_state >> 16);
}

/* Scales: normal ones near 2^-8, and the extremes a converter or a hostile
 * image may hold: 0, -0, the largest finite, subnormals, negative. */
static uint16_t scale_of(int kind_of_scales, uint32_t r, uint32_t b)
{
    static const uint16_t extreme[] = {0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001,
                                       0x03FF, 0x0400, 0x3C00, 0xBC00, 0x1800};
    if (kind_of_scales == 0) {
        return (uint16_t)(0x1C00u + (next_u16() & 0x3FFu) + ((r + b) & 1u) * 0x8000u);
    }
    return extreme[(r * 7u + b * 3u + (next_u16() & 3u)) % (sizeof extreme / sizeof extreme[0])];
}

static void qweights_fill(qweights *w, int kind, uint32_t rows, uint32_t cols, int scales)
{
    w->kind = kind, w->rows = rows, w->cols = cols, w->nb = (cols + QK - 1) / QK;
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t i = 0; i < w->nb * QK; i++) {
            int16_t v = kind == Q8 ? (int16_t)((int)(next_u16() % 255u) - 127)
                                   : (int16_t)((int)(next_u16() % 16u) - 8);
            /* the extremes: -128 (a Q8 byte a converter never writes), -8, 7 */
            if (i % 61u == 7u) {
                v = kind == Q8 ? -128 : -8;
            } else if (i % 53u == 5u) {
                v = kind == Q8 ? 127 : 7;
            }
            w->v[r][i] = i < cols ? v : 0;
        }
        for (uint32_t b = 0; b < w->nb; b++) {
            w->h[r][b] = scale_of(scales, r, b);
        }
        if (r == 1 && w->nb > 1) { /* a whole zero block */
            for (uint32_t i = 0; i < QK; i++) {
                w->v[r][QK + i] = 0;
            }
        }
    }
}

/* Activation rows: ordinary, huge, tiny (subnormal and beyond 127/FLT_MAX),
 * all-zero blocks, exact ties, one NaN / infinity row, and blocks of amax
 * about 1e-36 (inv finite) with subnormal elements, which a vector unit that
 * flushes subnormals (Helium) would quantize to 0 where the scalar FPU
 * gives +-1 .. 13. */
static void activations_fill(float *x, uint32_t cols, uint32_t t, int kind)
{
    for (uint32_t i = 0; i < cols; i++) {
        float v = next_float();
        x[i] = kind == 1 ? v * 3e38f : kind == 2 ? v * 1e-30f : kind == 3 ? v * 1e-44f : v * 4.0f;
        if ((i / QK) % 3u == 2u && t % 2u == 1u) {
            x[i] = (i % 2u) ? -0.0f : 0.0f;
        }
    }
    if (kind == 4) { /* amax 127 gives inv 1: halves are ties */
        for (uint32_t i = 0; i < cols; i++) {
            x[i] = (float)((int)(i % 255u) - 127) * 0.5f;
        }
        x[0] = 127.0f;
    }
    if (kind == 5 && t == 1) {
        x[cols / 2u] = t % 2u ? NAN : INFINITY;
    }
    if (kind == 5 && t == 2) {
        x[cols - 1u] = -INFINITY;
    }
    if (kind == 6) {
        for (uint32_t i = 0; i < cols; i++) {
            x[i] = i % 3u == 0u ? next_float() * 1e-36f : next_float() * 1e-37f;
        }
    }
}

static _Alignas(64) uint8_t q_packed[(Q_ROWS + G - 1) / G * G * Q_MAX_NB * 34u + 64u];
static qweights q_w;
static float q_x[Q_TOKENS][Q_MAX_COLS], q_d[Q_TOKENS][Q_MAX_NB];
static int8_t q_q[Q_TOKENS][Q_MAX_NB * QK];
static colibri_qblock q_blocks[Q_TOKENS * Q_MAX_NB + 1u];

/* 2047: the x86 decodes (avx2's, borrowed by avx512, and avx512vnni's) read whole rows in
 * chunks of up to 64 blocks; 2080 (65) is past that. The other tables go block by block,
 * which 1000 columns (32 blocks) covers, and skip the last two: most of the test's time on
 * the emulated CPUs (QEMU's Cortex-M55 and M7, qemu-aarch64). */
static const uint32_t q_cols[] = {1, 5, 31, 32, 33, 64, 95, 100, 256, 257, 1000, 2047, 2080};

static size_t q_col_cases(const colibri_kernels *k)
{
    static const char *const chunked[] = {"avx2", "avx512", "avx512vnni"};
    for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++) {
        if (strcmp(k->name, chunked[i]) == 0) {
            return sizeof q_cols / sizeof q_cols[0];
        }
    }
    return sizeof q_cols / sizeof q_cols[0] - 2u;
}
enum { Q_ACT_KINDS = 7, Q_OUT_STRIDE = Q_ROWS + 2 };

/* The spec's dot products of every row and token of the case, computed once
 * (each rows x tokens shape below reads its part): by the spec they do not
 * depend on the shape, and on the emulated CPUs computing them again for
 * each of the 108 shapes was most of the test's time. */
static float q_spec[Q_TOKENS * Q_OUT_STRIDE];

/* want: the canary i at every i, then the spec's rows x n values. */
static void q_expect(uint32_t rows, uint32_t n)
{
    for (uint32_t i = 0; i < Q_TOKENS * Q_OUT_STRIDE; i++) {
        got[i] = want[i] = (float)i;
    }
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t r = 0; r < rows; r++) {
            want[t * Q_OUT_STRIDE + r] = q_spec[t * Q_OUT_STRIDE + r];
        }
    }
}

static void check_quantizer(uint32_t cols, int kind)
{
    int ok = 1;
    for (uint32_t t = 0; t < Q_TOKENS; t++) {
        activations_fill(q_x[t], cols, t, kind);
        spec_quantize(q_d[t], q_q[t], q_x[t], cols);
        colibri_quantize_row(q_blocks + t * ((cols + QK - 1) / QK), q_x[t], cols);
        for (uint32_t b = 0; b * QK < cols; b++) {
            const colibri_qblock *blk = q_blocks + t * ((cols + QK - 1) / QK) + b;
            ok = ok && same(&blk->d, &q_d[t][b], 1) && memcmp(blk->q, &q_q[t][b * QK], QK) == 0;
        }
    }
    check(ok, &colibri_kernels_reference, "quantize_row", cols, 0, kind);
}

typedef void (*qmatmat_fn)(float *, size_t, const uint8_t *, const colibri_qblock *, uint32_t,
                           uint32_t, uint32_t);

static qmatmat_fn qslot(const colibri_kernels *k, int wkind, int layout)
{
    if (layout == R16) {
        return wkind == Q8 ? k->matmat_q8r16 : k->matmat_q4r16;
    }
    return wkind == Q8 ? k->matmat_q8 : k->matmat_q4;
}

static const char *qslot_name(int wkind, int layout)
{
    static const char *names[2][2] = {{"matmat_q8", "matmat_q4"}, {"matmat_q8r16", "matmat_q4r16"}};
    return names[layout][wkind];
}

/* rows 1..9, 16, 17, 33 and n 1..5, 8, 9 for one cols, weights kind, layout
 * and activations kind; the output's gap columns must stay as they were.
 * shift: weights at an odd address (blocks have no alignment). */
static void test_quant_matmat(const colibri_kernels *k, int wkind, int layout, uint32_t cols,
                              int akind, uint32_t shift)
{
    qweights_fill(&q_w, wkind, Q_ROWS, cols, akind % 2);
    (layout == R16 ? qpack_r16 : qpack)(q_packed + shift, &q_w);
    check_quantizer(cols, akind);
    for (uint32_t t = 0; t < Q_TOKENS; t++) {
        for (uint32_t r = 0; r < Q_ROWS; r++) {
            q_spec[t * Q_OUT_STRIDE + r] = spec_qdot(&q_w, r, q_d[t], q_q[t]);
        }
    }
    int ok = 1;
    for (size_t ri = 0; ri < sizeof q_rows / sizeof q_rows[0]; ri++) {
        for (size_t ti = 0; ti < sizeof q_tokens / sizeof q_tokens[0]; ti++) {
            uint32_t rows = q_rows[ri], n = q_tokens[ti];
            q_expect(rows, n);
            qslot(k, wkind, layout)(got, Q_OUT_STRIDE, q_packed + shift, q_blocks, rows, cols, n);
            ok = ok && same(got, want, Q_TOKENS * Q_OUT_STRIDE);
        }
    }
    check(ok, k, qslot_name(wkind, layout), cols, shift, akind);
}

/* Every binary16 value through the core's conversion. */
static void test_half_to_float(void)
{
    int ok = 1;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float a = colibri_half_to_float((uint16_t)h), b = spec_half((uint16_t)h);
        ok = ok && same(&a, &b, 1);
    }
    check(ok, &colibri_kernels_reference, "half_to_float", 65536, 0, DATA_NORMAL);
}

/* The R16 layout's columns: one part block, two blocks, a part last block,
 * 65 blocks (past the AVX-512 VNNI decode's chunk of 64 and its groups of
 * 16 block sums). Only that table works in chunks of blocks; the others go
 * block by block, which 100 columns covers, and skip the 65-block case:
 * most of the test's time on the emulated CPUs (QEMU's Cortex-M55 and M7,
 * qemu-aarch64). */
static const uint32_t r16_cols[] = {1, 33, 100, 2080};

static size_t r16_col_cases(const colibri_kernels *k)
{
    size_t all = sizeof r16_cols / sizeof r16_cols[0];
    return strcmp(k->name, "avx512vnni") == 0 ? all : all - 1u;
}

/* own_r16: the table has its own R16 slots (a NULL one is the reference's,
 * checked with the reference table). */
static void test_quantized(const colibri_kernels *k, int own_r16)
{
    for (size_t c = 0; c < q_col_cases(k); c++) {
        for (int akind = 0; akind < Q_ACT_KINDS; akind++) {
            for (int wkind = Q8; wkind <= Q4; wkind++) {
                test_quant_matmat(k, wkind, BY_ROW, q_cols[c], akind, (uint32_t)(c % 2u));
            }
        }
    }
    for (size_t c = 0; own_r16 && c < r16_col_cases(k); c++) {
        for (int akind = 0; akind < Q_ACT_KINDS; akind++) {
            for (int wkind = Q8; wkind <= Q4; wkind++) {
                test_quant_matmat(k, wkind, R16, r16_cols[c], akind, (uint32_t)(c % 2u));
            }
        }
    }
}

#include "test_kernels_qk.h"

/* No arguments: every table; else only the tables named. */
static int table_asked(const colibri_kernels *k, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], k->name) == 0) {
            return 1;
        }
    }
    return argc < 2;
}

int main(int argc, char **argv)
{
    test_half_to_float();
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        if (!table_asked(tables[t], argc, argv)) {
            continue;
        }
        if (!table_runs_here(tables[t])) {
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
        resolved.matmat_q8 = resolved.matmat_q8 ? resolved.matmat_q8 : ref->matmat_q8;
        resolved.matmat_q4 = resolved.matmat_q4 ? resolved.matmat_q4 : ref->matmat_q4;
        int own_r16 = tables[t]->matmat_q8r16 != NULL && tables[t]->matmat_q4r16 != NULL;
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
            for (uint32_t shift = 0; shift < 2; shift++) {
                for (int kind = 0; kind < DATA_KINDS; kind++) {
                    if (kind == DATA_SUBNORMAL && !fp32_subnormals_kept(tables[t])) {
                        continue;
                    }
                    test_reductions(k, lengths[i], shift, kind);
                    test_elementwise(k, lengths[i], shift, kind);
                    test_matmat(k, lengths[i], shift, kind);
                }
            }
        }
        if (!fp32_subnormals_kept(tables[t])) {
            printf("%s: fp32 slots not checked on subnormal inputs (flushed here)\n", k->name);
        }
        test_swiglu_range(k);
        test_quantized(k, own_r16);
        if (tables[t]->matmat_qk != NULL) { /* a NULL one is the reference's, checked there */
            test_qk(k, BY_ROW);
        }
        if (tables[t]->matmat_qkr16 != NULL) {
            test_qk(k, R16);
        }
        printf("%s: checked\n", k->name);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
