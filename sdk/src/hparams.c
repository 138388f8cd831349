/* hparams.c - decode and check the model record (docs/format.md 1.1). */
#include "colibri_math.h"
#include "model_internal.h"

/* The limits of the model record (docs/format.md 1.1); the Python tools'
 * copy, colibri_tools.image.image_spec.LIMITS, is tested equal to this table. */
#define MAX_VOCAB (1u << 24)
#define MAX_HIDDEN 65536u
#define MAX_LAYERS 1024u
#define MAX_HEADS 1024u
#define MAX_HEAD_DIM 1024u
#define MAX_CONTEXT COLIBRI_MAX_CONTEXT
#define MAX_INTERMEDIATE (1u << 20)
#define MAX_EXPERTS 4096u

/* Format 1.13: a 512-byte header, the record's extension in its second half. */
static int extended(const uint8_t *img)
{
    return colibri_rd_u32(img + HDR_HEADER_SIZE) == IMG_HEADER_SIZE_EXTENDED;
}

/* A field of the record's extension; 0 in an image without one. */
static uint32_t extension_u32(const uint8_t *img, uint32_t off)
{
    return extended(img) ? colibri_rd_u32(img + off) : 0u;
}

static float extension_f32(const uint8_t *img, uint32_t off)
{
    return extended(img) ? colibri_rd_f32(img + off) : 0.0f;
}

