/* mla.c - Multi-head Latent Attention (DeepSeek-V2/V3) for a chunk of
 * tokens, in the absorbed form: the KV cache holds one kv_lora_rank latent
 * and one rope_dim RoPE key per position, never per-head keys or values.
 *
 * Head h's key at position t is [W_uk_h c_t, r_t] and its value W_uv_h c_t
 * (c_t the normed latent, r_t the rotated RoPE key, W_uk_h and W_uv_h the
 * head's rows of KV_B), so with q_h = [q_nope, q_pe]:
 *   score_t = ((W_uk_h^T q_nope) . c_t + q_pe . r_t) * attention_scale
 *   out_h   = W_uv_h (sum_t softmax(score)_t c_t)
 * which is transformers' expanded computation summed in another order. */
#include "layers.h"
#include "kernels.h"
#include "linear.h"

/* Floats of one cached position: the latent, then the RoPE key. */
static uint32_t cache_stride(const colibri_hparams *hp)
{
    return hp->kv_lora_rank + hp->rope_dim;
}

/* The chunk's queries into ws->q: W_q x, or W_qb norm(W_qa x) with a q LoRA
 * (its intermediate in ws->v). */
static void queries(const colibri_model *m, const layer_view *layer, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t q_dim = hp->n_heads * hp->head_dim, rank = hp->q_lora_rank;
    if (rank == 0) {
        colibri_linear(m, ws->q, q_dim, layer->wq, ws->xn, q_dim, hp->hidden_size, n, ws->xq);
        return;
    }
    colibri_linear(m, ws->v, rank, layer->q_a, ws->xn, rank, hp->hidden_size, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        m->kernels.rmsnorm(ws->v + (size_t)t * rank, ws->v + (size_t)t * rank, layer->q_a_norm,
                           rank, hp->lora_eps);
    }
    colibri_linear(m, ws->q, q_dim, layer->wq, ws->v, q_dim, rank, n, ws->xq);
}

/* Token t's latent (normed) and RoPE key into the cache at pos, the key and
 * the RoPE part of each of its query heads rotated (not at attn_kind 2). */
static void latent_of_token(const colibri_model *m, const layer_view *layer, float *cache,
                            uint32_t pos, uint32_t t, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t stride = cache_stride(hp), nope = hp->head_dim - hp->rope_dim;
    const float *rope = ws->rope + (size_t)t * hp->head_dim;
    float *kv = ws->k + (size_t)t * stride, *q = ws->q + (size_t)t * hp->n_heads * hp->head_dim;
    m->kernels.rmsnorm(kv, kv, layer->kv_a_norm, hp->kv_lora_rank, hp->lora_eps);
    for (uint32_t h = 0; layer->attn_kind != ATTN_FULL_NOPE && h <= hp->n_heads; h++) {
        /* the RoPE key, then each head's RoPE part; none without RoPE (Kimi-Linear) */
        float *part = h == 0u ? kv + hp->kv_lora_rank : q + (h - 1u) * hp->head_dim + nope;
        m->kernels.rope_apply(part, rope, hp->rope_dim);
    }
    memcpy(cache + (size_t)pos * stride, kv, stride * sizeof(float));
}

typedef struct mla_job {
    const colibri_model *m;
    const layer_view *layer;
    workspace *ws;
    const float *cache;
    uint32_t pos, n;
} mla_job;

/* Query head h of one token at position pos: absorbed query, scores over
 * positions 0 .. pos, latent sum, value projection into out. */
