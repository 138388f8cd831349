/* ffn.c - SwiGLU feed-forward for a chunk of tokens: dense layers, routed
 * experts (each expert's block read once for all the tokens routed to it),
 * shared expert. */
#include "layers.h"
#include "kernels.h"
#include "linear.h"
#include "quant.h"
#include "router.h"

/* rows[t] += bias for n rows of `width` floats (bias NULL: nothing). */
static void add_bias(const colibri_model *m, float *rows, const float *bias, uint32_t width,
                     uint32_t n)
{
    for (uint32_t t = 0; bias != NULL && t < n; t++) {
        m->kernels.add(rows + (size_t)t * width, bias, width);
    }
}

/* At most this many MLPs in one group of products (their gate and up
 * matrices make 2x as many products). */
#define MLP_GROUP_MAX (COLIBRI_LINEAR_GROUP_MAX / 2u)
_Static_assert(MLP_GROUP_MAX == COLIBRI_EXPERTS_HELD, "a group holds its experts' blocks at once");

/* One SwiGLU MLP of a group: its matrices and biases (NULL: none) and
 * the rows [row, row + n) of the group's inputs, activations and outputs it
 * takes. */
enum { BIAS_GATE, BIAS_UP, BIAS_DOWN };

typedef struct mlp_part {
    matrix_ref gate, up, down;
    const float *bias[3]; /* [BIAS_GATE], [BIAS_UP], [BIAS_DOWN]: gpt-oss's, or NULL */
    uint32_t row, n;
} mlp_part;

/* Bias `which` of each part added to its rows of `rows` (width floats each). */
static void add_part_biases(const colibri_model *m, const mlp_part *parts, uint32_t count,
                            uint32_t which, float *rows, uint32_t width)
{
    for (uint32_t i = 0; i < count; i++) {
        const mlp_part *p = &parts[i];
        add_bias(m, rows + (size_t)p->row * width, p->bias[which], width, p->n);
    }
}

/* relu(x)^2 of each value (activation 2, format 1.14). */
static void relu2_rows(float *h, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float r = h[i] > 0.0f ? h[i] : 0.0f;
        h[i] = r * r;
    }
}

/* The activation of `rows` rows: h1 = act(h1, h2) (SiLU, or gpt-oss's
 * clamped form); h1 = relu(h1)^2 without gates (Nemotron-H's). */
static void activate_rows(const colibri_model *m, uint32_t width, uint32_t rows, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    if (hp->activation == ACT_RELU2) {
        relu2_rows(ws->h1, (size_t)rows * width);
        return;
    }
    for (uint32_t t = 0; t < rows; t++) {
        if (hp->activation == ACT_SWIGLU_CLAMPED) {
            colibri_reference_swiglu_clamped(ws->h1 + (size_t)t * width, ws->h2 + (size_t)t * width,
                                             width, hp->swiglu_limit, hp->swiglu_alpha);
        } else {
            m->kernels.swiglu(ws->h1 + (size_t)t * width, ws->h2 + (size_t)t * width, width);
        }
    }
}

/* The product of w on a part's rows: inputs x (rows of in_width floats) or
 * their blocks xq, outputs out (rows of out_width floats), from row `row`
 * on, n of them. */
static linear_product part_product(matrix_ref w, float *out, uint32_t out_width, const float *x,
                                   const colibri_qblock *xq, uint32_t in_width, uint32_t row,
                                   uint32_t n)
{
    linear_product p;
    p.out = out + (size_t)row * out_width;
    p.in =
        product_input(w, x + (size_t)row * in_width, xq + (size_t)row * colibri_qblocks(in_width));
    p.w = w;
    p.out_stride = out_width;
    p.rows = out_width;
    p.cols = in_width;
    p.n = n;
    return p;
}

/* For `count` (<= MLP_GROUP_MAX) SwiGLU MLPs of width `width`, each on its
 * rows of in (hidden_size floats each; `rows` in all): out rows = down(act(
 * gate in, up in)). Every gate and up product runs as one group, then every
 * down product: the port's threads are woken twice, whatever the count.
 * Inputs are quantized once for all of them when any matrix is Q8/Q4. */