static void hparams_read(const uint8_t *img, colibri_hparams *hp)
{
    hp->arch = colibri_rd_u32(img + HDR_ARCH);
    hp->alignment = colibri_rd_u32(img + HDR_ALIGNMENT);
    hp->vocab_size = colibri_rd_u32(img + REC_VOCAB);
    hp->hidden_size = colibri_rd_u32(img + REC_HIDDEN);
    hp->n_layers = colibri_rd_u32(img + REC_N_LAYERS);
    hp->n_heads = colibri_rd_u32(img + REC_N_HEADS);
    hp->n_kv_heads = colibri_rd_u32(img + REC_N_KV_HEADS);
    hp->head_dim = colibri_rd_u32(img + REC_HEAD_DIM);
    hp->max_context = colibri_rd_u32(img + REC_MAX_CONTEXT);
    hp->dense_intermediate = colibri_rd_u32(img + REC_DENSE_INTER);
    hp->expert_intermediate = colibri_rd_u32(img + REC_EXPERT_INTER);
    hp->n_experts = colibri_rd_u32(img + REC_N_EXPERTS);
    hp->shared_intermediate = colibri_rd_u32(img + REC_SHARED_INTER);
    hp->rms_eps = colibri_rd_f32(img + REC_RMS_EPS);
    hp->rope_theta = colibri_rd_f32(img + REC_ROPE_THETA);
    hp->attn_bias = colibri_rd_u32(img + REC_ATTN_BIAS);
    hp->qk_norm = colibri_rd_u32(img + REC_QK_NORM);
    hp->tie_embeddings = colibri_rd_u32(img + REC_TIE_EMBED);
    hp->router_score = colibri_rd_u32(img + REC_ROUTER_SCORE);
    hp->top_k = colibri_rd_u32(img + REC_TOP_K);
    hp->router_norm_topk = colibri_rd_u32(img + REC_NORM_TOPK);
    hp->routed_scaling = colibri_rd_f32(img + REC_ROUTED_SCALING);
    hp->shared_gate = colibri_rd_u32(img + REC_SHARED_GATE);
    hp->n_group = colibri_rd_u32(img + REC_N_GROUP);
    hp->topk_group = colibri_rd_u32(img + REC_TOPK_GROUP);
    hp->embedding_scale = colibri_rd_f32(img + REC_EMBEDDING_SCALE);
    hp->residual_scale = colibri_rd_f32(img + REC_RESIDUAL_SCALE);
    hp->attention_scale = colibri_rd_f32(img + REC_ATTENTION_SCALE);
    hp->logits_divisor = colibri_rd_f32(img + REC_LOGITS_DIVISOR);
    hp->norm_kind = colibri_rd_u32(img + REC_NORM_KIND);
    hp->router_jitter = colibri_rd_f32(img + REC_ROUTER_JITTER);
    hp->router_norm_min = colibri_rd_f32(img + REC_ROUTER_NORM_MIN);
    hp->rope_dim = colibri_rd_u32(img + REC_ROPE_DIM);
    hp->rope_kind = colibri_rd_u32(img + REC_ROPE_KIND);
    hp->rope_factor = colibri_rd_f32(img + REC_ROPE_FACTOR);
    hp->rope_ramp_low = colibri_rd_f32(img + REC_ROPE_RAMP_LOW);
    hp->rope_ramp_width = colibri_rd_f32(img + REC_ROPE_RAMP_WIDTH);
    hp->rope_attn_factor = colibri_rd_f32(img + REC_ROPE_ATTN_FACTOR);
    hp->sliding_window = colibri_rd_u32(img + REC_SLIDING_WINDOW);
    hp->activation = colibri_rd_u32(img + REC_ACTIVATION);
    hp->swiglu_limit = colibri_rd_f32(img + REC_SWIGLU_LIMIT);
    hp->swiglu_alpha = colibri_rd_f32(img + REC_SWIGLU_ALPHA);
    hp->mla = colibri_rd_u32(img + REC_MLA);
    hp->q_lora_rank = colibri_rd_u32(img + REC_Q_LORA_RANK);
    hp->kv_lora_rank = colibri_rd_u32(img + REC_KV_LORA_RANK);
    hp->v_head_dim = colibri_rd_u32(img + REC_V_HEAD_DIM);
    hp->lora_eps = colibri_rd_f32(img + REC_LORA_EPS);
    hp->qkv_clip = colibri_rd_f32(img + REC_QKV_CLIP);
    hp->attn_temp_floor = colibri_rd_f32(img + REC_ATTN_TEMP_FLOOR);
    hp->attn_temp_scale = colibri_rd_f32(img + REC_ATTN_TEMP_SCALE);
    hp->zero_experts = colibri_rd_u32(img + HDR_ZERO_EXPERTS);
    hp->shortcut_layers = 0; /* counted by the layer table check */
    hp->layer_rope = (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_LAYER_ROPE) != 0u;
    hp->kv_int8 = (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_KV_INT8) != 0u;
    hp->conv_kernel = extension_u32(img, REC_CONV_KERNEL);
    hp->router_sum_eps = extension_f32(img, REC_ROUTER_SUM_EPS);
    hp->conv_layers = 0; /* counted by the layer table check */
    hp->ssm_heads = extension_u32(img, REC_SSM_HEADS);
    hp->ssm_head_dim = extension_u32(img, REC_SSM_HEAD_DIM);
    hp->ssm_state = extension_u32(img, REC_SSM_STATE);
    hp->ssm_groups = extension_u32(img, REC_SSM_GROUPS);
    hp->kda_rank = extension_u32(img, REC_KDA_RANK);
    hp->kda_bound = extension_f32(img, REC_KDA_BOUND);
    hp->ssm_dt_rank = extension_u32(img, REC_SSM_DT_RANK);
    hp->ssm_dt_min = extension_f32(img, REC_SSM_DT_MIN);
    hp->kv_layers = hp->n_layers;
}

static int in_range(uint32_t value, uint32_t lo, uint32_t hi)
{
    return value >= lo && value <= hi;
}

static int positive_finite(float value)
{
    return colibri_is_finite(value) && value > 0.0f;
}

/* RoPE base: >= 1 (every Hugging Face model's is in the thousands or more; a
 * tiny or subnormal base makes 1 / theta^(2i/d) overflow to infinity). */
#define MIN_ROPE_THETA 1.0f
/* Routed scaling: at most 1024 (published models use up to 16; FLT_MAX makes
 * every routing weight infinite). */
#define MAX_ROUTED_SCALING 1024.0f
/* Embedding, residual and attention scales and the logits divisor: at most
 * 65536 (Granite's are 12, 0.22, 1/64 and 8). */
#define MAX_SCALE 65536.0f
/* Sparsemixer's jitter epsilon: 0 .. 1 (PhiMoE's is 0.01; from 1 on no
 * expert is ever masked, so larger values mean nothing more). */
