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

static float from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static uint32_t bits_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* v rounded to the nearest integer, ties to even, clamped to [-127, 127];
 * NaN (0 * inf of a tiny block's zero) gives 0. */
static int8_t round_q(float v)
{
    if (v > 127.0f) {
        return 127;
    }
    if (!(v > -127.0f)) {
        return v < 0.0f ? -127 : 0;
    }
    return (int8_t)(int32_t)((v + ROUNDER) - ROUNDER);
}

static void quantize_block(colibri_qblock *out, const float *x, uint32_t count)
{
    float v[COLIBRI_QBLOCK];
    uint32_t amax_bits = 0;
    for (uint32_t i = 0; i < COLIBRI_QBLOCK; i++) {
        v[i] = i < count ? x[i] : 0.0f;
        uint32_t a = bits_of(v[i]) & F32_ABS_MASK; /* |v| orders as its bits */
        amax_bits = a > amax_bits ? a : amax_bits;
    }
    memset(out->q, 0, sizeof out->q);
    if (amax_bits >= F32_INF_BITS) {
        out->d = from_bits(F32_QNAN_BITS);
        return;
    }
    if (amax_bits == 0u) {
        out->d = 0.0f;
        return;
    }
    float amax = from_bits(amax_bits);
    float inv = 127.0f / amax;
    out->d = amax / 127.0f;
    for (uint32_t i = 0; i < COLIBRI_QBLOCK; i++) {
        out->q[i] = round_q(v[i] * inv);
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
