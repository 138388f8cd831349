/*
 * tensor_check.c - the layer table and the tensor table, checked against the
 * model record once at init (docs/format.md 2, 3): every entry is the one
 * the layer description (layer_tensors.c) says comes next.
 */
#include "layer_tensors.h"

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
    uint32_t index;        /* next entry to check */
    uint64_t data_end;     /* end of the previous tensor's data (1.9 EXPERTS_LAST: of the
                            * previous tensor that is not an expert's) */
    uint64_t expert_end;   /* EXPERTS_LAST: end of the previous expert tensor's data */
    uint64_t first_expert; /* EXPERTS_LAST: where the first expert block starts */
    int experts_last;
    uint32_t quantized; /* 1 once a Q8 or Q4 tensor was seen */
} table_walk;

static uint32_t global_tensor_count(const colibri_hparams *hp)
{
    return (hp->tie_embeddings ? 2u : 3u) + (hp->norm_kind == NORM_LAYER) +
           ((hp->attn_bias & BIAS_LM_HEAD) != 0);
}

uint32_t colibri_layer_tensor_count(const colibri_hparams *hp, uint32_t ffn_kind,
                                    uint32_t attn_kind)
{
    uint32_t count = 0, part = colibri_operator_part(attn_kind);
    for (uint32_t i = 0; i < colibri_layer_tensors_count; i++) {
        const colibri_tensor_desc *d = &colibri_layer_tensors[i];
        count += colibri_tensor_in_layer(hp, d, part, ffn_kind);
    }
    if (ffn_kind == FFN_DENSE || ffn_kind == FFN_SHORTCUT) {
        count += colibri_part_tensor_count(hp, PART_DENSE);
    }
    if (ffn_kind != FFN_MOE && ffn_kind != FFN_SHORTCUT) {
        return count;
    }
    return count + colibri_part_tensor_count(hp, PART_MOE) +
           hp->n_experts * colibri_part_tensor_count(hp, PART_EXPERT);
}

/* ---- layer table --------------------------------------------------------- */

static int layer_kind_supported(const colibri_hparams *hp, uint32_t kind)
{
    int dense = hp->dense_intermediate > 0;
    int moe = hp->n_experts > 0 && hp->top_k > 0 && hp->expert_intermediate > 0;
    return kind == FFN_NONE ? 1 : kind == FFN_DENSE ? dense : kind == FFN_MOE ? moe : dense && moe;
}

/* A shortcut layer's MoE output waits for the next layer, a dense one
 * (format 1.12): the last layer is never one, nor two in a row. */
static int shortcut_placed(const colibri_model *m, uint32_t l, uint32_t kind)
{
    const uint8_t *next = m->layer_table + (size_t)(l + 1u) * IMG_LAYER_ENTRY_SIZE;
    return kind != FFN_SHORTCUT ||
           (l + 1u < m->hp.n_layers && colibri_rd_u32(next + LAY_FFN_KIND) == FFN_DENSE);
}

/* Widths of a layer kind no layer uses must be 0 (docs/format.md 1.1). */
/* A width no layer uses is 0 (the conv_kernel of a model without short
 * convolution layers too). */
static int unused_widths_zero(const colibri_hparams *hp, int any_dense, int any_moe)
{
    int dense_ok = any_dense || hp->dense_intermediate == 0;
    int moe_ok = any_moe || (hp->n_experts == 0 && hp->top_k == 0 && hp->expert_intermediate == 0);
    return dense_ok && moe_ok &&
           (hp->conv_layers > 0u || (hp->conv_kernel == 0u && hp->ssm_heads == 0u));
}

/* A layer's attn_kind (docs/format.md 2): sliding (1) and chunked (3, 1.11)
 * need a window, a short convolution (4, 1.13) its taps and no Mamba2
 * fields (a model's recurrent layers hold rows of one size), a Mamba2 mixer
 * (5, 1.14), a gated delta layer (6) or a KDA layer (7) its taps and heads,
 * a Mamba1 layer (8) those and a dt rank (which the others lack);
 * an MLA model's other layers are full attention, with or without RoPE. */
static int attn_kind_valid(const colibri_hparams *hp, uint32_t attn)
{
    int windowed = attn == ATTN_SLIDING || attn == ATTN_CHUNKED;
    int ssm = attn >= ATTN_MAMBA2 && attn <= ATTN_MAMBA1;
    return attn <= ATTN_NONE && !(windowed && hp->sliding_window == 0u) &&
           !(ssm && (attn == ATTN_MAMBA1) != (hp->ssm_dt_rank > 0u)) &&
           !(colibri_recurrent_kind(attn) && hp->conv_kernel == 0u) &&
           !(attn == ATTN_CONV && hp->ssm_heads != 0u) && !(ssm && hp->ssm_heads == 0u) &&
           (hp->mla != MLA_LATENT || attn == ATTN_FULL || attn == ATTN_FULL_NOPE ||
            attn == ATTN_NONE || colibri_recurrent_kind(attn));
}