#define MAX_ROUTER_JITTER 1.0f
/* The floor of the routing weights' sum: 0 .. 1 (ERNIE-4.5's is 1e-12). */
#define MAX_ROUTER_NORM_MIN 1.0f
/* Expert groups: at most 64 (DeepSeek-V3 has 8), so the kept groups fit in
 * one 64-bit mask. */
#define MAX_GROUPS 64u

static colibri_status check_kinds(const colibri_hparams *hp)
{
    if (!in_range(hp->arch, ARCH_MIXTRAL, ARCH_NEMOTRON_H) || hp->qk_norm > QK_NORM_L2_ROTATED ||
        hp->activation > ACT_RELU2 || hp->norm_kind > NORM_RMS_SANDWICH) {
        return COLIBRI_E_UNSUPPORTED_ARCH;
    }
    return COLIBRI_OK;
}

static colibri_status check_attention(const colibri_hparams *hp)
{
    int ok = in_range(hp->vocab_size, 1, MAX_VOCAB) && in_range(hp->hidden_size, 1, MAX_HIDDEN) &&
             in_range(hp->n_layers, 1, MAX_LAYERS) && in_range(hp->n_heads, 1, MAX_HEADS) &&
             in_range(hp->n_kv_heads, 1, hp->n_heads) && hp->n_heads % hp->n_kv_heads == 0 &&
             in_range(hp->head_dim, 2, MAX_HEAD_DIM) && hp->head_dim % 2 == 0 &&
             in_range(hp->max_context, 1, MAX_CONTEXT) && positive_finite(hp->rms_eps) &&
             colibri_is_finite(hp->rope_theta) && hp->rope_theta >= MIN_ROPE_THETA &&
             (hp->attn_bias & ~(uint32_t)BIAS_ALL) == 0 && hp->tie_embeddings <= 1;
    return ok ? COLIBRI_OK : COLIBRI_E_BAD_HYPERPARAMS;
}

/* Widths may be 0 when no layer uses them; the layer table check enforces
 * that each layer kind present has its widths. */
static colibri_status check_ffn(const colibri_hparams *hp)
{
    int ok =
        hp->dense_intermediate <= MAX_INTERMEDIATE && hp->expert_intermediate <= MAX_INTERMEDIATE &&
        hp->shared_intermediate <= MAX_INTERMEDIATE && hp->n_experts <= MAX_EXPERTS &&
        hp->zero_experts <= MAX_EXPERTS - hp->n_experts &&
        (hp->zero_experts == 0u || hp->n_experts > 0u) && hp->top_k <= colibri_router_width(hp) &&
        hp->top_k <= COLIBRI_MAX_TOP_K && hp->router_norm_topk <= 1 && hp->shared_gate <= 1 &&
        (hp->shared_gate == 0 || hp->shared_intermediate > 0);
    return ok ? COLIBRI_OK : COLIBRI_E_BAD_HYPERPARAMS;
}

/* Sparsemixer (router_score 3) picks exactly two experts and has a jitter
 * epsilon in 0 .. 1; every other router has jitter 0 (bits all zero). */
static int router_jitter_ok(const uint8_t *img, const colibri_hparams *hp)
{
    if (hp->router_score != ROUTER_SPARSEMIXER) {
        return colibri_rd_u32(img + REC_ROUTER_JITTER) == 0u;
    }
    return (hp->top_k == 2u || hp->n_experts == 0u) && colibri_is_finite(hp->router_jitter) &&
           hp->router_jitter >= 0.0f && hp->router_jitter <= MAX_ROUTER_JITTER;
}

/* router_norm_min: 0 .. 1 with router_score 4, else its bits all zero. */
static int router_norm_min_ok(const uint8_t *img, const colibri_hparams *hp)
{
    if (hp->router_score != ROUTER_SOFTMAX_BIASED) {
        return colibri_rd_u32(img + REC_ROUTER_NORM_MIN) == 0u;
    }
    return colibri_is_finite(hp->router_norm_min) && hp->router_norm_min >= 0.0f &&
           hp->router_norm_min <= MAX_ROUTER_NORM_MIN;
}

