/* workspace.h - how the caller's scratch memory is cut into named buffers. */
#ifndef COLIBRI_WORKSPACE_H
#define COLIBRI_WORKSPACE_H

#include "model_internal.h"

/* Float buffers of one forward step; sizes in docs/core.md (state and scratch layout). */
typedef struct workspace {
    float *x;         /* [H] residual stream */
    float *xn;        /* [H] normed input of a sub-block */
    float *ffn_sum;   /* [H] FFN result being summed */
    float *ffn_out;   /* [H] one expert's / projection's output */
    float *q;         /* [Q] */
    float *k;         /* [K] */
    float *v;         /* [K] */
    float *attn;      /* [Q] attention output, heads concatenated */
    float *scores;    /* [ctx] attention scores of one head */
    float *h1;        /* [M] gate activations */
    float *h2;        /* [M] up activations */
    float *router;    /* [max(E,1)] router scores */
    float *rope;      /* [head_dim] cos (first half) and sin (second half) */
    float *topk_w;    /* [max(top_k,1)] routing weights */
    uint32_t *topk_i; /* [max(top_k,1)] routed expert indices */
} workspace;

/* Bytes the layout needs, in 64 bits (never overflows); the same sum as
 * colibri_workspace_layout's. */
uint64_t colibri_workspace_layout64(const colibri_hparams *hp, uint32_t context);

/* Bytes the layout needs; with base != NULL also points *ws into base.
 * Only for a layout whose colibri_workspace_layout64 fits in size_t. */
size_t colibri_workspace_layout(const colibri_hparams *hp, uint32_t context, uint8_t *base,
                                workspace *ws);

#endif