colibri_status colibri_layer_table_check(colibri_model *m)
{
    uint32_t next = global_tensor_count(&m->hp);
    int any_dense = 0, any_moe = 0;
    uint32_t none = 0; /* layers without an operator (1.14): no KV cache either */
    m->hp.shortcut_layers = m->hp.conv_layers = 0;
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const uint8_t *e = m->layer_table + (size_t)l * IMG_LAYER_ENTRY_SIZE;
        uint32_t kind = colibri_rd_u32(e + LAY_FFN_KIND);
        uint32_t attn = colibri_rd_u32(e + LAY_ATTN_KIND);
        uint32_t count = colibri_layer_tensor_count(&m->hp, kind, attn);
        if (kind > FFN_NONE || colibri_rd_u32(e + LAY_FIRST_TENSOR) != next ||
            colibri_rd_u32(e + LAY_N_TENSORS) != count || !attn_kind_valid(&m->hp, attn) ||
            !shortcut_placed(m, l, kind)) {
            return COLIBRI_E_BAD_LAYER_TABLE;
        }
        if (!layer_kind_supported(&m->hp, kind)) {
            return COLIBRI_E_BAD_HYPERPARAMS;
        }
        next += count;
        any_dense |= kind == FFN_DENSE || kind == FFN_SHORTCUT;
        any_moe |= kind == FFN_MOE || kind == FFN_SHORTCUT;
        m->hp.shortcut_layers += kind == FFN_SHORTCUT;
        m->hp.conv_layers += colibri_recurrent_kind(attn);
        none += attn == ATTN_NONE;
    }
    m->hp.kv_layers = m->hp.n_layers - m->hp.conv_layers - none;
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

static int shape_matches(const uint8_t *e, const expected_tensor *want)
{
    return colibri_rd_u32(e + TEN_NDIM) == want->ndim &&
           colibri_rd_u32(e + TEN_SHAPE) == want->rows &&
           colibri_rd_u32(e + TEN_SHAPE + 4) == want->cols &&
           colibri_rd_u32(e + TEN_SHAPE + 8) == 0 && colibri_rd_u32(e + TEN_SHAPE + 12) == 0;
}

/* Roles whose matrix may be stored Q8 or Q4 (docs/format.md 3.3): the
 * embedding, the output projection, the attention projections (and the
 * output gate, format 1.11) and the
 * feed-forward matrices. Routers, norms, biases and the shared-expert gate
 * stay float32. */
static int role_quantizable(uint16_t role)
{
    return role == ROLE_TOKEN_EMBED || role == ROLE_LM_HEAD ||
           (role >= ROLE_ATTN_Q && role <= ROLE_ATTN_O) || role == ROLE_ATTN_GATE ||
           (role >= ROLE_DENSE_GATE && role <= ROLE_DENSE_DOWN) ||
           (role >= ROLE_SHARED_GATE && role <= ROLE_SHARED_DOWN) ||
           (role >= ROLE_EXPERT_GATE && role <= ROLE_EXPERT_DOWN) ||
           (role >= ROLE_CONV_IN_B && role <= ROLE_CONV_OUT && role != ROLE_CONV_KERNEL) ||
           (role >= ROLE_SSM_IN_Z && role <= ROLE_SSM_IN_DT) || role == ROLE_SSM_OUT ||
           (role >= ROLE_SSM_IN_BETA && role <= ROLE_KDA_G_B) || role == ROLE_MAMBA1_X_PROJ ||
           role == ROLE_MAMBA1_DT_PROJ;
}

/* The attention experts' stacked q and o matrices (format 1.11) stay
 * float32: one expert's rows are read at their offset. */
static int float_only(const colibri_hparams *hp, uint16_t role)
{
    return (hp->attn_bias & BIAS_ATTN_EXPERTS) != 0u &&
           (role == ROLE_ATTN_Q || role == ROLE_ATTN_O);
}

/* Rows in groups of 16 (1.8) and super-blocks (1.15) only where the rows go
 * through a product: not the token embedding, whose rows are read one by one. */
