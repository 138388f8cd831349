/* workspace.h - how the caller's scratch memory is cut into named buffers. */
#ifndef COLIBRI_WORKSPACE_H
#define COLIBRI_WORKSPACE_H

#include "model_internal.h"

/* Buffers of one forward chunk of up to `batch` tokens, row t for token t;
 * sizes in docs/core.md (state and scratch layout). */
typedef struct workspace {
    uint32_t batch;    /* tokens a chunk may hold */
    uint32_t context;  /* positions a row of scores holds */
    uint32_t call_pos; /* state->pos when colibri_forward was called */
    float *x;          /* [B][H] residual stream */
    float *xn;         /* [B][H] normed input of a sub-block */
    float *ffn_sum;    /* [B][H] FFN result being summed */
    float *ffn_out;    /* [B][H] one expert's / projection's output */
    float *q;          /* [B][Q] */
    float *k;          /* [B][K] */
    float *v;          /* [B][K] */
    float *attn;       /* [B][Q] attention output, heads concatenated */
    float *scores;     /* [n_heads][ctx] attention scores, a row per query head */
    float *h1;         /* [B][M] gate activations */
    float *h2;         /* [B][M] up activations */
    float *router;     /* [B][max(E + Z,1)] router scores (Z zero experts) */
    float *rope;       /* [B][head_dim] cos (first half) and sin (second half) */
    float *topk_w;     /* [B][max(top_k,1)] routing weights */
    uint32_t *topk_i;  /* [B][max(top_k,1)] routed expert indices */
    float *xg;         /* [B][H] inputs of the tokens one expert takes */
    uint32_t *sel;     /* [B] which tokens those are */
    float *sel_w;      /* [B] and their routing weights */
    void *xq;          /* quantized images: [B][ceil(max(H, Q, M) / 32)] activation blocks of a
                       * Q8/Q4 product (36 bytes each); else empty */
    float *latent;     /* MLA: [n_heads][2 * kv_lora] each head's absorbed query and
                       * latent sum; else empty */
    float *shortcut;   /* [B][H] a shortcut layer's MoE output, until the next layer's
                       * FFN is added (format 1.12); else empty */
    float *ssm;        /* Mamba2, delta rules (1.14): [B][I] z, [B][C] the convolution's
                       * input and [B][C] its output, [B][I] the time steps (a KDA
                       * layer's decays) and [B][heads] beta; else empty */
} workspace;

/* Bytes the layout for chunks of `batch` tokens needs, in 64 bits (never
 * overflows: context <= 2^24, batch <= COLIBRI_MAX_BATCH); the same sum as
 * colibri_workspace_layout's. */
uint64_t colibri_workspace_layout64(const colibri_hparams *hp, uint32_t context, uint32_t batch);

/* Bytes the layout needs; with base != NULL also points *ws into base.
 * Only for a layout whose colibri_workspace_layout64 fits in size_t. */
size_t colibri_workspace_layout(const colibri_hparams *hp, uint32_t context, uint32_t batch,
                                uint8_t *base, workspace *ws);

/* The largest batch (<= COLIBRI_MAX_BATCH) whose layout fits in `bytes`;
 * 0 if not even one token's does. */
uint32_t colibri_workspace_batch(const colibri_hparams *hp, uint32_t context, uint64_t bytes);

#endif
