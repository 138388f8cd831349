/* layer_tensors.c - the table of a layer's tensors (layer_tensors.h). */
#include "layer_tensors.h"

#define SLOT(field) ((uint16_t)offsetof(layer_view, field))

const colibri_tensor_desc colibri_layer_tensors[] = {
    {ROLE_ATTN_NORM, PART_ATTENTION, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_ATTN_Q, PART_ATTENTION, WHEN_Q_PROJ, DIM_Q_ROWS, DIM_HIDDEN, SLOT(wq)},
    {ROLE_MLA_Q_A, PART_ATTENTION, WHEN_Q_LORA, DIM_Q_LORA, DIM_HIDDEN, SLOT(q_a)},
    {ROLE_MLA_Q_A_NORM, PART_ATTENTION, WHEN_Q_LORA, DIM_Q_LORA, DIM_NONE, SLOT(q_a_norm)},
    {ROLE_MLA_Q_B, PART_ATTENTION, WHEN_Q_LORA, DIM_Q, DIM_Q_LORA, SLOT(wq)},
    {ROLE_MLA_KV_A, PART_ATTENTION, WHEN_MLA, DIM_KV_A, DIM_HIDDEN, SLOT(kv_a)},
    {ROLE_MLA_KV_A_NORM, PART_ATTENTION, WHEN_MLA, DIM_KV_LORA, DIM_NONE, SLOT(kv_a_norm)},
    {ROLE_MLA_KV_B, PART_ATTENTION, WHEN_MLA, DIM_KV_B, DIM_KV_LORA, SLOT(kv_b)},
    {ROLE_ATTN_K, PART_ATTENTION, WHEN_STANDARD, DIM_KV, DIM_HIDDEN, SLOT(wk)},
    {ROLE_ATTN_V, PART_ATTENTION, WHEN_STANDARD, DIM_KV, DIM_HIDDEN, SLOT(wv)},
    {ROLE_ATTN_GATE, PART_ATTENTION, WHEN_ATTN_GATE, DIM_Q, DIM_HIDDEN, SLOT(wg)},
    {ROLE_ATTN_ROUTER, PART_ATTENTION, WHEN_ATTN_EXPERTS, DIM_EXPERTS, DIM_HIDDEN,
     SLOT(attn_router)},
    {ROLE_ATTN_O, PART_ATTENTION, WHEN_ALWAYS, DIM_O_ROWS, DIM_O, SLOT(wo)},
    {ROLE_ATTN_Q_BIAS, PART_ATTENTION, WHEN_BIAS_Q, DIM_Q, DIM_NONE, SLOT(bq)},
    {ROLE_ATTN_K_BIAS, PART_ATTENTION, WHEN_BIAS_K, DIM_KV, DIM_NONE, SLOT(bk)},
    {ROLE_ATTN_V_BIAS, PART_ATTENTION, WHEN_BIAS_V, DIM_KV, DIM_NONE, SLOT(bv)},
    {ROLE_ATTN_O_BIAS, PART_ATTENTION, WHEN_BIAS_O, DIM_HIDDEN, DIM_NONE, SLOT(bo)},
    {ROLE_ATTN_Q_NORM, PART_ATTENTION, WHEN_QK_NORM, DIM_Q_NORM, DIM_NONE, SLOT(q_norm)},
    {ROLE_ATTN_K_NORM, PART_ATTENTION, WHEN_QK_NORM, DIM_K_NORM, DIM_NONE, SLOT(k_norm)},
    {ROLE_FFN_NORM, PART_ATTENTION, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_ATTENTION, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE,
     SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_ATTENTION, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_ATTENTION, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE,
     SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_ATTENTION, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE,
     SLOT(ffn_post_norm)},
    {ROLE_ATTN_SINKS, PART_ATTENTION, WHEN_SINKS, DIM_HEADS, DIM_NONE, SLOT(sinks)},
    {ROLE_ROPE_FREQ, PART_ATTENTION, WHEN_LAYER_ROPE, DIM_ROPE_PAIRS, DIM_NONE, SLOT(rope_freq)},
    {ROLE_ATTN_HEAD_GATE, PART_ATTENTION, WHEN_HEAD_GATE, DIM_HEADS, DIM_HIDDEN, SLOT(head_gate)},
    {ROLE_DENSE_GATE, PART_DENSE, WHEN_GATED, DIM_DENSE, DIM_HIDDEN, SLOT(dense_gate)},
    {ROLE_DENSE_UP, PART_DENSE, WHEN_ALWAYS, DIM_DENSE, DIM_HIDDEN, SLOT(dense_up)},
    {ROLE_DENSE_DOWN, PART_DENSE, WHEN_ALWAYS, DIM_HIDDEN, DIM_DENSE, SLOT(dense_down)},
    {ROLE_ROUTER_LOGIT_BIAS, PART_MOE, WHEN_ROUTER_LOGIT_BIAS, DIM_ROUTES, DIM_NONE,
     SLOT(router_logit_bias)},
    {ROLE_ROUTER, PART_MOE, WHEN_ALWAYS, DIM_ROUTES, DIM_HIDDEN, SLOT(router)},
    {ROLE_SHARED_GATE, PART_MOE, WHEN_SHARED_GATED, DIM_SHARED, DIM_HIDDEN, SLOT(shared_gate)},
    {ROLE_SHARED_UP, PART_MOE, WHEN_SHARED, DIM_SHARED, DIM_HIDDEN, SLOT(shared_up)},
    {ROLE_SHARED_DOWN, PART_MOE, WHEN_SHARED, DIM_HIDDEN, DIM_SHARED, SLOT(shared_down)},
    {ROLE_SHARED_EXPERT_GATE, PART_MOE, WHEN_SHARED_GATE, DIM_ONE, DIM_HIDDEN,
     SLOT(shared_expert_gate)},
    {ROLE_ROUTER_BIAS, PART_MOE, WHEN_ROUTER_BIAS, DIM_ROUTES, DIM_NONE, SLOT(router_bias)},
    {ROLE_EXPERT_GATE_UP_BIAS, PART_MOE, WHEN_EXPERT_BIAS, DIM_EXPERTS, DIM_EXPERT_2,
     SLOT(expert_gate_up_bias)},
    {ROLE_EXPERT_DOWN_BIAS, PART_MOE, WHEN_EXPERT_BIAS, DIM_EXPERTS, DIM_HIDDEN,
     SLOT(expert_down_bias)},
    {ROLE_MOE_OUT_BIAS, PART_MOE, WHEN_MOE_OUT_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(moe_out_bias)},
    {ROLE_EXPERT_GATE, PART_EXPERT, WHEN_GATED, DIM_EXPERT, DIM_HIDDEN, SLOT_NONE},
    {ROLE_EXPERT_UP, PART_EXPERT, WHEN_ALWAYS, DIM_EXPERT, DIM_HIDDEN, SLOT_NONE},
    {ROLE_EXPERT_DOWN, PART_EXPERT, WHEN_ALWAYS, DIM_HIDDEN, DIM_EXPERT, SLOT_NONE},
    /* a short convolution layer's operator (attn_kind 4, format 1.13) */
    {ROLE_ATTN_NORM, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_CONV_IN_B, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_HIDDEN, SLOT(conv_b)},
    {ROLE_CONV_IN_C, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_HIDDEN, SLOT(conv_c)},
    {ROLE_CONV_IN_X, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_HIDDEN, SLOT(conv_x)},
    {ROLE_CONV_KERNEL, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_CONV_TAPS, SLOT(conv_kernel)},
    {ROLE_CONV_OUT, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_HIDDEN, SLOT(conv_out)},
    {ROLE_FFN_NORM, PART_CONV, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_CONV, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_CONV, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_CONV, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_CONV, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_post_norm)},
    /* a Mamba2 layer's operator (attn_kind 5, format 1.14) */
    {ROLE_ATTN_NORM, PART_MAMBA2, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_SSM_IN_Z, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_INNER, DIM_HIDDEN, SLOT(ssm_in_z)},
    {ROLE_SSM_IN_XBC, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_CONV, DIM_HIDDEN, SLOT(ssm_in_xbc)},
    {ROLE_SSM_IN_DT, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_HIDDEN, SLOT(ssm_in_dt)},
    {ROLE_SSM_CONV_KERNEL, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_CONV, DIM_CONV_TAPS,
     SLOT(ssm_conv_kernel)},
    {ROLE_SSM_CONV_BIAS, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_CONV, DIM_NONE, SLOT(ssm_conv_bias)},
    {ROLE_SSM_DT_BIAS, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_dt_bias)},
    {ROLE_SSM_A, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_a)},
    {ROLE_SSM_D, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_d)},
    {ROLE_SSM_NORM, PART_MAMBA2, WHEN_ALWAYS, DIM_SSM_INNER, DIM_NONE, SLOT(ssm_norm)},
    {ROLE_SSM_OUT, PART_MAMBA2, WHEN_ALWAYS, DIM_HIDDEN, DIM_SSM_INNER, SLOT(ssm_out)},
    {ROLE_FFN_NORM, PART_MAMBA2, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_MAMBA2, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_MAMBA2, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_MAMBA2, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_MAMBA2, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_post_norm)},
    /* a gated delta layer's operator (attn_kind 6, format 1.14) */
    {ROLE_ATTN_NORM, PART_GATED_DELTA, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_SSM_IN_Z, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_INNER, DIM_HIDDEN, SLOT(ssm_in_z)},
    {ROLE_SSM_IN_XBC, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_CONV, DIM_HIDDEN, SLOT(ssm_in_xbc)},
    {ROLE_SSM_IN_DT, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_HIDDEN, SLOT(ssm_in_dt)},
    {ROLE_SSM_IN_BETA, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_HIDDEN, SLOT(ssm_in_beta)},
    {ROLE_SSM_CONV_KERNEL, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_CONV, DIM_CONV_TAPS,
     SLOT(ssm_conv_kernel)},
    {ROLE_SSM_DT_BIAS, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_dt_bias)},
    {ROLE_SSM_A, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_a)},
    {ROLE_SSM_NORM, PART_GATED_DELTA, WHEN_ALWAYS, DIM_SSM_HEAD_DIM, DIM_NONE, SLOT(ssm_norm)},
    {ROLE_SSM_OUT, PART_GATED_DELTA, WHEN_ALWAYS, DIM_HIDDEN, DIM_SSM_INNER, SLOT(ssm_out)},
    {ROLE_FFN_NORM, PART_GATED_DELTA, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_GATED_DELTA, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE,
     SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_GATED_DELTA, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE,
     SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_GATED_DELTA, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE,
     SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_GATED_DELTA, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE,
     SLOT(ffn_post_norm)},
    /* a KDA layer's operator (attn_kind 7, format 1.14) */
    {ROLE_ATTN_NORM, PART_KDA, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_SSM_IN_XBC, PART_KDA, WHEN_ALWAYS, DIM_SSM_CONV, DIM_HIDDEN, SLOT(ssm_in_xbc)},
    {ROLE_SSM_IN_BETA, PART_KDA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_HIDDEN, SLOT(ssm_in_beta)},
    {ROLE_KDA_F_A, PART_KDA, WHEN_ALWAYS, DIM_KDA_A_ROWS, DIM_HIDDEN, SLOT(kda_f_a)},
    {ROLE_KDA_F_B, PART_KDA, WHEN_KDA_RANK, DIM_SSM_INNER, DIM_KDA_RANK, SLOT(kda_f_b)},
    {ROLE_KDA_G_A, PART_KDA, WHEN_ALWAYS, DIM_KDA_A_ROWS, DIM_HIDDEN, SLOT(kda_g_a)},
    {ROLE_KDA_G_B, PART_KDA, WHEN_KDA_RANK, DIM_SSM_INNER, DIM_KDA_RANK, SLOT(kda_g_b)},
    {ROLE_SSM_CONV_KERNEL, PART_KDA, WHEN_ALWAYS, DIM_SSM_CONV, DIM_CONV_TAPS,
     SLOT(ssm_conv_kernel)},
    {ROLE_SSM_DT_BIAS, PART_KDA, WHEN_ALWAYS, DIM_SSM_INNER, DIM_NONE, SLOT(ssm_dt_bias)},
    {ROLE_SSM_A, PART_KDA, WHEN_ALWAYS, DIM_SSM_HEADS, DIM_NONE, SLOT(ssm_a)},
    {ROLE_SSM_NORM, PART_KDA, WHEN_ALWAYS, DIM_SSM_HEAD_DIM, DIM_NONE, SLOT(ssm_norm)},
    {ROLE_SSM_OUT, PART_KDA, WHEN_ALWAYS, DIM_HIDDEN, DIM_SSM_INNER, SLOT(ssm_out)},
    {ROLE_FFN_NORM, PART_KDA, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_KDA, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_KDA, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_KDA, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_KDA, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_post_norm)},
    /* a Mamba1 layer's operator (attn_kind 8, format 1.14) */
    {ROLE_ATTN_NORM, PART_MAMBA1, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm)},
    {ROLE_SSM_IN_Z, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_INNER, DIM_HIDDEN, SLOT(ssm_in_z)},
    {ROLE_SSM_IN_XBC, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_CONV, DIM_HIDDEN, SLOT(ssm_in_xbc)},
    {ROLE_SSM_CONV_KERNEL, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_CONV, DIM_CONV_TAPS,
     SLOT(ssm_conv_kernel)},
    {ROLE_SSM_CONV_BIAS, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_CONV, DIM_NONE, SLOT(ssm_conv_bias)},
    {ROLE_MAMBA1_X_PROJ, PART_MAMBA1, WHEN_ALWAYS, DIM_DT_B_C, DIM_SSM_INNER, SLOT(mamba1_x_proj)},
    {ROLE_MAMBA1_DT_NORM, PART_MAMBA1, WHEN_ALWAYS, DIM_DT_RANK, DIM_NONE, SLOT(mamba1_dt_norm)},
    {ROLE_MAMBA1_B_NORM, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_STATE, DIM_NONE, SLOT(mamba1_b_norm)},
    {ROLE_MAMBA1_C_NORM, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_STATE, DIM_NONE, SLOT(mamba1_c_norm)},
    {ROLE_MAMBA1_DT_PROJ, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_INNER, DIM_DT_RANK,
     SLOT(mamba1_dt_proj)},
    {ROLE_SSM_DT_BIAS, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_INNER, DIM_NONE, SLOT(ssm_dt_bias)},
    {ROLE_MAMBA1_A, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_INNER, DIM_SSM_STATE, SLOT(mamba1_a)},
    {ROLE_SSM_D, PART_MAMBA1, WHEN_ALWAYS, DIM_SSM_INNER, DIM_NONE, SLOT(ssm_d)},
    {ROLE_SSM_OUT, PART_MAMBA1, WHEN_ALWAYS, DIM_HIDDEN, DIM_SSM_INNER, SLOT(ssm_out)},
    {ROLE_FFN_NORM, PART_MAMBA1, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_ATTN_NORM_BIAS, PART_MAMBA1, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(attn_norm_bias)},
    {ROLE_FFN_NORM_BIAS, PART_MAMBA1, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_ATTN_POST_NORM, PART_MAMBA1, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(attn_post_norm)},
    {ROLE_FFN_POST_NORM, PART_MAMBA1, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_post_norm)},
    /* a layer without an operator (attn_kind 9, format 1.14): the FFN's norms */
    {ROLE_FFN_NORM, PART_NONE, WHEN_ALWAYS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm)},
    {ROLE_FFN_NORM_BIAS, PART_NONE, WHEN_NORM_BIAS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_norm_bias)},
    {ROLE_FFN_POST_NORM, PART_NONE, WHEN_POST_NORMS, DIM_HIDDEN, DIM_NONE, SLOT(ffn_post_norm)},
};