static int dtype_allowed(uint16_t role, uint32_t dtype)
{
    int in_products = dtype_row_groups(dtype) || dtype_superblocks(dtype);
    return dtype == DTYPE_F32 ||
           ((dtype == DTYPE_Q8 || dtype == DTYPE_Q4) && role_quantizable(role)) ||
           (in_products && role_quantizable(role) && role != ROLE_TOKEN_EMBED);
}

/* The size a tensor's dtype and shape give (sections 3.3 .. 3.5): float32
 * elements, or rows of blocks (of 32, or super-blocks of 256), whole groups
 * of 16 rows for the R16 dtypes (block fields checked first). */
static colibri_status size_matches(const uint8_t *e, const expected_tensor *want, uint32_t dtype)
{
    uint64_t size = colibri_rd_u64(e + TEN_SIZE), rows = want->rows;
    uint32_t per_block = dtype_block_weights(dtype);
    uint32_t row_blocks = (want->cols + per_block - 1u) / per_block;
    uint64_t block_bytes = dtype_block_bytes(dtype);
    if (dtype_row_groups(dtype)) {
        rows = (rows + COLIBRI_QGROUP_ROWS - 1u) / COLIBRI_QGROUP_ROWS * COLIBRI_QGROUP_ROWS;
    }
    if (dtype == DTYPE_F32) {
        uint64_t elements = rows * (want->cols ? want->cols : 1u);
        return size == elements * sizeof(float) ? COLIBRI_OK : COLIBRI_E_BAD_SHAPE;
    }
    if (colibri_rd_u32(e + TEN_BLOCK) != per_block ||
        colibri_rd_u32(e + TEN_ROW_BLOCKS) != row_blocks) {
        return COLIBRI_E_QUANT_BLOCKS;
    }
    return size == rows * row_blocks * block_bytes ? COLIBRI_OK : COLIBRI_E_QUANT_SIZE;
}

static int role_is_expert(uint16_t role)
{
    return role >= ROLE_EXPERT_GATE && role <= ROLE_EXPERT_DOWN;
}

static colibri_status check_placement(table_walk *w, const uint8_t *e, uint16_t role)
{
    uint64_t offset = colibri_rd_u64(e + TEN_OFFSET);
    uint64_t size = colibri_rd_u64(e + TEN_SIZE);
    int gated = w->m->hp.activation != ACT_RELU2; /* 1.14: no gate, the block starts at up */
    int first = role == (gated ? ROLE_EXPERT_GATE : ROLE_EXPERT_UP);
    uint64_t align = first ? w->m->hp.alignment : IMG_DATA_ALIGN;
    int expert = role_is_expert(role);
    uint64_t *end = w->experts_last && expert ? &w->expert_end : &w->data_end;
    if (size > w->m->image_size || offset > w->m->image_size - size) {
        return COLIBRI_E_OUT_OF_RANGE;
    }
    if (!expert && offset + size > w->m->resident_size) {
        return COLIBRI_E_TRUNCATED; /* a prefix buffer must hold all but the experts */
    }
    if ((offset & (align - 1u)) != 0) { /* align is a power of two */
        return COLIBRI_E_MISALIGNED;
    }
    if (offset < *end) {
        return COLIBRI_E_OVERLAP;
    }
    /* Up and down follow their gate back to back (one expert = one block). */
    if ((role == ROLE_EXPERT_UP || role == ROLE_EXPERT_DOWN) && !first &&
        offset != ((*end + IMG_DATA_ALIGN - 1u) & ~(uint64_t)(IMG_DATA_ALIGN - 1u))) {
        return COLIBRI_E_MISALIGNED;
    }
    if (expert && w->first_expert > offset) {
        w->first_expert = offset;
    }
    *end = offset + size;
    return COLIBRI_OK;
}

