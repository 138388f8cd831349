/*
 * model_internal.h - what the core's files share about a validated model:
 * table access and the per-layer view used by the forward pass.
 */
#ifndef COLIBRI_MODEL_INTERNAL_H
#define COLIBRI_MODEL_INTERNAL_H

#include "colibri.h"
#include "colibri_compat.h"
#include "image_layout.h"

/* A weight matrix in the image: its data and how it is stored (DTYPE_F32:
 * floats; DTYPE_Q8, DTYPE_Q4: rows of blocks, docs/format.md 3.3). */
typedef struct matrix_ref {
    const void *data;
    uint32_t dtype;
} matrix_ref;

/* Pointers to one layer's weights, resolved from the validated table. */
typedef struct layer_view {
    uint32_t ffn_kind;              /* FFN_DENSE, FFN_MOE or FFN_SHORTCUT */
    uint32_t attn_kind;             /* ATTN_FULL .. ATTN_MAMBA1 */
    const float *attn_norm;         /* [H] */
    matrix_ref wq;                  /* [Q, H]; MLA with a q LoRA: Q_B [Q, q_lora];
                                     * attention experts: [E * K, H], F32 */
    matrix_ref q_a;                 /* MLA: [q_lora, H] or none */
    const float *q_a_norm;          /* MLA: [q_lora] or NULL */
    matrix_ref kv_a;                /* MLA: [kv_lora + rope_dim, H] */
    const float *kv_a_norm;         /* MLA: [kv_lora] */
    matrix_ref kv_b;                /* MLA: [n_heads * (nope + v_head_dim), kv_lora], F32 */
    matrix_ref wk;                  /* [K, H] */
    matrix_ref wv;                  /* [K, H] */
    matrix_ref wg;                  /* [Q, H] the attention output's gate, or none */
    matrix_ref attn_router;         /* [E, H] the attention experts' router, or none */
    matrix_ref wo;                  /* [H, Q]; attention experts: [E * H, K], F32 */
    const float *bq;                /* [Q] or NULL */
    const float *bk;                /* [K] or NULL */
    const float *bv;                /* [K] or NULL */
    const float *bo;                /* [H] or NULL */
    const float *q_norm;            /* [Q] or [head_dim] or NULL */
    const float *k_norm;            /* [K] or [head_dim] or NULL */
    const float *ffn_norm;          /* [H] */
    const float *attn_norm_bias;    /* [H] (LayerNorm) or NULL */
    const float *ffn_norm_bias;     /* [H] (LayerNorm) or NULL */
    const float *attn_post_norm;    /* [H] norm of the attention's output (norm_kind 3) */
    const float *ffn_post_norm;     /* [H] norm of the FFN's output (norm_kind 3) */
    const float *sinks;             /* [n_heads] attention sinks or NULL */
    const float *rope_freq;         /* [rope_dim / 2] the layer's RoPE inverse frequencies
                                     * (format 1.12, LAYER_ROPE) or NULL */
    matrix_ref head_gate;           /* MLA (1.14): [n_heads, H] f32, each head's output gate */
    matrix_ref conv_b;              /* short convolution (1.13): [H, H] B of B * X */
    matrix_ref conv_c;              /* [H, H] C, the gate after the convolution */
    matrix_ref conv_x;              /* [H, H] X */
    matrix_ref conv_kernel;         /* [H, conv_kernel] f32: each channel's taps, oldest first */
    matrix_ref conv_out;            /* [H, H] the output projection */
    matrix_ref ssm_in_z;            /* Mamba2 (1.14): [I, H] the gate z (I = heads * head_dim) */
    matrix_ref ssm_in_xbc;          /* [C, H] x, B and C (C = I + 2 * groups * state) */
    matrix_ref ssm_in_dt;           /* [heads, H] the time steps */
    matrix_ref ssm_conv_kernel;     /* [C, conv_kernel] f32: each channel's taps, oldest first */
    const float *ssm_conv_bias;     /* [C] */
    const float *ssm_dt_bias;       /* [heads] */
    const float *ssm_a;             /* [heads] A = -exp(A_log) */
    const float *ssm_d;             /* [heads] the skip's D */
    const float *ssm_norm;          /* [I] the gated RMSNorm's weights, per group; gated
                                     * delta: [head_dim], per head */
    matrix_ref ssm_out;             /* [H, I] the output projection */
    matrix_ref ssm_in_beta;         /* gated delta (1.14): [heads, H] beta, or none */
    matrix_ref kda_f_a;             /* KDA (1.14): [rank or I, H] the forget gate's input */
    matrix_ref kda_f_b;             /* [I, rank] its second factor, or none (rank 0) */
    matrix_ref kda_g_a;             /* [rank or I, H] the output gate's */
    matrix_ref kda_g_b;             /* [I, rank] or none */
    matrix_ref mamba1_x_proj;       /* Mamba1 (1.14): [R + 2N, I] dt, B and C of x */
    const float *mamba1_dt_norm;    /* [R] */
    const float *mamba1_b_norm;     /* [N] */
    const float *mamba1_c_norm;     /* [N] */
    matrix_ref mamba1_dt_proj;      /* [I, R] */
    matrix_ref mamba1_a;            /* [I, N] f32, A = -exp(A_log) */
    const float *router_logit_bias; /* [E + Z] added to the router logits, or NULL */
    matrix_ref dense_gate;          /* [D, H] (dense layer) */
    matrix_ref dense_up;            /* [D, H] */
    matrix_ref dense_down;          /* [H, D] */
    matrix_ref router;              /* [E + Z, H] (MoE layer; Z zero experts) */
    matrix_ref shared_gate;         /* [S, H] or NULL */
    matrix_ref shared_up;           /* [S, H] or NULL */
    matrix_ref shared_down;         /* [H, S] or NULL */
    matrix_ref shared_expert_gate;  /* [1, H] or NULL */
    const float *router_bias;       /* [E + Z] selection bias (router_score 1, 4) or NULL */
    matrix_ref expert_gate_up_bias; /* [E, 2I] f32: expert e's gate then up biases, or NULL */
    matrix_ref expert_down_bias;    /* [E, H] f32, or NULL */
    const float *moe_out_bias;      /* [H] added to the routed experts' sum, or NULL */
    uint32_t first_expert;          /* table index of expert 0's EXPERT_GATE */
} layer_view;

