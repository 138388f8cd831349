/* state.c - KV state and scratch sizing (docs/core.md), state set-up. */
#include "workspace.h"

#define FLOATS_PER_REGION_STEP 16u

static uint64_t round_floats(uint64_t count)
{
    return (count + FLOATS_PER_REGION_STEP - 1u) / FLOATS_PER_REGION_STEP * FLOATS_PER_REGION_STEP;
}

static uint32_t max3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* The scratch regions in layout order (docs/core.md), in floats. */
enum { WORKSPACE_REGIONS = 22 };
/* One quantized activation block: a float scale and 32 int8 (36 bytes). */
#define ACTIVATION_BLOCK_FLOATS 9u

static void region_floats(const colibri_hparams *hp, uint32_t context, uint32_t batch,
                          uint64_t floats[WORKSPACE_REGIONS])
{
    uint64_t b = batch, h = hp->hidden_size, q = (uint64_t)hp->n_heads * hp->head_dim;
    uint64_t k = (uint64_t)hp->n_kv_heads * hp->head_dim;
    uint64_t m = max3(hp->dense_intermediate, hp->expert_intermediate, hp->shared_intermediate);
    uint64_t e = hp->n_experts > 0 ? colibri_router_width(hp) : 1u;
    uint64_t top = hp->top_k > 0 ? hp->top_k : 1u;
    /* sel: a token number per expert input, or the chunk's experts in use */
    uint64_t used = hp->n_experts < b * top ? hp->n_experts : b * top;
    /* MLA: k holds the latent and RoPE key, v the q LoRA, attn n_heads *
     * v_head_dim; the last region each head's absorbed query and latent sum. */
    int mla = hp->mla == MLA_LATENT;
    uint64_t kv_a = mla ? (uint64_t)hp->kv_lora_rank + hp->rope_dim : 0u;
    uint64_t q_lora = mla ? hp->q_lora_rank : 0u;
    uint64_t out = mla ? (uint64_t)hp->n_heads * hp->v_head_dim : q;
    uint64_t latent = mla ? 2u * (uint64_t)hp->n_heads * hp->kv_lora_rank : 0u;
    /* Mamba2, delta rules (1.14): z, the convolution's in and out, dt, beta */
    uint32_t inner = colibri_ssm_inner(hp);
    uint64_t ssm =
        inner > 0u ? b * (2u * inner + 2u * colibri_conv_channels(hp) + hp->ssm_heads) : 0u;
    uint64_t widest =
        max3(max3(hp->hidden_size, (uint32_t)(q > out ? q : out), (uint32_t)m), inner, 0u);
    uint64_t blocks = hp->quantized ? b * ((widest + COLIBRI_QBLOCK - 1u) / COLIBRI_QBLOCK) *
                                          ACTIVATION_BLOCK_FLOATS
                                    : 0u;
    const uint64_t in_order[WORKSPACE_REGIONS] = {b * h,
                                                  b * h,
                                                  b * h,
                                                  b * h,
                                                  b * q,
                                                  b * (k > kv_a ? k : kv_a),
                                                  b * (k > q_lora ? k : q_lora),
                                                  b * (q > out ? q : out),
                                                  (uint64_t)hp->n_heads * context,
                                                  b * m,
                                                  b * m,
                                                  b * e,
                                                  b * hp->head_dim,
                                                  b * top,
                                                  b * top,
                                                  b * h,
                                                  used > b ? used : b,
                                                  b,
                                                  blocks,
                                                  latent,
                                                  hp->shortcut_layers > 0u ? b * h : 0u,
                                                  ssm};
    for (uint32_t i = 0; i < WORKSPACE_REGIONS; i++) {
        floats[i] = round_floats(in_order[i]);
    }
}

uint64_t colibri_workspace_layout64(const colibri_hparams *hp, uint32_t context, uint32_t batch)
{
    uint64_t floats[WORKSPACE_REGIONS], total = 0;
    region_floats(hp, context, batch, floats);
    for (uint32_t i = 0; i < WORKSPACE_REGIONS; i++) {
        total += floats[i];
    }
    return total * sizeof(float);
}

