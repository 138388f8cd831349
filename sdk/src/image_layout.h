/*
 * image_layout.h - byte offsets and codes of the model image format v1.
 * docs/format.md is the normative description; this file mirrors it.
 */
#ifndef COLIBRI_IMAGE_LAYOUT_H
#define COLIBRI_IMAGE_LAYOUT_H

#include <stdint.h>

#include "colibri.h"

#define IMG_MAGIC "COLIBRI\x1a"
#define IMG_MAGIC_SIZE 8u
#define IMG_HEADER_SIZE 256u
/* Format 1.13: a header of 512 bytes, the record's extension at 256 .. 511. */
#define IMG_HEADER_SIZE_EXTENDED 512u
#define IMG_LAYER_ENTRY_SIZE 16u
#define IMG_TENSOR_ENTRY_SIZE 64u
#define IMG_DATA_ALIGN 64u
#define IMG_NONE 0xFFFFu

/* Header fields (section 1). */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION_MAJOR = 8,
    HDR_VERSION_MINOR = 10,
    HDR_HEADER_SIZE = 12,
    HDR_IMAGE_SIZE = 16,
    HDR_META_CRC = 24,
    HDR_FLAGS = 28,
    HDR_ALIGNMENT = 32,
    HDR_ARCH = 36,
    HDR_LAYER_TABLE = 40,
    HDR_TENSOR_TABLE = 48,
    HDR_N_TENSORS = 56,
    HDR_ZERO_EXPERTS = 60 /* u32: zero-computation experts (format 1.12), 0 before */
};

/* Model record fields (section 1.1). */
enum {
    REC_VOCAB = 64,
    REC_HIDDEN = 68,
    REC_N_LAYERS = 72,
    REC_N_HEADS = 76,
    REC_N_KV_HEADS = 80,
    REC_HEAD_DIM = 84,
    REC_MAX_CONTEXT = 88,
    REC_DENSE_INTER = 92,
    REC_EXPERT_INTER = 96,
    REC_N_EXPERTS = 100,
    REC_SHARED_INTER = 104,
    REC_RMS_EPS = 108,
    REC_ROPE_THETA = 112,
    REC_ATTN_BIAS = 116,
    REC_QK_NORM = 120,
    REC_TIE_EMBED = 124,
    REC_ROUTER_SCORE = 128,
    REC_TOP_K = 132,
    REC_NORM_TOPK = 136,
    REC_ROUTED_SCALING = 140,
    REC_SHARED_GATE = 144,
    REC_N_GROUP = 148,
    REC_TOPK_GROUP = 152,
    REC_ACTIVATION = 156,
    REC_NORM_KIND = 160,
    REC_EMBEDDING_SCALE = 164, /* format 1.1, with HDR_FLAG_SCALES */
    REC_RESIDUAL_SCALE = 168,
    REC_ATTENTION_SCALE = 172,
    REC_LOGITS_DIVISOR = 176,
    REC_ROUTER_JITTER = 180,   /* format 1.2, with router_score 3 */
    REC_ROUTER_NORM_MIN = 184, /* format 1.4, with router_score 4 */
    REC_ROPE_DIM = 188,        /* format 1.5, with HDR_FLAG_ROPE */
    REC_ROPE_KIND = 192,
    REC_ROPE_FACTOR = 196,
    REC_ROPE_RAMP_LOW = 200,
    REC_ROPE_RAMP_WIDTH = 204,
    REC_ROPE_ATTN_FACTOR = 208,
    REC_SLIDING_WINDOW = 212, /* format 1.6, with HDR_FLAG_SLIDING */
    REC_SWIGLU_LIMIT = 216,   /* format 1.6, with activation 1 */
    REC_SWIGLU_ALPHA = 220,
    REC_MLA = 224, /* format 1.7, with HDR_FLAG_MLA */
    REC_Q_LORA_RANK = 228,
    REC_KV_LORA_RANK = 232,
    REC_V_HEAD_DIM = 236,
    REC_LORA_EPS = 240,
    REC_QKV_CLIP = 244,        /* format 1.11: q, k and v clamped to +-qkv_clip */
    REC_ATTN_TEMP_FLOOR = 248, /* format 1.11: attention temperature tuning */
    REC_ATTN_TEMP_SCALE = 252,
    REC_END = 256, /* the record fills the header: no reserved bytes left */
    /* format 1.13, with header_size 512: the record's extension (section 1.2) */
    REC_CONV_KERNEL = 256,    /* taps of a short convolution layer (attn_kind 4) */
    REC_ROUTER_SUM_EPS = 260, /* router_score 1: added to the k weights' sum */
    /* format 1.14: the Mamba2 layers' (attn_kind 5) heads, their width, the
     * state's per head and the groups sharing B and C */
    REC_SSM_HEADS = 264,
    REC_SSM_HEAD_DIM = 268,
    REC_SSM_STATE = 272,
    REC_SSM_GROUPS = 276,
    REC_KDA_RANK = 280,    /* 1.14: a KDA layer's gate projections' rank (0: full) */
    REC_KDA_BOUND = 284,   /* 1.14: its bounded forget gate's lower bound (0: none) */
    REC_SSM_DT_RANK = 288, /* 1.14: a Mamba1 layer's time step rank (0: none) */
    REC_SSM_DT_MIN = 292,  /* 1.14: Mamba2's least time step (0: none) */
    REC_EXT_END = 296      /* 296 .. 511 reserved: zero */
};

