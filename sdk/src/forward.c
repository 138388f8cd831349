/* forward.c - colibri_forward: the decoder stack, a chunk of tokens at a time. */
#include "kernels.h"
#include "layers.h"
#include "linear.h"
#include "quant.h"

/* The norm of n rows: RMSNorm, or LayerNorm with its bias (norm_kind 1). */
static void norm_rows(const colibri_model *m, float *out, const float *x, const float *w,
                      const float *bias, uint32_t n)
{
    uint32_t hidden = m->hp.hidden_size;
    for (uint32_t t = 0; t < n; t++) {
        if (m->hp.norm_kind == NORM_LAYER) {
            colibri_reference_layernorm(out + (size_t)t * hidden, x + (size_t)t * hidden, w, bias,
                                        hidden, m->hp.rms_eps);
        } else {
            m->kernels.rmsnorm(out + (size_t)t * hidden, x + (size_t)t * hidden, w, hidden,
                               m->hp.rms_eps);
        }
    }
}

/* The residual add: y += x, or y += x * residual_scale (Granite). */
static void add_rows(const colibri_model *m, float *y, const float *x, uint32_t n)
{
    if (m->hp.residual_scale == 1.0f) {
        m->kernels.add(y, x, n * m->hp.hidden_size);
    } else {
        m->kernels.add_scaled(y, x, m->hp.residual_scale, n * m->hp.hidden_size);
    }
}

/* v[i] = v[i] * s (s == 1: nothing to do), or v[i] / d for the logits. */
static void scale_values(float *v, size_t n, float s)
{
    for (size_t i = 0; s != 1.0f && i < n; i++) {
        v[i] = v[i] * s;
    }
}

static void divide_values(float *v, size_t n, float d)
{
    for (size_t i = 0; d != 1.0f && i < n; i++) {
        v[i] = v[i] / d;
    }
}

/* A sublayer's input: the norm of the residual stream, or (NORM_RMS_POST)
 * the stream itself. */
static void sublayer_input(const colibri_model *m, workspace *ws, const float *w, const float *bias,
                           uint32_t n)
{
    if (m->hp.norm_kind == NORM_RMS_POST) {
        memcpy(ws->xn, ws->x, (size_t)n * m->hp.hidden_size * sizeof(float));
    } else {
        norm_rows(m, ws->xn, ws->x, w, bias, n);
    }
}

/* The norm of a sublayer's output before its residual add: the sublayer's
 * own norm under NORM_RMS_POST, the post norm under NORM_RMS_SANDWICH;
 * NULL for the other kinds (no norm after). */
static const float *sublayer_output_norm(const colibri_model *m, const float *norm,
                                         const float *post)
{
    return m->hp.norm_kind == NORM_RMS_POST       ? norm
           : m->hp.norm_kind == NORM_RMS_SANDWICH ? post
                                                  : NULL;
}

/* x += a sublayer's output, normed first with w when w != NULL (into xn:
 * the sublayer has read its input by then). */
static void add_sublayer(const colibri_model *m, workspace *ws, const float *out, const float *w,
                         uint32_t n)
{
    if (w != NULL) {
        norm_rows(m, ws->xn, out, w, NULL, n);
        out = ws->xn;
    }
    add_rows(m, ws->x, out, n);
}

/* Whether layer l - 1 is a shortcut layer (format 1.12): its MoE output is
 * added after layer l's FFN, as LongCat-Flash's does after its second. */
static int follows_shortcut(const colibri_model *m, uint32_t l)
{
    if (l == 0u) {
        return 0;
    }
    return colibri_rd_u32(m->layer_table + (size_t)(l - 1u) * IMG_LAYER_ENTRY_SIZE +
                          LAY_FFN_KIND) == FFN_SHORTCUT;
}

/* The chunk's RoPE rows from the layer's own frequencies (format 1.12,
 * LAYER_ROPE; without them chunk_forward computed the rows once). */
static void layer_rope_rows(const colibri_model *m, const layer_view *layer,
                            const colibri_state *state, workspace *ws, uint32_t n)
{
    for (uint32_t t = 0; layer->rope_freq != NULL && t < n; t++) {
        colibri_rope_table_of(&m->hp, layer->rope_freq, ws->rope + (size_t)t * m->hp.head_dim,
                              state->pos + t);
    }
}

/* Layer l's operator sublayer: norm, attention or a recurrent mixer, the
 * residual add. */
