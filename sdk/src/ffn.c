/* ffn.c - SwiGLU feed-forward for a chunk of tokens: dense layers, routed
 * experts (each expert's block read once for all the tokens routed to it),
 * shared expert. */
#include "layers.h"
#include "kernels.h"
#include "linear.h"
#include "router.h"

/* The biases of one expert's gate, up and down projections (gpt-oss). */
typedef struct mlp_bias {
    const float *gate, *up, *down;
} mlp_bias;

/* rows[t] += bias for n rows of `width` floats (bias NULL: nothing). */
static void add_bias(const colibri_model *m, float *rows, const float *bias, uint32_t width,
                     uint32_t n)
{
    for (uint32_t t = 0; bias != NULL && t < n; t++) {
        m->kernels.add(rows + (size_t)t * width, bias, width);
    }
}

/* out rows = down(act(gate in, up in)) for n tokens through one SwiGLU MLP
 * of width `width` (act: SiLU, or gpt-oss's clamped form; with biases when
 * `bias` is not NULL); in and out rows are hidden_size floats. */
static void swiglu_mlp(const colibri_model *m, matrix_ref gate, matrix_ref up, matrix_ref down,
                       const mlp_bias *bias, uint32_t width, const float *in, float *out,
                       uint32_t n, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hidden = hp->hidden_size;
    uint32_t ready = colibri_linear(m, ws->h1, width, gate, in, width, hidden, n, ws->xq, 0u);
    colibri_linear(m, ws->h2, width, up, in, width, hidden, n, ws->xq, ready); /* same input */
    add_bias(m, ws->h1, bias != NULL ? bias->gate : NULL, width, n);
    add_bias(m, ws->h2, bias != NULL ? bias->up : NULL, width, n);
    for (uint32_t t = 0; t < n; t++) {
        if (hp->activation == ACT_SWIGLU_CLAMPED) {
            colibri_k_swiglu_clamped(ws->h1 + (size_t)t * width, ws->h2 + (size_t)t * width, width,
                                     hp->swiglu_limit, hp->swiglu_alpha);
        } else {
            m->kernels.swiglu(ws->h1 + (size_t)t * width, ws->h2 + (size_t)t * width, width);
        }
    }
    colibri_linear(m, out, hidden, down, ws->h1, hidden, width, n, ws->xq, 0u);
    add_bias(m, out, bias != NULL ? bias->down : NULL, hidden, n);
}

/* Expert e's biases, or NULL when the layer has none. */
static const mlp_bias *expert_bias(const colibri_model *m, const layer_view *layer, uint32_t e,
                                   mlp_bias *bias)
{
    uint32_t inter = m->hp.expert_intermediate;
    if (layer->expert_gate_up_bias.data == NULL) {
        return NULL;
    }
    bias->gate = (const float *)layer->expert_gate_up_bias.data + (size_t)e * 2u * inter;
    bias->up = bias->gate + inter;
    bias->down = (const float *)layer->expert_down_bias.data + (size_t)e * m->hp.hidden_size;
    return bias;
}

/* The tokens routed to `expert`: their indices, weights and inputs into
 * ws->sel, ws->sel_w and ws->xg rows. Returns how many. */
static uint32_t gather_tokens(const colibri_model *m, uint32_t expert, uint32_t n, workspace *ws)
{
    uint32_t hidden = m->hp.hidden_size, top_k = m->hp.top_k, count = 0;
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t j = 0; j < top_k; j++) {
            if (ws->topk_i[(size_t)t * top_k + j] == expert) {
                ws->sel[count] = t;
                ws->sel_w[count] = ws->topk_w[(size_t)t * top_k + j];
                memcpy(ws->xg + (size_t)count * hidden, ws->xn + (size_t)t * hidden,
                       hidden * sizeof(float));
                count++;
            }
        }
    }
    return count;
}

/* Whether any token of the chunk is routed to `expert`. */
static int expert_used(const colibri_model *m, uint32_t expert, uint32_t n, const workspace *ws)
{
    for (uint32_t i = 0; i < n * m->hp.top_k; i++) {
        if (ws->topk_i[i] == expert) {
            return 1;
        }
    }
    return 0;
}

