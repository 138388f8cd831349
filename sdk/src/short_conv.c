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
    float *dst = colibri_recurrent_rows(m, state, 1u - state->conv_copy, slot);
    const float *hist = colibri_rows_before(
        state, ws, colibri_recurrent_rows(m, state, state->conv_copy, slot), dst);
    linear_product p[3] = {{ws->ffn_sum, NULL, layer->conv_b, h, h, h, n},
                           {ws->ffn_out, NULL, layer->conv_c, h, h, h, n},
                           {ws->xg, NULL, layer->conv_x, h, h, h, n}};
    colibri_linear_shared(m, p, 3u, ws->xn, h, n, ws->xq);
    multiply_into(ws->ffn_sum, ws->xg, (size_t)n * h); /* B * X */
    colibri_causal_conv((const float *)layer->conv_kernel.data, NULL, hist, ws->ffn_sum, ws->xg,
                        taps, h, n);
    colibri_conv_keep(dst, hist, ws->ffn_sum, taps, h, n);
    multiply_into(ws->xg, ws->ffn_out, (size_t)n * h); /* times C */
    colibri_linear(m, ws->ffn_out, h, layer->conv_out, ws->xg, h, h, n, ws->xq);
}
