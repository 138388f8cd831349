/* attention.c - grouped-query causal self-attention with a KV cache, for a
 * chunk of tokens: projections for all of them at once, their keys and
 * values into the cache, then each token over the positions up to its own. */
#include "layers.h"
#include "kernels.h"
#include "colibri_math.h"
#include "linear.h"
#include "quant.h"

/* One projection (colibri_linear, then the bias). */
static void project(const colibri_model *m, float *out, matrix_ref w, const float *bias,
                    const float *x, uint32_t rows, uint32_t cols, uint32_t n, void *xq)
{
    colibri_linear(m, out, rows, w, x, rows, cols, n, xq);
    for (uint32_t t = 0; bias != NULL && t < n; t++) {
        m->kernels.add(out + (size_t)t * rows, bias, rows);
    }
}

/* v[i] clamped to [-limit, limit] (DBRX's clip_qkv). */
static void clamp_values(float *v, size_t n, float limit)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = v[i] > limit ? limit : v[i] < -limit ? -limit : v[i];
    }
}

/* q, k and v of n tokens as one group of products (they share their input,
 * quantized once when any of them is Q8/Q4), then their biases. */
static void project_qkv(const colibri_model *m, const layer_view *layer, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t h = hp->hidden_size, q_dim = hp->n_heads * hp->head_dim;
    uint32_t kv_dim = hp->n_kv_heads * hp->head_dim;
    linear_product p[3] = {{ws->q, NULL, layer->wq, q_dim, q_dim, h, n},
                           {ws->k, NULL, layer->wk, kv_dim, kv_dim, h, n},
                           {ws->v, NULL, layer->wv, kv_dim, kv_dim, h, n}};
    colibri_linear_shared(m, p, 3u, ws->xn, h, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        if (layer->bq != NULL) {
            m->kernels.add(ws->q + (size_t)t * q_dim, layer->bq, q_dim);
        }
        if (layer->bk != NULL) {
            m->kernels.add(ws->k + (size_t)t * kv_dim, layer->bk, kv_dim);
        }
        if (layer->bv != NULL) {
            m->kernels.add(ws->v + (size_t)t * kv_dim, layer->bv, kv_dim);
        }
    }
    if (hp->qkv_clip > 0.0f) {
        clamp_values(ws->q, (size_t)n * q_dim, hp->qkv_clip);
        clamp_values(ws->k, (size_t)n * kv_dim, hp->qkv_clip);
        clamp_values(ws->v, (size_t)n * kv_dim, hp->qkv_clip);
    }
}

/* attn *= sigmoid(ATTN_GATE xn), element by element (AFMoE). The gate's
 * product goes into q, which the heads have finished reading. */
static void gate_output(const colibri_model *m, const layer_view *layer, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t q_dim = hp->n_heads * hp->head_dim;
    size_t count = (size_t)n * q_dim;
    project(m, ws->q, layer->wg, NULL, ws->xn, q_dim, hp->hidden_size, n, ws->xq);
    for (size_t i = 0; i < count; i++) {
        ws->attn[i] = ws->attn[i] * colibri_reference_sigmoid(ws->q[i]);
    }
}

/* q/k normalisation of one token: over the whole projection (OLMoE) or per
 * head (Qwen3; Hunyuan's after RoPE). */
static void qk_normalise(const colibri_model *m, float *v, const float *w, uint32_t heads)
{
    const colibri_hparams *hp = &m->hp;
    if (hp->qk_norm == QK_NORM_WHOLE) {
        m->kernels.rmsnorm(v, v, w, heads * hp->head_dim, hp->rms_eps);
    } else if (hp->qk_norm != QK_NORM_NONE) {
        for (uint32_t h = 0; h < heads; h++) {
            m->kernels.rmsnorm(v + h * hp->head_dim, v + h * hp->head_dim, w, hp->head_dim,
                               hp->rms_eps);
        }
    }
}

/* Each head of v divided by its root mean square (Llama 4's L2 norm: no
 * weights). The same plain code under every kernel table. */