static void swiglu_mlps(const colibri_model *m, const mlp_part *parts, uint32_t count,
                        uint32_t width, const float *in, float *out, uint32_t rows, workspace *ws)
{
    uint32_t hidden = m->hp.hidden_size, first = 0;
    const colibri_qblock *xq = ws->xq;
    linear_product p[2u * MLP_GROUP_MAX] = {{0}};
    for (uint32_t i = 0; i < count; i++) {
        const mlp_part *part = &parts[i];
        if (part->gate.data == NULL) { /* relu^2 (1.14): up into h1, no gate */
            p[first++] = part_product(part->up, ws->h1, width, in, xq, hidden, part->row, part->n);
            continue;
        }
        p[first++] = part_product(part->gate, ws->h1, width, in, xq, hidden, part->row, part->n);
        p[first++] = part_product(part->up, ws->h2, width, in, xq, hidden, part->row, part->n);
    }
    if (colibri_products_quantized(p, first)) {
        colibri_quantize_rows(ws->xq, in, hidden, rows);
    }
    colibri_linear_group(m, p, first);
    add_part_biases(m, parts, count, BIAS_GATE, ws->h1, width);
    add_part_biases(m, parts, count, BIAS_UP, ws->h2, width);
    activate_rows(m, width, rows, ws);
    for (uint32_t i = 0; i < count; i++) {
        const mlp_part *part = &parts[i];
        p[i] = part_product(part->down, out, hidden, ws->h1, xq, width, part->row, part->n);
    }
    if (colibri_products_quantized(p, count)) {
        colibri_quantize_rows(ws->xq, ws->h1, width, rows);
    }
    colibri_linear_group(m, p, count);
    add_part_biases(m, parts, count, BIAS_DOWN, out, hidden);
}

/* One SwiGLU MLP without biases on n rows (dense FFN, shared expert). */
static void swiglu_mlp(const colibri_model *m, matrix_ref gate, matrix_ref up, matrix_ref down,
                       uint32_t width, const float *in, float *out, uint32_t n, workspace *ws)
{
    mlp_part part = {gate, up, down, {NULL, NULL, NULL}, 0u, n};
    swiglu_mlps(m, &part, 1u, width, in, out, n, ws);
}

/* Expert e's gate, up and down biases into part->bias (NULL when the layer
 * has none). */
static void expert_biases(const colibri_model *m, const layer_view *layer, uint32_t e,
                          mlp_part *part)
{
    uint32_t inter = m->hp.expert_intermediate;
    if (layer->expert_gate_up_bias.data == NULL) {
        return;
    }
    part->bias[BIAS_GATE] = (const float *)layer->expert_gate_up_bias.data + (size_t)e * 2u * inter;
    part->bias[BIAS_UP] = part->bias[BIAS_GATE] + inter;
    part->bias[BIAS_DOWN] =
        (const float *)layer->expert_down_bias.data + (size_t)e * m->hp.hidden_size;
}

/* How many tokens of the chunk are routed to `expert`. */
static uint32_t routed_count(const colibri_model *m, uint32_t expert, uint32_t n,
                             const workspace *ws)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < n * m->hp.top_k; i++) {
        count += ws->topk_i[i] == expert;
    }
    return count;
}

/* Llama 4's router (router_score 5) weights the expert's input: x * w,
 * and the output is added as it is (w becomes 1). */
static void weight_input(const colibri_model *m, float *x, float *w)
{
    if (m->hp.router_score == ROUTER_TOPK_SIGMOID_INPUT) {
        for (uint32_t i = 0; i < m->hp.hidden_size; i++) {
            x[i] = x[i] * *w;
        }
        *w = 1.0f;
    }
}

/* The tokens routed to `expert`: their indices, weights and inputs into
 * ws->sel, ws->sel_w and ws->xg from row `row` on. Returns how many. */
