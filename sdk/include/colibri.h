/*
 * colibri.h - the one public header of the Colibri MoE inference core.
 *
 * Colibri runs Mixture-of-Experts transformer models from a model image that
 * lies in memory (an mmap'd file, or memory-mapped flash), in place, with no
 * allocation, no system call and no hidden state. This header is the manual:
 * every function says what it needs, what it returns and who owns what.
 *
 *   colibri_model  model;                 caller storage, filled by colibri_init
 *   colibri_state  state;                 caller storage: KV cache bookkeeping
 *   static uint8_t kv[...]   aligned(16)  caller memory: colibri_state_size()
 *   static uint8_t work[...] aligned(16)  caller memory: colibri_scratch_size()
 *
 *   colibri_init(&model, image, image_size, NULL);
 *   colibri_state_init(&state, &model, kv, sizeof kv, ctx);
 *   colibri_forward(&model, &state, ids, n, logits, COLIBRI_LOGITS_LAST,
 *                   work, sizeof work, NULL);
 *
 * Ownership: the image must stay mapped and unchanged while the model is in
 * use; the model struct points into it. The state points into the caller's
 * KV memory. Nothing is ever freed because nothing is ever allocated.
 *
 * Threads and interrupts: colibri_forward only reads the model and the image,
 * and writes only the state, the scratch memory and the logits the caller
 * passes. Two calls may run at once (one from an interrupt handler, say) if
 * they use different states, scratch buffers and logits buffers.
 *
 * Determinism: the same image, inputs and build give bit-identical logits.
 * The reference kernels are compiled without floating-point contraction.
 *
 * The model image format is specified in docs/format.md.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLIBRI_VERSION_MAJOR 0
#define COLIBRI_VERSION_MINOR 1
#define COLIBRI_VERSION_PATCH 0
/* The same as one number: major * 10000 + minor * 100 + patch. */
#define COLIBRI_VERSION_NUMBER                                                                     \
    (COLIBRI_VERSION_MAJOR * 10000 + COLIBRI_VERSION_MINOR * 100 + COLIBRI_VERSION_PATCH)

/* Image format version this build reads (docs/format.md). */
#define COLIBRI_FORMAT_MAJOR 1
#define COLIBRI_FORMAT_MINOR 16
/* Largest top_k and max_context; the record's other limits: docs/format.md 1.1. */
#define COLIBRI_MAX_TOP_K 64
#define COLIBRI_MAX_CONTEXT (1u << 24)
/* Most tokens one forward chunk holds (colibri_scratch_size_batch). */
#define COLIBRI_MAX_BATCH 256u

/*
 * Status codes. 0 is success. The values are pinned: they never change and
 * are never reused. colibri_strerror() gives a one-line text for each.
 */
