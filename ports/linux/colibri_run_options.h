/*
 * colibri_run_options.h - the command line of colibri-run: its options, their
 * strict parsing (colibri_run_options.c) and the usage text.
 */
#ifndef COLIBRI_RUN_OPTIONS_H
#define COLIBRI_RUN_OPTIONS_H

#include <stdint.h>

#define PROG "colibri-run"
#define COLIBRI_RUN_MAX_THREADS 64u /* = COLIBRI_LINUX_MAX_THREADS */
#define COLIBRI_RUN_DEFAULT_BATCH 32u

typedef struct run_options {
    const char *model_path;
    int32_t *ids; /* malloc'd, n_ids entries */
    uint32_t n_ids;
    uint32_t gen;            /* tokens to generate */
    const char *logits_path; /* --all-logits FILE, or NULL */
    const char *kernels;     /* --kernels NAME, or NULL: the port's choice */
    uint32_t context;        /* 0: default */
    uint32_t fingerprint;    /* 0: accept any image */
    uint32_t threads;        /* 0: one per online CPU */
    uint32_t batch;          /* 0: COLIBRI_RUN_DEFAULT_BATCH */
    int have_ids, have_gen, have_context, have_fingerprint;
    int mlock, preload, no_prefetch, stats, verify;
    int slots, no_confirm; /* --slots: MODEL is an A/B slot store (docs/ota.md) */
    int have_key;
    uint8_t trusted_key[32]; /* --trusted-key HEX */
    /* Experts from storage (docs/linux.md, "Models larger than memory"). */
    uint64_t memory_budget;         /* --memory-budget SIZE in bytes; 0: none */
    uint32_t expert_slots;          /* --expert-slots N; 0: from the budget */
    uint32_t io_threads;            /* --io-threads N */
    int have_io_threads, cache_lru; /* --cache-policy lru */
    int have_random;                /* --random-tokens SEED: feed these, not the argmax */
    uint32_t random_seed;
} run_options;

#define COLIBRI_RUN_DEFAULT_IO_THREADS 4u

extern const char colibri_run_usage_text[];

/* "colibri-run: error: ..." and a hint, on stderr. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void colibri_run_usage_error(const char *fmt, ...);

/* Fill *o from argv. Returns 0 to run, 1 for --help (done), -1 for a usage
 * error (already reported). o->ids is malloc'd. */
int colibri_run_parse_args(int argc, char **argv, run_options *o);

#endif /* COLIBRI_RUN_OPTIONS_H */