static uint32_t gather_tokens(const colibri_model *m, uint32_t expert, uint32_t n, uint32_t row,
                              workspace *ws)
{
    uint32_t hidden = m->hp.hidden_size, top_k = m->hp.top_k, count = row;
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t j = 0; j < top_k; j++) {
            if (ws->topk_i[(size_t)t * top_k + j] == expert) {
                ws->sel[count] = t;
                ws->sel_w[count] = ws->topk_w[(size_t)t * top_k + j];
                memcpy(ws->xg + (size_t)count * hidden, ws->xn + (size_t)t * hidden,
                       hidden * sizeof(float));
                weight_input(m, ws->xg + (size_t)count * hidden, &ws->sel_w[count]);
                count++;
            }
        }
    }
    return count - row;
}

/* The first expert from `e` on that the chunk uses (n_experts: none). */
static uint32_t used_from(const colibri_model *m, uint32_t e, uint32_t n, const workspace *ws)
{
    while (e < m->hp.n_experts && routed_count(m, e, n, ws) == 0u) {
        e++;
    }
    return e;
}

/* Tell the port that expert e's block is about to be read (e may be none). */
static void prefetch_expert(const colibri_model *m, const layer_view *layer, uint32_t e)
{
    expert_view ev;
    if (m->port.prefetch != NULL && m->port.expert_acquire == NULL && e < m->hp.n_experts) {
        colibri_expert_view_load(m, layer, e, &ev);
        m->port.prefetch(m->port.ctx, ev.block, ev.block_size);
    }
}

/* The first used expert after the group that starts at used expert e
 * (n_experts: none): at most MLP_GROUP_MAX used experts, whose tokens fit
 * the workspace's rows together. The port hears of each of the group's
 * expert blocks. */
static uint32_t group_end(const colibri_model *m, const layer_view *layer, uint32_t e, uint32_t n,
                          const workspace *ws)
{
    uint32_t count = 0, rows = 0;
    while (e < m->hp.n_experts && count < MLP_GROUP_MAX) {
        uint32_t taken = routed_count(m, e, n, ws);
        if (rows + taken > ws->batch) {
            break;
        }
        prefetch_expert(m, layer, e);
        rows += taken;
        count++;
        e = used_from(m, e + 1u, n, ws);
    }
    return e;
}

/* Each expert of a group, in ascending order, added into its tokens' sums
 * (so each token sums its experts in ascending order, as transformers
 * does, whatever the chunk and the grouping). */
static void sum_group(const colibri_model *m, uint32_t rows, workspace *ws)
{
    uint32_t hidden = m->hp.hidden_size;
    for (uint32_t c = 0; c < rows; c++) {
        m->kernels.add_scaled(ws->ffn_sum + (size_t)ws->sel[c] * hidden,
                              ws->ffn_out + (size_t)c * hidden, ws->sel_w[c], hidden);
    }
}

/* Expert e's block from the port (expert_acquire), its matrices rebased
 * onto it; in place without one. 0, or -1 when the port has none to give. */
static int expert_block(const colibri_model *m, const layer_view *layer, uint32_t l, uint32_t e,
                        expert_view *ev)
{
    const void *block;
    colibri_expert_view_load(m, layer, e, ev);
    if (m->port.expert_acquire == NULL) {
        return 0;
    }
    block =
        m->port.expert_acquire(m->port.ctx, l, e, (uint64_t)(ev->block - m->image), ev->block_size);
    if (block == NULL) {
        return -1;
    }
    colibri_expert_view_rebase(ev, (const uint8_t *)block);
    return 0;
}

/* Give the port back the blocks of the used experts [e, end). */
static void release_experts(const colibri_model *m, uint32_t l, uint32_t e, uint32_t end,
                            uint32_t n, const workspace *ws)
{
    for (; m->port.expert_release != NULL && e < end; e = used_from(m, e + 1u, n, ws)) {
        m->port.expert_release(m->port.ctx, l, e);
    }
}

/* The used experts [e, end) as the parts of one group: their blocks, their
 * tokens gathered into consecutive rows. Returns how many parts (rows in
 * *rows), or -1 when an expert's block cannot be had (none is held then). */
