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
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"

#define PROG "colibri-run"
#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define DEFAULT_CONTEXT 2048u
#define BUFFER_ALIGN 64u /* >= the core's 16; one cache line */

typedef struct run_options {
    const char *model_path;
    int32_t *ids; /* malloc'd, n_ids entries */
    uint32_t n_ids;
    uint32_t gen;            /* tokens to generate */
    const char *logits_path; /* --all-logits FILE, or NULL */
    uint32_t context;        /* 0: default */
    uint32_t fingerprint;    /* 0: accept any image */
    int have_ids, have_gen, have_context, have_fingerprint;
    int mlock, stats, verify;
} run_options;

typedef struct run_timing {
    uint64_t map_ns, init_ns, verify_ns;
    uint64_t prompt_ns, prompt_ticks;
    uint64_t *step_ns; /* gen - 1 decode steps */
    uint32_t n_steps;
} run_timing;

static const char usage_text[] =
    "usage: " PROG " MODEL.bin --ids ID[,ID...] [options]\n"
    "\n"
    "Run a Colibri model image on the prompt token ids and greedy-decode.\n"
    "Stdout: one line with the generated token ids separated by spaces\n"
    "(an empty line with --gen 0). Everything else goes to stderr.\n"
    "\n"
    "options:\n"
    "  --ids LIST          prompt token ids, comma-separated decimal (required)\n"
    "  --gen N             tokens to generate greedily (default 0)\n"
    "  --all-logits FILE   write float32 little-endian logits for every prompt\n"
    "                      position to FILE, shape [n_ids, vocab_size]\n"
    "  --context N         positions of KV cache to allocate\n"
    "                      (default: min(model max_context, 2048))\n"
    "  --mlock             lock the whole image in RAM (needs RLIMIT_MEMLOCK\n"
    "                      of at least the image size, or CAP_IPC_LOCK)\n"
    "  --verify            check every tensor's CRC-32 before running\n"
    "  --fingerprint HEX   refuse an image whose fingerprint differs (0x1234abcd)\n"
    "  --stats             print dimensions, sizes and timings to stderr\n"
    "  -h, --help          show this help and exit\n"
    "\n"
    "exit status: 0 success, 1 model or runtime error, 2 usage error\n";

/* ---- messages ---------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void
usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs(PROG ": error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n" PROG ": try '" PROG " --help'\n", stderr);
}

/* ---- SIGBUS: a model file truncated while mapped (docs/linux.md) ------------------ */

static const uint8_t *volatile g_map_lo;
static volatile size_t g_map_size;

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
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(EXIT_RUNTIME);
    }
    /* Not ours: SA_RESETHAND restored the default action; returning re-raises. */
}

static void install_sigbus_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGBUS, &sa, NULL);
}

/* ---- strict number parsing ---------------------------------------------------- */

/*
 * Parse the decimal integer at s[0 .. len) into *out, 0 <= *out <= max.
 * Only digits are accepted: no sign, no space, no empty string. Returns NULL
 * on success, else a phrase saying what is wrong.
 */
static const char *parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    char buf[32];
    char *end = NULL;
    long long v;
    size_t i;
    if (len == 0) {
        return "is empty";
    }
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return (s[i] == '-' && i == 0) ? "is negative" : "is not a decimal integer";
        }
    }
    while (len > 1 && s[0] == '0') { /* leading zeros: value unchanged */
        s++;
        len--;
    }
    if (len >= sizeof buf) {
        return "is too large";
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno == ERANGE || v < 0) {
        return "is too large";
    }
    if (end != buf + len) {
        return "is not a decimal integer";
    }
    if ((uint64_t)v > max) {
        return "is too large";
    }
    *out = (uint64_t)v;
    return NULL;
}