static void operator_sublayer(const colibri_model *m, const layer_view *layer, uint32_t l,
                              colibri_state *state, workspace *ws, uint32_t n)
{
    layer_rope_rows(m, layer, state, ws, n);
    sublayer_input(m, ws, layer->attn_norm, layer->attn_norm_bias, n);
    if (layer->attn_kind == ATTN_CONV) {
        colibri_short_conv_forward(m, layer, l, state, ws, n);
    } else if (layer->attn_kind == ATTN_MAMBA2) {
        colibri_mamba2_forward(m, layer, l, state, ws, n);
    } else if (layer->attn_kind == ATTN_GATED_DELTA) {
        colibri_gated_delta_forward(m, layer, l, state, ws, n);
    } else if (layer->attn_kind == ATTN_KDA) {
        colibri_kda_forward(m, layer, l, state, ws, n);
    } else if (layer->attn_kind == ATTN_MAMBA1) {
        colibri_mamba1_forward(m, layer, l, state, ws, n);
    } else {
        colibri_attention_forward(m, layer, l, state, ws, n);
    }
    add_sublayer(m, ws, ws->ffn_out,
                 sublayer_output_norm(m, layer->attn_norm, layer->attn_post_norm), n);
}

static colibri_status decoder_layer(const colibri_model *m, uint32_t l, colibri_state *state,
                                    workspace *ws, uint32_t n)
{
    layer_view layer;
    colibri_status status;
    colibri_layer_view_load(m, l, &layer);
    if (layer.attn_kind != ATTN_NONE) {
        operator_sublayer(m, &layer, l, state, ws, n);
    }
    if (layer.ffn_kind == FFN_NONE) {
        return COLIBRI_OK;
    }
    sublayer_input(m, ws, layer.ffn_norm, layer.ffn_norm_bias, n);
    status = colibri_ffn_forward(m, &layer, l, ws, n);
    if (status != COLIBRI_OK) {
        return status;
    }
    if (m->port.route != NULL && layer.ffn_kind != FFN_DENSE) {
        m->port.route(m->port.route_ctx, l, state->pos, n, m->hp.top_k, ws->topk_i, ws->topk_w);
    }
    add_sublayer(m, ws, ws->ffn_sum, sublayer_output_norm(m, layer.ffn_norm, layer.ffn_post_norm),
                 n);
    if (follows_shortcut(m, l)) {
        add_rows(m, ws->x, ws->shortcut, n);
    }
    return COLIBRI_OK;
}

/* The global matrices' dtypes (docs/format.md 3.3): TOKEN_EMBED is entry 0,
 * LM_HEAD entry 2 (or the embedding itself, tied). */
static matrix_ref token_embedding(const colibri_model *m)
{
    matrix_ref ref = {m->token_embed, colibri_rd_u16(tensor_entry(m, 0) + TEN_DTYPE)};
    return ref;
}

static matrix_ref output_projection(const colibri_model *m)
{
    uint32_t index = m->hp.tie_embeddings ? 0u : 2u;
    matrix_ref ref = {m->lm_head, colibri_rd_u16(tensor_entry(m, index) + TEN_DTYPE)};
    return ref;
}

/* Row `id` of the token embedding as floats: copied, or for Q8/Q4 each
 * weight d * q (one float multiplication, as docs/format.md 3.3 defines it). */
static void embed_row(const colibri_model *m, float *out, uint32_t id)
{
    matrix_ref e = token_embedding(m);
    uint32_t hidden = m->hp.hidden_size, blocks = colibri_qblocks(hidden);
    uint32_t block_bytes = e.dtype == DTYPE_Q8 ? COLIBRI_Q8_BLOCK_BYTES : COLIBRI_Q4_BLOCK_BYTES;
    const uint8_t *row = (const uint8_t *)e.data + (size_t)id * blocks * block_bytes;
    if (e.dtype == DTYPE_F32) {
        memcpy(out, (const float *)e.data + (size_t)id * hidden, hidden * sizeof(float));
        return;
    }
    for (uint32_t i = 0; i < hidden; i++) {
        const uint8_t *block = row + (size_t)(i / COLIBRI_QBLOCK) * block_bytes;
        uint32_t j = i % COLIBRI_QBLOCK;
        int32_t q = e.dtype == DTYPE_Q8
                        ? (int32_t)(int8_t)block[2u + j]
                        : (int32_t)((block[2u + j % 16u] >> (j / 16u * 4u)) & 15u) - 8;
        out[i] = colibri_qblock_scale(block) * (float)q;
    }
}

/* Run ids[0 .. n) (n <= ws->batch) at state->pos onward. Tokens t >=
 * first_logits write their logits to row t - first_logits of `logits`.
 * On an error state->pos stays. */