static int group_parts(const colibri_model *m, const layer_view *layer, uint32_t l, uint32_t e,
                       uint32_t end, uint32_t n, workspace *ws, mlp_part *parts, uint32_t *rows)
{
    uint32_t first = e;
    int count = 0;
    *rows = 0;
    for (; e < end; e = used_from(m, e + 1u, n, ws)) {
        expert_view ev;
        if (expert_block(m, layer, l, e, &ev) != 0) {
            release_experts(m, l, first, e, n, ws);
            return -1;
        }
        uint32_t taken = gather_tokens(m, e, n, *rows, ws);
        parts[count] = (mlp_part){ev.gate, ev.up, ev.down, {NULL, NULL, NULL}, *rows, taken};
        expert_biases(m, layer, e, &parts[count]);
        count++;
        *rows += taken;
    }
    return count;
}

/* Tell the port which experts the chunk uses (ascending), in ws->sel,
 * which gather_tokens fills only afterwards. */
static void experts_chosen(const colibri_model *m, uint32_t l, uint32_t n, workspace *ws)
{
    uint32_t count = 0;
    if (m->port.experts_chosen == NULL) {
        return;
    }
    for (uint32_t e = used_from(m, 0, n, ws); e < m->hp.n_experts;
         e = used_from(m, e + 1u, n, ws)) {
        ws->sel[count++] = e;
    }
    m->port.experts_chosen(m->port.ctx, l, ws->sel, count);
}

/* The port's router's choice for each of the chunk's n tokens, checked
 * and in the core's order. */
static colibri_status port_routes(const colibri_model *m, uint32_t l, uint32_t n, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    colibri_status status = COLIBRI_OK;
    if (m->port.router(m->port.ctx, l, n, hp->hidden_size, ws->xn, hp->top_k, ws->topk_i,
                       ws->topk_w) != 0) {
        return COLIBRI_E_ROUTER_FAILED;
    }
    for (uint32_t t = 0; t < n && status == COLIBRI_OK; t++) {
        status = colibri_router_accept(hp, ws->topk_i + (size_t)t * hp->top_k,
                                       ws->topk_w + (size_t)t * hp->top_k);
    }
    return status;
}

/* The router's choice for each of the chunk's n tokens: the port's, or
 * the core's own. */
static colibri_status route_tokens(const colibri_model *m, const layer_view *layer, uint32_t l,
                                   uint32_t n, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t width = colibri_router_width(hp);
    if (m->port.router != NULL) {
        return port_routes(m, l, n, ws);
    }
    colibri_linear(m, ws->router, width, layer->router, ws->xn, width, hp->hidden_size, n, ws->xq);
    add_bias(m, ws->router, layer->router_logit_bias, width, n);
    for (uint32_t t = 0; t < n; t++) {
        colibri_router_select(m, ws->router + (size_t)t * width, layer->router_bias,
                              ws->topk_i + (size_t)t * hp->top_k,
                              ws->topk_w + (size_t)t * hp->top_k);
    }
    return COLIBRI_OK;
}

/* The routed experts of layer l: used experts in ascending order, in groups
 * whose tokens fit the workspace together (a decoded token's experts are
 * one group when top_k <= MLP_GROUP_MAX, 2), each group's products run
 * together. The port hears of each group's expert blocks before the group
 * before it computes, so it can fetch them meanwhile; with expert_acquire
 * a group holds its blocks from its parts to its sum. */
