/*
 * tensor_table.c - the layer table and the tensor table: check them against
 * the model record once at init (docs/format.md 2, 3), then resolve a
 * layer's weight pointers from them for the forward pass.
 */
#include "model_internal.h"

/* What the next table entry must be. */
typedef struct expected_tensor {
    uint16_t role;
    uint16_t layer;
    uint16_t expert;
    uint32_t ndim;
    uint32_t rows;
    uint32_t cols; /* 0 for vectors */
} expected_tensor;

/* Walk state of the check. */
typedef struct table_walk {
    const colibri_model *m;
    uint32_t index;     /* next entry to check */
    uint64_t data_end;  /* end of the previous tensor's data */
} table_walk;

static uint32_t global_tensor_count(const colibri_hparams *hp)
{
    return hp->tie_embeddings ? 2u : 3u;
}

static uint32_t bit_count(uint32_t bits)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < 4; i++) {
        count += (bits >> i) & 1u;
    }
    return count;
}

static uint32_t attention_tensor_count(const colibri_hparams *hp)
{
    return 6u + bit_count(hp->attn_bias) + (hp->qk_norm != QK_NORM_NONE ? 2u : 0u);
}

static uint32_t moe_shared_count(const colibri_hparams *hp)
{
    return hp->shared_intermediate > 0 ? 3u + hp->shared_gate : 0u;
}

uint32_t colibri_layer_tensor_count(const colibri_hparams *hp, uint32_t ffn_kind)
{
    uint32_t count = attention_tensor_count(hp);
    if (ffn_kind == FFN_DENSE) {
        return count + 3u;
    }
    return count + 1u + moe_shared_count(hp) + EXPERT_TENSORS * hp->n_experts;
}

/* ---- layer table --------------------------------------------------------- */

static int layer_kind_supported(const colibri_hparams *hp, uint32_t kind)
{
    if (kind == FFN_DENSE) {
        return hp->dense_intermediate > 0;
    }
    return kind == FFN_MOE && hp->n_experts > 0 && hp->top_k > 0 && hp->expert_intermediate > 0;
}

/* Widths of a layer kind no layer uses must be 0 (docs/format.md 1.1). */
static int unused_widths_zero(const colibri_hparams *hp, int any_dense, int any_moe)
{
    int dense_ok = any_dense || hp->dense_intermediate == 0;
    int moe_ok = any_moe || (hp->n_experts == 0 && hp->top_k == 0 && hp->expert_intermediate == 0);
    return dense_ok && moe_ok;
}

colibri_status colibri_layer_table_check(const colibri_model *m)
{
    uint32_t next = global_tensor_count(&m->hp);
    int any_dense = 0, any_moe = 0;
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const uint8_t *e = m->layer_table + (size_t)l * IMG_LAYER_ENTRY_SIZE;
        uint32_t kind = colibri_rd_u32(e + LAY_FFN_KIND);
        uint32_t count = colibri_layer_tensor_count(&m->hp, kind);
        if (kind > FFN_MOE || colibri_rd_u32(e + LAY_FIRST_TENSOR) != next ||
            colibri_rd_u32(e + LAY_N_TENSORS) != count) {
            return COLIBRI_E_BAD_LAYER_TABLE;
        }
        if (!layer_kind_supported(&m->hp, kind)) {
            return COLIBRI_E_BAD_HYPERPARAMS;
        }
        next += count;
        any_dense |= kind == FFN_DENSE;
        any_moe |= kind == FFN_MOE;
    }
    if (next != m->n_tensors) {
        return COLIBRI_E_BAD_LAYER_TABLE;
    }
    return unused_widths_zero(&m->hp, any_dense, any_moe) ? COLIBRI_OK : COLIBRI_E_BAD_HYPERPARAMS;
}

/* ---- tensor table ---------------------------------------------------------- */

static int identity_matches(const uint8_t *e, const expected_tensor *want)
{
    return colibri_rd_u16(e + TEN_ROLE) == want->role &&
           colibri_rd_u16(e + TEN_LAYER) == want->layer &&
           colibri_rd_u16(e + TEN_EXPERT) == want->expert;
}