typedef enum colibri_status {
    COLIBRI_OK = 0,
    COLIBRI_E_BAD_ARGUMENT = 1,         /* NULL pointer, zero length, bad enum */
    COLIBRI_E_BAD_MAGIC = 2,            /* not a Colibri image */
    COLIBRI_E_UNSUPPORTED_VERSION = 3,  /* format major version or flags unknown */
    COLIBRI_E_TRUNCATED = 4,            /* image shorter than it says it is */
    COLIBRI_E_CHECKSUM = 5,             /* header/table CRC or tensor data CRC wrong */
    COLIBRI_E_OUT_OF_RANGE = 6,         /* a tensor offset/size points past the end */
    COLIBRI_E_MISALIGNED = 7,           /* tensor or caller buffer not aligned */
    COLIBRI_E_UNSUPPORTED_ARCH = 8,     /* family, activation, norm or qk-norm kind */
    COLIBRI_E_UNSUPPORTED_ROUTER = 9,   /* router kind this build does not implement */
    COLIBRI_E_CONFIG_MISMATCH = 10,     /* image fingerprint != compiled-in config */
    COLIBRI_E_TOKEN_OUT_OF_RANGE = 11,  /* token id >= vocab_size */
    COLIBRI_E_CONTEXT_FULL = 12,        /* state has no room for the tokens */
    COLIBRI_E_WORKSPACE_TOO_SMALL = 13, /* state or scratch memory too small */
    COLIBRI_E_BAD_HYPERPARAMS = 14,     /* model record values invalid or inconsistent */
    COLIBRI_E_UNSUPPORTED_DTYPE = 15,   /* tensor dtype this build cannot read */
    COLIBRI_E_BAD_TENSOR_TABLE = 16,    /* tensor missing, extra, repeated or out of order */
    COLIBRI_E_BAD_SHAPE = 17,           /* tensor shape/size differs from the model record */
    COLIBRI_E_OVERLAP = 18,             /* tensor data overlaps the tables or another tensor */
    COLIBRI_E_BAD_LAYER_TABLE = 19,     /* layer table inconsistent */
    COLIBRI_E_SIGNATURE = 20,           /* signature does not verify (changed, other key) */
    COLIBRI_E_BAD_KEY = 21,             /* public key is not an Ed25519 point of full order */
    COLIBRI_E_UNSIGNED = 22,            /* no signature block after the image */
    COLIBRI_E_BAD_SIGNATURE_BLOCK = 23, /* signature block malformed, short or not this one's */
    COLIBRI_E_HASH_MISMATCH = 24,       /* a data block's SHA-512 differs from the signed one */
    COLIBRI_E_WRONG_KEY = 25,           /* signed, but not by the key the device trusts */
    COLIBRI_E_NO_SLOT = 26,             /* neither weight slot holds a bootable image */
    COLIBRI_E_FLASH = 27,               /* flash erase/program failed or read back wrong */
    COLIBRI_E_SLOT_TOO_SMALL = 28,      /* image and signature larger than the slot */
    COLIBRI_E_UPDATE_ORDER = 29,        /* update step out of order (offset, size, state) */
    COLIBRI_E_ROLLBACK = 30,            /* signed version older than the running slot's */
    COLIBRI_E_QUANT_SIZE = 31,          /* quantized tensor's size != rows x blocks x block bytes */
    COLIBRI_E_QUANT_BLOCKS = 32,        /* quantized tensor's block size or blocks per row wrong */
    COLIBRI_E_QUANT_SCALE = 33,         /* quantized tensor has a scale that is not finite */
    COLIBRI_E_EXPERT_UNAVAILABLE = 34,  /* the port could not give an expert's block */
    COLIBRI_E_RESERVED = 35,            /* a reserved field is not zero (a later feature) */
    COLIBRI_E_UPDATE_MISMATCH = 36,     /* the slot's image is not the bytes the update wrote */
    COLIBRI_E_LAST_IMAGE = 37,          /* refused: the slot is the last bootable image */
    COLIBRI_E_ROUTER_FAILED = 38,       /* the port's router returned nonzero */
    COLIBRI_E_BAD_ROUTE = 39            /* the port's router: expert out of range or twice,
                                         * or a weight not finite */
} colibri_status;

/* A one-line English description of a status; never NULL. */
const char *colibri_strerror(colibri_status status);

/* COLIBRI_VERSION_NUMBER of the library linked in (which may differ from the
 * header a program was compiled with when it loads a shared libcolibri). */
uint32_t colibri_version(void);

/* ---------------------------------------------------------------------------
 * Port interface: how the core reaches the platform. Optional; versioned.
 * ------------------------------------------------------------------------- */

/*
 * The struct only grows, at its end; version says how much of it the port
 * filled. colibri_init accepts 1 <= version <= COLIBRI_PORT_VERSION and reads
 * only the slots that version has, so a port written for an older version
 * keeps working unchanged.
 *
 *   version 1: ticks, prefetch, ctx
 *   version 2: + parallel_for, kernels
 *   version 3: + route, route_ctx
 *   version 4: + expert_acquire, expert_release, experts_chosen
 *   version 5: + attention_route
 *   version 6: + router
 */
#define COLIBRI_PORT_VERSION 6

/* The most expert blocks a forward pass holds at once (expert_acquire). */
#define COLIBRI_EXPERTS_HELD 2u

/* A task of parallel_for: runs task number `task` of a batch. */
typedef void (*colibri_task_fn)(void *arg, uint32_t task);

/*
 * A router observer (port version 3): called once per MoE layer and forward
 * chunk, after the router chose, with the choices for the chunk's n_tokens
 * tokens at positions pos .. pos + n_tokens - 1: token t went to experts
 * experts[t * top_k + j] (ascending, j < top_k) with weights[t * top_k + j].
 * Layers come in order within a chunk. The arrays live in the caller's
 * scratch memory and are valid only during the call; the observer must not
 * call the core on the same state or scratch. What it sees is what the
 * forward pass uses: the same bits on every kernel table, thread count and
 * batch size (the chunking, and so the n_tokens of each call, differs).
 */