static void rms_heads(const colibri_model *m, float *v, uint32_t heads)
{
    uint32_t hd = m->hp.head_dim;
    for (uint32_t h = 0; h < heads; h++) {
        float *x = v + h * hd, sum = 0.0f, r;
        for (uint32_t i = 0; i < hd; i++) {
            sum += x[i] * x[i];
        }
        r = 1.0f / colibri_sqrtf(sum / (float)hd + m->hp.rms_eps);
        for (uint32_t i = 0; i < hd; i++) {
            x[i] = x[i] * r;
        }
    }
}

/* Llama 4's attention temperature on q at position pos, in a layer without
 * RoPE: log1p(floor((pos + 1) / floor_scale)) * scale + 1. */
static void tune_temperature(const colibri_model *m, float *q, uint32_t pos)
{
    const colibri_hparams *hp = &m->hp;
    float steps = (float)(uint32_t)(((float)pos + 1.0f) / hp->attn_temp_floor); /* floor */
    float factor = colibri_logf(1.0f + steps) * hp->attn_temp_scale + 1.0f;
    for (uint32_t i = 0; i < hp->n_heads * hp->head_dim; i++) {
        q[i] = q[i] * factor;
    }
}

/* Token's q and k normalised (nothing with qk_norm 0). */
static void qk_normalise_token(const colibri_model *m, const layer_view *layer, float *q, float *k)
{
    qk_normalise(m, q, layer->q_norm, m->hp.n_heads);
    qk_normalise(m, k, layer->k_norm, m->hp.n_kv_heads);
}

/* RoPE on the first rope_dim dimensions of each head (all of them but for
 * GLM's partial rotary). */
static void rope_heads(const colibri_model *m, float *v, const float *cos_sin, uint32_t heads)
{
    for (uint32_t h = 0; h < heads; h++) {
        m->kernels.rope_apply(v + h * m->hp.head_dim, cos_sin, m->hp.rope_dim);
    }
}

/* softmax over x[0 .. n) and one more logit, the sink, whose share is
 * dropped (gpt-oss): x[i] = exp(x[i] - m) / (sum + exp(sink - m)), m the
 * largest of all n + 1. The same plain code under every kernel table. */
static void softmax_with_sink(float *x, uint32_t n, float sink)
{
    float max = sink, sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    for (uint32_t i = 0; i < n; i++) {
        x[i] = colibri_expf(x[i] - max);
        sum += x[i];
    }
    sum += colibri_expf(sink - max);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = x[i] / sum;
    }
}

/* ---- the int8 KV cache (1.15, docs/core.md) --------------------------------
 * A row: n_kv_heads float scales d, then the kv_dim int8 (head h's at h *
 * head_dim), x ~ d * q. Plain C, the same on every kernel table. */

/* dot(q, k) with k_i = d * q_i (one rounding each), in the canonical order:
 * 16 lanes, term i into lane i % 16 by one fused multiply-add, then the
 * pairwise tree (docs/kernels.md). */
static float int8_dot(const float *q, const int8_t *k, float d, uint32_t n)
{
    float lane[COLIBRI_LANES] = {0.0f};
    for (uint32_t i = 0; i < n; i++) {
        lane[i % COLIBRI_LANES] = colibri_fmaf(q[i], d * (float)k[i], lane[i % COLIBRI_LANES]);
    }
    for (uint32_t width = COLIBRI_LANES / 2u; width > 0; width /= 2u) {
        for (uint32_t j = 0; j < width; j++) {
            lane[j] = lane[j] + lane[j + width];
        }
    }
    return lane[0];
}

/* Head h's key score against a cache row, float32 or int8. */
static float key_score(const colibri_model *m, const float *q, const float *row, uint32_t h)
{
    uint32_t hd = m->hp.head_dim;
    if (!m->hp.kv_int8) {
        return m->kernels.dot(q, row + (size_t)h * hd, hd);
    }
    return int8_dot(q, (const int8_t *)(row + m->hp.n_kv_heads) + (size_t)h * hd, row[h], hd);
}

/* out += p * head h's value of a cache row: out_i = fma(d * q_i, p, out_i)
 * for an int8 row. */