/* Group-limited routing (format 1.5): n_group divides n_experts, at most
 * MAX_GROUPS; topk_group of them kept, holding at least top_k experts; a
 * sigmoid router ranks a group by its two best experts, so each holds two.
 * Only the softmax and sigmoid routers have groups. */
static int groups_valid(const colibri_hparams *hp)
{
    uint32_t per_group;
    if (hp->n_group == 1 && hp->topk_group == 1) {
        return 1;
    }
    if (hp->router_score > ROUTER_SIGMOID || !in_range(hp->n_group, 1, MAX_GROUPS) ||
        !in_range(hp->topk_group, 1, hp->n_group) || hp->n_experts % hp->n_group != 0) {
        return 0;
    }
    per_group = hp->n_experts / hp->n_group;
    return hp->top_k <= hp->topk_group * per_group &&
           (hp->router_score != ROUTER_SIGMOID || per_group >= 2u);
}

/* Zero-computation experts (format 1.12) go with the routers that score
 * every expert alike: softmax (0, 4), sigmoid (1) or top-k softmax (2), in
 * one group; not beside attention experts, which share n_experts. */
static int zero_experts_ok(const colibri_hparams *hp)
{
    int router =
        hp->router_score <= ROUTER_TOPK_SOFTMAX || hp->router_score == ROUTER_SOFTMAX_BIASED;
    return hp->zero_experts == 0u ||
           (router && hp->n_group == 1u && (hp->attn_bias & BIAS_ATTN_EXPERTS) == 0u);
}

static colibri_status check_router(const uint8_t *img, const colibri_hparams *hp)
{
    if (hp->router_score > ROUTER_TOPK_SIGMOID_INPUT || !zero_experts_ok(hp) ||
        !router_jitter_ok(img, hp) || !router_norm_min_ok(img, hp) || !groups_valid(hp) ||
        !positive_finite(hp->routed_scaling) || hp->routed_scaling > MAX_ROUTED_SCALING) {
        return COLIBRI_E_UNSUPPORTED_ROUTER;
    }
    return COLIBRI_OK;
}

/* Format 1.1 scales: with HDR_FLAG_SCALES all four finite and > 0; without
 * it all four zero, which means the defaults (1, 1, head_dim^-0.5, 1). */
static colibri_status check_scales(const uint8_t *img, colibri_hparams *hp)
{
    int present = (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_SCALES) != 0;
    const float scales[4] = {hp->embedding_scale, hp->residual_scale, hp->attention_scale,
                             hp->logits_divisor};
    for (uint32_t i = 0; i < 4u; i++) {
        int ok = present ? positive_finite(scales[i]) && scales[i] <= MAX_SCALE
                         : colibri_rd_u32(img + REC_EMBEDDING_SCALE + 4u * i) == 0u;
        if (!ok) {
            return COLIBRI_E_BAD_HYPERPARAMS;
        }
    }
    if (!present) {
        hp->embedding_scale = hp->residual_scale = hp->logits_divisor = 1.0f;
        hp->attention_scale = 1.0f / colibri_sqrtf((float)hp->head_dim);
    }
    return COLIBRI_OK;
}

/* YaRN's numbers (format 1.5): the frequency divisor, ramp start and width,
 * cos/sin factor; for default RoPE all four are 0. */
static int yarn_valid(const colibri_hparams *hp)
{
    if (hp->rope_kind == ROPE_DEFAULT) {
        return hp->rope_factor == 0.0f && hp->rope_ramp_low == 0.0f &&
               hp->rope_ramp_width == 0.0f && hp->rope_attn_factor == 0.0f;
    }
    return positive_finite(hp->rope_factor) && hp->rope_factor <= MAX_SCALE &&
           colibri_is_finite(hp->rope_ramp_low) && hp->rope_ramp_low >= 0.0f &&
           hp->rope_ramp_low <= MAX_SCALE && positive_finite(hp->rope_ramp_width) &&
           hp->rope_ramp_width <= MAX_SCALE && positive_finite(hp->rope_attn_factor) &&
           hp->rope_attn_factor <= MAX_SCALE;
}