typedef void (*colibri_route_fn)(void *route_ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens,
                                 uint32_t top_k, const uint32_t *experts, const float *weights);

/*
 * A router outside the core (port version 6: an accelerator, an FPGA IP; docs/core.md): for MoE
 * layer `layer` and a chunk of n_tokens tokens, x holds the router's input (n_tokens rows of
 * `hidden` floats: what the core's router would multiply). It writes token t's top_k experts to
 * experts[t * top_k + j], in any order, and their weights to weights[t * top_k + j], used as
 * they are (the outputs' factors; Llama 4's router_score 5: the inputs'), and returns 0; else
 * the call ends with COLIBRI_E_ROUTER_FAILED. A token's experts must be distinct and below
 * n_experts + zero_experts, its weights finite, else COLIBRI_E_BAD_ROUTE. Calling thread only.
 */
typedef int (*colibri_router_fn)(void *ctx, uint32_t layer, uint32_t n_tokens, uint32_t hidden,
                                 const float *x, uint32_t top_k, uint32_t *experts, float *weights);

typedef struct colibri_port {
    uint32_t version; /* the COLIBRI_PORT_VERSION the port was written for */
    /* (optional) a monotonic tick counter; what a tick is is the port's
     * business (cycles, instructions, nanoseconds) and its docs say so. */
    uint64_t (*ticks)(void *ctx);
    /* (optional) a hint that [addr, addr+size) is about to be read: an expert
     * block in slow flash, say. Must not fail and must not block for long. */
    void (*prefetch)(void *ctx, const void *addr, size_t size);
    void *ctx; /* passed back to the functions here */
    /* (optional, version 2) run fn(arg, 0) .. fn(arg, n_tasks - 1), in any
     * order and on any threads, and return when all have finished. Tasks
     * never share what they write, so results do not depend on the split.
     * NULL, or a port of version 1: the core runs them itself, in order.
     * Must not be called from an interrupt handler's port. */
    void (*parallel_for)(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg);
    /* (optional, version 2) the kernel table for this CPU (a port may pick
     * one by probing the CPU); NULL, or a port of version 1: the reference. */
    const struct colibri_kernels *kernels;
    /* (optional, version 3) the router observer above (statistics such as
     * expert use per layer, routing traces); NULL: none. It runs on the
     * calling thread, never inside parallel_for. */
    colibri_route_fn route;
    void *route_ctx; /* passed to route */
    /* (optional, version 4) Routed experts that need not be addressable in
     * the image (docs/core.md, Experts from storage): the core asks for
     * expert `expert` of layer `layer`, the bytes [offset, offset + size) of
     * the image (its gate, up and down matrices as the image lays them out),
     * and reads them at the returned address, which must be 64-byte aligned
     * and hold those bytes unchanged until expert_release(layer, expert).
     * NULL when the bytes cannot be had: the call then returns
     * COLIBRI_E_EXPERT_UNAVAILABLE and no logits, and the state is as it was
     * before the call. At most COLIBRI_EXPERTS_HELD blocks are held at once;
     * every acquired block is released, on errors too. The core reads no
     * routed expert's bytes in the image then (everything else it reads in
     * place), and never calls prefetch for them. Both NULL: in place. */
    const void *(*expert_acquire)(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset,
                                  size_t size);
    void (*expert_release)(void *ctx, uint32_t layer, uint32_t expert);
    /* (optional, version 4) as soon as a layer's router has chosen for a
     * chunk: the experts the chunk uses, ascending, count of them, in the
     * order they will be acquired, so the port can read the later ones while
     * the first computes. Runs on the calling thread. NULL: none. */
    void (*experts_chosen)(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t count);
    /* (optional, version 5) the router observer of the attention experts
     * (format 1.11, JetMoE's mixture of attention heads): called as route,
     * with route_ctx, once per layer and chunk after the attention's router
     * chose (before the layer's FFN), top_k experts a token. NULL: none. */
    colibri_route_fn attention_route;
    /* (optional, version 6) the router above, with ctx, for every MoE FFN (the
     * attention experts keep the core's); NULL: the core's router. */
    colibri_router_fn router;
} colibri_port;