static int shape_matches(const uint8_t *e, const expected_tensor *want, uint64_t size)
{
    uint64_t elements = (uint64_t)want->rows * (want->cols ? want->cols : 1u);
    return colibri_rd_u32(e + TEN_NDIM) == want->ndim &&
           colibri_rd_u32(e + TEN_SHAPE) == want->rows &&
           colibri_rd_u32(e + TEN_SHAPE + 4) == want->cols &&
           colibri_rd_u32(e + TEN_SHAPE + 8) == 0 && colibri_rd_u32(e + TEN_SHAPE + 12) == 0 &&
           size == elements * sizeof(float);
}

static colibri_status check_placement(table_walk *w, const uint8_t *e, uint16_t role)
{
    uint64_t offset = colibri_rd_u64(e + TEN_OFFSET);
    uint64_t size = colibri_rd_u64(e + TEN_SIZE);
    uint64_t align = role == ROLE_EXPERT_GATE ? w->m->hp.alignment : IMG_DATA_ALIGN;
    if (size > w->m->image_size || offset > w->m->image_size - size) {
        return COLIBRI_E_OUT_OF_RANGE;
    }
    if ((offset & (align - 1u)) != 0) { /* align is a power of two */
        return COLIBRI_E_MISALIGNED;
    }
    if (offset < w->data_end) {
        return COLIBRI_E_OVERLAP;
    }
    /* Up and down follow their gate back to back (one expert = one block). */
    if ((role == ROLE_EXPERT_UP || role == ROLE_EXPERT_DOWN) &&
        offset != ((w->data_end + IMG_DATA_ALIGN - 1u) & ~(uint64_t)(IMG_DATA_ALIGN - 1u))) {
        return COLIBRI_E_MISALIGNED;
    }
    w->data_end = offset + size;
    return COLIBRI_OK;
}

static colibri_status expect(table_walk *w, const expected_tensor *want)
{
    const uint8_t *e;
    colibri_status status;
    if (w->index >= w->m->n_tensors) {
        return COLIBRI_E_BAD_TENSOR_TABLE;
    }
    e = tensor_entry(w->m, w->index);
    if (!identity_matches(e, want)) {
        return COLIBRI_E_BAD_TENSOR_TABLE;
    }
    if (colibri_rd_u16(e + TEN_DTYPE) != DTYPE_F32) {
        return COLIBRI_E_UNSUPPORTED_DTYPE;
    }
    status = check_placement(w, e, want->role);
    if (status != COLIBRI_OK) {
        return status;
    }
    if (!shape_matches(e, want, colibri_rd_u64(e + TEN_SIZE))) {
        return COLIBRI_E_BAD_SHAPE;
    }
    w->index++;
    return COLIBRI_OK;
}

static colibri_status expect_matrix(table_walk *w, uint16_t role, uint32_t layer, uint32_t expert,
                                    uint32_t rows, uint32_t cols)
{
    expected_tensor want = {role, (uint16_t)layer, (uint16_t)expert, 2u, rows, cols};
    return expect(w, &want);
}

static colibri_status expect_vector(table_walk *w, uint16_t role, uint32_t layer, uint32_t rows)
{
    expected_tensor want = {role, (uint16_t)layer, IMG_NONE, 1u, rows, 0u};
    return expect(w, &want);
}

/* A chain of expectations stops at the first failure. */
#define EXPECT(call)                                                           \
    do {                                                                       \
        colibri_status s_ = (call);                                            \
        if (s_ != COLIBRI_OK) {                                                \
            return s_;                                                         \
        }                                                                      \
    } while (0)

