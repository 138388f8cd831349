/*
 * colibri_run.c - colibri-run, the Linux command-line runner.
 *
 *   colibri-run MODEL.bin --ids 1,2,3 [--gen N] [--all-logits FILE] [--mlock]
 *               [--stats] [--context N] [--verify] [--fingerprint 0xHEX]
 *
 * Maps the model image (colibri_linux_map), initialises the core, runs the
 * prompt ids, greedy-decodes --gen tokens and prints their ids as one line on
 * stdout. Everything else goes to stderr. Exit status: 0 success, 1 model or
 * runtime error, 2 usage error. docs/linux.md is the user's manual.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_run_options.h"
#include "colibri_run_slot.h"
#include "colibri_run_stats.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define DEFAULT_CONTEXT 2048u
#define BUFFER_ALIGN 64u /* >= the core's 16; one cache line */

/* ---- SIGBUS: a model file truncated while mapped (docs/linux.md) ------------------ */

static const uint8_t *volatile g_map_lo;
static volatile size_t g_map_size;
static atomic_int g_sigbus_reported;

static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    static const char msg[] =
        PROG ": fatal: SIGBUS while reading the mapped model file: the file was "
             "truncated by another process (or its storage failed) while in use. "
             "Replace model files with rename(), never truncate them in place.\n";
    uintptr_t a = (uintptr_t)info->si_addr;
    uintptr_t lo = (uintptr_t)g_map_lo;
    (void)sig;
    (void)uctx;
    if (lo != 0 && a >= lo && a - lo < g_map_size) {
        /* Threads may fault at once: the first reports and exits the process. */
        if (atomic_exchange(&g_sigbus_reported, 1) == 0) {
            ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
            (void)w;
            _exit(EXIT_RUNTIME);
        }
        for (;;) {
            pause();
        }
    }
    /* Not ours: back to the default action; returning re-raises. */
    signal(SIGBUS, SIG_DFL);
}

static void install_sigbus_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGBUS, &sa, NULL);
}

/* ---- helpers ------------------------------------------------------------------ */