/* ---------------------------------------------------------------------------
 * Kernels: the numeric inner loops, one table per instruction set
 * (docs/kernels.md). Every kernel meets the same contract and gives the same
 * bits as the reference. A NULL slot means the reference kernel.
 * ------------------------------------------------------------------------- */

/* Quantized weights (docs/format.md, docs/kernels.md): a row is ceil(cols /
 * 32) blocks of 32 (zeros past cols), each a binary16 scale d and its values:
 * Q8 32 int8 q (weight = d * q, 34 bytes), Q4 16 bytes, byte j holding
 * element j (low nibble) and j + 16 (weight = d * (nibble - 8), 18 bytes). */
#define COLIBRI_QBLOCK 32u
#define COLIBRI_Q8_BLOCK_BYTES 34u
#define COLIBRI_Q4_BLOCK_BYTES 18u

/* The same in groups of 16 rows (1.8, Q8_R16, Q4_R16; docs/format.md 3.4): a
 * tile a block of the 16 rows, their scales then their values interleaved. */
#define COLIBRI_QGROUP_ROWS 16u

/* Super-blocks (1.15, QK2 .. QK6, docs/format.md 3.5): 256 weights of a row at b bits: binary16
 * d and dmin, eight blocks' 6-bit scales and mins, b-bit levels q (weight = d * scale * q -
 * dmin * min). QK2_R16 .. QK6_R16 (1.16, 3.6): in groups of 16 rows, a tile a super-block. */
#define COLIBRI_QK_BLOCK 256u
#define COLIBRI_QK_BYTES(bits) (16u + 32u * (bits))

/* One block of 32 quantized activations: x[i] ~ d * q[i], q in [-127, 127]
 * (the core's one activation quantizer makes them, docs/kernels.md). A row
 * of cols activations is ceil(cols / 32) of these. */
typedef struct colibri_qblock {
    float d;
    int8_t q[32];
} colibri_qblock;

typedef struct colibri_kernels {
    const char *name; /* "reference", ... */
    /* sum_i a[i] * b[i] in the canonical order (docs/kernels.md). */
    float (*dot)(const float *a, const float *b, uint32_t n);
    /* out[r] = dot(w + r * cols, x, cols) for r < rows, w fp32 row-major;
     * out does not alias w or x. */
    void (*matvec_f32)(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols);
    /* out[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)); out may alias x. */
    void (*rmsnorm)(float *out, const float *x, const float *w, uint32_t n, float eps);
    /* x[i] = exp(x[i] - max) / sum, in place; n >= 1. */
    void (*softmax)(float *x, uint32_t n);
    /* a[i] = silu(a[i]) * b[i], silu(v) = v / (1 + exp(-v)). */
    void (*swiglu)(float *a, const float *b, uint32_t n);
    /* y[i] = y[i] + x[i]. */
    void (*add)(float *y, const float *x, uint32_t n);
    /* y[i] = y[i] + x[i] * s. */
    void (*add_scaled)(float *y, const float *x, float s, uint32_t n);
    /* rotate one head vector by a RoPE cos/sin table (rotate-half). */
    void (*rope_apply)(float *x, const float *cos_sin, uint32_t head_dim);
    /* out[t * out_stride + r] = dot(w + r * cols, x + t * cols, cols), r < rows,
     * t < n: each weight row read once for all n tokens; out aliases neither. */
    void (*matmat_f32)(float *out, size_t out_stride, const float *w, const float *x, uint32_t rows,
                       uint32_t cols, uint32_t n);
    /* out[t * out_stride + r] = the quantized dot of weight row r (Q8
     * blocks, rows * ceil(cols / 32) * 34 bytes at w, any alignment) with
     * activation row t (ceil(cols / 32) blocks at x + t * ceil(cols / 32)),
     * r < rows, t < n: per block an exact integer sum, then
     * acc = fma(isum, d_w * d_x, acc) block by block (docs/kernels.md). */
    void (*matmat_q8)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n);
    /* The same with Q4 weight blocks (18 bytes each). */
    void (*matmat_q4)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n);
    /* The same on rows in groups of 16 (Q8_R16, Q4_R16 above; w: a group's
     * first tile; padding rows not written): matmat_q8/q4's bits. */
    void (*matmat_q8r16)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                         uint32_t rows, uint32_t cols, uint32_t n);
    void (*matmat_q4r16)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                         uint32_t rows, uint32_t cols, uint32_t n);
    /* The same on super-blocks of `bits` bits (QK2 .. QK6 above): per block
     * of 32 of a row, acc = fma(isum, d * scale * d_x, acc), then
     * acc = fma(-sum(q_x), dmin * min * d_x, acc) (docs/kernels.md); and on
     * QK2_R16 .. QK6_R16 (w: a group's first tile): matmat_qk's bits. */
    void (*matmat_qk)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
    void (*matmat_qkr16)(float *out, size_t out_stride, const uint8_t *w, const colibri_qblock *x,
                         uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits);
} colibri_kernels;