size_t colibri_workspace_layout(const colibri_hparams *hp, uint32_t context, uint32_t batch,
                                uint8_t *base, workspace *ws)
{
    uint64_t floats[WORKSPACE_REGIONS];
    float *topk_i = NULL, *sel = NULL, *xq = NULL, *latent = NULL;
    size_t used = 0;
    workspace unused;
    if (ws == NULL) {
        ws = &unused;
    }
    float **slots[WORKSPACE_REGIONS] = {
        &ws->x,    &ws->xn,     &ws->ffn_sum,  &ws->ffn_out, &ws->q,  &ws->k,
        &ws->v,    &ws->attn,   &ws->scores,   &ws->h1,      &ws->h2, &ws->router,
        &ws->rope, &ws->topk_w, &topk_i,       &ws->xg,      &sel,    &ws->sel_w,
        &xq,       &latent,     &ws->shortcut, &ws->ssm};
    region_floats(hp, context, batch, floats);
    for (uint32_t i = 0; i < WORKSPACE_REGIONS; i++) {
        *slots[i] = base != NULL ? (float *)(void *)(base + used) : NULL;
        used += (size_t)floats[i] * sizeof(float);
    }
    ws->batch = batch;
    ws->context = context;
    ws->topk_i = (uint32_t *)(void *)topk_i;
    ws->sel = (uint32_t *)(void *)sel;
    ws->xq = xq;
    ws->latent = latent;
    return used;
}

uint32_t colibri_workspace_batch(const colibri_hparams *hp, uint32_t context, uint64_t bytes)
{
    uint32_t lo = 0, hi = COLIBRI_MAX_BATCH; /* layout(lo) fits (or lo = 0), layout(hi+1) not */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1u) / 2u;
        if (colibri_workspace_layout64(hp, context, mid) <= bytes) {
            lo = mid;
        } else {
            hi = mid - 1u;
        }
    }
    return lo;
}

static int context_valid(const colibri_model *model, uint32_t max_context)
{
    return model != NULL && model->image != NULL && max_context > 0 &&
           max_context <= model->hp.max_context;
}

/* 0 when the byte count does not fit in size_t (a 32-bit target asked for a
 * context it could never hold), so a caller can never get a short buffer. */
static size_t fit_size(uint64_t bytes)
{
    return bytes <= (uint64_t)SIZE_MAX ? (size_t)bytes : 0u;
}

/* Floats of one position of one layer in the KV cache: its K and V rows
 * (float32 or int8), or with MLA its latent and RoPE key. */
static uint64_t cache_floats(const colibri_hparams *hp)
{
    if (hp->mla == MLA_LATENT) {
        return (uint64_t)hp->kv_lora_rank + hp->rope_dim;
    }
    return 2u * (uint64_t)colibri_kv_row_floats(hp);
}

/* Floats of the KV cache, then of the recurrent layers' two copies of
 * their rows (format 1.13). <= 1024 * 2^24 * 2^21: fits in 64 bits; the
 * rows <= 2 * 1024 * (63 * 3 * 2^20 + 2^30). */
static uint64_t kv_floats(const colibri_hparams *hp, uint32_t max_context)
{
    return (uint64_t)hp->kv_layers * max_context * cache_floats(hp);
}

static uint64_t conv_floats(const colibri_hparams *hp)
{
    return 2u * (uint64_t)hp->conv_layers * colibri_recurrent_floats(hp);
}

size_t colibri_state_size(const colibri_model *model, uint32_t max_context)
{
    if (!context_valid(model, max_context)) {
        return 0;
    }
    return fit_size((kv_floats(&model->hp, max_context) + conv_floats(&model->hp)) * sizeof(float));
}

size_t colibri_scratch_size_batch(const colibri_model *model, uint32_t max_context,
                                  uint32_t max_batch)
{
    if (!context_valid(model, max_context) || max_batch == 0 || max_batch > COLIBRI_MAX_BATCH) {
        return 0;
    }
    return fit_size(colibri_workspace_layout64(&model->hp, max_context, max_batch));
}

size_t colibri_scratch_size(const colibri_model *model, uint32_t max_context)
{
    return colibri_scratch_size_batch(model, max_context, 1u);
}

colibri_status colibri_state_init(colibri_state *state, const colibri_model *model, void *mem,
                                  size_t mem_size, uint32_t max_context)
{
    size_t need = colibri_state_size(model, max_context);
    if (state == NULL || mem == NULL || need == 0) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (((uintptr_t)mem & 15u) != 0) {
        return COLIBRI_E_MISALIGNED;
    }
    if (mem_size < need) {
        return COLIBRI_E_WORKSPACE_TOO_SMALL;
    }
    size_t kv = (size_t)kv_floats(&model->hp, max_context);
    state->k_cache = (float *)mem;
    state->v_cache = model->hp.mla == MLA_LATENT ? NULL : state->k_cache + kv / 2u;
    state->conv_state = model->hp.conv_layers > 0u ? state->k_cache + kv : NULL;
    state->max_context = max_context;
    state->pos = 0;
    state->fingerprint = model->fingerprint;
    state->conv_copy = 0;
    return COLIBRI_OK;
}

void colibri_state_reset(colibri_state *state)
{
    if (state != NULL) {
        state->pos = 0;
    }
}