static colibri_status expect(table_walk *w, const expected_tensor *want)
{
    const uint8_t *e;
    colibri_status status;
    uint32_t dtype;
    if (w->index >= w->m->n_tensors) {
        return COLIBRI_E_BAD_TENSOR_TABLE;
    }
    e = tensor_entry(w->m, w->index);
    if (!identity_matches(e, want)) {
        return COLIBRI_E_BAD_TENSOR_TABLE;
    }
    if (colibri_rd_u64(e + TEN_RESERVED) != 0) {
        return COLIBRI_E_RESERVED; /* a later format feature (docs/format.md 7) */
    }
    dtype = colibri_rd_u16(e + TEN_DTYPE);
    if (!dtype_allowed(want->role, dtype) ||
        (float_only(&w->m->hp, want->role) && dtype != DTYPE_F32)) {
        return COLIBRI_E_UNSUPPORTED_DTYPE;
    }
    status = check_placement(w, e, want->role);
    if (status != COLIBRI_OK) {
        return status;
    }
    if (!shape_matches(e, want)) {
        return COLIBRI_E_BAD_SHAPE;
    }
    status = size_matches(e, want, dtype);
    if (status != COLIBRI_OK) {
        return status;
    }
    w->quantized |= dtype != DTYPE_F32;
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
#define EXPECT(call)                                                                               \
    do {                                                                                           \
        colibri_status s_ = (call);                                                                \
        if (s_ != COLIBRI_OK) {                                                                    \
            return s_;                                                                             \
        }                                                                                          \
    } while (0)

static colibri_status expect_globals(table_walk *w)
{
    const colibri_hparams *hp = &w->m->hp;
    EXPECT(expect_matrix(w, ROLE_TOKEN_EMBED, IMG_NONE, IMG_NONE, hp->vocab_size, hp->hidden_size));
    EXPECT(expect_vector(w, ROLE_OUTPUT_NORM, IMG_NONE, hp->hidden_size));
    if (!hp->tie_embeddings) {
        EXPECT(expect_matrix(w, ROLE_LM_HEAD, IMG_NONE, IMG_NONE, hp->vocab_size, hp->hidden_size));
    }
    if (hp->norm_kind == NORM_LAYER) {
        EXPECT(expect_vector(w, ROLE_OUTPUT_NORM_BIAS, IMG_NONE, hp->hidden_size));
    }
    if ((hp->attn_bias & BIAS_LM_HEAD) != 0) {
        EXPECT(expect_vector(w, ROLE_LM_HEAD_BIAS, IMG_NONE, hp->vocab_size));
    }
    return COLIBRI_OK;
}

/* Every present tensor of one part of layer l (of expert e, or IMG_NONE),
 * a layer of ffn_kind `kind`. */
static colibri_status expect_part(table_walk *w, uint32_t l, uint32_t part, uint32_t e,
                                  uint32_t kind)
{
    const colibri_hparams *hp = &w->m->hp;
    for (uint32_t i = 0; i < colibri_layer_tensors_count; i++) {
        const colibri_tensor_desc *d = &colibri_layer_tensors[i];
        if (colibri_tensor_in_layer(hp, d, part, kind)) {
            expected_tensor want = {d->role,
                                    (uint16_t)l,
                                    (uint16_t)e,
                                    d->cols == DIM_NONE ? 1u : 2u,
                                    colibri_tensor_dim(hp, d->rows),
                                    colibri_tensor_dim(hp, d->cols)};
            EXPECT(expect(w, &want));
        }
    }
    return COLIBRI_OK;
}

static colibri_status expect_layer(table_walk *w, uint32_t l, uint32_t kind, uint32_t attn)
{
    EXPECT(expect_part(w, l, colibri_operator_part(attn), IMG_NONE, kind));
    if (kind == FFN_DENSE || kind == FFN_SHORTCUT) {
        EXPECT(expect_part(w, l, PART_DENSE, IMG_NONE, kind));
    }
    if (kind != FFN_MOE && kind != FFN_SHORTCUT) {
        return COLIBRI_OK;
    }
    EXPECT(expect_part(w, l, PART_MOE, IMG_NONE, kind));
    for (uint32_t e = 0; e < w->m->hp.n_experts; e++) {
        EXPECT(expect_part(w, l, PART_EXPERT, e, kind));
    }
    return COLIBRI_OK;
}

colibri_status colibri_tensor_table_check(const colibri_model *m, uint32_t *quantized)
{
    table_walk w = {m, 0, 0, 0, UINT64_MAX, 0, 0};
    w.data_end = colibri_rd_u64(m->image + HDR_TENSOR_TABLE) +
                 (uint64_t)m->n_tensors * IMG_TENSOR_ENTRY_SIZE;
    w.expert_end = w.data_end;
    w.experts_last = (colibri_rd_u32(m->image + HDR_FLAGS) & HDR_FLAG_EXPERTS_LAST) != 0;
    EXPECT(expect_globals(&w));
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const uint8_t *e = m->layer_table + (size_t)l * IMG_LAYER_ENTRY_SIZE;
        EXPECT(expect_layer(&w, l, colibri_rd_u32(e + LAY_FFN_KIND),
                            colibri_rd_u32(e + LAY_ATTN_KIND)));
    }
    *quantized = w.quantized;
    if (w.index != m->n_tensors) {
        return COLIBRI_E_BAD_TENSOR_TABLE;
    }
    /* EXPERTS_LAST: the experts' data after all the rest (docs/format.md 3.2) */
    return w.experts_last && w.first_expert < w.data_end ? COLIBRI_E_OVERLAP : COLIBRI_OK;
}