const uint32_t colibri_layer_tensors_count =
    (uint32_t)(sizeof colibri_layer_tensors / sizeof colibri_layer_tensors[0]);

int colibri_tensor_present(const colibri_hparams *hp, const colibri_tensor_desc *d)
{
    switch (d->when) {
    case WHEN_BIAS_Q: return (hp->attn_bias & BIAS_Q) != 0;
    case WHEN_BIAS_K: return (hp->attn_bias & BIAS_K) != 0;
    case WHEN_BIAS_V: return (hp->attn_bias & BIAS_V) != 0;
    case WHEN_BIAS_O: return (hp->attn_bias & BIAS_O) != 0;
    case WHEN_QK_NORM: return hp->qk_norm != QK_NORM_NONE && hp->qk_norm != QK_NORM_L2_ROTATED;
    case WHEN_SHARED: return hp->shared_intermediate > 0;
    case WHEN_SHARED_GATED: return hp->shared_intermediate > 0 && hp->activation != ACT_RELU2;
    case WHEN_SHARED_GATE: return hp->shared_intermediate > 0 && hp->shared_gate != 0;
    case WHEN_NORM_BIAS: return hp->norm_kind == NORM_LAYER;
    case WHEN_STANDARD: return hp->mla != MLA_LATENT;
    case WHEN_Q_PROJ: return hp->mla != MLA_LATENT || hp->q_lora_rank == 0;
    case WHEN_Q_LORA: return hp->mla == MLA_LATENT && hp->q_lora_rank > 0;
    case WHEN_MLA: return hp->mla == MLA_LATENT;
    case WHEN_ATTN_GATE: return (hp->attn_bias & BIAS_ATTN_GATE) != 0;
    case WHEN_POST_NORMS: return hp->norm_kind == NORM_RMS_SANDWICH;
    case WHEN_ATTN_EXPERTS: return (hp->attn_bias & BIAS_ATTN_EXPERTS) != 0;
    case WHEN_MOE_OUT_BIAS: return (hp->attn_bias & BIAS_MOE_OUT) != 0;
    case WHEN_ROUTER_BIAS:
        return hp->router_score == ROUTER_SOFTMAX_BIASED || hp->router_score == ROUTER_SIGMOID;
    case WHEN_SINKS: return (hp->attn_bias & BIAS_SINKS) != 0;
    case WHEN_ROUTER_LOGIT_BIAS: return (hp->attn_bias & BIAS_ROUTER) != 0;
    case WHEN_EXPERT_BIAS: return (hp->attn_bias & BIAS_EXPERTS) != 0;
    case WHEN_LAYER_ROPE: return hp->layer_rope != 0;
    case WHEN_KDA_RANK: return hp->kda_rank > 0u;
    case WHEN_HEAD_GATE: return (hp->attn_bias & BIAS_HEAD_GATE) != 0;
    case WHEN_GATED: return hp->activation != ACT_RELU2;
    default: return 1;
    }
}

