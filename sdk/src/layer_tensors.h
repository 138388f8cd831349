/*
 * layer_tensors.h - the one description of a decoder layer's tensors
 * (docs/format.md 3.1): which roles, in which order, present when, with
 * which shape, and which layer_view field points at each. Checking the
 * tensor table, counting a layer's entries and resolving the views all walk
 * this table; tests/sdk/layout_dump.c prints it for the Python side's test.
 */
#ifndef COLIBRI_LAYER_TENSORS_H
#define COLIBRI_LAYER_TENSORS_H

#include "model_internal.h"

/* Which part of a layer a tensor belongs to, in table order: the operator
 * (attention, a short convolution (1.13), a Mamba2 mixer or a gated delta
 * layer (1.14)), then the FFN's. */
enum {
    PART_ATTENTION,
    PART_DENSE,
    PART_MOE,
    PART_EXPERT,
    PART_CONV,
    PART_MAMBA2,
    PART_GATED_DELTA,
    PART_KDA,
    PART_MAMBA1,
    PART_NONE /* attn_kind 9: the FFN's norms only */
};

/* When a tensor is present, from the model record. */
enum {
    WHEN_ALWAYS,
    WHEN_BIAS_Q,
    WHEN_BIAS_K,
    WHEN_BIAS_V,
    WHEN_BIAS_O,
    WHEN_QK_NORM,
    WHEN_SHARED,
    WHEN_SHARED_GATED, /* the shared expert's gate matrix (not with activation 2) */
    WHEN_SHARED_GATE,
    WHEN_NORM_BIAS,   /* norm_kind 1 (LayerNorm) */
    WHEN_ROUTER_BIAS, /* router_score 1 or 4 */
    WHEN_SINKS,       /* attn_bias bit 5 */
    WHEN_ROUTER_LOGIT_BIAS,
    WHEN_EXPERT_BIAS,
    WHEN_STANDARD, /* not MLA: K and V projections */
    WHEN_Q_PROJ,   /* standard attention, or MLA without a q LoRA */
    WHEN_Q_LORA,   /* MLA with a q LoRA */
    WHEN_MLA,
    WHEN_ATTN_GATE,    /* attn_bias bit 8 (format 1.11) */
    WHEN_POST_NORMS,   /* norm_kind 3 (format 1.11) */
    WHEN_ATTN_EXPERTS, /* attn_bias bit 9 (format 1.11) */
    WHEN_MOE_OUT_BIAS, /* attn_bias bit 10 (format 1.11) */
    WHEN_LAYER_ROPE,   /* header flag LAYER_ROPE (format 1.12) */
    WHEN_KDA_RANK,     /* kda_rank > 0 (format 1.14) */
    WHEN_HEAD_GATE,    /* attn_bias bit 11 (format 1.14) */
    WHEN_GATED         /* activation 0 or 1: the MLPs' gate matrices */
};

/* A shape dimension, from the model record (DIM_NONE: a vector's cols). */
enum {
    DIM_NONE,
    DIM_ONE,
    DIM_HIDDEN,
    DIM_Q,      /* n_heads * head_dim */
    DIM_KV,     /* n_kv_heads * head_dim */
    DIM_Q_NORM, /* DIM_Q for a whole-projection norm, head_dim per head */
    DIM_K_NORM,
    DIM_DENSE,
    DIM_EXPERTS,
    DIM_SHARED,
    DIM_EXPERT, /* expert_intermediate */
    DIM_HEADS,
    DIM_EXPERT_2, /* 2 * expert_intermediate */
    DIM_O,        /* n_heads * head_dim, MLA: n_heads * v_head_dim */
    DIM_Q_LORA,
    DIM_KV_A, /* kv_lora_rank + rope_dim: the latent and the RoPE key */
    DIM_KV_LORA,
    DIM_KV_B,       /* n_heads * (head_dim - rope_dim + v_head_dim) */
    DIM_Q_ROWS,     /* ATTN_Q's rows: Q, with attention experts n_experts * K */
    DIM_O_ROWS,     /* ATTN_O's rows: H, with attention experts n_experts * H */
    DIM_ROUTES,     /* the router's rows: n_experts + zero_experts (format 1.12) */
    DIM_ROPE_PAIRS, /* rope_dim / 2 */
    DIM_CONV_TAPS,  /* conv_kernel (format 1.13) */
    DIM_SSM_INNER,  /* ssm_heads * ssm_head_dim (format 1.14) */
    DIM_SSM_CONV,   /* a Mamba2 convolution's channels: inner + 2 * groups * state */
    DIM_SSM_HEADS,
    DIM_SSM_HEAD_DIM,
    DIM_KDA_A_ROWS, /* kda_rank, or I when 0 (one full-rank matrix) */
    DIM_KDA_RANK,
    DIM_SSM_STATE,
    DIM_DT_RANK, /* ssm_dt_rank (Mamba1) */
    DIM_DT_B_C   /* ssm_dt_rank + 2 * ssm_state */
};

#define SLOT_NONE 0xFFFFu /* expert tensors: read through expert_view */

typedef struct colibri_tensor_desc {
    uint16_t role;
    uint8_t part;
    uint8_t when;
    uint8_t rows;
    uint8_t cols;
    uint16_t slot; /* offsetof(layer_view, field), or SLOT_NONE */
} colibri_tensor_desc;

extern const colibri_tensor_desc colibri_layer_tensors[];
extern const uint32_t colibri_layer_tensors_count;

int colibri_tensor_present(const colibri_hparams *hp, const colibri_tensor_desc *d);
uint32_t colibri_tensor_dim(const colibri_hparams *hp, uint32_t dim);

/* The operator part of a layer of this attn_kind. */
static inline uint32_t colibri_operator_part(uint32_t attn_kind)
{
    return attn_kind == ATTN_CONV          ? PART_CONV
           : attn_kind == ATTN_MAMBA2      ? PART_MAMBA2
           : attn_kind == ATTN_GATED_DELTA ? PART_GATED_DELTA
           : attn_kind == ATTN_KDA         ? PART_KDA
           : attn_kind == ATTN_MAMBA1      ? PART_MAMBA1
           : attn_kind == ATTN_NONE        ? PART_NONE
                                           : PART_ATTENTION;
}

/* Present tensors of one part (PART_EXPERT: of one expert). */
uint32_t colibri_part_tensor_count(const colibri_hparams *hp, uint32_t part);

/* Whether a layer of this ffn_kind holds the tensor in this part: it is of
 * the part, present, and not an FFN norm of an FFN_NONE layer (1.14). */
static inline int colibri_tensor_in_layer(const colibri_hparams *hp, const colibri_tensor_desc *d,
                                          uint32_t part, uint32_t ffn_kind)
{
    int ffn_norm =
        d->role == ROLE_FFN_NORM || d->role == ROLE_FFN_NORM_BIAS || d->role == ROLE_FFN_POST_NORM;
    return d->part == part && colibri_tensor_present(hp, d) && (ffn_kind != FFN_NONE || !ffn_norm);
}

/* Tensors of one expert block: gate, up, down; up, down without gates. */
static inline uint32_t colibri_expert_tensors(const colibri_hparams *hp)
{
    return colibri_part_tensor_count(hp, PART_EXPERT);
}

#endif /* COLIBRI_LAYER_TENSORS_H */