static colibri_status expect_globals(table_walk *w)
{
    const colibri_hparams *hp = &w->m->hp;
    EXPECT(expect_matrix(w, ROLE_TOKEN_EMBED, IMG_NONE, IMG_NONE, hp->vocab_size, hp->hidden_size));
    EXPECT(expect_vector(w, ROLE_OUTPUT_NORM, IMG_NONE, hp->hidden_size));
    if (!hp->tie_embeddings) {
        EXPECT(expect_matrix(w, ROLE_LM_HEAD, IMG_NONE, IMG_NONE, hp->vocab_size, hp->hidden_size));
    }
    return COLIBRI_OK;
}

static colibri_status expect_attention(table_walk *w, uint32_t l)
{
    const colibri_hparams *hp = &w->m->hp;
    uint32_t h = hp->hidden_size, q = hp->n_heads * hp->head_dim, k = hp->n_kv_heads * hp->head_dim;
    int whole = hp->qk_norm == QK_NORM_WHOLE;
    EXPECT(expect_vector(w, ROLE_ATTN_NORM, l, h));
    EXPECT(expect_matrix(w, ROLE_ATTN_Q, l, IMG_NONE, q, h));
    EXPECT(expect_matrix(w, ROLE_ATTN_K, l, IMG_NONE, k, h));
    EXPECT(expect_matrix(w, ROLE_ATTN_V, l, IMG_NONE, k, h));
    EXPECT(expect_matrix(w, ROLE_ATTN_O, l, IMG_NONE, h, q));
    if (hp->attn_bias & BIAS_Q) EXPECT(expect_vector(w, ROLE_ATTN_Q_BIAS, l, q));
    if (hp->attn_bias & BIAS_K) EXPECT(expect_vector(w, ROLE_ATTN_K_BIAS, l, k));
    if (hp->attn_bias & BIAS_V) EXPECT(expect_vector(w, ROLE_ATTN_V_BIAS, l, k));
    if (hp->attn_bias & BIAS_O) EXPECT(expect_vector(w, ROLE_ATTN_O_BIAS, l, h));
    if (hp->qk_norm != QK_NORM_NONE) {
        EXPECT(expect_vector(w, ROLE_ATTN_Q_NORM, l, whole ? q : hp->head_dim));
        EXPECT(expect_vector(w, ROLE_ATTN_K_NORM, l, whole ? k : hp->head_dim));
    }
    return expect_vector(w, ROLE_FFN_NORM, l, h);
}

static colibri_status expect_dense(table_walk *w, uint32_t l)
{
    uint32_t h = w->m->hp.hidden_size, d = w->m->hp.dense_intermediate;
    EXPECT(expect_matrix(w, ROLE_DENSE_GATE, l, IMG_NONE, d, h));
    EXPECT(expect_matrix(w, ROLE_DENSE_UP, l, IMG_NONE, d, h));
    return expect_matrix(w, ROLE_DENSE_DOWN, l, IMG_NONE, h, d);
}

static colibri_status expect_moe(table_walk *w, uint32_t l)
{
    const colibri_hparams *hp = &w->m->hp;
    uint32_t h = hp->hidden_size, s = hp->shared_intermediate, i = hp->expert_intermediate;
    EXPECT(expect_matrix(w, ROLE_ROUTER, l, IMG_NONE, hp->n_experts, h));
    if (s > 0) {
        EXPECT(expect_matrix(w, ROLE_SHARED_GATE, l, IMG_NONE, s, h));
        EXPECT(expect_matrix(w, ROLE_SHARED_UP, l, IMG_NONE, s, h));
        EXPECT(expect_matrix(w, ROLE_SHARED_DOWN, l, IMG_NONE, h, s));
        if (hp->shared_gate) EXPECT(expect_matrix(w, ROLE_SHARED_EXPERT_GATE, l, IMG_NONE, 1, h));
    }
    for (uint32_t e = 0; e < hp->n_experts; e++) {
        EXPECT(expect_matrix(w, ROLE_EXPERT_GATE, l, e, i, h));
        EXPECT(expect_matrix(w, ROLE_EXPERT_UP, l, e, i, h));
        EXPECT(expect_matrix(w, ROLE_EXPERT_DOWN, l, e, h, i));
    }
    return COLIBRI_OK;
}

