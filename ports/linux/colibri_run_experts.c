/*
 * colibri_run_experts.c - colibri-run's expert cache (colibri_run_experts.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri_run_experts.h"

/* "123456789 bytes (117.7 MiB)". */
static void format_bytes(char *buf, size_t n, uint64_t bytes)
{
    (void)snprintf(buf, n, "%llu bytes (%.1f MiB)", (unsigned long long)bytes,
                   (double)bytes / (1024.0 * 1024.0));
}

/* The budget's slots, or 0 after saying why the budget is too small. */
static uint32_t budget_slots(const run_options *o, const run_experts *x, size_t buffers_bytes)
{
    const colibri_linux_expert_layout *l = &x->layout;
    uint64_t minimum;
    uint32_t slots = colibri_linux_budget_slots(l, o->memory_budget, buffers_bytes, &minimum);
    char budget[64], min[64], dense[64], buffers[64], slot[64];
    if (slots != 0) {
        return slots;
    }
    format_bytes(budget, sizeof budget, o->memory_budget);
    format_bytes(min, sizeof min, minimum);
    format_bytes(dense, sizeof dense, l->dense_bytes);
    format_bytes(buffers, sizeof buffers, buffers_bytes);
    format_bytes(slot, sizeof slot, l->slot_bytes);
    fprintf(stderr,
            PROG ": error: %s: --memory-budget %s is below this model's minimum of %s: the dense "
                 "part %s (read in place), KV state, scratch and logits %s (a smaller --context "
                 "shrinks the KV state), %u MiB for the process, and %u expert slots (one layer's "
                 "top_k) of %s\n",
            o->model_path, budget, min, dense, buffers, COLIBRI_LINUX_PROCESS_RESERVE >> 20,
            l->min_slots, slot);
    return 0;
}

/* The port's expert slots on the cache, and the model initialised again
 * with them (colibri_init reads the port once). */
static int give_to_core(const run_options *o, const colibri_linux_mapping *map,
                        colibri_model *model, colibri_port *port, colibri_linux_port_ctx *pctx,
                        run_experts *x)
{
    colibri_port fresh;
    colibri_options opt;
    colibri_status st;
    pctx->experts = x->cache;
    colibri_linux_port_init(&fresh, pctx);
    port->expert_acquire = fresh.expert_acquire;
    port->expert_release = fresh.expert_release;
    port->experts_chosen = fresh.experts_chosen;
    memset(&opt, 0, sizeof opt);
    opt.expected_fingerprint = o->fingerprint;
    opt.port = port;
    st = colibri_init(model, map->data, map->size, &opt);
    if (st != COLIBRI_OK) {
        fprintf(stderr, PROG ": error: %s: cannot load the model with the expert cache: %s\n",
                o->model_path, colibri_strerror(st));
        return 1;
    }
    return 0;
}

static int alloc_steps(const run_options *o, run_experts *x)
{
    size_t steps = o->gen > 1 ? (size_t)o->gen - 1u : 1u;
    x->step_stall_ns = (uint64_t *)calloc(steps, sizeof *x->step_stall_ns);
    x->step_bytes = (uint64_t *)calloc(steps, sizeof *x->step_bytes);
    x->step_hits = (uint64_t *)calloc(steps, sizeof *x->step_hits);
    if (x->step_stall_ns == NULL || x->step_bytes == NULL || x->step_hits == NULL) {
        fprintf(stderr, PROG ": error: cannot allocate memory for the cache's counters\n");
        return 1;
    }
    return 0;
}

int colibri_run_experts_open(const run_options *o, const colibri_linux_mapping *map,
                             colibri_model *model, colibri_port *port, colibri_linux_port_ctx *pctx,
                             size_t buffers_bytes, run_experts *x)
{
    colibri_linux_expert_config cfg;
    char err[1024];
    colibri_linux_status ls;
    if (o->memory_budget == 0 && o->expert_slots == 0) {
        return 0;
    }
    ls = colibri_linux_expert_layout_of(model, &x->layout);
    if (ls != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": error: %s: %s: --memory-budget and --expert-slots need one\n",
                o->model_path, colibri_linux_strerror(ls));
        return 1;
    }
    x->fixed_bytes = x->layout.dense_bytes + buffers_bytes + COLIBRI_LINUX_PROCESS_RESERVE;
    memset(&cfg, 0, sizeof cfg);
    cfg.slots = o->expert_slots != 0 ? o->expert_slots : budget_slots(o, x, buffers_bytes);
    cfg.io_threads = o->io_threads;
    cfg.flags = (o->mlock ? COLIBRI_LINUX_EXPERTS_MLOCK : 0u) |
                (o->verify ? COLIBRI_LINUX_EXPERTS_VERIFY : 0u) |
                (o->cache_lru ? COLIBRI_LINUX_EXPERTS_LRU : 0u);
    if (cfg.slots == 0 || alloc_steps(o, x) != 0) {
        return 1;
    }
    if (cfg.slots > x->layout.moe_layers * x->layout.experts) { /* more is no use */
        cfg.slots = x->layout.moe_layers * x->layout.experts;
    }
    ls = colibri_linux_experts_open(&x->cache, map, model, &cfg, err, sizeof err);
    if (ls != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": error: %s: %s\n", o->model_path, err);
        return 1;
    }
    return give_to_core(o, map, model, port, pctx, x);
}