extern const colibri_kernels colibri_kernels_reference; /* portable C: defines every result */
/* SIMD tables, each only in a core built with it (make KERNELS=..., a board's
 * `kernels`): x86-64 AVX2, AVX-512F (a port checks the CPU first), AArch64
 * Advanced SIMD, Armv8.1-M Helium (Cortex-M55). */
extern const colibri_kernels colibri_kernels_avx2;
extern const colibri_kernels colibri_kernels_avx512;
/* avx512 with its quantized products on AVX-512 VNNI (and BW). */
extern const colibri_kernels colibri_kernels_avx512vnni;
extern const colibri_kernels colibri_kernels_neon;
/* neon with its quantized products on the dot-product extension (SDOT). */
extern const colibri_kernels colibri_kernels_neondot;
extern const colibri_kernels colibri_kernels_helium;
/* Quantized products on the Arm DSP extension (SMLAD: Cortex-M4/M7/M33/M55). */
extern const colibri_kernels colibri_kernels_dsp;

/* ---------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------- */

/* Hyper-parameters, decoded from the image's model record (docs/format.md). */
typedef struct colibri_hparams {
    uint32_t arch; /* the family, 1 mixtral .. 33 nemotron_h: docs/format.md 1.1, offset 36 */
    uint32_t vocab_size;
    uint32_t hidden_size;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t max_context;
    uint32_t dense_intermediate;
    uint32_t expert_intermediate;
    uint32_t n_experts;
    uint32_t shared_intermediate;
    float rms_eps;
    float rope_theta;
    uint32_t attn_bias; /* bit 0 q, 1 k, 2 v, 3 o, 4 LM head, 5 sinks, 6 router logits, 7
                         * experts, 8 output gate, 9 attention experts, 10 MoE output bias,
                         * 11 MLA head gate */
    uint32_t qk_norm; /* 0 none, 1 whole projection, 2 per head, 3 and 4 (no weights) after RoPE */
    uint32_t tie_embeddings;
    uint32_t router_score; /* 0 softmax then top-k; 1 sigmoid, selection on score + bias
                            * (DeepSeek-V3); 2 top-k of the logits, softmax over the k;
                            * 3 sparsemixer (PhiMoE, top-2); 4 softmax, top-k of
                            * softmax + ROUTER_BIAS (ERNIE-4.5) */
    uint32_t top_k;
    uint32_t router_norm_topk;
    float routed_scaling;
    uint32_t shared_gate; /* 0 none, 1 sigmoid */
    uint32_t n_group;
    uint32_t topk_group;
    uint32_t alignment;
    /* format 1.1 scales (defaults when the image has none: 1, 1, head_dim^-0.5,
     * 1): x = embedding * embedding_scale; x += block * residual_scale; attention
     * scores q.k * attention_scale; logits / logits_divisor (Granite). */
    float embedding_scale;
    float residual_scale;
    float attention_scale;
    float logits_divisor;
    /* format 1.2: 0 RMSNorm, 1 LayerNorm with bias (PhiMoE); sparsemixer's
     * jitter epsilon (router_score 3, else 0). */
    uint32_t norm_kind;
    float router_jitter;
    /* format 1.3: 1 when some weight matrix is quantized (docs/format.md
     * 3.3, 3.5); the scratch then holds the quantized activations (core.md). */
    uint32_t quantized;
    /* format 1.4: with router_norm_topk the k weights are divided by
     * max(their sum, router_norm_min) (ERNIE-4.5's moe_norm_min; else 0). */
    float router_norm_min;
    /* format 1.5 RoPE (none in the image: rope_dim = head_dim, rope_kind 0) on the first
     * rope_dim dimensions of each head; rope_kind 1 YaRN, its ramp clamp((i - ramp_low) /
     * ramp_width, 0, 1) and rope_attn_factor (docs/format.md 1.1). */
    uint32_t rope_dim;
    uint32_t rope_kind;
    float rope_factor;
    float rope_ramp_low;
    float rope_ramp_width;
    float rope_attn_factor;
    /* format 1.6 (gpt-oss): positions a sliding-window layer attends to (its
     * own included; 0: no such layer); activation 0 SiLU, 1 clamped SwiGLU
     * (gate = min(gate, limit), up = clamp(up, -limit, limit),
     * (up + 1) * gate * sigmoid(alpha * gate)). */
    uint32_t sliding_window;
    uint32_t activation;
    float swiglu_limit;
    float swiglu_alpha;
    /* format 1.7 Multi-head Latent Attention (mla 1, DeepSeek-V2/V3; else all 0): the KV cache
     * holds a kv_lora_rank latent and a rope_dim key a position (docs/format.md 1.1, mla). */
    uint32_t mla;
    uint32_t q_lora_rank;
    uint32_t kv_lora_rank;
    uint32_t v_head_dim;
    float lora_eps;
    /* format 1.11: q, k and v clamped to [-qkv_clip, qkv_clip] (DBRX; 0: not); Llama 4: q at p
     * times log1p(floor((p + 1) / attn_temp_floor)) * attn_temp_scale + 1 without RoPE. */
    float qkv_clip;
    float attn_temp_floor;
    float attn_temp_scale;
    /* format 1.12 (LongCat-Flash): zero-computation experts beside the n_experts
     * routed ones: the router scores n_experts + zero_experts, and a token routed
     * to expert n_experts + z adds its input times its weight (nothing read).
     * shortcut_layers: how many layers are FFN_SHORTCUT (a dense FFN and a MoE on
     * its input whose output is added after the next layer's FFN). */
    uint32_t zero_experts;
    uint32_t shortcut_layers;
    /* format 1.12 (MiMo-V2-Flash), header flag LAYER_ROPE: 1 when every layer
     * holds its own RoPE inverse frequencies (ROPE_FREQ, rope_dim / 2 floats)
     * in place of rope_theta^(-2i / rope_dim); else 0. */
    uint32_t layer_rope;
    /* 1.13 (LFM2): conv_kernel, the taps of the conv_layers (attn_kind 4 .. 8:
     * rows in the state, no KV cache; kv_layers the rest); router_sum_eps, added
     * to router_score 1's k weights' sum. 1.14 (Mamba, delta rules: attn_kind 5
     * .. 8): ssm_heads of ssm_head_dim channels, ssm_state per channel, ssm_groups
     * of B and C, KDA's gate rank, Mamba1's dt rank; KDA's gate bound, dt floor. */
    uint32_t conv_kernel, conv_layers, kv_layers;
    float router_sum_eps;
    uint32_t ssm_heads, ssm_head_dim, ssm_state, ssm_groups, kda_rank, ssm_dt_rank;
    float kda_bound, ssm_dt_min;
    uint32_t kv_int8; /* 1.15: K and V cached as int8 per head and position (docs/core.md) */
} colibri_hparams;