/* Format 1.5 RoPE fields: with HDR_FLAG_ROPE an even rope_dim in 2 ..
 * head_dim, a known kind and its numbers; without it all six zero, which
 * means RoPE over the whole head, default kind. Each layer's own
 * frequencies (1.12, HDR_FLAG_LAYER_ROPE) need the flag and default RoPE. */
static colibri_status check_rope(const uint8_t *img, colibri_hparams *hp)
{
    int rope = (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_ROPE) != 0;
    if (hp->layer_rope && (!rope || hp->rope_kind != ROPE_DEFAULT)) {
        return COLIBRI_E_BAD_HYPERPARAMS;
    }
    if (!rope) {
        for (uint32_t off = REC_ROPE_DIM; off <= REC_ROPE_ATTN_FACTOR; off += 4u) {
            if (colibri_rd_u32(img + off) != 0u) {
                return COLIBRI_E_BAD_HYPERPARAMS;
            }
        }
        hp->rope_dim = hp->head_dim;
        return COLIBRI_OK;
    }
    if (hp->rope_kind > ROPE_YARN) {
        return COLIBRI_E_UNSUPPORTED_ARCH;
    }
    if (!in_range(hp->rope_dim, 2, hp->head_dim) || hp->rope_dim % 2 != 0 || !yarn_valid(hp)) {
        return COLIBRI_E_BAD_HYPERPARAMS;
    }
    return COLIBRI_OK;
}

/* Format 1.6: the clamped SwiGLU's limit and alpha (activation 1) finite, >
 * 0, <= 65536, else their bits zero; sliding_window 1 .. 2^24 with header
 * flag SLIDING, else zero. */
static colibri_status check_gpt_oss_fields(const uint8_t *img, const colibri_hparams *hp)
{
    int sliding = (colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_SLIDING) != 0;
    int clamped = hp->activation == ACT_SWIGLU_CLAMPED;
    int ok = sliding ? in_range(hp->sliding_window, 1u, MAX_CONTEXT) : hp->sliding_window == 0u;
    if (clamped) {
        ok = ok && positive_finite(hp->swiglu_limit) && hp->swiglu_limit <= MAX_SCALE &&
             positive_finite(hp->swiglu_alpha) && hp->swiglu_alpha <= MAX_SCALE;
    } else {
        ok = ok && colibri_rd_u32(img + REC_SWIGLU_LIMIT) == 0u &&
             colibri_rd_u32(img + REC_SWIGLU_ALPHA) == 0u;
    }
    return ok ? COLIBRI_OK : COLIBRI_E_BAD_HYPERPARAMS;
}

/* LoRA ranks of Multi-head Latent Attention: at most 65536 (DeepSeek-V3's
 * are 1536 for q, 512 for kv). */
#define MAX_LORA_RANK 65536u

/* Format 1.7 Multi-head Latent Attention: with HDR_FLAG_MLA mla 1, a
 * kv rank, an optional q rank, the value width and the LoRA norms' eps; one
 * KV head per query head, no q/k norm or attention biases, no int8 KV cache
 * (1.15: the latent stays float32); without the flag all five fields zero. */
static colibri_status check_mla(const uint8_t *img, const colibri_hparams *hp)
{
    if ((colibri_rd_u32(img + HDR_FLAGS) & HDR_FLAG_MLA) == 0) {
        for (uint32_t off = REC_MLA; off <= REC_LORA_EPS; off += 4u) {
            if (colibri_rd_u32(img + off) != 0u) {
                return COLIBRI_E_BAD_HYPERPARAMS;
            }
        }
        return COLIBRI_OK;
    }
    if (hp->mla != MLA_LATENT) {
        return COLIBRI_E_UNSUPPORTED_ARCH;
    }
    if (!in_range(hp->kv_lora_rank, 1, MAX_LORA_RANK) || hp->q_lora_rank > MAX_LORA_RANK ||
        !in_range(hp->v_head_dim, 1, MAX_HEAD_DIM) || !positive_finite(hp->lora_eps) ||
        hp->n_kv_heads != hp->n_heads || hp->qk_norm != QK_NORM_NONE ||
        (hp->attn_bias & BIAS_ATTN) != 0 || hp->rope_dim >= hp->head_dim || hp->kv_int8) {
        return COLIBRI_E_BAD_HYPERPARAMS;
    }
    return COLIBRI_OK;
}