/* Header flags a reader of this version knows (section 1). */
enum {
    HDR_FLAG_SCALES = 1,
    HDR_FLAG_ROPE = 2,
    HDR_FLAG_SLIDING = 4,       /* format 1.6: sliding_window and the layers' attn_kind */
    HDR_FLAG_MLA = 8,           /* format 1.7: Multi-head Latent Attention */
    HDR_FLAG_EXPERTS_LAST = 16, /* format 1.9: every expert block after the other data */
    HDR_FLAG_LAYER_ROPE = 32,   /* format 1.12: each layer's RoPE frequencies (ROPE_FREQ) */
    HDR_FLAG_KV_INT8 = 64,      /* format 1.15: the KV cache held as int8 (docs/core.md) */
    HDR_KNOWN_FLAGS = HDR_FLAG_SCALES | HDR_FLAG_ROPE | HDR_FLAG_SLIDING | HDR_FLAG_MLA |
                      HDR_FLAG_EXPERTS_LAST | HDR_FLAG_LAYER_ROPE | HDR_FLAG_KV_INT8
};

/* activation values (section 1.1): SiLU; gpt-oss's clamped SwiGLU (1.6). */
enum { ACT_SILU = 0, ACT_SWIGLU_CLAMPED = 1, ACT_RELU2 = 2 };
/* ACT_RELU2 (1.14, Nemotron-H): relu(up x)^2, MLPs without a gate matrix. */

/* router_score values (section 1.1). */
enum {
    ROUTER_SOFTMAX = 0,
    ROUTER_SIGMOID = 1,
    ROUTER_TOPK_SOFTMAX = 2,
    ROUTER_SPARSEMIXER = 3,
    ROUTER_SOFTMAX_BIASED = 4,
    ROUTER_TOPK_SIGMOID_INPUT = 5 /* format 1.11, Llama 4: the weight scales the input */
};

/* norm_kind values (section 1.1). NORM_RMS_POST (format 1.10, OLMo-2 and
 * FlexOlmo): RMSNorm on each sublayer's output before its residual add, the
 * sublayers reading the residual stream itself. */
enum { NORM_RMS = 0, NORM_LAYER = 1, NORM_RMS_POST = 2, NORM_RMS_SANDWICH = 3 };
/* NORM_RMS_SANDWICH (format 1.11, AFMoE): RMSNorm on each sublayer's input
 * and, with its own weights, on its output before the residual add. */

/* rope_kind values (section 1.1, format 1.5). */
enum { ROPE_DEFAULT = 0, ROPE_YARN = 1 };

/* mla values (section 1.1, format 1.7): Multi-head Latent Attention. */
enum { MLA_LATENT = 1 };

/* Layer table entry fields (section 2). */
enum { LAY_FFN_KIND = 0, LAY_FIRST_TENSOR = 4, LAY_N_TENSORS = 8, LAY_ATTN_KIND = 12 };
/* attn_kind: format 1.6; ATTN_FULL_NOPE (1.10, EXAONE's global layers): full
 * attention without RoPE on q and k. */
