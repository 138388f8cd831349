/* attention.c - grouped-query causal self-attention with a KV cache. */
#include "layers.h"
#include "kernels.h"
#include "colibri_math.h"

static void project(float *out, const float *w, const float *bias, const float *x,
                    uint32_t rows, uint32_t cols)
{
    colibri_k_matvec(out, w, x, rows, cols);
    if (bias != NULL) {
        colibri_k_add(out, bias, rows);
    }
}

/* q/k normalisation: over the whole projection (OLMoE) or per head (Qwen3). */
static void qk_normalise(const colibri_hparams *hp, float *v, const float *w, uint32_t heads)
{
    if (hp->qk_norm == QK_NORM_WHOLE) {
        colibri_k_rmsnorm(v, v, w, heads * hp->head_dim, hp->rms_eps);
    } else if (hp->qk_norm == QK_NORM_PER_HEAD) {
        for (uint32_t h = 0; h < heads; h++) {
            colibri_k_rmsnorm(v + h * hp->head_dim, v + h * hp->head_dim, w, hp->head_dim,
                              hp->rms_eps);
        }
    }
}

static void rope_heads(float *v, const float *cos_sin, uint32_t heads, uint32_t head_dim)
{
    for (uint32_t h = 0; h < heads; h++) {
        colibri_k_rope_apply(v + h * head_dim, cos_sin, head_dim);
    }
}

/* One query head over positions 0 .. pos of its KV head. */
static void attend_head(const colibri_hparams *hp, const float *q, const float *k_cache,
                        const float *v_cache, uint32_t kv_head, uint32_t pos, float *scores,
                        float *out)
{
    uint32_t hd = hp->head_dim, kv_stride = hp->n_kv_heads * hd;
    float scale = 1.0f / colibri_sqrtf((float)hd);
    for (uint32_t t = 0; t <= pos; t++) {
        scores[t] = colibri_k_dot(q, k_cache + (size_t)t * kv_stride + kv_head * hd, hd) * scale;
    }
    colibri_k_softmax(scores, pos + 1u);
    memset(out, 0, hd * sizeof(float));
    for (uint32_t t = 0; t <= pos; t++) {
        colibri_k_add_scaled(out, v_cache + (size_t)t * kv_stride + kv_head * hd, scores[t], hd);
    }
}

void attention_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                       colibri_state *state, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    size_t layer_offset = (size_t)layer_index * state->max_context * kv_dim;
    float *k_cache = state->k_cache + layer_offset, *v_cache = state->v_cache + layer_offset;
    uint32_t group = hp->n_heads / hp->n_kv_heads;

    project(ws->q, layer->wq, layer->bq, ws->xn, q_dim, hp->hidden_size);
    project(ws->k, layer->wk, layer->bk, ws->xn, kv_dim, hp->hidden_size);
    project(ws->v, layer->wv, layer->bv, ws->xn, kv_dim, hp->hidden_size);
    qk_normalise(hp, ws->q, layer->q_norm, hp->n_heads);
    qk_normalise(hp, ws->k, layer->k_norm, hp->n_kv_heads);
    rope_heads(ws->q, ws->rope, hp->n_heads, hd);
    rope_heads(ws->k, ws->rope, hp->n_kv_heads, hd);
    memcpy(k_cache + (size_t)state->pos * kv_dim, ws->k, kv_dim * sizeof(float));
    memcpy(v_cache + (size_t)state->pos * kv_dim, ws->v, kv_dim * sizeof(float));
    for (uint32_t h = 0; h < hp->n_heads; h++) {
        attend_head(hp, ws->q + h * hd, k_cache, v_cache, h / group, state->pos, ws->scores,
                    ws->attn + h * hd);
    }
    project(ws->ffn_out, layer->wo, layer->bo, ws->attn, hp->hidden_size, q_dim);
}