/* Attention experts (format 1.11, JetMoE): the MoE layers' n_experts and
 * top_k, each chosen expert giving n_kv_heads query heads, so n_heads =
 * top_k * n_kv_heads; standard attention without q bias, q/k norm, gate or
 * clamp. */
static int attention_experts_valid(const colibri_hparams *hp)
{
    if ((hp->attn_bias & BIAS_ATTN_EXPERTS) == 0u) {
        return 1;
    }
    return hp->mla != MLA_LATENT && hp->n_experts > 0u && hp->top_k > 0u &&
           hp->n_heads == hp->top_k * hp->n_kv_heads && hp->qk_norm == QK_NORM_NONE &&
           (hp->attn_bias & (BIAS_Q | BIAS_ATTN_GATE)) == 0u && hp->qkv_clip == 0.0f;
}

/* Format 1.11: the q/k/v clamp, 0 (its bits all zero: none) or finite, >
 * 0, <= 65536 (DBRX's is 8); the temperature's floor, both bits zero (none)
 * or finite, 1 .. 2^24 (Llama 4's is 8192) with a scale finite, > 0, <=
 * 65536 (0.1). They and the output gate go with standard attention only,
 * the head gate (1.14) with MLA only. */
static colibri_status check_attention_extras(const uint8_t *img, const colibri_hparams *hp)
{
    int clipped = colibri_rd_u32(img + REC_QKV_CLIP) != 0u;
    int tuned = colibri_rd_u32(img + REC_ATTN_TEMP_FLOOR) != 0u;
    int ok = !clipped || (positive_finite(hp->qkv_clip) && hp->qkv_clip <= MAX_SCALE);
    if (tuned) {
        ok = ok && colibri_is_finite(hp->attn_temp_floor) && hp->attn_temp_floor >= 1.0f &&
             hp->attn_temp_floor <= (float)MAX_CONTEXT && positive_finite(hp->attn_temp_scale) &&
             hp->attn_temp_scale <= MAX_SCALE;
    } else {
        ok = ok && colibri_rd_u32(img + REC_ATTN_TEMP_SCALE) == 0u;
    }
    if (hp->mla == MLA_LATENT) {
        ok = ok && !clipped && !tuned && (hp->attn_bias & BIAS_ATTN_GATE) == 0u;
    } else {
        ok = ok && (hp->attn_bias & BIAS_HEAD_GATE) == 0u; /* the head gate is MLA's (1.14) */
    }
    return ok && attention_experts_valid(hp) ? COLIBRI_OK : COLIBRI_E_BAD_HYPERPARAMS;
}

/* The taps of a short convolution: 2 .. 64 (LFM2's are 3). */
#define MAX_CONV_KERNEL 64u
/* DeepSeek-V3's term added to its sigmoid weights' sum, the sum a 256-byte
 * header (or a 0 in the extension) means for router_score 1. */
#define SIGMOID_SUM_EPS 1e-20f

/* A Mamba2 mixer's sizes (format 1.14): heads, head_dim and state 1 ..
 * 1024 (Granite-4.0-H's are 48 .. 128, 64, 128), groups dividing the heads;
 * all four zero without Mamba2 layers. A Mamba1 layer's (dt_rank > 0): a
 * head per channel (head_dim 1), one group, dt_rank + 2 * state <= heads
 * (the projection of dt, B and C fits where the convolution's input was).
 * The least time step: 0 (none) or finite, above 0, at most 1
 * (Nemotron-H's time_step_min is 0.001). */
#define MAX_SSM_SIZE 1024u
/* A KDA forget gate's lower bound: below 0, at least -1024 (Ling's is -5). */
#define MAX_KDA_BOUND 1024.0f