enum {
    ATTN_FULL = 0,
    ATTN_SLIDING = 1,
    ATTN_FULL_NOPE = 2,
    ATTN_CHUNKED = 3,
    ATTN_CONV = 4,
    ATTN_MAMBA2 = 5,
    ATTN_GATED_DELTA = 6,
    ATTN_KDA = 7,
    ATTN_MAMBA1 = 8,
    ATTN_NONE = 9 /* 1.14: no operator, the layer is its FFN (Nemotron-H) */
};
/* ATTN_CHUNKED (1.11, Llama 4): positions in chunks of sliding_window, each
 * attending within its own chunk up to itself. ATTN_CONV (1.13, LFM2): no
 * attention but a gated short convolution (short_conv.c), no KV cache.
 * ATTN_MAMBA2 (1.14, Granite-4.0-H): a Mamba2 mixer (mamba2.c), no KV cache.
 * ATTN_GATED_DELTA (1.14, Qwen3-Next): a gated delta rule layer
 * (gated_delta.c) over the same inputs and state, no KV cache. ATTN_KDA
 * (1.14, Kimi-Linear): the same rule with a decay per key channel.
 * ATTN_MAMBA1 (1.14, Jamba): a Mamba (v1) mixer (mamba1.c), no KV cache. */
/* FFN_SHORTCUT (format 1.12, LongCat-Flash): a dense FFN and, on the same
 * input, a MoE whose output is added after the next layer's FFN. */
enum { FFN_DENSE = 0, FFN_MOE = 1, FFN_SHORTCUT = 2, FFN_NONE = 3 };
/* FFN_NONE (1.14, Nemotron-H): no FFN, the layer is its operator. */

/* Tensor table entry fields (section 3). */
enum {
    TEN_ROLE = 0,
    TEN_LAYER = 2,
    TEN_EXPERT = 4,
    TEN_DTYPE = 6,
    TEN_NDIM = 8,
    TEN_SHAPE = 12,
    TEN_CRC = 28,
    TEN_OFFSET = 32,
    TEN_SIZE = 40,
    TEN_BLOCK = 48,      /* format 1.3, quantized dtypes: weights per block */
    TEN_ROW_BLOCKS = 52, /* and blocks per row */
    TEN_RESERVED = 56,   /* 8 bytes, zero */
    TEN_RESERVED_SIZE = 8
};
/* Tensor dtypes (section 3.3): float32, the blockwise Q8 and Q4 (1.3),
 * whose block sizes are COLIBRI_QBLOCK and COLIBRI_Q8/Q4_BLOCK_BYTES, the
 * same blocks in groups of COLIBRI_QGROUP_ROWS rows (1.8), and the
 * super-blocks of 256 weights at 2 .. 6 bits (1.15, section 3.5), row by row
 * or in groups of 16 rows (1.16, 3.6). */
enum {
    DTYPE_F32 = 0,
    DTYPE_Q8 = 1,
    DTYPE_Q4 = 2,
    DTYPE_Q8_R16 = 3,
    DTYPE_Q4_R16 = 4,
    DTYPE_QK2 = 5, /* .. DTYPE_QK6 = 9: bits = dtype - 3 */
    DTYPE_QK6 = 9,
    DTYPE_QK2_R16 = 10, /* .. DTYPE_QK6_R16 = 14 (1.16): bits = dtype - 8 */
    DTYPE_QK6_R16 = 14
};

/* Whether a dtype is a super-block one (QK2 .. QK6, QK2_R16 .. QK6_R16), and
 * its bits. */
static inline int dtype_superblocks(uint32_t dtype)
{
    return dtype >= DTYPE_QK2 && dtype <= DTYPE_QK6_R16;
}

static inline uint32_t dtype_qk_bits(uint32_t dtype)
{
    return dtype <= DTYPE_QK6 ? dtype - 3u : dtype - 8u;
}

/* Bytes of one block of a quantized dtype (0 for float32). */
static inline uint32_t dtype_block_bytes(uint32_t dtype)
{
    return dtype == DTYPE_Q8 || dtype == DTYPE_Q8_R16   ? COLIBRI_Q8_BLOCK_BYTES
           : dtype == DTYPE_Q4 || dtype == DTYPE_Q4_R16 ? COLIBRI_Q4_BLOCK_BYTES
           : dtype_superblocks(dtype)                   ? COLIBRI_QK_BYTES(dtype_qk_bits(dtype))
                                                        : 0u;
}

/* Weights of one block of a quantized dtype (its TEN_BLOCK). */
static inline uint32_t dtype_block_weights(uint32_t dtype)
{
    return dtype_superblocks(dtype) ? COLIBRI_QK_BLOCK : COLIBRI_QBLOCK;
}

/* Bytes of one row of cols weights of a quantized dtype (blocks padded). */
static inline size_t dtype_row_bytes(uint32_t dtype, uint32_t cols)
{
    uint32_t per = dtype_block_weights(dtype);
    return (size_t)((cols + per - 1u) / per) * dtype_block_bytes(dtype);
}