/* Does path name the mapped model file (by any name: a link, another path)? */
static int is_the_model_file(const char *path, const colibri_linux_mapping *map)
{
    struct stat a, b;
    return stat(path, &a) == 0 && fstat(map->fd, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Write count floats as little-endian binary32. 0 or an errno value. */
static int write_logits(const char *path, const float *v, size_t count)
{
    unsigned char buf[4096 * 4];
    size_t i = 0;
    int e = 0;
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return errno != 0 ? errno : EIO;
    }
    while (i < count && e == 0) {
        size_t n = count - i < 4096 ? count - i : 4096, j;
        for (j = 0; j < n; j++) {
            uint32_t bits;
            memcpy(&bits, &v[i + j], sizeof bits);
            buf[4 * j + 0] = (unsigned char)(bits & 0xFFu);
            buf[4 * j + 1] = (unsigned char)((bits >> 8) & 0xFFu);
            buf[4 * j + 2] = (unsigned char)((bits >> 16) & 0xFFu);
            buf[4 * j + 3] = (unsigned char)((bits >> 24) & 0xFFu);
        }
        if (fwrite(buf, 4, n, f) != n) {
            e = errno != 0 ? errno : EIO;
        }
        i += n;
    }
    if (fclose(f) != 0 && e == 0) {
        e = errno != 0 ? errno : EIO;
    }
    return e;
}

/* ---- the run ------------------------------------------------------------------ */

typedef struct run_buffers {
    void *kv, *scratch;
    float *logits;
    int32_t *out;
    size_t kv_bytes, scratch_bytes;
} run_buffers;

static int runtime_error(const char *path, const char *what, colibri_status st)
{
    fprintf(stderr, PROG ": error: %s: %s: %s (status %d)\n", path, what, colibri_strerror(st),
            (int)st);
    return EXIT_RUNTIME;
}

static int load_model(const run_options *o, const colibri_linux_mapping *map,
                      const colibri_port *port, colibri_model *model, run_timing *t)
{
    colibri_options opt;
    colibri_status st;
    uint64_t t0 = colibri_linux_ticks_ns();
    memset(&opt, 0, sizeof opt);
    opt.expected_fingerprint = o->fingerprint;
    opt.port = port;
    st = colibri_init(model, map->data, map->size, &opt);
    t->init_ns = colibri_linux_ticks_ns() - t0;
    if (st != COLIBRI_OK) {
        runtime_error(o->model_path, "cannot load the model image", st);
        uint32_t fp;
        if (st == COLIBRI_E_CONFIG_MISMATCH &&
            colibri_image_fingerprint(map->data, map->size, &fp) == COLIBRI_OK) {
            fprintf(stderr,
                    PROG ": the image's fingerprint is 0x%08x, --fingerprint asked "
                         "for 0x%08x\n",
                    fp, o->fingerprint);
        }
        return EXIT_RUNTIME;
    }
    if (o->verify) {
        uint32_t bad = 0;
        (void)colibri_linux_advise(map, COLIBRI_LINUX_ACCESS_SEQUENTIAL);
        t0 = colibri_linux_ticks_ns();
        st = colibri_verify(model, &bad);
        t->verify_ns = colibri_linux_ticks_ns() - t0;
        (void)colibri_linux_advise(map, o->memory_budget || o->expert_slots
                                            ? COLIBRI_LINUX_ACCESS_DONTNEED /* keep the budget */
                                            : COLIBRI_LINUX_ACCESS_RANDOM);
        (void)colibri_linux_advise(map, COLIBRI_LINUX_ACCESS_RANDOM);
        if (st != COLIBRI_OK) {
            runtime_error(o->model_path, "the image failed verification", st);
            if (st == COLIBRI_E_CHECKSUM) {
                fprintf(stderr, PROG ": tensor table entry %u has wrong data\n", bad);
            }
            return EXIT_RUNTIME;
        }
    }
    return 0;
}

/* Context size and the checks that need the model. */
static int check_request(const run_options *o, const colibri_model *model, uint32_t *ctx)
{
    const colibri_hparams *hp = &model->hp;
    uint64_t needed = (uint64_t)o->n_ids + (o->gen > 0 ? o->gen - 1u : 0u);
    uint32_t i;
    if (o->have_context) {
        if (o->context > hp->max_context) {
            colibri_run_usage_error("--context %u is larger than the model's max_context %u",
                                    o->context, hp->max_context);
            return EXIT_USAGE;
        }
        *ctx = o->context;
    } else {
        *ctx = hp->max_context < DEFAULT_CONTEXT ? hp->max_context : DEFAULT_CONTEXT;
    }
    if (o->n_ids > *ctx) {
        colibri_run_usage_error("--ids has %u ids but the context holds %u positions%s", o->n_ids,
                                *ctx, hp->max_context > *ctx ? " (raise it with --context)" : "");
        return EXIT_USAGE;
    }
    if (needed > *ctx) {
        colibri_run_usage_error(
            "%u prompt ids and --gen %u need %llu positions but the context holds "
            "%u%s",
            o->n_ids, o->gen, (unsigned long long)needed, *ctx,
            hp->max_context > *ctx ? " (raise it with --context)" : "");
        return EXIT_USAGE;
    }
    for (i = 0; i < o->n_ids; i++) {
        if ((uint32_t)o->ids[i] >= hp->vocab_size) {
            colibri_run_usage_error("--ids: id %u (%d) is not below the model's vocab_size %u",
                                    i + 1, (int)o->ids[i], hp->vocab_size);
            return EXIT_USAGE;
        }
    }
    return 0;
}

static int alloc_buffers(const run_options *o, const colibri_model *model, uint32_t ctx,
                         run_buffers *b)
{
    size_t vocab = model->hp.vocab_size;
    size_t rows = o->logits_path != NULL ? o->n_ids : 1;
    b->kv_bytes = colibri_state_size(model, ctx);
    b->scratch_bytes =
        colibri_scratch_size_batch(model, ctx, o->batch ? o->batch : COLIBRI_RUN_DEFAULT_BATCH);
    if (b->kv_bytes == 0 || b->scratch_bytes == 0) {
        fprintf(stderr,
                PROG ": error: %s: the core reports no state/scratch size for a "
                     "context of %u\n",
                o->model_path, ctx);
        return EXIT_RUNTIME;
    }
    if (rows > SIZE_MAX / sizeof(float) / vocab) {
        fprintf(stderr, PROG ": error: %u x %zu logits do not fit in memory\n", o->n_ids, vocab);
        return EXIT_RUNTIME;
    }
    b->kv = colibri_linux_alloc_aligned(b->kv_bytes, BUFFER_ALIGN);
    b->scratch = colibri_linux_alloc_aligned(b->scratch_bytes, BUFFER_ALIGN);
    b->logits = (float *)colibri_linux_alloc_aligned(rows * vocab * sizeof(float), BUFFER_ALIGN);
    b->out = (int32_t *)malloc(((size_t)o->gen + 1) * sizeof(int32_t));
    if (b->kv == NULL || b->scratch == NULL || b->logits == NULL || b->out == NULL) {
        fprintf(stderr,
                PROG ": error: cannot allocate memory: KV state %zu bytes, scratch %zu "
                     "bytes, logits %zu bytes (try a smaller --context)\n",
                b->kv_bytes, b->scratch_bytes, rows * vocab * sizeof(float));
        return EXIT_RUNTIME;
    }
    return 0;
}

/* The chosen token's logit is NaN only when every logit is: the model's
 * arithmetic overflowed (extreme weights). No token is printed then. */
static int logit_is_number(const run_options *o, const float *logits, int32_t best, uint32_t n)
{
    if (logits[best] == logits[best]) {
        return 1;
    }
    fprintf(stderr,
            PROG ": error: %s: every logit of generated token %u is NaN (the model's weights "
                 "overflow float32); no tokens printed\n",
            o->model_path, n);
    return 0;
}

/* The id to feed next: the argmax of logits (which must be a number), or
 * with --random-tokens the next of a xorshift64 sequence. 0, or an exit
 * status after a message. */
static int next_token(const run_options *o, uint64_t *rng, const float *logits, uint32_t vocab,
                      int32_t *out, uint32_t n)
{
    if (o->have_random) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *out = (int32_t)(*rng % vocab);
        return 0;
    }
    *out = (int32_t)colibri_argmax(logits, vocab);
    return logit_is_number(o, logits, *out, n) ? 0 : EXIT_RUNTIME;
}

