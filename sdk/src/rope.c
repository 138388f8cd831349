/* rope.c - the RoPE table of one position (docs/format.md 1.1: rope_dim,
 * rope_kind; 1.12: a layer's own frequencies), computed as transformers
 * computes it in float32. */
#include "colibri_math.h"
#include "kernels.h"
#include "layers.h"

/* YaRN's inverse frequency of pair i: the interpolated frequency
 * (inv_freq / factor) blended with the original one by the ramp
 * clamp((i - ramp_low) / ramp_width, 0, 1). */
static float yarn_inv_freq(const colibri_hparams *hp, uint32_t i)
{
    float pos_freq = colibri_powf(hp->rope_theta, (float)(2u * i) / (float)hp->rope_dim);
    float ramp = ((float)i - hp->rope_ramp_low) / hp->rope_ramp_width;
    float extrapolation = 1.0f - (ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp);
    float interpolated = 1.0f / (hp->rope_factor * pos_freq);
    return interpolated * (1.0f - extrapolation) + (1.0f / pos_freq) * extrapolation;
}

void colibri_rope_table(const colibri_hparams *hp, float *cos_sin, uint32_t pos)
{
    uint32_t half = hp->rope_dim / 2u;
    if (hp->rope_kind != ROPE_YARN) {
        colibri_reference_rope_table(cos_sin, pos, hp->rope_dim, hp->rope_theta);
        return;
    }
    for (uint32_t i = 0; i < half; i++) {
        colibri_sincosf((float)pos * yarn_inv_freq(hp, i), &cos_sin[half + i], &cos_sin[i]);
        cos_sin[i] = cos_sin[i] * hp->rope_attn_factor;
        cos_sin[half + i] = cos_sin[half + i] * hp->rope_attn_factor;
    }
}

void colibri_rope_table_of(const colibri_hparams *hp, const float *inv_freq, float *cos_sin,
                           uint32_t pos)
{
    uint32_t half = hp->rope_dim / 2u;
    for (uint32_t i = 0; i < half; i++) {
        colibri_sincosf((float)pos * inv_freq[i], &cos_sin[half + i], &cos_sin[i]);
    }
}