/* The first expert from `e` on that the chunk uses (n_experts: none). */
static uint32_t used_from(const colibri_model *m, uint32_t e, uint32_t n, const workspace *ws)
{
    while (e < m->hp.n_experts && !expert_used(m, e, n, ws)) {
        e++;
    }
    return e;
}

/* Tell the port that expert e's block is about to be read (e may be none). */
static void prefetch_expert(const colibri_model *m, const layer_view *layer, uint32_t e)
{
    expert_view ev;
    if (m->port.prefetch != NULL && e < m->hp.n_experts) {
        colibri_expert_view_load(m, layer, e, &ev);
        m->port.prefetch(m->port.ctx, ev.block, ev.block_size);
    }
}

/* Routed experts in ascending expert order, so each token sums its experts
 * in ascending order (as transformers does) whatever the chunk. The port
 * hears of each expert's block one expert ahead, so it can fetch the next
 * block while this one computes. */
static void routed_experts(const colibri_model *m, const layer_view *layer, uint32_t n,
                           workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hidden = hp->hidden_size, e;
    colibri_linear(m, ws->router, hp->n_experts, layer->router, ws->xn, hp->n_experts, hidden, n,
                   ws->xq, 0u);
    add_bias(m, ws->router, layer->router_logit_bias, hp->n_experts, n);
    for (uint32_t t = 0; t < n; t++) {
        colibri_router_select(m, ws->router + (size_t)t * hp->n_experts, layer->router_bias,
                              ws->topk_i + (size_t)t * hp->top_k,
                              ws->topk_w + (size_t)t * hp->top_k);
    }
    memset(ws->ffn_sum, 0, (size_t)n * hidden * sizeof(float));
    e = used_from(m, 0, n, ws);
    prefetch_expert(m, layer, e);
    while (e < hp->n_experts) {
        expert_view ev;
        mlp_bias bias;
        uint32_t ahead = used_from(m, e + 1u, n, ws), count = gather_tokens(m, e, n, ws);
        prefetch_expert(m, layer, ahead);
        colibri_expert_view_load(m, layer, e, &ev);
        swiglu_mlp(m, ev.gate, ev.up, ev.down, expert_bias(m, layer, e, &bias),
                   hp->expert_intermediate, ws->xg, ws->ffn_out, count, ws);
        for (uint32_t c = 0; c < count; c++) {
            m->kernels.add_scaled(ws->ffn_sum + (size_t)ws->sel[c] * hidden,
                                  ws->ffn_out + (size_t)c * hidden, ws->sel_w[c], hidden);
        }
        e = ahead;
    }
}

static void shared_expert(const colibri_model *m, const layer_view *layer, uint32_t n,
                          workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hidden = hp->hidden_size;
    swiglu_mlp(m, layer->shared_gate, layer->shared_up, layer->shared_down, NULL,
               hp->shared_intermediate, ws->xn, ws->ffn_out, n, ws);
    for (uint32_t t = 0; t < n; t++) {
        const float *xn = ws->xn + (size_t)t * hidden;
        float gate = 1.0f;
        if (hp->shared_gate) {
            gate = colibri_k_sigmoid(
                m->kernels.dot((const float *)layer->shared_expert_gate.data, xn, hidden));
        }
        m->kernels.add_scaled(ws->ffn_sum + (size_t)t * hidden, ws->ffn_out + (size_t)t * hidden,
                              gate, hidden);
    }
}

void colibri_ffn_forward(const colibri_model *m, const layer_view *layer, workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    if (layer->ffn_kind == FFN_DENSE) {
        swiglu_mlp(m, layer->dense_gate, layer->dense_up, layer->dense_down, NULL,
                   hp->dense_intermediate, ws->xn, ws->ffn_sum, n, ws);
        return;
    }
    routed_experts(m, layer, n, ws);
    if (hp->shared_intermediate > 0) {
        shared_expert(m, layer, n, ws);
    }
}