static void latent_head(const mla_job *job, uint32_t h, const float *q, uint32_t pos, float *out)
{
    const colibri_model *m = job->m;
    const colibri_hparams *hp = &m->hp;
    const colibri_kernels *k = &m->kernels;
    uint32_t rank = hp->kv_lora_rank, stride = cache_stride(hp);
    uint32_t nope = hp->head_dim - hp->rope_dim, rows = nope + hp->v_head_dim;
    const float *kv_b = job->layer->kv_b.data; /* F32: MLA roles are never quantized */
    const float *w_uk = kv_b + (size_t)h * rows * rank, *w_uv = w_uk + nope * rank;
    float *q_lat = job->ws->latent + (size_t)h * 2u * rank, *sum = q_lat + rank;
    float *scores = job->ws->scores + (size_t)h * job->ws->context;
    memset(q_lat, 0, rank * sizeof(float));
    for (uint32_t i = 0; i < nope; i++) {
        k->add_scaled(q_lat, w_uk + (size_t)i * rank, q[i], rank);
    }
    for (uint32_t t = 0; t <= pos; t++) {
        const float *c = job->cache + (size_t)t * stride;
        float s = k->dot(q_lat, c, rank) + k->dot(q + nope, c + rank, hp->rope_dim);
        scores[t] = s * hp->attention_scale;
    }
    k->softmax(scores, pos + 1u);
    memset(sum, 0, rank * sizeof(float));
    for (uint32_t t = 0; t <= pos; t++) {
        k->add_scaled(sum, job->cache + (size_t)t * stride, scores[t], rank);
    }
    for (uint32_t i = 0; i < hp->v_head_dim; i++) {
        out[i] = k->dot(w_uv + (size_t)i * rank, sum, rank);
    }
}

/* One query head for every token of the chunk: a task of its own (heads
 * write disjoint rows of ws->latent, ws->scores and ws->attn). */
static void mla_head_task(void *arg, uint32_t h)
{
    const mla_job *job = arg;
    const colibri_hparams *hp = &job->m->hp;
    uint32_t q_dim = hp->n_heads * hp->head_dim, out_dim = hp->n_heads * hp->v_head_dim;
    for (uint32_t t = 0; t < job->n; t++) {
        latent_head(job, h, job->ws->q + (size_t)t * q_dim + h * hp->head_dim, job->pos + t,
                    job->ws->attn + (size_t)t * out_dim + h * hp->v_head_dim);
    }
}

/* Each head's output times sigmoid(dot(ATTN_HEAD_GATE row h, x)) (format
 * 1.14, Ling's head gate), when the layer has one. */
static void gate_heads(const colibri_model *m, const layer_view *layer, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    const float *gate = (const float *)layer->head_gate.data;
    for (uint32_t t = 0; gate != NULL && t < n; t++) {
        const float *x = ws->xn + (size_t)t * hp->hidden_size;
        for (uint32_t h = 0; h < hp->n_heads; h++) {
            float g = colibri_reference_sigmoid(
                m->kernels.dot(gate + (size_t)h * hp->hidden_size, x, hp->hidden_size));
            float *out = ws->attn + ((size_t)t * hp->n_heads + h) * hp->v_head_dim;
            for (uint32_t i = 0; i < hp->v_head_dim; i++) {
                out[i] = out[i] * g;
            }
        }
    }
}

void colibri_mla_forward(const colibri_model *m, const layer_view *layer, uint32_t layer_index,
                         colibri_state *state, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t stride = cache_stride(hp), out_dim = hp->n_heads * hp->v_head_dim;
    float *cache =
        state->k_cache + (size_t)colibri_layer_slot(m, layer_index) * state->max_context * stride;
    queries(m, layer, ws, n);
    colibri_linear(m, ws->k, stride, layer->kv_a, ws->xn, stride, hp->hidden_size, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        latent_of_token(m, layer, cache, state->pos + t, t, ws);
    }
    mla_job job = {m, layer, ws, cache, state->pos, n};
    uint64_t work = (uint64_t)n * (state->pos + n) * (hp->kv_lora_rank + hp->rope_dim) * 2u *
                    hp->n_heads; /* every head: scores and latent sums */
    if (!colibri_parallel_tasks(m, hp->n_heads, work, mla_head_task, &job)) {
        for (uint32_t h = 0; h < hp->n_heads; h++) {
            mla_head_task(&job, h);
        }
    }
    gate_heads(m, layer, ws, n);
    colibri_linear(m, ws->ffn_out, hp->hidden_size, layer->wo, ws->attn, hp->hidden_size, out_dim,
                   n, ws->xq);
}
