/*
 * short_conv.c - LFM2's gated short convolution, the operator of a layer
 * whose attn_kind is ATTN_CONV (format 1.13): B, C and X projections of the
 * normed input, a causal depthwise convolution of B * X over the last
 * conv_kernel positions, times C, then the output projection. The layer
 * keeps its last conv_kernel - 1 inputs of the convolution in the state:
 * read from the copy that holds the positions before the call, written to
 * the other, which colibri_forward makes the current one when the call
 * succeeds (docs/core.md, Recurrent state).
 */
#include "layers.h"
#include "linear.h"

/* Layer slot `slot`'s history rows (conv_kernel - 1 of hidden floats) in
 * copy `copy` of the state's convolution memory. */
static float *history_rows(const colibri_model *m, const colibri_state *state, uint32_t copy,
                           uint32_t slot)
{
    size_t per_layer = (size_t)(m->hp.conv_kernel - 1u) * m->hp.hidden_size;
    return state->conv_state + ((size_t)copy * m->hp.conv_layers + slot) * per_layer;
}

/* Channel c of row j of the history (back rows, all zero when hist is
 * NULL: position 0 has none) followed by the chunk's rows. */
static float tap_input(const float *hist, const float *bx, uint32_t back, uint32_t j,
                       uint32_t hidden, uint32_t c)
{
    if (j < back) {
        return hist != NULL ? hist[(size_t)j * hidden + c] : 0.0f;
    }
    return bx[(size_t)(j - back) * hidden + c];
}

/* out[t][c] = sum over k (ascending) of kernel[c][k] * input(t + k), the
 * window of token t ending at its own row: the same sum, in the same
 * order, whatever the chunk. */
static void convolve(const float *kernel, const float *hist, const float *bx, float *out,
                     uint32_t taps, uint32_t hidden, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t c = 0; c < hidden; c++) {
            const float *w = kernel + (size_t)c * taps;
            float sum = 0.0f;
            for (uint32_t k = 0; k < taps; k++) {
                sum += w[k] * tap_input(hist, bx, taps - 1u, t + k, hidden, c);
            }
            out[(size_t)t * hidden + c] = sum;
        }
    }
}

/* The last taps - 1 rows of history and chunk into dst, which may be hist
 * itself: row j comes from row n + j, another row, never one written before it. */
static void keep_history(float *dst, const float *hist, const float *bx, uint32_t taps,
                         uint32_t hidden, uint32_t n)
{
    uint32_t back = taps - 1u;
    for (uint32_t j = 0; j < back; j++) {
        float *row = dst + (size_t)j * hidden;
        if (n + j >= back) {
            memcpy(row, bx + (size_t)(n + j - back) * hidden, hidden * sizeof(float));
        } else if (hist != NULL) {
            memcpy(row, hist + (size_t)(n + j) * hidden, hidden * sizeof(float));
        } else {
            memset(row, 0, hidden * sizeof(float));
        }
    }
}

static void multiply_into(float *y, const float *x, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        y[i] = y[i] * x[i];
    }
}

void colibri_short_conv_forward(const colibri_model *m, const layer_view *layer,
                                uint32_t layer_index, colibri_state *state, workspace *ws,
                                uint32_t n)
{
    uint32_t h = m->hp.hidden_size, taps = m->hp.conv_kernel;
    uint32_t slot = colibri_layer_slot(m, layer_index);
    float *dst = history_rows(m, state, 1u - state->conv_copy, slot);
    const float *hist = state->pos == 0u ? NULL
                        : state->pos == ws->call_pos
                            ? history_rows(m, state, state->conv_copy, slot)
                            : dst;
    linear_product p[3] = {{ws->ffn_sum, NULL, layer->conv_b, h, h, h, n},
                           {ws->ffn_out, NULL, layer->conv_c, h, h, h, n},
                           {ws->xg, NULL, layer->conv_x, h, h, h, n}};
    colibri_linear_shared(m, p, 3u, ws->xn, h, n, ws->xq);
    multiply_into(ws->ffn_sum, ws->xg, (size_t)n * h); /* B * X */
    convolve((const float *)layer->conv_kernel.data, hist, ws->ffn_sum, ws->xg, taps, h, n);
    keep_history(dst, hist, ws->ffn_sum, taps, h, n);
    multiply_into(ws->xg, ws->ffn_out, (size_t)n * h); /* times C */
    colibri_linear(m, ws->ffn_out, h, layer->conv_out, ws->xg, h, h, n, ws->xq);
}