static int run_tokens(const run_options *o, const colibri_model *model, uint32_t ctx,
                      run_buffers *b, run_timing *t)
{
    colibri_state state;
    colibri_status st;
    colibri_logits_mode mode = o->logits_path != NULL ? COLIBRI_LOGITS_ALL : COLIBRI_LOGITS_LAST;
    uint32_t vocab = model->hp.vocab_size, i;
    const float *last;
    uint64_t t0, rng = 0x9E3779B97F4A7C15ull ^ o->random_seed;

    st = colibri_state_init(&state, model, b->kv, b->kv_bytes, ctx);
    if (st != COLIBRI_OK) {
        return runtime_error(o->model_path, "cannot set up the KV state", st);
    }
    t0 = colibri_linux_ticks_ns();
    st = colibri_forward(model, &state, o->ids, o->n_ids, b->logits, mode, b->scratch,
                         b->scratch_bytes, &t->prompt_ticks);
    t->prompt_ns = colibri_linux_ticks_ns() - t0;
    if (st != COLIBRI_OK) {
        colibri_run_experts_explain(o, &t->experts);
        return runtime_error(o->model_path, "forward pass over the prompt failed", st);
    }
    if (o->logits_path != NULL) {
        int e = write_logits(o->logits_path, b->logits, (size_t)o->n_ids * vocab);
        if (e != 0) {
            fprintf(stderr, PROG ": error: %s: cannot write the logits: %s\n", o->logits_path,
                    strerror(e));
            return EXIT_RUNTIME;
        }
    }
    if (o->gen == 0) {
        return 0;
    }
    last = b->logits + (mode == COLIBRI_LOGITS_ALL ? (size_t)(o->n_ids - 1) * vocab : 0);
    if (next_token(o, &rng, last, vocab, &b->out[0], 1) != 0) {
        return EXIT_RUNTIME;
    }
    for (i = 1; i < o->gen; i++) {
        uint64_t ticks = 0;
        colibri_run_experts_step_begin(&t->experts);
        t0 = colibri_linux_ticks_ns();
        st = colibri_forward(model, &state, &b->out[i - 1], 1, b->logits, COLIBRI_LOGITS_LAST,
                             b->scratch, b->scratch_bytes, &ticks);
        t->step_ns[t->n_steps] = colibri_linux_ticks_ns() - t0;
        colibri_run_experts_step_end(&t->experts, t->n_steps++);
        if (st != COLIBRI_OK) {
            colibri_run_experts_explain(o, &t->experts);
            fprintf(stderr, PROG ": error: at generated token %u:\n", i + 1);
            return runtime_error(o->model_path, "forward pass failed", st);
        }
        if (next_token(o, &rng, b->logits, vocab, &b->out[i], i + 1) != 0) {
            return EXIT_RUNTIME;
        }
    }
    return 0;
}

