/*
 * colibri_run_stats.h - colibri-run's --stats: the timings of a run, the
 * expert use per layer (through the port's router observer) and the report
 * on stderr (docs/linux.md lists its lines).
 */
#ifndef COLIBRI_RUN_STATS_H
#define COLIBRI_RUN_STATS_H

#include <stdint.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_run_experts.h"
#include "colibri_run_options.h"

/* Expert use per layer for --stats: counts[layer * n_experts + e] is how
 * many tokens the router sent to expert e of layer (the port's router
 * observer, colibri_port.route, fills it); attention[] the same for the
 * attention experts (format 1.11, JetMoE: colibri_port.attention_route). */
typedef struct expert_counts {
    uint64_t *counts; /* NULL until the model's shape is known */
    uint64_t *attention;
    uint64_t *zero; /* per layer: picks of zero-computation experts (format 1.12) */
    uint32_t n_layers, n_experts;
} expert_counts;

typedef struct run_timing {
    uint64_t map_ns, init_ns, verify_ns;
    uint64_t prompt_ns, prompt_ticks;
    uint64_t *step_ns; /* gen - 1 decode steps */
    uint32_t n_steps;
    run_experts experts; /* the expert cache, with --memory-budget */
} run_timing;

/* Counts for every layer and expert of the model (a model without experts:
 * none). 0, or -1 when memory runs out (said on stderr). */
int colibri_run_counts_alloc(expert_counts *c, const colibri_model *model);
void colibri_run_counts_free(expert_counts *c);

/* The router observers (colibri_port.route and attention_route) that fill
 * an expert_counts. */
void colibri_run_count_route(void *ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens,
                             uint32_t top_k, const uint32_t *experts, const float *weights);
void colibri_run_count_attention_route(void *ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens,
                                       uint32_t top_k, const uint32_t *experts,
                                       const float *weights);

/* The report: the model, kernels and threads, sizes, timings, then one line
 * per MoE layer with each expert's count. Sorts t->step_ns. */
void colibri_run_print_stats(const run_options *o, const colibri_linux_mapping *map,
                             const colibri_model *model, uint32_t ctx, size_t state_bytes,
                             size_t scratch_bytes, run_timing *t, const expert_counts *c);

#endif