/*
 * A validated view of an image. Caller storage; filled by colibri_init; holds
 * pointers into the image only. Treat the fields as read-only.
 */
typedef struct colibri_model {
    const uint8_t *image;        /* the image, as passed to colibri_init */
    uint64_t image_size;         /* bytes the image says it has */
    uint64_t resident_size;      /* bytes of it at image: image_size, or less when the
                                  * routed experts come from the port (format 1.9's
                                  * EXPERTS_LAST; docs/core.md, Experts from storage) */
    const uint8_t *layer_table;  /* n_layers entries of 16 bytes */
    const uint8_t *tensor_table; /* n_tensors entries of 64 bytes */
    uint32_t n_tensors;
    uint32_t fingerprint; /* the image's meta CRC-32 */
    colibri_hparams hp;
    const float *token_embed;      /* [vocab_size, hidden_size] */
    const float *output_norm;      /* [hidden_size] */
    const float *lm_head;          /* [vocab_size, hidden_size]; == token_embed if tied (the
                                    * same dtype rule) */
    const float *output_norm_bias; /* [hidden_size] (LayerNorm) or NULL */
    const float *lm_head_bias;     /* [vocab_size] or NULL */
    colibri_port port;             /* the caller's port, as far as its version goes */
    colibri_kernels kernels;       /* the chosen table, NULL slots filled with the reference */
} colibri_model;