static int parse_count(const char *opt, const char *text, uint64_t min, uint64_t max, uint32_t *out)
{
    uint64_t v = 0;
    const char *why = parse_decimal(text, strlen(text), max, &v);
    if (why != NULL) {
        usage_error("%s '%s' %s (expected a whole number from %llu to %llu)", opt, text, why,
                    (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    if (v < min) {
        usage_error("%s '%s' is too small (expected a whole number from %llu to %llu)", opt, text,
                    (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_fingerprint(const char *text, uint32_t *out)
{
    const char *digits = text;
    char *end = NULL;
    unsigned long long v;
    size_t i, n;
    if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        digits += 2;
    }
    n = strlen(digits);
    for (i = 0; i < n; i++) {
        char c = digits[i];
        int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex) {
            break;
        }
    }
    if (n == 0 || i != n) {
        usage_error("--fingerprint '%s' is not a hexadecimal number (expected e.g. 0x1a2b3c4d)",
                    text);
        return -1;
    }
    errno = 0;
    v = strtoull(digits, &end, 16);
    if (errno == ERANGE || *end != '\0' || v > 0xFFFFFFFFull) {
        usage_error("--fingerprint '%s' does not fit in 32 bits", text);
        return -1;
    }
    if (v == 0) {
        usage_error("--fingerprint 0 would accept any image; give the image's fingerprint "
                    "(model_config.h COLIBRI_MODEL_FINGERPRINT)");
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* "1,2,3" -> ids. Bounded by the format's largest context; the model's
 * context bounds it again once the model is loaded. */
static int parse_ids(const char *text, run_options *o)
{
    size_t count = 1, i, k = 0;
    const char *p = text;
    if (text[0] == '\0') {
        usage_error("--ids is empty (expected comma-separated token ids, e.g. --ids 1,2,3)");
        return -1;
    }
    for (i = 0; text[i] != '\0'; i++) {
        count += text[i] == ',';
    }
    if (count > COLIBRI_MAX_CONTEXT) {
        usage_error("--ids has %zu ids, more than any model's context (%u)", count,
                    COLIBRI_MAX_CONTEXT);
        return -1;
    }
    o->ids = (int32_t *)malloc(count * sizeof *o->ids);
    if (o->ids == NULL) {
        usage_error("cannot allocate memory for %zu ids", count);
        return -1;
    }
    for (k = 0; k < count; k++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        uint64_t v = 0;
        const char *why = parse_decimal(p, len, INT32_MAX, &v);
        if (why != NULL) {
            usage_error("--ids: id %zu ('%.*s') %s (ids are whole numbers from 0 to %d, "
                        "separated by single commas)",
                        k + 1, (int)(len > 40 ? 40 : len), p, why, INT32_MAX);
            return -1;
        }
        o->ids[k] = (int32_t)v;
        p += len + 1;
    }
    o->n_ids = (uint32_t)count;
    return 0;
}

/* ---- argument parsing --------------------------------------------------------- */

enum opt_id {
    OPT_IDS,
    OPT_GEN,
    OPT_LOGITS,
    OPT_CONTEXT,
    OPT_FINGERPRINT,
    OPT_MLOCK,
    OPT_STATS,
    OPT_VERIFY,
    OPT_HELP,
    OPT_COUNT
};

static const struct {
    const char *name;
    int takes_value;
} k_opts[OPT_COUNT] = {
    {"--ids", 1},   {"--gen", 1},   {"--all-logits", 1}, {"--context", 1}, {"--fingerprint", 1},
    {"--mlock", 0}, {"--stats", 0}, {"--verify", 0},     {"--help", 0},
};

static int find_option(const char *arg, size_t name_len)
{
    int i;
    if (name_len == 2 && strncmp(arg, "-h", 2) == 0) {
        return OPT_HELP;
    }
    for (i = 0; i < OPT_COUNT; i++) {
        if (strlen(k_opts[i].name) == name_len && strncmp(arg, k_opts[i].name, name_len) == 0) {
            return i;
        }
    }
    return -1;
}

static int apply_option(run_options *o, int id, const char *value)
{
    switch (id) {
    case OPT_IDS: o->have_ids = 1; return parse_ids(value, o);
    case OPT_GEN: o->have_gen = 1; return parse_count("--gen", value, 0, INT32_MAX, &o->gen);
    case OPT_CONTEXT:
        o->have_context = 1;
        return parse_count("--context", value, 1, COLIBRI_MAX_CONTEXT, &o->context);
    case OPT_FINGERPRINT: o->have_fingerprint = 1; return parse_fingerprint(value, &o->fingerprint);
    case OPT_LOGITS:
        if (value[0] == '\0') {
            usage_error("--all-logits needs a file name");
            return -1;
        }
        o->logits_path = value;
        return 0;
    case OPT_MLOCK: o->mlock = 1; return 0;
    case OPT_STATS: o->stats = 1; return 0;
    case OPT_VERIFY: o->verify = 1; return 0;
    default: return -1;
    }
}

/* Returns 0 to run, 1 for --help (done), -1 for a usage error. */
static int parse_args(int argc, char **argv, run_options *o)
{
    int seen[OPT_COUNT] = {0};
    int i, only_positional = 0;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq, *value = NULL;
        size_t name_len;
        int id;
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            if (o->model_path != NULL) {
                usage_error("more than one model file given ('%s' and '%s')", o->model_path, arg);
                return -1;
            }
            if (arg[0] == '\0') {
                usage_error("the model file name is empty");
                return -1;
            }
            o->model_path = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = 1;
            continue;
        }
        eq = strchr(arg, '=');
        name_len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        id = find_option(arg, name_len);
        if (id < 0) {
            usage_error("unknown option '%.*s'", (int)name_len, arg);
            return -1;
        }
        if (seen[id]++) {
            usage_error("option %s given more than once", k_opts[id].name);
            return -1;
        }
        if (id == OPT_HELP) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (!k_opts[id].takes_value) {
            if (eq != NULL) {
                usage_error("option %s takes no value", k_opts[id].name);
                return -1;
            }
        } else if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            usage_error("option %s needs a value", k_opts[id].name);
            return -1;
        }
        if (apply_option(o, id, value) != 0) {
            return -1;
        }
    }
    if (o->model_path == NULL) {
        usage_error("no model file given");
        return -1;
    }
    if (!o->have_ids) {
        usage_error("no prompt given (--ids 1,2,3)");
        return -1;
    }
    return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static void *alloc_aligned(size_t bytes)
{
    size_t rounded;
    if (bytes > SIZE_MAX - BUFFER_ALIGN) {
        return NULL;
    }
    rounded = (bytes + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN; /* C11 rule */
    return aligned_alloc(BUFFER_ALIGN, rounded == 0 ? BUFFER_ALIGN : rounded);
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

static const char *arch_name(uint32_t arch)
{
    switch (arch) {
    case 1: return "mixtral";
    case 2: return "qwen2_moe";
    case 3: return "olmoe";
    case 4: return "qwen3_moe";
    case 5: return "switch";
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

static void print_stats(const run_options *o, const colibri_linux_mapping *map,
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
        qsort(t->step_ns, t->n_steps, sizeof *t->step_ns, cmp_u64);
        fprintf(stderr,
                PROG ": decode: steps=%u ns=%llu per_token_ns_mean=%llu min=%llu "
                     "median=%llu max=%llu tokens_per_s=%.2f\n",
                t->n_steps, (unsigned long long)total, (unsigned long long)(total / t->n_steps),
                (unsigned long long)t->step_ns[0], (unsigned long long)t->step_ns[t->n_steps / 2],
                (unsigned long long)t->step_ns[t->n_steps - 1], per_second(t->n_steps, total));
    } else {
        fprintf(stderr, PROG ": decode: steps=0\n");
    }
    gen_ns = t->prompt_ns + total;
    fprintf(stderr, PROG ": generate: tokens=%u ns=%llu tokens_per_s=%.2f\n", o->gen,
            (unsigned long long)gen_ns, per_second(o->gen, gen_ns));
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
        if (st == COLIBRI_E_CONFIG_MISMATCH) {
            uint32_t fp = (uint32_t)map->data[24] | ((uint32_t)map->data[25] << 8) |
                          ((uint32_t)map->data[26] << 16) | ((uint32_t)map->data[27] << 24);
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
            usage_error("--context %u is larger than the model's max_context %u", o->context,
                        hp->max_context);
            return EXIT_USAGE;
        }
        *ctx = o->context;
    } else {
        *ctx = hp->max_context < DEFAULT_CONTEXT ? hp->max_context : DEFAULT_CONTEXT;
    }
    if (o->n_ids > *ctx) {
        usage_error("--ids has %u ids but the context holds %u positions%s", o->n_ids, *ctx,
                    hp->max_context > *ctx ? " (raise it with --context)" : "");
        return EXIT_USAGE;
    }
    if (needed > *ctx) {
        usage_error("%u prompt ids and --gen %u need %llu positions but the context holds "
                    "%u%s",
                    o->n_ids, o->gen, (unsigned long long)needed, *ctx,
                    hp->max_context > *ctx ? " (raise it with --context)" : "");
        return EXIT_USAGE;
    }
    for (i = 0; i < o->n_ids; i++) {
        if ((uint32_t)o->ids[i] >= hp->vocab_size) {
            usage_error("--ids: id %u (%d) is not below the model's vocab_size %u", i + 1,
                        (int)o->ids[i], hp->vocab_size);
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
    b->scratch_bytes = colibri_scratch_size(model, ctx);
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
    b->kv = alloc_aligned(b->kv_bytes);
    b->scratch = alloc_aligned(b->scratch_bytes);
    b->logits = (float *)alloc_aligned(rows * vocab * sizeof(float));
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

static int run_tokens(const run_options *o, const colibri_model *model, uint32_t ctx,
                      run_buffers *b, run_timing *t)
{
    colibri_state state;
    colibri_status st;
    colibri_logits_mode mode = o->logits_path != NULL ? COLIBRI_LOGITS_ALL : COLIBRI_LOGITS_LAST;
    uint32_t vocab = model->hp.vocab_size, i;
    const float *last;
    uint64_t t0;

    st = colibri_state_init(&state, model, b->kv, b->kv_bytes, ctx);
    if (st != COLIBRI_OK) {
        return runtime_error(o->model_path, "cannot set up the KV state", st);
    }
    t0 = colibri_linux_ticks_ns();
    st = colibri_forward(model, &state, o->ids, o->n_ids, b->logits, mode, b->scratch,
                         b->scratch_bytes, &t->prompt_ticks);
    t->prompt_ns = colibri_linux_ticks_ns() - t0;
    if (st != COLIBRI_OK) {
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
    b->out[0] = (int32_t)colibri_argmax(last, vocab);
    for (i = 1; i < o->gen; i++) {
        uint64_t ticks = 0;
        t0 = colibri_linux_ticks_ns();
        st = colibri_forward(model, &state, &b->out[i - 1], 1, b->logits, COLIBRI_LOGITS_LAST,
                             b->scratch, b->scratch_bytes, &ticks);
        t->step_ns[t->n_steps++] = colibri_linux_ticks_ns() - t0;
        if (st != COLIBRI_OK) {
            fprintf(stderr, PROG ": error: at generated token %u:\n", i + 1);
            return runtime_error(o->model_path, "forward pass failed", st);
        }
        b->out[i] = (int32_t)colibri_argmax(b->logits, vocab);
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

static int run(const run_options *o)
{
    colibri_linux_mapping map;
    colibri_port port;
    colibri_model model;
    run_buffers b;
    run_timing t;
    char err[1024];
    uint32_t ctx = 0;
    int rc;
    uint64_t t0 = colibri_linux_ticks_ns();
    colibri_linux_status ls;

    memset(&b, 0, sizeof b);
    memset(&t, 0, sizeof t);
    ls = colibri_linux_map(&map, o->model_path, o->mlock ? COLIBRI_LINUX_MAP_MLOCK : 0u, err,
                           sizeof err);
    t.map_ns = colibri_linux_ticks_ns() - t0;
    if (ls != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": error: %s\n", err);
        return EXIT_RUNTIME;
    }
    g_map_size = map.size;
    g_map_lo = map.data;
    colibri_linux_port_init(&port, &map);

    rc = load_model(o, &map, &port, &model, &t);
    if (rc == 0) {
        rc = check_request(o, &model, &ctx);
    }
    if (rc == 0) {
        rc = alloc_buffers(o, &model, ctx, &b);
    }
    if (rc == 0 && o->gen > 1) {
        t.step_ns = (uint64_t *)malloc(((size_t)o->gen - 1) * sizeof(uint64_t));
        if (t.step_ns == NULL) {
            fprintf(stderr, PROG ": error: cannot allocate memory for timings\n");
            rc = EXIT_RUNTIME;
        }
    }
    if (rc == 0) {
        rc = run_tokens(o, &model, ctx, &b, &t);
    }
    if (rc == 0) {
        rc = print_ids(b.out, o->gen);
    }
    if (rc == 0 && o->stats) {
        print_stats(o, &map, &model, ctx, b.kv_bytes, b.scratch_bytes, &t);
    }
    free(t.step_ns);
    free(b.out);
    free(b.logits);
    free(b.scratch);
    free(b.kv);
    g_map_lo = NULL;
    colibri_linux_unmap(&map);
    return rc;
}

int main(int argc, char **argv)
{
    run_options o;
    int rc;
    memset(&o, 0, sizeof o);
    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        free(o.ids);
        return rc > 0 ? 0 : EXIT_USAGE;
    }
    install_sigbus_handler();
    rc = run(&o);
    free(o.ids);
    return rc;
}
