/*
 * quant.c - the activation quantizer of every quantized product (quant.h):
 * plain IEEE binary32 operations and integer ones, no C library math, so
 * every target gives the same blocks.
 */
#include "quant.h"

#define F32_ABS_MASK 0x7FFFFFFFu
#define F32_INF_BITS 0x7F800000u
#define F32_QNAN_BITS 0x7FC00000u
/* 1.5 * 2^23: v + ROUNDER lies in [2^23, 2^24) for |v| <= 127, where the
 * spacing of floats is 1, so the addition rounds v to an integer, ties to
 * even (ROUNDER is even), and the subtraction is exact. */
#define ROUNDER 12582912.0f

/* A span whose inv is +inf (amax below 127 / FLT_MAX): v * inv is +-inf
 * for v != 0, clamped to +-127, and NaN for v = 0, which counts as 0. */
static void quantize_tiny(int8_t *q, const float *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        q[i] = (int8_t)(v[i] > 0.0f ? 127 : v[i] < 0.0f ? -127 : 0);
    }
}

/* The one rule (quant.h) over n values: q written, d returned. Plain loops
 * without branches, so that a compiler may run them in vector registers
 * (same operations, same bits); the blocks' n is the constant 32. */
static inline float quantize_span(int8_t *q, const float *v, uint32_t n)
{
    int32_t amax_bits = 0; /* signed: SSE2 and others compare int32 lanes */
    for (uint32_t i = 0; i < n; i++) {
        int32_t a = (int32_t)(colibri_f32_bits(v[i]) & F32_ABS_MASK); /* |v| orders as its bits */
        amax_bits = a > amax_bits ? a : amax_bits;
    }
    memset(q, 0, n);
    if (amax_bits >= (int32_t)F32_INF_BITS) {
        return colibri_f32_from_bits(F32_QNAN_BITS);
    }
    if (amax_bits == 0) {
        return 0.0f;
    }
    float amax = colibri_f32_from_bits((uint32_t)amax_bits);
    float inv = 127.0f / amax;
    if (colibri_f32_bits(inv) >= F32_INF_BITS) {
        quantize_tiny(q, v, n);
        return amax / 127.0f;
    }
    /* |v * inv| <= 127 (1 + 2^-24)^2 < 127.5: rounds into [-127, 127] */
    for (uint32_t i = 0; i < n; i++) {
        q[i] = (int8_t)(int32_t)((v[i] * inv + ROUNDER) - ROUNDER);
    }
    return amax / 127.0f;
}

/* One block of a row: count <= 32 values, zeros past them. */
static void quantize_block(colibri_qblock *out, const float *x, uint32_t count)
{
    float padded[COLIBRI_QBLOCK];
    const float *v = x;
    if (count < COLIBRI_QBLOCK) { /* the last block of a row: zeros past cols */
        memset(padded, 0, sizeof padded);
        memcpy(padded, x, count * sizeof(float));
        v = padded;
    }
    out->d = quantize_span(out->q, v, COLIBRI_QBLOCK);
}

void colibri_quantize_row(colibri_qblock *out, const float *x, uint32_t cols)
{
    uint32_t nb = colibri_qblocks(cols);
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t left = cols - b * COLIBRI_QBLOCK;
        quantize_block(out + b, x + (size_t)b * COLIBRI_QBLOCK,
                       left < COLIBRI_QBLOCK ? left : COLIBRI_QBLOCK);
    }
}

float colibri_quantize_head(int8_t *q, const float *x, uint32_t n)
{
    return quantize_span(q, x, n);
}