static void add_value(const colibri_model *m, float *out, const float *row, uint32_t h, float p)
{
    uint32_t hd = m->hp.head_dim;
    if (!m->hp.kv_int8) {
        m->kernels.add_scaled(out, row + (size_t)h * hd, p, hd);
        return;
    }
    const int8_t *v = (const int8_t *)(row + m->hp.n_kv_heads) + (size_t)h * hd;
    for (uint32_t i = 0; i < hd; i++) {
        out[i] = colibri_fmaf(row[h] * (float)v[i], p, out[i]);
    }
}

/* Token t's K or V row x (kv_dim floats) into the cache at dst: as it is,
 * or each head quantized (int8 cache). */
static void store_row(const colibri_hparams *hp, float *dst, const float *x)
{
    uint32_t hd = hp->head_dim;
    if (!hp->kv_int8) {
        memcpy(dst, x, (size_t)hp->n_kv_heads * hd * sizeof(float));
        return;
    }
    int8_t *q = (int8_t *)(dst + hp->n_kv_heads);
    for (uint32_t h = 0; h < hp->n_kv_heads; h++) {
        dst[h] = colibri_quantize_head(q + (size_t)h * hd, x + (size_t)h * hd, hd);
    }
}

/* One query head over positions first .. pos of its KV head (first > 0 in a
 * sliding-window layer), with its sink when the layer has sinks. */
static void attend_head(const colibri_model *m, const float *q, const float *k_cache,
                        const float *v_cache, uint32_t kv_head, uint32_t first, uint32_t pos,
                        const float *sink, float *scores, float *out)
{
    uint32_t hd = m->hp.head_dim, row = colibri_kv_row_floats(&m->hp), n = pos + 1u - first;
    float scale = m->hp.attention_scale;
    k_cache += (size_t)first * row;
    v_cache += (size_t)first * row;
    for (uint32_t t = 0; t < n; t++) {
        scores[t] = key_score(m, q, k_cache + (size_t)t * row, kv_head) * scale;
    }
    if (sink != NULL) {
        softmax_with_sink(scores, n, *sink);
    } else {
        m->kernels.softmax(scores, n);
    }
    memset(out, 0, hd * sizeof(float));
    for (uint32_t t = 0; t < n; t++) {
        add_value(m, out, v_cache + (size_t)t * row, kv_head, scores[t]);
    }
}

/* The first position token `pos` attends to: 0, in a sliding-window layer
 * the oldest of the last sliding_window positions, in a chunked one (Llama
 * 4) the first of its chunk of sliding_window positions. */
static uint32_t window_start(const colibri_model *m, const layer_view *layer, uint32_t pos)
{
    uint32_t w = m->hp.sliding_window;
    if (layer->attn_kind == ATTN_CHUNKED) {
        return pos - pos % w;
    }
    return layer->attn_kind == ATTN_SLIDING && pos >= w ? pos + 1u - w : 0u;
}

/* The KV head query head h reads: its group's, or with attention experts
 * (JetMoE) head h mod n_kv_heads (each chosen expert brings one query head
 * per KV head). */
static uint32_t kv_head_of(const colibri_hparams *hp, uint32_t h)
{
    if ((hp->attn_bias & BIAS_ATTN_EXPERTS) != 0u) {
        return h % hp->n_kv_heads;
    }
    return h / (hp->n_heads / hp->n_kv_heads);
}

/* One query head for every token of the chunk, on its own row of scores:
 * a task of its own (heads write disjoint parts of ws->attn). */
typedef struct heads_job {
    const colibri_model *m;
    const layer_view *layer;
    workspace *ws;
    const float *k_cache, *v_cache;
    uint32_t pos, n;
} heads_job;