static colibri_status chunk_forward(const colibri_model *m, colibri_state *state,
                                    const int32_t *ids, uint32_t n, float *logits,
                                    uint32_t first_logits, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hidden = hp->hidden_size;
    for (uint32_t t = 0; t < n; t++) {
        embed_row(m, ws->x + (size_t)t * hidden, (uint32_t)ids[t]);
        scale_values(ws->x + (size_t)t * hidden, hidden, hp->embedding_scale);
        if (!hp->layer_rope) {
            colibri_rope_table(hp, ws->rope + (size_t)t * hp->head_dim, state->pos + t);
        }
    }
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        colibri_status status = decoder_layer(m, l, state, ws, n);
        if (status != COLIBRI_OK) {
            return status;
        }
    }
    state->pos += n;
    if (logits != NULL && first_logits < n) {
        uint32_t rows = n - first_logits;
        const float *x = ws->x + (size_t)first_logits * hidden;
        norm_rows(m, ws->xn, x, m->output_norm, m->output_norm_bias, rows);
        colibri_linear(m, logits, hp->vocab_size, output_projection(m), ws->xn, hp->vocab_size,
                       hidden, rows, ws->xq);
        for (uint32_t t = 0; m->lm_head_bias != NULL && t < rows; t++) {
            m->kernels.add(logits + (size_t)t * hp->vocab_size, m->lm_head_bias, hp->vocab_size);
        }
        divide_values(logits, (size_t)rows * hp->vocab_size, hp->logits_divisor);
    }
    return COLIBRI_OK;
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

/* The scratch's alignment, and the chunk size (*batch) it holds: sized once
 * per call (0 tokens: COLIBRI_E_WORKSPACE_TOO_SMALL). */
static colibri_status check_scratch(const colibri_model *m, const colibri_state *state,
                                    const void *scratch, size_t scratch_size, uint32_t *batch)
{
    if (scratch == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (((uintptr_t)scratch & 15u) != 0) {
        return COLIBRI_E_MISALIGNED;
    }
    *batch = colibri_workspace_batch(&m->hp, state->max_context, scratch_size);
    return *batch == 0u ? COLIBRI_E_WORKSPACE_TOO_SMALL : COLIBRI_OK;
}

static uint64_t port_ticks(const colibri_model *m)
{
    return m->port.ticks != NULL ? m->port.ticks(m->port.ctx) : 0u;
}

/* Chunk [start, start + n) of the ids: where its logits go, and from which
 * of its tokens on (*first = n: none). */
static float *chunk_logits(float *logits, colibri_logits_mode mode, uint32_t start, uint32_t n,
                           uint32_t n_ids, uint32_t vocab, uint32_t *first)
{
    *first = n;
    if (mode == COLIBRI_LOGITS_ALL) {
        *first = 0;
        return logits + (size_t)start * vocab;
    }
    if (mode == COLIBRI_LOGITS_LAST && start + n == n_ids) {
        *first = n - 1u;
        return logits;
    }
    return NULL;
}

colibri_status colibri_forward(const colibri_model *model, colibri_state *state, const int32_t *ids,
                               uint32_t n_ids, float *logits, colibri_logits_mode mode,
                               void *scratch, size_t scratch_size, uint64_t *ticks)
{
    workspace ws;
    uint64_t start;
    uint32_t batch = 0;
    colibri_status status = check_call(model, state, ids, n_ids, logits, mode);
    if (status == COLIBRI_OK) {
        status = check_scratch(model, state, scratch, scratch_size, &batch);
    }
    if (status != COLIBRI_OK) {
        return status;
    }
    start = port_ticks(model);
    colibri_workspace_layout(&model->hp, state->max_context, batch, (uint8_t *)scratch, &ws);
    uint32_t pos = state->pos;
    ws.call_pos = pos;
    for (uint32_t i = 0; i < n_ids && status == COLIBRI_OK; i += ws.batch) {
        uint32_t n = n_ids - i < ws.batch ? n_ids - i : ws.batch, first;
        float *rows = chunk_logits(logits, mode, i, n, n_ids, model->hp.vocab_size, &first);
        status = chunk_forward(model, state, ids + i, n, rows, first, &ws);
    }
    if (status != COLIBRI_OK) {
        state->pos = pos; /* the call left no position behind, nor convolution rows */
        return status;
    }
    state->conv_copy ^= n_ids > 0u && model->hp.conv_layers > 0u; /* the rows just written */
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
        int best_nan = values[best] != values[best];
        best = values[i] > values[best] || (best_nan && values[i] == values[i]) ? i : best;
    }
    return best;
}
