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

/* A block whose inv is +inf (amax below 127 / FLT_MAX): v * inv is +-inf
 * for v != 0, clamped to +-127, and NaN for v = 0, which counts as 0. */
static void quantize_tiny(int8_t *q, const float *v)
{
    for (uint32_t i = 0; i < COLIBRI_QBLOCK; i++) {
        q[i] = (int8_t)(v[i] > 0.0f ? 127 : v[i] < 0.0f ? -127 : 0);
    }
}

/* Plain loops without branches, so that a compiler may run them in vector
 * registers (same operations, same bits). */
static void quantize_block(colibri_qblock *out, const float *x, uint32_t count)
{
    float padded[COLIBRI_QBLOCK];
    const float *v = x;
    int32_t amax_bits = 0;        /* signed: SSE2 and others compare int32 lanes */
    if (count < COLIBRI_QBLOCK) { /* the last block of a row: zeros past cols */
        memset(padded, 0, sizeof padded);
        memcpy(padded, x, count * sizeof(float));
        v = padded;
    }
    for (uint32_t i = 0; i < COLIBRI_QBLOCK; i++) {
        int32_t a = (int32_t)(colibri_f32_bits(v[i]) & F32_ABS_MASK); /* |v| orders as its bits */
        amax_bits = a > amax_bits ? a : amax_bits;
    }
    memset(out->q, 0, sizeof out->q);
    if (amax_bits >= (int32_t)F32_INF_BITS) {
        out->d = colibri_f32_from_bits(F32_QNAN_BITS);
        return;
    }
    if (amax_bits == 0) {
        out->d = 0.0f;
        return;
    }
    float amax = colibri_f32_from_bits((uint32_t)amax_bits);
    float inv = 127.0f / amax;
    out->d = amax / 127.0f;
    if (colibri_f32_bits(inv) >= F32_INF_BITS) {
        quantize_tiny(out->q, v);
        return;
    }
    /* |v * inv| <= 127 (1 + 2^-24)^2 < 127.5: rounds into [-127, 127] */
    for (uint32_t i = 0; i < COLIBRI_QBLOCK; i++) {
        out->q[i] = (int8_t)(int32_t)((v[i] * inv + ROUNDER) - ROUNDER);
    }
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
    int32_t amax_bits = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t a = (int32_t)(colibri_f32_bits(x[i]) & F32_ABS_MASK);
        amax_bits = a > amax_bits ? a : amax_bits;
    }
    memset(q, 0, n);
    if (amax_bits >= (int32_t)F32_INF_BITS || amax_bits == 0) {
        return amax_bits == 0 ? 0.0f : colibri_f32_from_bits(F32_QNAN_BITS);
    }
    float amax = colibri_f32_from_bits((uint32_t)amax_bits);
    float inv = 127.0f / amax;
    for (uint32_t i = 0; i < n; i++) {
        float v = colibri_f32_bits(inv) >= F32_INF_BITS /* tiny amax: +-127 */
                      ? (x[i] > 0.0f   ? 127.0f
                         : x[i] < 0.0f ? -127.0f
                                       : 0.0f)
                      : (x[i] * inv + ROUNDER) - ROUNDER;
        q[i] = (int8_t)(int32_t)v;
    }
    return amax / 127.0f;
}