/* Whether a dtype stores its rows in groups of 16 (1.8, 1.16). */
static inline int dtype_row_groups(uint32_t dtype)
{
    return dtype == DTYPE_Q8_R16 || dtype == DTYPE_Q4_R16 ||
           (dtype >= DTYPE_QK2_R16 && dtype <= DTYPE_QK6_R16);
}

/* Tensor roles (section 3.1). */
enum {
    ROLE_TOKEN_EMBED = 1,
    ROLE_OUTPUT_NORM = 2,
    ROLE_LM_HEAD = 3,
    ROLE_OUTPUT_NORM_BIAS = 4,
    ROLE_LM_HEAD_BIAS = 5,
    ROLE_ATTN_NORM = 16,
    ROLE_ATTN_Q = 17,
    ROLE_ATTN_K = 18,
    ROLE_ATTN_V = 19,
    ROLE_ATTN_O = 20,
    ROLE_ATTN_Q_BIAS = 21,
    ROLE_ATTN_K_BIAS = 22,
    ROLE_ATTN_V_BIAS = 23,
    ROLE_ATTN_O_BIAS = 24,
    ROLE_ATTN_Q_NORM = 25,
    ROLE_ATTN_K_NORM = 26,
    ROLE_FFN_NORM = 27,
    ROLE_ATTN_NORM_BIAS = 28,
    ROLE_FFN_NORM_BIAS = 29,
    ROLE_ATTN_SINKS = 30,
    ROLE_DENSE_GATE = 32,
    ROLE_DENSE_UP = 33,
    ROLE_DENSE_DOWN = 34,
    ROLE_ROUTER_LOGIT_BIAS = 39,
    ROLE_ROUTER = 40,
    ROLE_SHARED_GATE = 41,
    ROLE_SHARED_UP = 42,
    ROLE_SHARED_DOWN = 43,
    ROLE_SHARED_EXPERT_GATE = 44,
    ROLE_ROUTER_BIAS = 45,
    ROLE_EXPERT_GATE_UP_BIAS = 46,
    ROLE_EXPERT_DOWN_BIAS = 47,
    ROLE_EXPERT_GATE = 48,
    ROLE_EXPERT_UP = 49,
    ROLE_EXPERT_DOWN = 50,
    ROLE_MLA_Q_A = 64, /* format 1.6: Multi-head Latent Attention */
    ROLE_MLA_Q_A_NORM = 65,
    ROLE_MLA_Q_B = 66,
    ROLE_MLA_KV_A = 67,
    ROLE_MLA_KV_A_NORM = 68,
    ROLE_MLA_KV_B = 69,
    ROLE_ATTN_GATE = 70, /* format 1.11: the attention output's gate */
    ROLE_ATTN_POST_NORM = 71,
    ROLE_FFN_POST_NORM = 72,
    ROLE_ATTN_ROUTER = 73, /* format 1.11: the attention experts' router */
    ROLE_MOE_OUT_BIAS = 74,
    ROLE_ROPE_FREQ = 75, /* format 1.12: a layer's RoPE inverse frequencies */
    ROLE_CONV_IN_B = 76, /* format 1.13: a short convolution layer's B, C and X */
    ROLE_CONV_IN_C = 77,
    ROLE_CONV_IN_X = 78,
    ROLE_CONV_KERNEL = 79, /* [H, conv_kernel] the depthwise taps, float32 */
    ROLE_CONV_OUT = 80,
    ROLE_SSM_IN_Z = 81, /* format 1.14: a Mamba2 layer's gate, x/B/C and dt projections */
    ROLE_SSM_IN_XBC = 82,
    ROLE_SSM_IN_DT = 83,
    ROLE_SSM_CONV_KERNEL = 84, /* [conv channels, conv_kernel] float32 */
    ROLE_SSM_CONV_BIAS = 85,   /* the float32 vectors: conv bias, dt bias, A, D, norm */
    ROLE_SSM_DT_BIAS = 86,
    ROLE_SSM_A = 87,
    ROLE_SSM_D = 88,
    ROLE_SSM_NORM = 89,
    ROLE_SSM_OUT = 90,
    ROLE_SSM_IN_BETA = 91, /* a gated delta layer's beta projection */
    ROLE_KDA_F_A = 92,     /* 1.14: a KDA layer's forget gate projection, [rank or I, H] */
    ROLE_KDA_F_B = 93,     /* its second factor [I, rank] (kda_rank > 0) */
    ROLE_KDA_G_A = 94,     /* its output gate projection, the same shapes */
    ROLE_KDA_G_B = 95,
    ROLE_ATTN_HEAD_GATE = 96, /* 1.14: [n_heads, H] float32, attn_bias bit 11 */
    ROLE_MAMBA1_X_PROJ = 97,  /* 1.14: a Mamba1 layer's dt, B and C projection [R + 2N, I] */
    ROLE_MAMBA1_DT_NORM = 98, /* the RMSNorms of dt [R], B and C [N] (Jamba's) */
    ROLE_MAMBA1_B_NORM = 99,
    ROLE_MAMBA1_C_NORM = 100,
    ROLE_MAMBA1_DT_PROJ = 101, /* [I, R] */
    ROLE_MAMBA1_A = 102        /* [I, N] float32: A = -exp(A_log) per channel and state */
};

