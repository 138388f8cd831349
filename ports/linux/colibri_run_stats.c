/*
 * colibri_run_stats.c - colibri-run's --stats (colibri_run_stats.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri_run_stats.h"

int colibri_run_counts_alloc(expert_counts *c, const colibri_model *model)
{
    size_t cells = (size_t)model->hp.n_layers * model->hp.n_experts;
    c->counts = c->attention = c->zero = NULL;
    c->n_layers = model->hp.n_layers;
    c->n_experts = model->hp.n_experts;
    if (c->n_experts == 0) {
        return 0;
    }
    c->counts = (uint64_t *)calloc(cells, sizeof(uint64_t));
    c->attention = (uint64_t *)calloc(cells, sizeof(uint64_t)); /* stays 0 but for JetMoE */
    c->zero = (uint64_t *)calloc(c->n_layers, sizeof(uint64_t));
    if (c->counts == NULL || c->attention == NULL || c->zero == NULL) {
        fprintf(stderr, PROG ": error: cannot allocate memory for expert counts\n");
        return -1;
    }
    return 0;
}

void colibri_run_counts_free(expert_counts *c)
{
    free(c->counts);
    free(c->attention);
    free(c->zero);
    c->counts = c->attention = c->zero = NULL;
}

/* Each choice into its expert's count; a zero-computation expert's (index
 * n_experts on) into *zero when zero is not NULL. */
static void count_choices(const expert_counts *c, uint64_t *counts, uint64_t *zero, uint32_t layer,
                          uint32_t n_choices, const uint32_t *experts)
{
    uint32_t i;
    if (counts == NULL || layer >= c->n_layers) {
        return;
    }
    for (i = 0; i < n_choices; i++) {
        if (experts[i] < c->n_experts) {
            counts[(size_t)layer * c->n_experts + experts[i]]++;
        } else if (zero != NULL) {
            zero[layer]++;
        }
    }
}

void colibri_run_count_route(void *ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens,
                             uint32_t top_k, const uint32_t *experts, const float *weights)
{
    const expert_counts *c = (const expert_counts *)ctx;
    (void)pos;
    (void)weights;
    count_choices(c, c->counts, c->zero, layer, n_tokens * top_k, experts);
}

void colibri_run_count_attention_route(void *ctx, uint32_t layer, uint32_t pos, uint32_t n_tokens,
                                       uint32_t top_k, const uint32_t *experts,
                                       const float *weights)
{
    const expert_counts *c = (const expert_counts *)ctx;
    (void)pos;
    (void)weights;
    count_choices(c, c->attention, NULL, layer, n_tokens * top_k, experts);
}

/* One line per layer that routed: how many tokens each expert took (dense
 * layers, which route nothing, print no line), under `what` ("experts", or
 * "attention-experts" for the attention experts); with zero-computation
 * experts (`zero` not NULL) how many choices went to them, apart. */
static void print_counts(const colibri_model *model, const expert_counts *c, const uint64_t *counts,
                         const uint64_t *zero, const char *what)
{
    uint32_t l, e;
    for (l = 0; counts != NULL && l < c->n_layers; l++) {
        const uint64_t *row = counts + (size_t)l * c->n_experts;
        uint64_t routed = 0;
        for (e = 0; e < c->n_experts; e++) {
            routed += row[e];
        }
        if (routed == 0 && (zero == NULL || zero[l] == 0)) {
            continue;
        }
        fprintf(stderr, PROG ": %s: layer=%u top_k=%u routed=%llu counts=", what, l,
                model->hp.top_k, (unsigned long long)routed);
        for (e = 0; e < c->n_experts; e++) {
            fprintf(stderr, e == 0 ? "%llu" : ",%llu", (unsigned long long)row[e]);
        }
        if (zero != NULL) {
            fprintf(stderr, " zero=%llu", (unsigned long long)zero[l]);
        }
        fputc('\n', stderr);
    }
}

static const char *arch_name(uint32_t arch)
{
    switch (arch) {
    case 1: return "mixtral";
    case 2: return "qwen2_moe";
    case 3: return "olmoe";
    case 4: return "qwen3_moe";
    case 5: return "switch";
    case 6: return "granitemoe";
    case 7: return "granitemoeshared";
    case 8: return "phimoe";
    case 9: return "ernie4_5_moe";
    case 10: return "glm4_moe";
    case 11: return "dots1";
    case 12: return "gpt_oss";
    case 13: return "deepseek_v2";
    case 14: return "deepseek_v3";
    case 15: return "flex_olmo";
    case 16: return "hunyuan_v1_moe";
    case 17: return "glm4_moe_lite";
    case 18: return "minimax_m2";
    case 19: return "exaone_moe";
    case 20: return "dbrx";
    case 21: return "afmoe";
    case 22: return "llama4_text";
    case 23: return "jetmoe";
    case 24: return "longcat_flash";
    case 25: return "mimo_v2_flash";
    case 26: return "lfm2_moe";
    case 27: return "granitemoehybrid";
    case 28: return "qwen3_next";
    case 29: return "qwen3_5_moe";
    case 30: return "kimi_linear";
    case 31: return "bailing_hybrid";
    case 32: return "jamba";
    case 33: return "nemotron_h";
    default: return "unknown";
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double per_second(uint64_t count, uint64_t ns)
{
    return ns == 0 ? 0.0 : (double)count * 1e9 / (double)ns;
}

/* Peak resident set of this process image in KiB (VmHWM), 0 if unknown.
 * getrusage's ru_maxrss would include the parent's size before exec. */
static unsigned long peak_rss_kib(void)
{
    char line[256];
    unsigned long kib = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtoul(line + 6, NULL, 10);
        }
    }
    fclose(f);
    return kib;
}