static int print_ids(const int32_t *ids, uint32_t n)
{
    uint32_t i;
    for (i = 0; i < n; i++) {
        printf(i == 0 ? "%d" : " %d", (int)ids[i]);
    }
    putchar('\n');
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, PROG ": error: cannot write to standard output: %s\n", strerror(errno));
        return EXIT_RUNTIME;
    }
    return 0;
}

/* The Linux port with --kernels and --threads applied. */
static int setup_port(const run_options *o, const colibri_linux_mapping *map,
                      colibri_linux_port_ctx *ctx, colibri_port *port)
{
    uint32_t threads = o->threads ? o->threads : colibri_linux_cpu_count();
    ctx->map = map;
    ctx->pool = NULL;
    if (threads > 1u && (ctx->pool = colibri_linux_pool_start(threads)) == NULL) {
        fprintf(stderr, PROG ": error: cannot start %u threads\n", threads);
        return EXIT_RUNTIME;
    }
    colibri_linux_port_init(port, ctx);
    if (o->no_prefetch) {
        port->prefetch = NULL;
    }
    if (o->kernels != NULL && (port->kernels = colibri_linux_kernels(o->kernels)) == NULL) {
        char names[256];
        colibri_linux_kernel_names(names, sizeof names);
        fprintf(stderr, PROG ": error: no kernel table '%s' runs here (this build has: %s)\n",
                o->kernels, names);
        colibri_linux_pool_stop(ctx->pool);
        return EXIT_USAGE;
    }
    return 0;
}

static int map_model(const run_options *o, colibri_linux_store *store, colibri_slot_boot *boot,
                     colibri_linux_mapping *map)
{
    char err[1024];
    if (o->slots) {
        return colibri_run_open_slot(o, store, boot, map);
    }
    int whole = o->memory_budget == 0 && o->expert_slots == 0; /* else --mlock: the slots */
    colibri_linux_status ls = colibri_linux_map(map, o->model_path,
                                                (o->mlock && whole ? COLIBRI_LINUX_MAP_MLOCK : 0u) |
                                                    (o->preload ? COLIBRI_LINUX_MAP_POPULATE : 0u),
                                                err, sizeof err);
    if (ls != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": error: %s\n", err);
        return EXIT_RUNTIME;
    }
    return 0;
}

static void unmap_model(const run_options *o, colibri_linux_store *store,
                        const colibri_slot_boot *boot, colibri_linux_mapping *map, int *rc)
{
    if (o->slots) {
        *rc = colibri_run_close_slot(o, store, boot, *rc);
    } else {
        colibri_linux_unmap(map);
    }
}

/* Everything one run holds, from the mapped image to the printed ids. */
typedef struct run_session {
    colibri_linux_store store; /* --slots */
    colibri_slot_boot boot;
    colibri_linux_mapping map;
    colibri_linux_port_ctx port_ctx;
    colibri_port port;
    colibri_model model;
    expert_counts experts;
    run_buffers buffers;
    run_timing timing;
    uint32_t ctx; /* positions of KV state */
} run_session;

/* --all-logits must not name the model file, whatever path reaches it. */
static int check_logits_path(const run_options *o, const run_session *s)
{
    colibri_linux_mapping file = s->map; /* the file that holds the image */
    file.fd = o->slots ? s->store.fd : s->map.fd;
    if (o->logits_path != NULL && is_the_model_file(o->logits_path, &file)) {
        fprintf(stderr,
                PROG ": error: --all-logits %s is the model file: writing it would destroy the "
                     "model; choose another file\n",
                o->logits_path);
        return EXIT_USAGE;
    }
    return 0;
}

/* Map the image (or boot a slot), then the port with the run's options. */
static int open_session(const run_options *o, run_session *s)
{
    uint64_t t0 = colibri_linux_ticks_ns();
    int rc = map_model(o, &s->store, &s->boot, &s->map);
    s->timing.map_ns = colibri_linux_ticks_ns() - t0;
    if (rc != 0) {
        return rc;
    }
    g_map_size = s->map.size;
    g_map_lo = s->map.data;
    rc = check_logits_path(o, s);
    if (rc == 0) {
        rc = setup_port(o, &s->map, &s->port_ctx, &s->port);
    }
    if (rc == 0 && o->stats) {
        s->port.route = colibri_run_count_route;
        s->port.attention_route = colibri_run_count_attention_route;
        s->port.route_ctx = &s->experts;
    }
    return rc;
}

