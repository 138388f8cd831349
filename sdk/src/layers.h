/* layers.h - the two sub-blocks of a decoder layer, for a chunk of n tokens
 * (1 <= n <= ws->batch) at positions state->pos .. state->pos + n - 1; row t
 * of each workspace buffer belongs to token t. */
#ifndef COLIBRI_LAYERS_H
#define COLIBRI_LAYERS_H

#include "workspace.h"

/* Self-attention: reads ws->xn, appends the chunk's K/V to the cache and
 * writes the projected output into ws->ffn_out. ws->rope row t must hold the
 * RoPE table of position state->pos + t. */
void colibri_attention_forward(const colibri_model *m, const layer_view *layer,
                               uint32_t layer_index, colibri_state *state, workspace *ws,
                               uint32_t n);

/* Multi-head Latent Attention (record field mla 1, mla.c), with the same contract:
 * called by colibri_attention_forward for such a model. */
void colibri_mla_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                         colibri_state *state, workspace *ws, uint32_t n);

/* Attention experts (format 1.11, JetMoE; attention_experts.c): each token's
 * top_k by the ATTN_ROUTER logits, a softmax over the k, into ws->topk_i
 * and ws->topk_w (slots by ascending expert; the FFN routes over them
 * later), told to the port's attention_route; slot s's query heads (row t
 * of ws->q, from s * K on) from its expert's rows of ATTN_Q. */
void colibri_expert_queries(const colibri_model *m, const layer_view *layer, workspace *ws,
                            uint32_t n, uint32_t layer_index, uint32_t pos);

/* Their output into ws->ffn_out: each slot's heads (ws->attn) through its
 * expert's rows of ATTN_O, times its weight, summed by slot (through xg's
 * first row, free until the FFN), then ATTN_O_BIAS. */
void colibri_expert_outputs(const colibri_model *m, const layer_view *layer, workspace *ws,
                            uint32_t n);

/* A short convolution layer's operator (attn_kind 4, format 1.13;
 * short_conv.c), with the attention's contract: reads ws->xn, writes
 * ws->ffn_out; its last inputs go to the state's other copy (ws->call_pos:
 * where the call started, when the current copy holds those before). */
void colibri_short_conv_forward(const colibri_model *m, const layer_view *layer,
                                uint32_t layer_index, colibri_state *state, workspace *ws,
                                uint32_t n);

/* A Mamba2 layer's operator (attn_kind 5, format 1.14; mamba2.c), with the
 * same contract: its convolution rows and SSM state go to the state's
 * other copy, read from the current one when the call starts there. */
void colibri_mamba2_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                            colibri_state *state, workspace *ws, uint32_t n);

/* A gated delta layer's operator (attn_kind 6, format 1.14, Qwen3-Next's
 * linear attention; gated_delta.c), with the same contract and state as a
 * Mamba2 layer's. */
void colibri_gated_delta_forward(const colibri_model *m, const layer_view *layer,
                                 uint32_t layer_index, colibri_state *state, workspace *ws,
                                 uint32_t n);

/* A KDA layer's operator (attn_kind 7, format 1.14, Kimi-Linear's linear
 * attention; gated_delta.c): the gated delta rule with a decay per key
 * channel, the same contract and state. */
void colibri_kda_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                         colibri_state *state, workspace *ws, uint32_t n);

/* A Mamba1 layer's operator (attn_kind 8, format 1.14, Jamba's mamba layers;
 * mamba1.c), with the same contract and state layout (a head per channel). */
void colibri_mamba1_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                            colibri_state *state, workspace *ws, uint32_t n);

/* One chunk of a Mamba2 or delta rule layer, in ws->ssm: z [n][I], the
 * convolution's input [n][C] (free once convolved) and output [n][C] (after
 * SiLU: x, then B, then C per row; the scan writes y over x), dt (softplus(dt
 * + dt_bias), [n][heads]; a KDA layer's per-channel decay [n][I]), beta
 * [n][heads] (raw, delta rule layers only); the state S before the chunk
 * (NULL at position 0) and where S after it goes (may be `before`). The
 * projections a layer kind lacks are skipped. */
typedef struct ssm_chunk {
    float *z, *in, *conv, *dt, *beta;
    const float *before;
    float *after;
} ssm_chunk;

/* The state row (at `row` floats) a token's update reads: the row itself
 * (s) after the chunk's first token, the state before the chunk for its
 * first, NULL at position 0 (zeros). */
static inline const float *colibri_ssm_prev(const ssm_chunk *chunk, const float *s, uint32_t t,
                                            size_t row)
{
    return t > 0u ? s : chunk->before != NULL ? chunk->before + row : NULL;
}

/* The projections of ws->xn, the convolution (its rows kept in the state's
 * other copy), SiLU and the time steps of a chunk (mamba2.c). */
void colibri_ssm_inputs(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                        colibri_state *state, workspace *ws, uint32_t n, ssm_chunk *chunk);

/* fn(job, h) for every head h, on the port's threads when worth it. */
void colibri_ssm_scan(const colibri_model *m, colibri_task_fn fn, void *job, uint32_t n);

/* The rows a recurrent layer reads at the chunk's start: NULL at position
 * 0 (none), the current copy's when the call starts here, else `own` (the
 * other copy, written by the call's earlier chunks). */
static inline const float *colibri_rows_before(const colibri_state *state, const workspace *ws,
                                               const float *current, const float *own)
{
    return state->pos == 0u ? NULL : state->pos == ws->call_pos ? current : own;
}

/* out[t][c] = sum over k (ascending) of kernel[c][k] * input(t + k) (then
 * + bias[c] when bias != NULL): the window of token t ending at its own
 * row, over the taps - 1 history rows (hist; NULL: zeros) and the chunk's n
 * rows of `channels` floats. The same sum, in the same order, whatever the
 * chunk (causal_conv.c). */
void colibri_causal_conv(const float *kernel, const float *bias, const float *hist, const float *in,
                         float *out, uint32_t taps, uint32_t channels, uint32_t n);

/* The last taps - 1 rows of history and chunk into dst, which may be hist
 * itself: row j comes from row n + j, another row, never one written
 * before it. */
void colibri_conv_keep(float *dst, const float *hist, const float *in, uint32_t taps,
                       uint32_t channels, uint32_t n);

/* Feed-forward block (dense or MoE) of layer l: reads ws->xn, writes
 * ws->ffn_sum. COLIBRI_E_EXPERT_UNAVAILABLE when the port cannot give a
 * routed expert's block (ws->ffn_sum then holds no result). */
colibri_status colibri_ffn_forward(const colibri_model *m, const layer_view *layer, uint32_t l,
                                   workspace *ws, uint32_t n);

/* cos_sin[0 .. rope_dim/2) = cos, [rope_dim/2 .. rope_dim) = sin of each
 * frequency at position pos: default RoPE or YaRN (rope.c). */
void colibri_rope_table(const colibri_hparams *hp, float *cos_sin, uint32_t pos);
/* The RoPE table of position pos from a layer's own inverse frequencies
 * (format 1.12, LAYER_ROPE: rope_dim / 2 of them). */
void colibri_rope_table_of(const colibri_hparams *hp, const float *inv_freq, float *cos_sin,
                           uint32_t pos);

#endif
