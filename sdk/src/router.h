/* router.h - MoE routing: scores, top-k selection, routing weights. */
#ifndef COLIBRI_ROUTER_H
#define COLIBRI_ROUTER_H

#include "colibri.h"

/*
 * Pick the k largest of scores[0 .. n): indices into idx[0 .. k) in rank
 * order (largest first), their scores into weight[0 .. k).
 * Tie rule: equal scores rank by lower index first. NaN ranks below every
 * number. Runs k full passes over n scores whatever the values: constant
 * time for a given (n, k). Requires 1 <= k <= n.
 */
void colibri_router_top_k(const float *scores, uint32_t n, uint32_t k, uint32_t *idx,
                          float *weight);

/* Reorder the k (idx, weight) pairs by ascending expert index, in a fixed
 * number of steps (the order experts are summed in). */
void colibri_router_sort_by_expert(uint32_t *idx, float *weight, uint32_t k);

/*
 * The routing of one token from its router logits (W x, n_experts +
 * zero_experts floats, overwritten; an index >= n_experts is a zero expert): scores = softmax(logits) then top-k (router_score 0), or
 * sigmoid(logits) with selection on score + bias (router_score 1,
 * DeepSeek-V3; bias: the layer's ROUTER_BIAS), or the top-k logits then a
 * softmax over those k (router_score 2, Granite), or PhiMoE's sparsemixer
 * top-2 (router_score 3), or a softmax whose top k are chosen on softmax +
 * bias (router_score 4, ERNIE-4.5); with n_group > 1 only the experts of
 * the topk_group best groups are candidates; optional renormalisation,
 * routed scaling, then ascending expert order.
 */
void colibri_router_select(const colibri_model *m, float *scores, const float *bias, uint32_t *idx,
                           float *weight);

/*
 * A port router's choice for one token (port version 6), checked and put in
 * the core's order: COLIBRI_E_BAD_ROUTE unless its top_k experts are
 * distinct and below n_experts + zero_experts and its weights finite; then
 * the pairs sorted by ascending expert, as colibri_router_select leaves them.
 */
colibri_status colibri_router_accept(const colibri_hparams *hp, uint32_t *idx, float *weight);

#endif