/* Attention bias bits, qk-norm kinds, architectures. */
enum { BIAS_Q = 1u, BIAS_K = 2u, BIAS_V = 4u, BIAS_O = 8u, BIAS_ATTN = 15u };
enum { BIAS_LM_HEAD = 16u }; /* format 1.2 */
/* format 1.6: per-head attention sinks, router logit bias, expert biases;
 * 1.11: the attention output's sigmoid gate (AFMoE), attention experts
 * (JetMoE's mixture of attention heads) and a bias after the routed experts'
 * sum (JetMoE). */
enum { BIAS_SINKS = 32u, BIAS_ROUTER = 64u, BIAS_EXPERTS = 128u, BIAS_ATTN_GATE = 256u };
enum { BIAS_ATTN_EXPERTS = 512u, BIAS_MOE_OUT = 1024u, BIAS_HEAD_GATE = 2048u, BIAS_ALL = 4095u };
/* 1.14: BIAS_HEAD_GATE, an MLA layer's output scaled per head by sigmoid(ATTN_HEAD_GATE
 * x) (Ling). */
/* QK_NORM_PER_HEAD_ROTATED (format 1.10, Hunyuan): per head, after RoPE;
 * QK_NORM_L2_ROTATED (1.11, Llama 4): per head without weights, after RoPE,
 * on the layers that turn q and k. */
enum {
    QK_NORM_NONE = 0,
    QK_NORM_WHOLE = 1,
    QK_NORM_PER_HEAD = 2,
    QK_NORM_PER_HEAD_ROTATED = 3,
    QK_NORM_L2_ROTATED = 4
};
enum {
    ARCH_MIXTRAL = 1,
    ARCH_QWEN2_MOE = 2,
    ARCH_OLMOE = 3,
    ARCH_QWEN3_MOE = 4,
    ARCH_SWITCH = 5,
    ARCH_GRANITEMOE = 6,
    ARCH_GRANITEMOE_SHARED = 7,
    ARCH_PHIMOE = 8,
    ARCH_ERNIE4_5_MOE = 9,
    ARCH_GLM4_MOE = 10,
    ARCH_DOTS1 = 11,
    ARCH_GPT_OSS = 12,
    ARCH_DEEPSEEK_V2 = 13,
    ARCH_DEEPSEEK_V3 = 14,
    ARCH_FLEX_OLMO = 15,
    ARCH_HUNYUAN_V1_MOE = 16,
    ARCH_GLM4_MOE_LITE = 17,
    ARCH_MINIMAX_M2 = 18,
    ARCH_EXAONE_MOE = 19,
    ARCH_DBRX = 20,
    ARCH_AFMOE = 21,
    ARCH_LLAMA4 = 22,
    ARCH_JETMOE = 23,
    ARCH_LONGCAT_FLASH = 24,
    ARCH_MIMO_V2_FLASH = 25,
    ARCH_LFM2_MOE = 26,
    ARCH_GRANITEMOE_HYBRID = 27,
    ARCH_QWEN3_NEXT = 28,
    ARCH_QWEN3_5_MOE = 29,
    ARCH_KIMI_LINEAR = 30,
    ARCH_BAILING_HYBRID = 31,
    ARCH_JAMBA = 32,
    ARCH_NEMOTRON_H = 33
};

/* Tensors of one expert block, and the non-expert tensors that precede the
 * experts in an MoE layer, follow from the model record. */
#define EXPERT_TENSORS 3u

#endif /* COLIBRI_IMAGE_LAYOUT_H */
