/* attention_experts.c - JetMoE's mixture of attention heads (format 1.11,
 * attn_bias bit 9): each token's attention experts bring their own query
 * and output projections over the layer's shared keys and values. */
#include "kernels.h"
#include "layers.h"
#include "linear.h"
#include "router.h"

/* Rows first .. of a float32 matrix of `cols` columns (an attention
 * expert's part of the stacked ATTN_Q or ATTN_O). */
static matrix_ref rows_from(matrix_ref w, uint32_t first, uint32_t cols)
{
    w.data = (const float *)w.data + (size_t)first * cols;
    return w;
}

void colibri_expert_queries(const colibri_model *m, const layer_view *layer, workspace *ws,
                            uint32_t n, uint32_t layer_index, uint32_t pos)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t h = hp->hidden_size, e = hp->n_experts, k = hp->top_k;
    uint32_t kv_dim = hp->n_kv_heads * hp->head_dim, q_dim = k * kv_dim;
    colibri_linear(m, ws->router, e, layer->attn_router, ws->xn, e, h, n, ws->xq);
    for (uint32_t t = 0; t < n; t++) {
        uint32_t *idx = ws->topk_i + (size_t)t * k;
        float *weight = ws->topk_w + (size_t)t * k;
        colibri_router_top_k(ws->router + (size_t)t * e, e, k, idx, weight);
        m->kernels.softmax(weight, k);
        colibri_router_sort_by_expert(idx, weight, k); /* slots by expert, as route reports */
        for (uint32_t s = 0; s < k; s++) {
            colibri_linear(m, ws->q + (size_t)t * q_dim + s * kv_dim, kv_dim,
                           rows_from(layer->wq, idx[s] * kv_dim, h), ws->xn + (size_t)t * h, kv_dim,
                           h, 1u, ws->xq);
        }
    }
    if (m->port.attention_route != NULL) {
        m->port.attention_route(m->port.route_ctx, layer_index, pos, n, k, ws->topk_i, ws->topk_w);
    }
}

void colibri_expert_outputs(const colibri_model *m, const layer_view *layer, workspace *ws,
                            uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t h = hp->hidden_size, k = hp->top_k, kv_dim = hp->n_kv_heads * hp->head_dim;
    for (uint32_t t = 0; t < n; t++) {
        float *out = ws->ffn_out + (size_t)t * h;
        memset(out, 0, h * sizeof(float));
        for (uint32_t s = 0; s < k; s++) {
            colibri_linear(m, ws->xg, h,
                           rows_from(layer->wo, ws->topk_i[(size_t)t * k + s] * h, kv_dim),
                           ws->attn + ((size_t)t * k + s) * kv_dim, h, kv_dim, 1u, ws->xq);
            m->kernels.add_scaled(out, ws->xg, ws->topk_w[(size_t)t * k + s], h);
        }
        if (layer->bo != NULL) {
            m->kernels.add(out, layer->bo, h);
        }
    }
}