/* One routed expert's weights: one contiguous block in the image. */
typedef struct expert_view {
    matrix_ref gate; /* [I, H] */
    matrix_ref up;   /* [I, H] */
    matrix_ref down; /* [H, I] */
    const uint8_t *block;
    size_t block_size;
} expert_view;

static inline const uint8_t *tensor_entry(const colibri_model *m, uint32_t index)
{
    return m->tensor_table + (size_t)index * IMG_TENSOR_ENTRY_SIZE;
}

static inline const float *tensor_data(const colibri_model *m, uint32_t index)
{
    const uint8_t *p = m->image + colibri_rd_u64(tensor_entry(m, index) + TEN_OFFSET);
    return (const float *)(const void *)p;
}

static inline matrix_ref tensor_matrix(const colibri_model *m, uint32_t index)
{
    matrix_ref ref = {tensor_data(m, index), colibri_rd_u16(tensor_entry(m, index) + TEN_DTYPE)};
    return ref;
}

/* The experts a router scores: the routed ones and (format 1.12) the
 * zero-computation ones after them. */
static inline uint32_t colibri_router_width(const colibri_hparams *hp)
{
    return hp->n_experts + hp->zero_experts;
}

void colibri_layer_view_load(const colibri_model *m, uint32_t layer, layer_view *view);
void colibri_expert_view_load(const colibri_model *m, const layer_view *layer, uint32_t expert,
                              expert_view *view);
