/*
 * causal_conv.c - the depthwise causal convolution of the recurrent layers
 * (LFM2's short convolution, 1.13; a Mamba2 mixer's, 1.14) and the rows it
 * keeps in the state: its last conv_kernel - 1 inputs.
 */
#include "layers.h"

/* Channel c of row j of the history (back rows, all zero when hist is
 * NULL: position 0 has none) followed by the chunk's rows. */
static float tap_input(const float *hist, const float *in, uint32_t back, uint32_t j,
                       uint32_t channels, uint32_t c)
{
    if (j < back) {
        return hist != NULL ? hist[(size_t)j * channels + c] : 0.0f;
    }
    return in[(size_t)(j - back) * channels + c];
}

void colibri_causal_conv(const float *kernel, const float *bias, const float *hist, const float *in,
                         float *out, uint32_t taps, uint32_t channels, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t c = 0; c < channels; c++) {
            const float *w = kernel + (size_t)c * taps;
            float sum = 0.0f;
            for (uint32_t k = 0; k < taps; k++) {
                sum += w[k] * tap_input(hist, in, taps - 1u, t + k, channels, c);
            }
            out[(size_t)t * channels + c] = bias != NULL ? sum + bias[c] : sum;
        }
    }
}

void colibri_conv_keep(float *dst, const float *hist, const float *in, uint32_t taps,
                       uint32_t channels, uint32_t n)
{
    uint32_t back = taps - 1u;
    for (uint32_t j = 0; j < back; j++) {
        float *row = dst + (size_t)j * channels;
        if (n + j >= back) {
            memcpy(row, in + (size_t)(n + j - back) * channels, channels * sizeof(float));
        } else if (hist != NULL) {
            memcpy(row, hist + (size_t)(n + j) * channels, channels * sizeof(float));
        } else {
            memset(row, 0, channels * sizeof(float));
        }
    }
}
