/* router.c - MoE routing (contract in router.h). */
#include "router.h"
#include "model_internal.h"
#include "colibri_math.h"
#include "kernels.h"

/* True when score a at index ia ranks before score b at index ib. */
static int ranks_before(float a, uint32_t ia, float b, uint32_t ib)
{
    int a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) {
        return (!a_nan && b_nan) || (a_nan && b_nan && ia < ib);
    }
    return a > b || (a == b && ia < ib);
}

/* Expert e's ranking key: its score, plus the bias when there is one. */
static float key_of(const float *scores, const float *bias, uint32_t e)
{
    return bias != NULL ? scores[e] + bias[e] : scores[e];
}

/* The k best keys in rank order among the experts of the kept groups (bit g
 * of `groups`: experts [g size, (g+1) size) are candidates); their scores
 * (without the bias) to weight. */
static void top_k_keyed(const float *scores, const float *bias, uint32_t n, uint32_t k,
                        uint64_t groups, uint32_t size, uint32_t *idx, float *weight)
{
    uint32_t prev = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = n; /* none yet */
        for (uint32_t e = 0; e < n; e++) {
            float key = key_of(scores, bias, e);
            int kept = ((groups >> (e / size)) & 1u) != 0;
            int after_prev = j == 0 || ranks_before(key_of(scores, bias, prev), prev, key, e);
            int better = best == n || ranks_before(key, e, key_of(scores, bias, best), best);
            best = (kept && after_prev && better) ? e : best;
        }
        idx[j] = best;
        weight[j] = scores[best];
        prev = best;
    }
}

void colibri_router_top_k(const float *scores, uint32_t n, uint32_t k, uint32_t *idx, float *weight)
{
    top_k_keyed(scores, NULL, n, k, 1u, n, idx, weight);
}

void colibri_router_sort_by_expert(uint32_t *idx, float *weight, uint32_t k)
{
    /* Exchange sort with a fixed k(k-1)/2 compare-exchange steps. */
    for (uint32_t i = 0; i < k; i++) {
        for (uint32_t j = i + 1u; j < k; j++) {
            uint32_t lo = idx[i] < idx[j] ? idx[i] : idx[j];
            uint32_t hi = idx[i] < idx[j] ? idx[j] : idx[i];
            float w_lo = idx[i] < idx[j] ? weight[i] : weight[j];
            float w_hi = idx[i] < idx[j] ? weight[j] : weight[i];
            idx[i] = lo;
            idx[j] = hi;
            weight[i] = w_lo;
            weight[j] = w_hi;
        }
    }
}

colibri_status colibri_router_accept(const colibri_hparams *hp, uint32_t *idx, float *weight)
{
    uint32_t experts = hp->n_experts + hp->zero_experts;
    for (uint32_t j = 0; j < hp->top_k; j++) {
        if (idx[j] >= experts || !colibri_is_finite(weight[j])) {
            return COLIBRI_E_BAD_ROUTE;
        }
    }
    colibri_router_sort_by_expert(idx, weight, hp->top_k);
    for (uint32_t j = 1; j < hp->top_k; j++) {
        if (idx[j] == idx[j - 1u]) {
            return COLIBRI_E_BAD_ROUTE;
        }
    }
    return COLIBRI_OK;
}

/* Sparsemixer's weight of expert `pick` at inference (PhiMoE): a softmax
 * over the logits s_e left unmasked, taken at `pick`. With top = s[pick], the
 * largest logit not skipped, s_e is masked when e == skip or when
 * (top - s_e) / max(|s_e|, top) > 2 eps. The softmax's largest term is
 * top's, exp(0) = 1, so the weight is 1 / sum of exp(s_e - top). */
static float sparsemixer_weight(const float *s, uint32_t n, uint32_t pick, uint32_t skip, float eps)
{
    float top = s[pick], sum = 0.0f;
    for (uint32_t e = 0; e < n; e++) {
        float magnitude = s[e] < 0.0f ? -s[e] : s[e];
        float factor = magnitude > top ? magnitude : top;
        if (e != skip && !((top - s[e]) / factor > 2.0f * eps)) {
            sum += colibri_expf(s[e] - top);
        }
    }
    return 1.0f / sum;
}

/* PhiMoE's top-2: the largest logit, then the largest of the others, each
 * weighted by its own masked softmax (the first one's mask skips nothing). */
static void sparsemixer(const colibri_model *m, const float *scores, uint32_t *idx, float *weight)
{
    uint32_t n = colibri_router_width(&m->hp);
    colibri_router_top_k(scores, n, 2u, idx, weight);
    weight[0] = sparsemixer_weight(scores, n, idx[0], n, m->hp.router_jitter);
    weight[1] = sparsemixer_weight(scores, n, idx[1], idx[0], m->hp.router_jitter);
}

/* ERNIE-4.5: the k best of softmax + bias (the bias steers the choice
 * only), weighted by their softmax values. `scores` becomes the softmax. */