/* What the request needs once the model's shape is known: expert counts
 * (--stats), state, scratch and logits, the decode steps' timings. */
static int prepare(const run_options *o, run_session *s)
{
    int rc = check_request(o, &s->model, &s->ctx);
    if (rc == 0 && o->stats && colibri_run_counts_alloc(&s->experts, &s->model) != 0) {
        rc = EXIT_RUNTIME;
    }
    if (rc == 0) {
        rc = alloc_buffers(o, &s->model, s->ctx, &s->buffers);
    }
    if (rc == 0) {
        const run_buffers *b = &s->buffers;
        size_t rows = o->logits_path != NULL ? o->n_ids : 1;
        size_t held = b->kv_bytes + b->scratch_bytes + rows * s->model.hp.vocab_size * 4u +
                      ((size_t)o->gen + 1u) * sizeof(int32_t);
        rc = colibri_run_experts_open(o, &s->map, &s->model, &s->port, &s->port_ctx, held,
                                      &s->timing.experts);
    }
    if (rc == 0 && o->gen > 1) {
        s->timing.step_ns = (uint64_t *)malloc(((size_t)o->gen - 1) * sizeof(uint64_t));
        if (s->timing.step_ns == NULL) {
            fprintf(stderr, PROG ": error: cannot allocate memory for timings\n");
            rc = EXIT_RUNTIME;
        }
    }
    return rc;
}

/* A model file rewritten during the run voids its results (docs/linux.md). */
static int check_unchanged(const run_options *o, const colibri_linux_mapping *map, int rc)
{
    if (colibri_linux_changed(map) != 1 || rc == EXIT_USAGE) {
        return rc;
    }
    fprintf(stderr,
            PROG ": error: %s: the model file was written while it was in use, so the "
                 "results may mix old and new weights; none printed%s. Replace model files "
                 "with rename(), never rewrite them in place.\n",
            o->model_path, o->logits_path != NULL ? " (the logits file is removed)" : "");
    if (o->logits_path != NULL) {
        (void)unlink(o->logits_path);
    }
    return EXIT_RUNTIME;
}

static void close_session(const run_options *o, run_session *s, int *rc)
{
    colibri_run_experts_close(&s->timing.experts);
    colibri_run_counts_free(&s->experts);
    free(s->timing.step_ns);
    free(s->buffers.out);
    free(s->buffers.logits);
    free(s->buffers.scratch);
    free(s->buffers.kv);
    g_map_lo = NULL;
    colibri_linux_pool_stop(s->port_ctx.pool);
    unmap_model(o, &s->store, &s->boot, &s->map, rc);
}

/* map -> port -> load -> prepare -> tokens -> unchanged? -> print -> stats. */
static int run(const run_options *o)
{
    run_session s;
    run_buffers *b = &s.buffers;
    int rc;
    memset(&s, 0, sizeof s);
    rc = open_session(o, &s);
    if (rc != 0) {
        if (s.map.data != NULL) {
            unmap_model(o, &s.store, &s.boot, &s.map, &rc);
        }
        return rc;
    }
    rc = load_model(o, &s.map, &s.port, &s.model, &s.timing);
    if (rc == 0) {
        rc = prepare(o, &s);
    }
    if (rc == 0) {
        rc = run_tokens(o, &s.model, s.ctx, b, &s.timing);
    }
    rc = check_unchanged(o, &s.map, rc);
    if (rc == 0) {
        rc = print_ids(b->out, o->gen);
    }
    if (rc == 0 && o->stats) {
        colibri_run_print_stats(o, &s.map, &s.model, s.ctx, b->kv_bytes, b->scratch_bytes,
                                &s.timing, &s.experts);
    }
    close_session(o, &s, &rc);
    return rc;
}

int main(int argc, char **argv)
{
    run_options o;
    int rc;
    memset(&o, 0, sizeof o);
    rc = colibri_run_parse_args(argc, argv, &o);
    if (rc != 0) {
        free(o.ids);
        return rc > 0 ? 0 : EXIT_USAGE;
    }
    install_sigbus_handler();
    rc = run(&o);
    free(o.ids);
    return rc;
}
