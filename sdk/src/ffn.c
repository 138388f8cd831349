/* ffn.c - SwiGLU feed-forward: dense layers, routed experts, shared expert. */
#include "layers.h"
#include "kernels.h"
#include "router.h"

/* out = down(silu(gate x) * up x) for one SwiGLU MLP of width `width`. */
static void swiglu_mlp(const colibri_model *m, const float *gate, const float *up,
                       const float *down, uint32_t width, workspace *ws)
{
    const colibri_kernels *k = &m->kernels;
    uint32_t hidden = m->hp.hidden_size;
    k->matvec_f32(ws->h1, gate, ws->xn, width, hidden);
    k->matvec_f32(ws->h2, up, ws->xn, width, hidden);
    k->swiglu(ws->h1, ws->h2, width);
    k->matvec_f32(ws->ffn_out, down, ws->h1, hidden, width);
}

static void prefetch_expert(const colibri_model *m, const expert_view *ev)
{
    if (m->port.prefetch != NULL) {
        m->port.prefetch(m->port.ctx, ev->block, ev->block_size);
    }
}

/* Routed experts, summed in ascending expert order (as transformers does). */
static void routed_experts(const colibri_model *m, const layer_view *layer, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    colibri_router_route(m, layer->router, ws->xn, ws->router, ws->topk_i, ws->topk_w);
    memset(ws->ffn_sum, 0, hp->hidden_size * sizeof(float));
    for (uint32_t j = 0; j < hp->top_k; j++) {
        expert_view ev;
        colibri_expert_view_load(m, layer, ws->topk_i[j], &ev);
        prefetch_expert(m, &ev);
        swiglu_mlp(m, ev.gate, ev.up, ev.down, hp->expert_intermediate, ws);
        m->kernels.add_scaled(ws->ffn_sum, ws->ffn_out, ws->topk_w[j], hp->hidden_size);
    }
}

static void shared_expert(const colibri_model *m, const layer_view *layer, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    float gate = 1.0f;
    swiglu_mlp(m, layer->shared_gate, layer->shared_up, layer->shared_down, hp->shared_intermediate,
               ws);
    if (hp->shared_gate) {
        gate =
            colibri_k_sigmoid(m->kernels.dot(layer->shared_expert_gate, ws->xn, hp->hidden_size));
    }
    m->kernels.add_scaled(ws->ffn_sum, ws->ffn_out, gate, hp->hidden_size);
}

void colibri_ffn_forward(const colibri_model *m, const layer_view *layer, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    if (layer->ffn_kind == FFN_DENSE) {
        swiglu_mlp(m, layer->dense_gate, layer->dense_up, layer->dense_down, hp->dense_intermediate,
                   ws);
        memcpy(ws->ffn_sum, ws->ffn_out, hp->hidden_size * sizeof(float));
        return;
    }
    routed_experts(m, layer, ws);
    if (hp->shared_intermediate > 0) {
        shared_expert(m, layer, ws);
    }
}