static void softmax_biased(const colibri_model *m, float *scores, const float *bias, uint32_t *idx,
                           float *weight)
{
    uint32_t n = colibri_router_width(&m->hp);
    m->kernels.softmax(scores, n);
    top_k_keyed(scores, bias, n, m->hp.top_k, 1u, n, idx, weight);
}

/* A group's rank: the sum of its two best keys (sigmoid router), or its best
 * score (softmax router, DeepSeek-V2's group-limited greedy). */
static float group_score(const colibri_hparams *hp, const float *scores, const float *bias,
                         uint32_t first, uint32_t size)
{
    uint32_t best = first, second = first + size;
    for (uint32_t e = first + 1u; e < first + size; e++) {
        if (ranks_before(key_of(scores, bias, e), e, key_of(scores, bias, best), best)) {
            second = best;
            best = e;
        } else if (second == first + size ||
                   ranks_before(key_of(scores, bias, e), e, key_of(scores, bias, second), second)) {
            second = e;
        }
    }
    if (hp->router_score != ROUTER_SIGMOID) {
        return scores[best];
    }
    return key_of(scores, bias, best) + key_of(scores, bias, second);
}

/* The topk_group best groups, as a mask (bit g: group g kept); all groups
 * when there is one. Each pass ranks the groups not yet kept afresh (no
 * array of group scores: the stack stays small for interrupt handlers). */
static uint64_t kept_groups(const colibri_hparams *hp, const float *scores, const float *bias)
{
    uint32_t size = colibri_router_width(hp) / hp->n_group;
    uint64_t mask = 0;
    if (hp->n_group == 1u) {
        return 1u;
    }
    for (uint32_t j = 0; j < hp->topk_group; j++) {
        uint32_t best = hp->n_group;
        float best_rank = 0.0f;
        for (uint32_t g = 0; g < hp->n_group; g++) {
            float rank = group_score(hp, scores, bias, g * size, size);
            int free = ((mask >> g) & 1u) == 0;
            if (free && (best == hp->n_group || ranks_before(rank, g, best_rank, best))) {
                best = g;
                best_rank = rank;
            }
        }
        mask |= (uint64_t)1u << best;
    }
    return mask;
}

/* The k best keys among the experts of the topk_group best groups. */
static void select_in_groups(const colibri_hparams *hp, const float *scores, const float *bias,
                             uint32_t *idx, float *weight)
{
    uint32_t n = colibri_router_width(hp);
    top_k_keyed(scores, bias, n, hp->top_k, kept_groups(hp, scores, bias), n / hp->n_group, idx,
                weight);
}

/* DeepSeek-V3's router: sigmoid scores, groups and experts chosen on score
 * + bias, the chosen experts weighted by their scores. */
static void sigmoid_select(const colibri_model *m, float *scores, const float *bias, uint32_t *idx,
                           float *weight)
{
    for (uint32_t e = 0; e < colibri_router_width(&m->hp); e++) {
        scores[e] = colibri_reference_sigmoid(scores[e]);
    }
    select_in_groups(&m->hp, scores, bias, idx, weight);
}

void colibri_router_select(const colibri_model *m, float *scores, const float *bias, uint32_t *idx,
                           float *weight)
{
    const colibri_hparams *hp = &m->hp;
    uint32_t k = hp->top_k;
    if (hp->router_score == ROUTER_SPARSEMIXER) {
        sparsemixer(m, scores, idx, weight);
    } else if (hp->router_score == ROUTER_SOFTMAX_BIASED) {
        softmax_biased(m, scores, bias, idx, weight);
    } else if (hp->router_score == ROUTER_TOPK_SOFTMAX) {
        /* Granite: the k largest logits, then a softmax over those k. */
        colibri_router_top_k(scores, colibri_router_width(hp), k, idx, weight);
        m->kernels.softmax(weight, k);
    } else if (hp->router_score == ROUTER_SIGMOID) {
        sigmoid_select(m, scores, bias, idx, weight);
    } else if (hp->router_score == ROUTER_TOPK_SIGMOID_INPUT) {
        /* Llama 4: the k largest logits, each weighted by its sigmoid (the
         * FFN scales the expert's input by it, not its output). */
        colibri_router_top_k(scores, colibri_router_width(hp), k, idx, weight);
        for (uint32_t j = 0; j < k; j++) {
            weight[j] = colibri_reference_sigmoid(weight[j]);
        }
    } else {
        m->kernels.softmax(scores, colibri_router_width(hp));
        select_in_groups(hp, scores, NULL, idx, weight);
    }
    if (hp->router_norm_topk) {
        /* A term added to the sigmoid weights' sum: DeepSeek-V3's 1e-20,
         * LFM2's 1e-6 (format 1.13); 0 for the other routers. */
        float sum = hp->router_sum_eps;
        for (uint32_t j = 0; j < k; j++) {
            sum += weight[j];
        }
        sum = sum > hp->router_norm_min ? sum : hp->router_norm_min;
        for (uint32_t j = 0; j < k; j++) {
            weight[j] = weight[j] / sum;
        }
    }
    for (uint32_t j = 0; j < k; j++) {
        weight[j] = weight[j] * hp->routed_scaling;
    }
    colibri_router_sort_by_expert(idx, weight, k);
}