static void head_task(void *arg, uint32_t h)
{
    const heads_job *job = arg;
    const colibri_hparams *hp = &job->m->hp;
    uint32_t hd = hp->head_dim, q_dim = hp->n_heads * hd;
    float *scores = job->ws->scores + (size_t)h * job->ws->context;
    const float *sink = job->layer->sinks != NULL ? job->layer->sinks + h : NULL;
    for (uint32_t t = 0; t < job->n; t++) {
        uint32_t pos = job->pos + t;
        attend_head(job->m, job->ws->q + (size_t)t * q_dim + h * hd, job->k_cache, job->v_cache,
                    kv_head_of(hp, h), window_start(job->m, job->layer, pos), pos, sink, scores,
                    job->ws->attn + (size_t)t * q_dim + h * hd);
    }
}

/* Norms and rotation of token t's q and k, then its k and v into the cache. */
static void keys_of_token(const colibri_model *m, const layer_view *layer, float *k_cache,
                          float *v_cache, uint32_t pos, uint32_t t, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    float *q = ws->q + (size_t)t * q_dim, *k = ws->k + (size_t)t * kv_dim;
    int norms_after_rope = hp->qk_norm == QK_NORM_PER_HEAD_ROTATED;
    int rotated = layer->attn_kind != ATTN_FULL_NOPE;
    if (!norms_after_rope && hp->qk_norm != QK_NORM_L2_ROTATED) {
        qk_normalise_token(m, layer, q, k);
    }
    if (rotated) {
        rope_heads(m, q, ws->rope + (size_t)t * hd, hp->n_heads);
        rope_heads(m, k, ws->rope + (size_t)t * hd, hp->n_kv_heads);
    }
    if (norms_after_rope) {
        qk_normalise_token(m, layer, q, k);
    }
    if (hp->qk_norm == QK_NORM_L2_ROTATED && rotated) {
        rms_heads(m, q, hp->n_heads);
        rms_heads(m, k, hp->n_kv_heads);
    }
    if (hp->attn_temp_floor > 0.0f && !rotated) {
        tune_temperature(m, q, pos);
    }
    store_row(hp, k_cache + (size_t)pos * colibri_kv_row_floats(hp), k);
    store_row(hp, v_cache + (size_t)pos * colibri_kv_row_floats(hp), ws->v + (size_t)t * kv_dim);
}

void colibri_attention_forward(const colibri_model *m, const layer_view *layer,
                               uint32_t layer_index, colibri_state *state, workspace *ws,
                               uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    size_t layer_offset =
        (size_t)colibri_layer_slot(m, layer_index) * state->max_context * colibri_kv_row_floats(hp);
    float *k_cache, *v_cache;
    if (hp->mla == MLA_LATENT) {
        colibri_mla_forward(m, layer, layer_index, state, ws, n);
        return;
    }
    k_cache = state->k_cache + layer_offset;
    v_cache = state->v_cache + layer_offset;

    int experts = (hp->attn_bias & BIAS_ATTN_EXPERTS) != 0u;
    if (experts) {
        colibri_expert_queries(m, layer, ws, n, layer_index, state->pos);
        project(m, ws->k, layer->wk, layer->bk, ws->xn, kv_dim, hp->hidden_size, n, ws->xq);
        project(m, ws->v, layer->wv, layer->bv, ws->xn, kv_dim, hp->hidden_size, n, ws->xq);
    } else {
        project_qkv(m, layer, ws, n);
    }
    for (uint32_t t = 0; t < n; t++) {
        keys_of_token(m, layer, k_cache, v_cache, state->pos + t, t, ws);
    }
    heads_job job = {m, layer, ws, k_cache, v_cache, state->pos, n};
    /* every head: a score and a value sum over each position, for each token */
    uint64_t work = (uint64_t)n * (state->pos + n) * hd * 2u * hp->n_heads;
    if (!colibri_parallel_tasks(m, hp->n_heads, work, head_task, &job)) {
        for (uint32_t h = 0; h < hp->n_heads; h++) {
            head_task(&job, h);
        }
    }
    if ((hp->attn_bias & BIAS_ATTN_GATE) != 0u) {
        gate_output(m, layer, ws, n);
    }
    if (experts) {
        colibri_expert_outputs(m, layer, ws, n);
        return;
    }
    project(m, ws->ffn_out, layer->wo, layer->bo, ws->attn, hp->hidden_size, q_dim, n, ws->xq);
}