static int ssm_valid(const uint8_t *img, const colibri_hparams *hp)
{
    int kda_ok =
        hp->kda_rank <= MAX_SSM_SIZE && (colibri_rd_u32(img + REC_KDA_BOUND) == 0u ||
                                         (colibri_is_finite(hp->kda_bound) &&
                                          hp->kda_bound < 0.0f && hp->kda_bound >= -MAX_KDA_BOUND));
    int mamba1_ok =
        hp->ssm_dt_rank == 0u ||
        (hp->ssm_dt_rank <= MAX_SSM_SIZE && hp->ssm_head_dim == 1u && hp->ssm_groups == 1u &&
         (uint64_t)hp->ssm_dt_rank + 2u * hp->ssm_state <= hp->ssm_heads);
    int dt_min_ok =
        colibri_rd_u32(img + REC_SSM_DT_MIN) == 0u ||
        (colibri_is_finite(hp->ssm_dt_min) && hp->ssm_dt_min > 0.0f && hp->ssm_dt_min <= 1.0f);
    if (hp->ssm_heads == 0u) {
        return hp->ssm_head_dim == 0u && hp->ssm_state == 0u && hp->ssm_groups == 0u &&
               hp->kda_rank == 0u && colibri_rd_u32(img + REC_KDA_BOUND) == 0u &&
               hp->ssm_dt_rank == 0u && colibri_rd_u32(img + REC_SSM_DT_MIN) == 0u;
    }
    if (!kda_ok || !mamba1_ok || !dt_min_ok) {
        return 0;
    }
    return hp->ssm_heads <= MAX_SSM_SIZE && in_range(hp->ssm_head_dim, 1u, MAX_SSM_SIZE) &&
           in_range(hp->ssm_state, 1u, MAX_SSM_SIZE) &&
           in_range(hp->ssm_groups, 1u, hp->ssm_heads) && hp->ssm_heads % hp->ssm_groups == 0u;
}

/* Format 1.13's extension (docs/format.md 1.2): conv_kernel 0 or 2 .. 64;
 * router_sum_eps 0 .. 1 with router_score 1, else its bits zero; 1.14's
 * Mamba2 sizes; the rest of the 512 bytes zero. Without the extension the
 * defaults. */
static colibri_status check_extension(const uint8_t *img, colibri_hparams *hp)
{
    int sigmoid = hp->router_score == ROUTER_SIGMOID;
    int ok = (hp->conv_kernel == 0u || in_range(hp->conv_kernel, 2u, MAX_CONV_KERNEL)) &&
             ssm_valid(img, hp);
    if (!extended(img)) {
        hp->router_sum_eps = sigmoid ? SIGMOID_SUM_EPS : 0.0f;
        return COLIBRI_OK;
    }
    if (sigmoid) {
        ok = ok && colibri_is_finite(hp->router_sum_eps) && hp->router_sum_eps >= 0.0f &&
             hp->router_sum_eps <= 1.0f;
    } else {
        ok = ok && colibri_rd_u32(img + REC_ROUTER_SUM_EPS) == 0u;
    }
    if (!ok) {
        return COLIBRI_E_BAD_HYPERPARAMS;
    }
    for (uint32_t off = REC_EXT_END; off < IMG_HEADER_SIZE_EXTENDED; off += 4u) {
        if (colibri_rd_u32(img + off) != 0u) {
            return COLIBRI_E_RESERVED;
        }
    }
    if (sigmoid && hp->router_sum_eps == 0.0f) {
        hp->router_sum_eps = SIGMOID_SUM_EPS;
    }
    return COLIBRI_OK;
}

colibri_status colibri_hparams_decode(const uint8_t *image, colibri_hparams *hp)
{
    colibri_status status;
    hparams_read(image, hp);
    status = check_kinds(hp);
    if (status == COLIBRI_OK) {
        status = check_attention(hp);
    }
    if (status == COLIBRI_OK) {
        status = check_ffn(hp);
    }
    if (status == COLIBRI_OK) {
        status = check_router(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_scales(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_rope(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_gpt_oss_fields(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_mla(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_attention_extras(image, hp);
    }
    if (status == COLIBRI_OK) {
        status = check_extension(image, hp);
    }
    return status;
}