uint32_t colibri_tensor_dim(const colibri_hparams *hp, uint32_t dim)
{
    int whole = hp->qk_norm == QK_NORM_WHOLE, mla = hp->mla == MLA_LATENT;
    int moa = (hp->attn_bias & BIAS_ATTN_EXPERTS) != 0;
    uint32_t kv = hp->n_kv_heads * hp->head_dim;
    switch (dim) {
    case DIM_ONE: return 1u;
    case DIM_HIDDEN: return hp->hidden_size;
    case DIM_Q: return hp->n_heads * hp->head_dim;
    case DIM_KV: return hp->n_kv_heads * hp->head_dim;
    case DIM_Q_NORM: return whole ? hp->n_heads * hp->head_dim : hp->head_dim;
    case DIM_K_NORM: return whole ? hp->n_kv_heads * hp->head_dim : hp->head_dim;
    case DIM_DENSE: return hp->dense_intermediate;
    case DIM_EXPERTS: return hp->n_experts;
    case DIM_ROUTES: return colibri_router_width(hp);
    case DIM_ROPE_PAIRS: return hp->rope_dim / 2u;
    case DIM_CONV_TAPS: return hp->conv_kernel;
    case DIM_SSM_INNER: return colibri_ssm_inner(hp);
    case DIM_SSM_CONV: return colibri_conv_channels(hp);
    case DIM_SSM_HEADS: return hp->ssm_heads;
    case DIM_SSM_HEAD_DIM: return hp->ssm_head_dim;
    case DIM_KDA_A_ROWS: return hp->kda_rank > 0u ? hp->kda_rank : colibri_ssm_inner(hp);
    case DIM_KDA_RANK: return hp->kda_rank;
    case DIM_SSM_STATE: return hp->ssm_state;
    case DIM_DT_RANK: return hp->ssm_dt_rank;
    case DIM_DT_B_C: return hp->ssm_dt_rank + 2u * hp->ssm_state;
    case DIM_SHARED: return hp->shared_intermediate;
    case DIM_EXPERT: return hp->expert_intermediate;
    case DIM_HEADS: return hp->n_heads;
    case DIM_EXPERT_2: return 2u * hp->expert_intermediate;
    case DIM_O: return moa ? kv : hp->n_heads * (mla ? hp->v_head_dim : hp->head_dim);
    case DIM_Q_ROWS: return moa ? hp->n_experts * kv : hp->n_heads * hp->head_dim;
    case DIM_O_ROWS: return moa ? hp->n_experts * hp->hidden_size : hp->hidden_size;
    case DIM_Q_LORA: return hp->q_lora_rank;
    case DIM_KV_A: return hp->kv_lora_rank + hp->rope_dim;
    case DIM_KV_LORA: return hp->kv_lora_rank;
    case DIM_KV_B: return hp->n_heads * (hp->head_dim - hp->rope_dim + hp->v_head_dim);
    default: return 0u;
    }
}

uint32_t colibri_part_tensor_count(const colibri_hparams *hp, uint32_t part)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < colibri_layer_tensors_count; i++) {
        const colibri_tensor_desc *d = &colibri_layer_tensors[i];
        count += d->part == part && colibri_tensor_present(hp, d);
    }
    return count;
}