void colibri_run_experts_step_begin(run_experts *x)
{
    if (x->cache != NULL) {
        colibri_linux_experts_stats(x->cache, &x->before);
    }
}

void colibri_run_experts_step_end(run_experts *x, uint32_t step)
{
    colibri_linux_expert_stats now;
    if (x->cache == NULL) {
        return;
    }
    colibri_linux_experts_stats(x->cache, &now);
    x->step_stall_ns[step] = now.stall_ns - x->before.stall_ns;
    x->step_bytes[step] = now.bytes_read - x->before.bytes_read;
    x->step_hits[step] = now.hits - x->before.hits;
    x->decode_stall_ns += x->step_stall_ns[step];
    x->decode_bytes += x->step_bytes[step];
    x->decode_acquires += now.acquires - x->before.acquires;
    x->decode_hits += now.hits - x->before.hits;
}

void colibri_run_experts_explain(const run_options *o, run_experts *x)
{
    char line[512];
    if (x->cache != NULL && colibri_linux_experts_error(x->cache, line, sizeof line)) {
        fprintf(stderr, PROG ": error: %s: reading an expert from the file failed: %s\n",
                o->model_path, line);
    }
}

static void print_list(const char *name, const uint64_t *v, uint32_t n)
{
    fprintf(stderr, PROG ": %s: ", name);
    for (uint32_t i = 0; i < n; i++) {
        fprintf(stderr, i == 0 ? "%llu" : ",%llu", (unsigned long long)v[i]);
    }
    fputc('\n', stderr);
}

void colibri_run_experts_report(const run_options *o, run_experts *x, uint32_t n_steps)
{
    colibri_linux_expert_stats s;
    double steps = n_steps > 0 ? (double)n_steps : 1.0;
    if (x->cache == NULL) {
        return;
    }
    colibri_linux_experts_stats(x->cache, &s);
    fprintf(stderr,
            PROG ": expert_cache: budget=%llu fixed_bytes=%llu dense_bytes=%llu slots=%u "
                 "slot_bytes=%zu io_threads=%u direct=%s policy=%s\n",
            (unsigned long long)o->memory_budget, (unsigned long long)x->fixed_bytes,
            (unsigned long long)x->layout.dense_bytes, s.slots, x->layout.slot_bytes, s.io_threads,
            s.direct ? "yes" : "no", o->cache_lru ? "lru" : "quota");
    fprintf(stderr,
            PROG ": expert_reads: acquires=%llu hits=%llu ahead=%llu waits=%llu misses=%llu "
                 "reads=%llu bytes=%llu stall_ns=%llu failures=%llu\n",
            (unsigned long long)s.acquires, (unsigned long long)s.hits, (unsigned long long)s.ahead,
            (unsigned long long)s.waits, (unsigned long long)s.misses, (unsigned long long)s.reads,
            (unsigned long long)s.bytes_read, (unsigned long long)s.stall_ns,
            (unsigned long long)s.failures);
    fprintf(stderr,
            PROG ": expert_decode: hit_rate=%.4f bytes_per_token=%.0f stall_ns_per_token=%.0f\n",
            x->decode_acquires ? (double)x->decode_hits / (double)x->decode_acquires : 0.0,
            (double)x->decode_bytes / steps, (double)x->decode_stall_ns / steps);
    if (n_steps > 0) {
        print_list("token_stall_ns", x->step_stall_ns, n_steps);
        print_list("token_read_bytes", x->step_bytes, n_steps);
        print_list("token_expert_hits", x->step_hits, n_steps);
    }
}

void colibri_run_experts_close(run_experts *x)
{
    colibri_linux_experts_close(x->cache);
    x->cache = NULL;
    free(x->step_stall_ns);
    free(x->step_bytes);
    free(x->step_hits);
    x->step_stall_ns = x->step_bytes = x->step_hits = NULL;
}