/* The view's matrices moved onto a copy of its block at `block` (the
 * port's expert_acquire): the same offsets from the block's start. */
void colibri_expert_view_rebase(expert_view *view, const uint8_t *block);

/* colibri_options: the port version is known; port and kernels into *m. */
int colibri_options_valid(const colibri_options *options);
void colibri_options_apply(colibri_model *m, const colibri_options *options);

/* Validation steps of colibri_init, in the order docs/format.md gives. */
colibri_status colibri_hparams_decode(const uint8_t *image, colibri_hparams *hp);
/* The layer table; counts the layers of each kind into m->hp
 * (shortcut_layers, conv_layers, kv_layers). */
colibri_status colibri_layer_table_check(colibri_model *m);
/* The tensor table; *quantized = 1 when a matrix is Q8 or Q4. */
colibri_status colibri_tensor_table_check(const colibri_model *m, uint32_t *quantized);

/* Tensors a layer of the given kinds holds (docs/format.md 3.1). */
uint32_t colibri_layer_tensor_count(const colibri_hparams *hp, uint32_t ffn_kind,
                                    uint32_t attn_kind);

/* Layer l's place among the layers of its kind: the recurrent layers
 * (short convolutions, 1.13; Mamba2, 1.14) in the state's recurrent rows,
 * the others in the KV cache. */
uint32_t colibri_layer_slot(const colibri_model *m, uint32_t l);

/* Floats of one position's K (or V) row of one layer in a standard
 * attention's cache: kv_dim, or with an int8 cache (1.15) n_kv_heads scales
 * and then kv_dim int8 padded to whole floats (docs/core.md). */
static inline uint32_t colibri_kv_row_floats(const colibri_hparams *hp)
{
    uint32_t kv_dim = hp->n_kv_heads * hp->head_dim;
    return hp->kv_int8 ? hp->n_kv_heads + (kv_dim + 3u) / 4u : kv_dim;
}

/* Whether a layer of this attn_kind keeps recurrent rows, not a KV cache. */
static inline int colibri_recurrent_kind(uint32_t attn_kind)
{
    return attn_kind >= ATTN_CONV && attn_kind <= ATTN_MAMBA1;
}

/* A Mamba2 layer's inner width (heads * head_dim) and its convolution's
 * channels: x, B and C; a short convolution's are the hidden size. */
static inline uint32_t colibri_ssm_inner(const colibri_hparams *hp)
{
    return hp->ssm_heads * hp->ssm_head_dim;
}

static inline uint32_t colibri_conv_channels(const colibri_hparams *hp)
{
    if (hp->ssm_heads == 0u) {
        return hp->hidden_size;
    }
    return hp->ssm_dt_rank > 0u ? colibri_ssm_inner(hp) /* Mamba1: x only */
                                : colibri_ssm_inner(hp) + 2u * hp->ssm_groups * hp->ssm_state;
}

/* Floats of one recurrent layer in one copy of the state: the convolution's
 * last conv_kernel - 1 inputs, then a Mamba2 layer's [heads][head_dim][state]. */
static inline uint64_t colibri_recurrent_floats(const colibri_hparams *hp)
{
    uint64_t taps = hp->conv_kernel > 0u ? hp->conv_kernel - 1u : 0u;
    return taps * colibri_conv_channels(hp) + (uint64_t)colibri_ssm_inner(hp) * hp->ssm_state;
}

/* Recurrent layer `slot`'s floats in copy `copy` of the state. */
static inline float *colibri_recurrent_rows(const colibri_model *m, const colibri_state *state,
                                            uint32_t copy, uint32_t slot)
{
    size_t per_layer = (size_t)colibri_recurrent_floats(&m->hp);
    return state->conv_state + ((size_t)copy * m->hp.conv_layers + slot) * per_layer;
}

#endif /* COLIBRI_MODEL_INTERNAL_H */