colibri_status colibri_tensor_table_check(const colibri_model *m)
{
    table_walk w = {m, 0, 0};
    w.data_end = colibri_rd_u64(m->image + HDR_TENSOR_TABLE) +
                 (uint64_t)m->n_tensors * IMG_TENSOR_ENTRY_SIZE;
    EXPECT(expect_globals(&w));
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        uint32_t kind = colibri_rd_u32(m->layer_table + (size_t)l * IMG_LAYER_ENTRY_SIZE);
        EXPECT(expect_attention(&w, l));
        EXPECT(kind == FFN_DENSE ? expect_dense(&w, l) : expect_moe(&w, l));
    }
    return w.index == m->n_tensors ? COLIBRI_OK : COLIBRI_E_BAD_TENSOR_TABLE;
}

/* ---- views for the forward pass --------------------------------------------- */

static const float **view_slot(layer_view *v, uint16_t role)
{
    switch (role) {
    case ROLE_ATTN_NORM: return &v->attn_norm;
    case ROLE_ATTN_Q: return &v->wq;
    case ROLE_ATTN_K: return &v->wk;
    case ROLE_ATTN_V: return &v->wv;
    case ROLE_ATTN_O: return &v->wo;
    case ROLE_ATTN_Q_BIAS: return &v->bq;
    case ROLE_ATTN_K_BIAS: return &v->bk;
    case ROLE_ATTN_V_BIAS: return &v->bv;
    case ROLE_ATTN_O_BIAS: return &v->bo;
    case ROLE_ATTN_Q_NORM: return &v->q_norm;
    case ROLE_ATTN_K_NORM: return &v->k_norm;
    case ROLE_FFN_NORM: return &v->ffn_norm;
    case ROLE_DENSE_GATE: return &v->dense_gate;
    case ROLE_DENSE_UP: return &v->dense_up;
    case ROLE_DENSE_DOWN: return &v->dense_down;
    case ROLE_ROUTER: return &v->router;
    case ROLE_SHARED_GATE: return &v->shared_gate;
    case ROLE_SHARED_UP: return &v->shared_up;
    case ROLE_SHARED_DOWN: return &v->shared_down;
    case ROLE_SHARED_EXPERT_GATE: return &v->shared_expert_gate;
    default: return NULL;
    }
}

void colibri_layer_view_load(const colibri_model *m, uint32_t layer, layer_view *view)
{
    const uint8_t *entry = m->layer_table + (size_t)layer * IMG_LAYER_ENTRY_SIZE;
    uint32_t first = colibri_rd_u32(entry + LAY_FIRST_TENSOR);
    uint32_t own = colibri_layer_tensor_count(&m->hp, FFN_DENSE);
    memset(view, 0, sizeof *view);
    view->ffn_kind = colibri_rd_u32(entry + LAY_FFN_KIND);
    if (view->ffn_kind == FFN_MOE) {
        own = attention_tensor_count(&m->hp) + 1u + moe_shared_count(&m->hp);
    }
    for (uint32_t i = first; i < first + own; i++) {
        const float **slot = view_slot(view, colibri_rd_u16(tensor_entry(m, i) + TEN_ROLE));
        if (slot != NULL) {
            *slot = tensor_data(m, i);
        }
    }
    view->first_expert = first + own;
}

void colibri_expert_view_load(const colibri_model *m, const layer_view *layer, uint32_t expert,
                      expert_view *view)
{
    uint32_t gate = layer->first_expert + expert * EXPERT_TENSORS;
    const uint8_t *down = tensor_entry(m, gate + 2u);
    view->gate = tensor_data(m, gate);
    view->up = tensor_data(m, gate + 1u);
    view->down = tensor_data(m, gate + 2u);
    view->block = (const uint8_t *)(const void *)view->gate;
    view->block_size = (size_t)(colibri_rd_u64(down + TEN_OFFSET) + colibri_rd_u64(down + TEN_SIZE) -
                                colibri_rd_u64(tensor_entry(m, gate) + TEN_OFFSET));
}