typedef struct colibri_options {
    /* 0: accept any image. Otherwise the image's fingerprint must equal it
     * (pass COLIBRI_MODEL_FINGERPRINT from the generated model_config.h). */
    uint32_t expected_fingerprint;
    const colibri_port *port; /* NULL: no ticks, no prefetch, one thread, reference kernels */
} colibri_options;

/*
 * Validate the image at [image, image + image_size) and fill *model.
 * Checks the header, the header/table CRC, the model record, the layer table
 * and every tensor table entry against the buffer size (docs/format.md,
 * section 4). Does not read tensor data (see colibri_verify). Zero copy.
 * The buffer may hold only the start of an image whose expert blocks come
 * last (format 1.9, EXPERTS_LAST), up to at least the end of its last
 * tensor that is not an expert's, when the port gives the routed experts
 * (expert_acquire): the rest stays in storage (docs/core.md).
 * On failure *model is zeroed and the status names the first defect found.
 * options may be NULL. image must be at least 4-byte aligned.
 */
colibri_status colibri_init(colibri_model *model, const void *image, size_t image_size,
                            const colibri_options *options);

/*
 * The fingerprint an image states (its header's meta CRC-32, what
 * colibri_options.expected_fingerprint and model_config.h's
 * COLIBRI_MODEL_FINGERPRINT are compared with), read without validating the
 * rest: for messages after COLIBRI_E_CONFIG_MISMATCH. Checks only what
 * colibri_init checks first: COLIBRI_E_TRUNCATED below the 256-byte header,
 * COLIBRI_E_BAD_MAGIC, COLIBRI_E_UNSUPPORTED_VERSION; any alignment.
 */
colibri_status colibri_image_fingerprint(const void *image, size_t image_size,
                                         uint32_t *fingerprint);

/*
 * Read every tensor of an initialised model and check its data CRC-32, and
 * that every scale of a quantized tensor (its d, dmin) is finite. Returns
 * COLIBRI_E_CHECKSUM or COLIBRI_E_QUANT_SCALE for the first bad tensor; if
 * bad_tensor is not NULL it receives that tensor's table index. Time is
 * proportional to the image size. Of an image given in part (colibri_init),
 * the part given: the expert blocks in storage are checked where the port
 * reads them (colibri_verify_expert_block).
 */
colibri_status colibri_verify(const colibri_model *model, uint32_t *bad_tensor);

/* Check the data CRCs (and scales) of one expert's block (gate, up, down) in the
 * image: COLIBRI_E_EXPERT_UNAVAILABLE for a block past the part init was given. */
colibri_status colibri_verify_expert(const colibri_model *model, uint32_t layer, uint32_t expert);

/* The same checks on a copy of the expert's block at `block` (what a port's
 * expert_acquire read from storage, say), its size colibri_expert_block's. */
colibri_status colibri_verify_expert_block(const colibri_model *model, uint32_t layer,
                                           uint32_t expert, const void *block);

/* Where expert `expert` of MoE layer `layer` lies in the image: the bytes
 * [*offset, *offset + *size) that expert_acquire is asked for (docs/core.md,
 * Experts from storage). COLIBRI_E_BAD_ARGUMENT for a layer that is not MoE
 * or an index out of range. offset or size may be NULL. */
colibri_status colibri_expert_block(const colibri_model *model, uint32_t layer, uint32_t expert,
                                    uint64_t *offset, size_t *size);

/* ---------------------------------------------------------------------------
 * State (KV cache) and scratch memory
 * ------------------------------------------------------------------------- */

typedef struct colibri_state {
    float *k_cache;       /* [kv_layers][max_context][n_kv_heads * head_dim] (kv_int8:
                           * rows of scales and int8); MLA: [..][kv_lora_rank + rope_dim] */
    float *v_cache;       /* same shape as k_cache; MLA: NULL (the latent is both) */
    float *conv_state;    /* 1.13: [2][conv_layers][rows of a layer] or NULL (core.md) */
    uint32_t max_context; /* positions this state can hold */
    uint32_t pos;         /* positions filled so far */
    uint32_t fingerprint; /* model it was made for */
    uint32_t conv_copy;   /* which copy holds the rows before pos (docs/core.md) */
} colibri_state;

