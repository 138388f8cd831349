/*
 * colibri_run_experts.h - colibri-run's --memory-budget and --expert-slots:
 * the budget split into what the run must hold and the expert cache, the
 * cache opened and given to the core, its per-token counters and its lines
 * of --stats (docs/linux.md, "Models larger than memory").
 */
#ifndef COLIBRI_RUN_EXPERTS_H
#define COLIBRI_RUN_EXPERTS_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_run_options.h"

typedef struct run_experts {
    colibri_linux_experts *cache; /* NULL: experts read in place */
    colibri_linux_expert_layout layout;
    uint64_t fixed_bytes;                             /* what the run holds besides the cache */
    colibri_linux_expert_stats before;                /* at the start of the current step */
    uint64_t *step_stall_ns, *step_bytes, *step_hits; /* per decode step */
    uint64_t decode_stall_ns, decode_bytes, decode_acquires, decode_hits;
} run_experts;

/* With --memory-budget or --expert-slots: plan the slots (buffers_bytes: the
 * KV state, scratch and logits already allocated), open the cache, hand it to
 * the port and initialise the model again with it. 0, or an exit status
 * after a message. Without either option: 0, nothing done. */
int colibri_run_experts_open(const run_options *o, const colibri_linux_mapping *map,
                             colibri_model *model, colibri_port *port, colibri_linux_port_ctx *pctx,
                             size_t buffers_bytes, run_experts *x);

/* Around each decode step i (steps counted from 0). */
void colibri_run_experts_step_begin(run_experts *x);
void colibri_run_experts_step_end(run_experts *x, uint32_t step);

/* After a forward pass failed with COLIBRI_E_EXPERT_UNAVAILABLE: the read
 * that failed, on stderr. */
void colibri_run_experts_explain(const run_options *o, run_experts *x);

/* --stats lines of the cache (nothing without one). */
void colibri_run_experts_report(const run_options *o, run_experts *x, uint32_t n_steps);

void colibri_run_experts_close(run_experts *x);

#endif
