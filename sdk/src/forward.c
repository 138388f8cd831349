/* forward.c - colibri_forward: the decoder stack, one token at a time. */
#include "kernels.h"
#include "layers.h"

static void decoder_layer(const colibri_model *m, uint32_t l, colibri_state *state, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    layer_view layer;
    const colibri_kernels *k = &m->kernels;
    colibri_layer_view_load(m, l, &layer);
    k->rmsnorm(ws->xn, ws->x, layer.attn_norm, hp->hidden_size, hp->rms_eps);
    colibri_attention_forward(m, &layer, l, state, ws);
    k->add(ws->x, ws->ffn_out, hp->hidden_size);
    k->rmsnorm(ws->xn, ws->x, layer.ffn_norm, hp->hidden_size, hp->rms_eps);
    colibri_ffn_forward(m, &layer, ws);
    k->add(ws->x, ws->ffn_sum, hp->hidden_size);
}

/* Run one token at state->pos; with logits != NULL write its logits. */
static void token_forward(const colibri_model *m, colibri_state *state, int32_t id, float *logits,
                          workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    memcpy(ws->x, m->token_embed + (size_t)id * hp->hidden_size, hp->hidden_size * sizeof(float));
    colibri_k_rope_table(ws->rope, state->pos, hp->head_dim, hp->rope_theta);
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        decoder_layer(m, l, state, ws);
    }
    state->pos++;
    if (logits != NULL) {
        m->kernels.rmsnorm(ws->xn, ws->x, m->output_norm, hp->hidden_size, hp->rms_eps);
        m->kernels.matvec_f32(logits, m->lm_head, ws->xn, hp->vocab_size, hp->hidden_size);
    }
}

static colibri_status check_call(const colibri_model *m, const colibri_state *state,
                                 const int32_t *ids, uint32_t n_ids, const float *logits,
                                 colibri_logits_mode mode)
{
    if (m == NULL || m->image == NULL || state == NULL || state->k_cache == NULL || ids == NULL ||
        n_ids == 0 || state->fingerprint != m->fingerprint ||
        (mode != COLIBRI_LOGITS_LAST && mode != COLIBRI_LOGITS_ALL &&
         mode != COLIBRI_LOGITS_NONE) ||
        (logits == NULL && mode != COLIBRI_LOGITS_NONE)) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    for (uint32_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->hp.vocab_size) {
            return COLIBRI_E_TOKEN_OUT_OF_RANGE;
        }
    }
    if (n_ids > state->max_context - state->pos) {
        return COLIBRI_E_CONTEXT_FULL;
    }
    return COLIBRI_OK;
}

static colibri_status check_scratch(const colibri_model *m, const colibri_state *state,
                                    const void *scratch, size_t scratch_size)
{
    if (scratch == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (((uintptr_t)scratch & 15u) != 0) {
        return COLIBRI_E_MISALIGNED;
    }
    if (scratch_size < colibri_workspace_layout64(&m->hp, state->max_context)) {
        return COLIBRI_E_WORKSPACE_TOO_SMALL;
    }
    return COLIBRI_OK;
}

static uint64_t port_ticks(const colibri_model *m)
{
    return m->port.ticks != NULL ? m->port.ticks(m->port.ctx) : 0u;
}

static float *logits_row(float *logits, colibri_logits_mode mode, uint32_t i, uint32_t n,
                         uint32_t vocab)
{
    if (mode == COLIBRI_LOGITS_ALL) {
        return logits + (size_t)i * vocab;
    }
    return (mode == COLIBRI_LOGITS_LAST && i + 1u == n) ? logits : NULL;
}

colibri_status colibri_forward(const colibri_model *model, colibri_state *state, const int32_t *ids,
                               uint32_t n_ids, float *logits, colibri_logits_mode mode,
                               void *scratch, size_t scratch_size, uint64_t *ticks)
{
    workspace ws;
    uint64_t start;
    colibri_status status = check_call(model, state, ids, n_ids, logits, mode);
    if (status == COLIBRI_OK) {
        status = check_scratch(model, state, scratch, scratch_size);
    }
    if (status != COLIBRI_OK) {
        return status;
    }
    start = port_ticks(model);
    colibri_workspace_layout(&model->hp, state->max_context, (uint8_t *)scratch, &ws);
    for (uint32_t i = 0; i < n_ids; i++) {
        float *row = logits_row(logits, mode, i, n_ids, model->hp.vocab_size);
        token_forward(model, state, ids[i], row, &ws);
    }
    if (ticks != NULL) {
        *ticks = port_ticks(model) - start;
    }
    return COLIBRI_OK;
}

uint32_t colibri_argmax(const float *values, uint32_t n)
{
    uint32_t best = 0;
    if (values == NULL) {
        return 0;
    }
    for (uint32_t i = 1; i < n; i++) {
        best = values[i] > values[best] || values[best] != values[best] ? i : best;
    }
    return best;
}