static void print_summary(const run_options *o, const colibri_linux_mapping *map,
                          const colibri_model *model, uint32_t ctx, size_t state_bytes,
                          size_t scratch_bytes, run_timing *t)
{
    const colibri_hparams *hp = &model->hp;
    uint64_t total = 0, gen_ns;
    uint32_t i;
    fprintf(stderr,
            PROG ": model: arch=%s vocab=%u hidden=%u layers=%u heads=%u kv_heads=%u "
                 "head_dim=%u experts=%u top_k=%u expert_ffn=%u dense_ffn=%u shared_ffn=%u "
                 "max_context=%u fingerprint=0x%08x\n",
            arch_name(hp->arch), hp->vocab_size, hp->hidden_size, hp->n_layers, hp->n_heads,
            hp->n_kv_heads, hp->head_dim, hp->n_experts, hp->top_k, hp->expert_intermediate,
            hp->dense_intermediate, hp->shared_intermediate, hp->max_context, model->fingerprint);
    fprintf(
        stderr, PROG ": kernels: %s threads=%u batch=%u\n", model->kernels.name,
        model->port.parallel_for != NULL
            ? colibri_linux_pool_threads(((const colibri_linux_port_ctx *)model->port.ctx)->pool)
            : 1u,
        o->batch ? o->batch : COLIBRI_RUN_DEFAULT_BATCH);
    fprintf(stderr, PROG ": image: bytes=%llu file_bytes=%zu mlock=%s\n",
            (unsigned long long)model->image_size, map->size, map->locked ? "yes" : "no");
    fprintf(stderr,
            PROG ": memory: context=%u state_bytes=%zu scratch_bytes=%zu peak_rss_kib=%lu\n", ctx,
            state_bytes, scratch_bytes, peak_rss_kib());
    fprintf(stderr, PROG ": setup: map_ns=%llu init_ns=%llu verify_ns=%llu\n",
            (unsigned long long)t->map_ns, (unsigned long long)t->init_ns,
            (unsigned long long)t->verify_ns);
    fprintf(stderr, PROG ": prompt: tokens=%u ns=%llu core_ticks=%llu tokens_per_s=%.2f\n",
            o->n_ids, (unsigned long long)t->prompt_ns, (unsigned long long)t->prompt_ticks,
            per_second(o->n_ids, t->prompt_ns));
    for (i = 0; i < t->n_steps; i++) {
        total += t->step_ns[i];
    }
    if (t->n_steps > 0) {
        fprintf(stderr, PROG ": token_ns: ");
        for (i = 0; i < t->n_steps; i++) {
            fprintf(stderr, i == 0 ? "%llu" : ",%llu", (unsigned long long)t->step_ns[i]);
        }
        fputc('\n', stderr);
        qsort(t->step_ns, t->n_steps, sizeof *t->step_ns, cmp_u64);
        fprintf(stderr,
                PROG ": decode: steps=%u ns=%llu per_token_ns_mean=%llu min=%llu "
                     "median=%llu p99=%llu max=%llu tokens_per_s=%.2f\n",
                t->n_steps, (unsigned long long)total, (unsigned long long)(total / t->n_steps),
                (unsigned long long)t->step_ns[0], (unsigned long long)t->step_ns[t->n_steps / 2],
                (unsigned long long)t->step_ns[(t->n_steps * 99u) / 100u],
                (unsigned long long)t->step_ns[t->n_steps - 1], per_second(t->n_steps, total));
    } else {
        fprintf(stderr, PROG ": decode: steps=0\n");
    }
    gen_ns = t->prompt_ns + total;
    fprintf(stderr, PROG ": generate: tokens=%u ns=%llu tokens_per_s=%.2f\n", o->gen,
            (unsigned long long)gen_ns, per_second(o->gen, gen_ns));
}

void colibri_run_print_stats(const run_options *o, const colibri_linux_mapping *map,
                             const colibri_model *model, uint32_t ctx, size_t state_bytes,
                             size_t scratch_bytes, run_timing *t, const expert_counts *c)
{
    print_summary(o, map, model, ctx, state_bytes, scratch_bytes, t);
    colibri_run_experts_report(o, &t->experts, t->n_steps);
    print_counts(model, c, c->attention, NULL, "attention-experts");
    print_counts(model, c, c->counts, model->hp.zero_experts > 0u ? c->zero : NULL, "experts");
}
