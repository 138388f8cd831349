/* layers.h - the two sub-blocks of a decoder layer, for one token. */
#ifndef COLIBRI_LAYERS_H
#define COLIBRI_LAYERS_H

#include "workspace.h"

/* Self-attention of the token at state->pos: reads ws->xn, writes its K/V
 * into the cache and the projected output into ws->ffn_out. ws->rope must
 * hold the RoPE table of state->pos. */
void colibri_attention_forward(const colibri_model *m, const layer_view *layer,
                               uint32_t layer_index, colibri_state *state, workspace *ws);

/* Feed-forward block (dense or MoE): reads ws->xn, writes ws->ffn_sum. */
void colibri_ffn_forward(const colibri_model *m, const layer_view *layer, workspace *ws);

#endif