/* Bytes of KV memory a state for max_context positions needs (0 if
 * max_context is 0 or larger than the model's). Formula: docs/core.md. */
size_t colibri_state_size(const colibri_model *model, uint32_t max_context);

/* Bytes of scratch memory colibri_forward needs with a state of
 * max_context positions (0 on bad arguments): one token at a time. */
size_t colibri_scratch_size(const colibri_model *model, uint32_t max_context);

/* Bytes of scratch for chunks of up to max_batch tokens (1 ..
 * COLIBRI_MAX_BATCH; 0 on bad arguments). colibri_forward runs a prompt in
 * chunks of the largest batch its scratch holds, each weight row read once
 * per chunk; the logits are the same bits whatever the batch. */
size_t colibri_scratch_size_batch(const colibri_model *model, uint32_t max_context,
                                  uint32_t max_batch);

/*
 * Make *state use the caller's memory [mem, mem + mem_size) as its KV cache
 * for up to max_context positions, and empty it. mem must be 16-byte
 * aligned and at least colibri_state_size(model, max_context) bytes.
 */
colibri_status colibri_state_init(colibri_state *state, const colibri_model *model, void *mem,
                                  size_t mem_size, uint32_t max_context);

/* Forget every position (the memory is kept, not cleared). */
void colibri_state_reset(colibri_state *state);

/* ---------------------------------------------------------------------------
 * Forward pass
 * ------------------------------------------------------------------------- */

typedef enum colibri_logits_mode {
    COLIBRI_LOGITS_LAST = 0, /* logits: vocab_size floats, for the last id */
    COLIBRI_LOGITS_ALL = 1,  /* logits: n_ids * vocab_size floats, row per id */
    COLIBRI_LOGITS_NONE = 2  /* logits may be NULL; only the KV cache advances */
} colibri_logits_mode;

/*
 * Run ids[0 .. n_ids-1] through the model at positions state->pos onward,
 * append their keys and values to the state, and write logits as asked.
 *
 * Before anything is written, every id is checked (< vocab_size, else
 * COLIBRI_E_TOKEN_OUT_OF_RANGE), room is checked (state->pos + n_ids <=
 * state->max_context, else COLIBRI_E_CONTEXT_FULL) and the scratch size is
 * checked (COLIBRI_E_WORKSPACE_TOO_SMALL): a refused call changes nothing.
 * With a port's expert_acquire, a block it cannot give ends the call with
 * COLIBRI_E_EXPERT_UNAVAILABLE (its router: COLIBRI_E_ROUTER_FAILED,
 * COLIBRI_E_BAD_ROUTE): state->pos is where it was before the call
 * (the state holds nothing of it that a later call would read), and the
 * logits buffer's contents are undefined.
 *
 * scratch: 16-byte aligned, colibri_scratch_size(model, state->max_context)
 * bytes. ticks (optional): the port's tick count for the call, 0 without a
 * ticks function.
 *
 * No allocation, no system call, loop bounds fixed by the model record.
 */
colibri_status colibri_forward(const colibri_model *model, colibri_state *state, const int32_t *ids,
                               uint32_t n_ids, float *logits, colibri_logits_mode mode,
                               void *scratch, size_t scratch_size, uint64_t *ticks);

/* Index of the largest of n floats; ties go to the lowest index; NaN ranks
 * below every number, so all-NaN values give 0 (check values[0] then). */
uint32_t colibri_argmax(const float *values, uint32_t n);

/* CRC-32 (IEEE 802.3, reflected, as the image format uses: docs/format.md
 * section 6) continued over [data, data + size); start with crc = 0. The
 * serial protocol and the samples use it too. */
uint32_t colibri_crc32_update(uint32_t crc, const uint8_t *data, size_t size);

/* The over-the-air part of the API (signed images, A/B weight slots): in a
 * file of its own, part of this header. */
#include "colibri_ota.h"

/* The expert cache (routed experts read from storage into caller memory): in
 * a file of its own, part of this header. */
#include "colibri_expert_cache.h"

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_H */