static colibri_status routed_experts(const colibri_model *m, const layer_view *layer, uint32_t l,
                                     uint32_t n, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t e, end;
    colibri_status status = route_tokens(m, layer, l, n, ws);
    if (status != COLIBRI_OK) {
        return status;
    }
    experts_chosen(m, l, n, ws);
    memset(ws->ffn_sum, 0, (size_t)n * hp->hidden_size * sizeof(float));
    e = used_from(m, 0, n, ws);
    end = group_end(m, layer, e, n, ws);
    while (e < hp->n_experts) {
        mlp_part parts[MLP_GROUP_MAX];
        uint32_t rows, after = group_end(m, layer, end, n, ws); /* the next group's */
        int count = group_parts(m, layer, l, e, end, n, ws, parts, &rows);
        if (count < 0) {
            return COLIBRI_E_EXPERT_UNAVAILABLE;
        }
        swiglu_mlps(m, parts, (uint32_t)count, hp->expert_intermediate, ws->xg, ws->ffn_out, rows,
                    ws);
        sum_group(m, rows, ws);
        release_experts(m, l, e, end, n, ws);
        e = end;
        end = after;
    }
    return COLIBRI_OK;
}

static void shared_expert(const colibri_model *m, const layer_view *layer, uint32_t n,
                          workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t hidden = hp->hidden_size;
    swiglu_mlp(m, layer->shared_gate, layer->shared_up, layer->shared_down, hp->shared_intermediate,
               ws->xn, ws->ffn_out, n, ws);
    for (uint32_t t = 0; t < n; t++) {
        const float *xn = ws->xn + (size_t)t * hidden;
        float gate = 1.0f;
        if (hp->shared_gate) {
            gate = colibri_reference_sigmoid(
                m->kernels.dot((const float *)layer->shared_expert_gate.data, xn, hidden));
        }
        m->kernels.add_scaled(ws->ffn_sum + (size_t)t * hidden, ws->ffn_out + (size_t)t * hidden,
                              gate, hidden);
    }
}

/* The zero-computation experts (format 1.12) each token picked, after its
 * routed ones and in ascending order as the router sorted them: each adds
 * the token's input times its weight (an identity expert). */
static void zero_experts(const colibri_model *m, uint32_t n, workspace *ws)
{
    const colibri_hparams *hp = &m->hp;
    for (uint32_t t = 0; hp->zero_experts > 0u && t < n; t++) {
        for (uint32_t j = 0; j < hp->top_k; j++) {
            size_t pick = (size_t)t * hp->top_k + j;
            if (ws->topk_i[pick] >= hp->n_experts) {
                m->kernels.add_scaled(ws->ffn_sum + (size_t)t * hp->hidden_size,
                                      ws->xn + (size_t)t * hp->hidden_size, ws->topk_w[pick],
                                      hp->hidden_size);
            }
        }
    }
}

/* The MoE of a layer into ws->ffn_sum: routed experts, zero experts, the
 * bias after their sum (JetMoE), the shared expert. */
static colibri_status moe_forward(const colibri_model *m, const layer_view *layer, uint32_t l,
                                  workspace *ws, uint32_t n)
{
    const colibri_hparams *hp = &m->hp;
    colibri_status status = routed_experts(m, layer, l, n, ws);
    if (status != COLIBRI_OK) {
        return status;
    }
    zero_experts(m, n, ws);
    add_bias(m, ws->ffn_sum, layer->moe_out_bias, hp->hidden_size, n);
    if (hp->shared_intermediate > 0) {
        shared_expert(m, layer, n, ws);
    }
    return COLIBRI_OK;
}

static void dense_ffn(const colibri_model *m, const layer_view *layer, uint32_t n, workspace *ws)
{
    swiglu_mlp(m, layer->dense_gate, layer->dense_up, layer->dense_down, m->hp.dense_intermediate,
               ws->xn, ws->ffn_sum, n, ws);
}

colibri_status colibri_ffn_forward(const colibri_model *m, const layer_view *layer, uint32_t l,
                                   workspace *ws, uint32_t n)
{
    colibri_status status = COLIBRI_OK;
    if (layer->ffn_kind != FFN_DENSE) {
        status = moe_forward(m, layer, l, ws, n);
    }
    if (status == COLIBRI_OK && layer->ffn_kind == FFN_SHORTCUT) {
        memcpy(ws->shortcut, ws->ffn_sum, (size_t)n * m->hp.hidden_size * sizeof(float));
    }
    if (layer->ffn_kind != FFN_MOE) {
        dense_ffn(m, layer, n, ws);
    }
    return status;
}
