/*
 * colibri_run_options.c - colibri-run's command line: strict decimal and hex
 * parsing (no sign, no overflow, no trailing junk), the option table, and
 * the usage text (colibri_run_options.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_run_options.h"

const char colibri_run_usage_text[] =
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
    "                      of at least the image size, or CAP_IPC_LOCK); with\n"
    "                      a budget, the expert cache's slots\n"
    "  --preload           map every page of the image before running (page\n"
    "                      faults then stay out of the timings)\n"
    "  --no-prefetch       do not ask the kernel to read the next expert's\n"
    "                      block ahead (madvise WILLNEED) while one computes\n"
    "  --verify            check every tensor's CRC-32 before running\n"
    "  --kernels NAME      use this kernel table (default: the best this CPU runs)\n"
    "  --threads N         threads for the matrix products, 1 .. 64\n"
    "                      (default: the number of online CPUs)\n"
    "  --batch N           prompt tokens per forward chunk, 1 .. 256 (default 32);\n"
    "                      logits are the same bits whatever N and --threads\n"
    "  --fingerprint HEX   refuse an image whose fingerprint differs (0x1234abcd)\n"
    "  --stats             print dimensions, sizes and timings to stderr\n"
    "  --slots             MODEL is an A/B slot store (colibri-slot): run the\n"
    "                      slot boot picks, confirm an image on trial after a\n"
    "                      good run (docs/ota.md)\n"
    "  --trusted-key HEX   with --slots: images must be signed by this Ed25519\n"
    "                      public key (64 hex digits: colibri-sign hex KEY.pub)\n"
    "  --no-confirm        with --slots: leave an image on trial unconfirmed\n"
    "  --memory-budget SIZE  run in SIZE bytes of memory (K, M, G, KiB, MiB,\n"
    "                      GiB): routed experts are read from the file into a\n"
    "                      cache of what the budget leaves; the same logits\n"
    "  --expert-slots N    a cache of N expert slots (instead of a budget)\n"
    "  --io-threads N      threads reading experts ahead, 0 .. 16 (default 4)\n"
    "  --cache-policy P    quota (default: per-layer shares, least used first)\n"
    "                      or lru (least recently used, for comparison)\n"
    "  --random-tokens SEED  decode by feeding pseudo-random ids (from SEED)\n"
    "                      instead of the argmax: varied routing, as\n"
    "                      llama-bench's tg test feeds (benchmarks)\n"
    "  -h, --help          show this help and exit\n"
    "\n"
    "exit status: 0 success, 1 model or runtime error, 2 usage error\n";

/* ---- messages ---------------------------------------------------------------- */

void colibri_run_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs(PROG ": error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n" PROG ": try '" PROG " --help'\n", stderr);
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
        colibri_run_usage_error("%s '%s' %s (expected a whole number from %llu to %llu)", opt, text,
                                why, (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    if (v < min) {
        colibri_run_usage_error("%s '%s' is too small (expected a whole number from %llu to %llu)",
                                opt, text, (unsigned long long)min, (unsigned long long)max);
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
        colibri_run_usage_error(
            "--fingerprint '%s' is not a hexadecimal number (expected e.g. 0x1a2b3c4d)", text);
        return -1;
    }
    errno = 0;
    v = strtoull(digits, &end, 16);
    if (errno == ERANGE || *end != '\0' || v > 0xFFFFFFFFull) {
        colibri_run_usage_error("--fingerprint '%s' does not fit in 32 bits", text);
        return -1;
    }
    if (v == 0) {
        colibri_run_usage_error(
            "--fingerprint 0 would accept any image; give the image's fingerprint "
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
        colibri_run_usage_error(
            "--ids is empty (expected comma-separated token ids, e.g. --ids 1,2,3)");
        return -1;
    }
    for (i = 0; text[i] != '\0'; i++) {
        count += text[i] == ',';
    }
    if (count > COLIBRI_MAX_CONTEXT) {
        colibri_run_usage_error("--ids has %zu ids, more than any model's context (%u)", count,
                                COLIBRI_MAX_CONTEXT);
        return -1;
    }
    o->ids = (int32_t *)malloc(count * sizeof *o->ids);
    if (o->ids == NULL) {
        colibri_run_usage_error("cannot allocate memory for %zu ids", count);
        return -1;
    }
    for (k = 0; k < count; k++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        uint64_t v = 0;
        const char *why = parse_decimal(p, len, INT32_MAX, &v);
        if (why != NULL) {
            colibri_run_usage_error(
                "--ids: id %zu ('%.*s') %s (ids are whole numbers from 0 to %d, "
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

/* "512M", "1.5GiB"-free sizes: digits and an optional K, M, G (x1024) with
 * an optional "iB" or "B". */
static int parse_size(const char *opt, const char *text, uint64_t *out)
{
    size_t digits = strspn(text, "0123456789");
    const char *unit = text + digits;
    unsigned shift = 0;
    uint64_t v = 0;
    const char *why =
        text[0] == '-' ? "is negative" : parse_decimal(text, digits, UINT64_MAX >> 30, &v);
    if (*unit == 'K' || *unit == 'k') {
        shift = 10;
    } else if (*unit == 'M' || *unit == 'm') {
        shift = 20;
    } else if (*unit == 'G' || *unit == 'g') {
        shift = 30;
    }
    unit += shift != 0;
    if (shift != 0 && (strcmp(unit, "iB") == 0 || strcmp(unit, "B") == 0)) {
        unit += strlen(unit);
    }
    if (why != NULL || *unit != '\0' || v == 0) {
        colibri_run_usage_error("%s '%s' %s (expected bytes, e.g. 536870912, 512M or 2GiB)", opt,
                                text,
                                why != NULL ? why
                                : v == 0    ? "is zero"
                                            : "has an unknown unit");
        return -1;
    }
    *out = v << shift;
    return 0;
}

static int parse_policy(const char *text, run_options *o)
{
    if (strcmp(text, "quota") != 0 && strcmp(text, "lru") != 0) {
        colibri_run_usage_error("--cache-policy '%s' is not quota or lru", text);
        return -1;
    }
    o->cache_lru = strcmp(text, "lru") == 0;
    return 0;
}

/* 64 hex digits: an Ed25519 public key. */
static int parse_key(const char *text, uint8_t key[32])
{
    if (colibri_linux_parse_key(text, key) != 0) {
        colibri_run_usage_error("--trusted-key needs 64 hex digits (32 bytes, colibri-sign hex "
                                "KEY.pub), got '%s'",
                                text);
        return -1;
    }
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
    OPT_PRELOAD,
    OPT_NO_PREFETCH,
    OPT_STATS,
    OPT_VERIFY,
    OPT_KERNELS,
    OPT_THREADS,
    OPT_BATCH,
    OPT_HELP,
    OPT_SLOTS,
    OPT_TRUSTED_KEY,
    OPT_NO_CONFIRM,
    OPT_MEMORY_BUDGET,
    OPT_EXPERT_SLOTS,
    OPT_IO_THREADS,
    OPT_CACHE_POLICY,
    OPT_RANDOM_TOKENS,
    OPT_COUNT
};

static const struct {
    const char *name;
    int takes_value;
} k_opts[OPT_COUNT] = {
    {"--ids", 1},          {"--gen", 1},           {"--all-logits", 1},   {"--context", 1},
    {"--fingerprint", 1},  {"--mlock", 0},         {"--preload", 0},      {"--no-prefetch", 0},
    {"--stats", 0},        {"--verify", 0},        {"--kernels", 1},      {"--threads", 1},
    {"--batch", 1},        {"--help", 0},          {"--slots", 0},        {"--trusted-key", 1},
    {"--no-confirm", 0},   {"--memory-budget", 1}, {"--expert-slots", 1}, {"--io-threads", 1},
    {"--cache-policy", 1}, {"--random-tokens", 1},
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
            colibri_run_usage_error("--all-logits needs a file name");
            return -1;
        }
        o->logits_path = value;
        return 0;
    case OPT_THREADS:
        return parse_count("--threads", value, 1, COLIBRI_RUN_MAX_THREADS, &o->threads);
    case OPT_BATCH: return parse_count("--batch", value, 1, COLIBRI_MAX_BATCH, &o->batch);
    case OPT_MLOCK: o->mlock = 1; return 0;
    case OPT_PRELOAD: o->preload = 1; return 0;
    case OPT_NO_PREFETCH: o->no_prefetch = 1; return 0;
    case OPT_STATS: o->stats = 1; return 0;
    case OPT_VERIFY: o->verify = 1; return 0;
    case OPT_SLOTS: o->slots = 1; return 0;
    case OPT_NO_CONFIRM: o->no_confirm = 1; return 0;
    case OPT_TRUSTED_KEY: o->have_key = 1; return parse_key(value, o->trusted_key);
    case OPT_MEMORY_BUDGET: return parse_size("--memory-budget", value, &o->memory_budget);
    case OPT_EXPERT_SLOTS:
        return parse_count("--expert-slots", value, 1, UINT32_MAX / 2u, &o->expert_slots);
    case OPT_IO_THREADS:
        o->have_io_threads = 1;
        return parse_count("--io-threads", value, 0, 16, &o->io_threads);
    case OPT_CACHE_POLICY: return parse_policy(value, o);
    case OPT_RANDOM_TOKENS:
        o->have_random = 1;
        return parse_count("--random-tokens", value, 0, UINT32_MAX, &o->random_seed);
    case OPT_KERNELS:
        if (value[0] == '\0') {
            colibri_run_usage_error("--kernels needs a table name");
            return -1;
        }
        o->kernels = value;
        return 0;
    default: return -1;
    }
}

/* The expert cache's options go together, and not with a slot store. */
static int check_expert_options(run_options *o)
{
    int cache = o->memory_budget != 0 || o->expert_slots != 0;
    if (o->memory_budget != 0 && o->expert_slots != 0) {
        colibri_run_usage_error("give --memory-budget or --expert-slots, not both");
        return -1;
    }
    if (!cache && (o->have_io_threads || o->cache_lru)) {
        colibri_run_usage_error("--io-threads and --cache-policy need --memory-budget or "
                                "--expert-slots");
        return -1;
    }
    if (cache && (o->slots || o->preload)) {
        colibri_run_usage_error("--memory-budget and --expert-slots work on a model file, "
                                "without --slots or --preload");
        return -1;
    }
    if (!o->have_io_threads) {
        o->io_threads = COLIBRI_RUN_DEFAULT_IO_THREADS;
    }
    return 0;
}

/* Returns 0 to run, 1 for --help (done), -1 for a usage error. */
int colibri_run_parse_args(int argc, char **argv, run_options *o)
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
                colibri_run_usage_error("more than one model file given ('%s' and '%s')",
                                        o->model_path, arg);
                return -1;
            }
            if (arg[0] == '\0') {
                colibri_run_usage_error("the model file name is empty");
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
            colibri_run_usage_error("unknown option '%.*s'", (int)name_len, arg);
            return -1;
        }
        if (seen[id]++) {
            colibri_run_usage_error("option %s given more than once", k_opts[id].name);
            return -1;
        }
        if (id == OPT_HELP) {
            fputs(colibri_run_usage_text, stdout);
            return 1;
        }
        if (!k_opts[id].takes_value) {
            if (eq != NULL) {
                colibri_run_usage_error("option %s takes no value", k_opts[id].name);
                return -1;
            }
        } else if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            colibri_run_usage_error("option %s needs a value", k_opts[id].name);
            return -1;
        }
        if (apply_option(o, id, value) != 0) {
            return -1;
        }
    }
    if (o->model_path == NULL) {
        colibri_run_usage_error("no model file given");
        return -1;
    }
    if (!o->have_ids) {
        colibri_run_usage_error("no prompt given (--ids 1,2,3)");
        return -1;
    }
    if ((o->have_key || o->no_confirm) && !o->slots) {
        colibri_run_usage_error("--trusted-key and --no-confirm need --slots");
        return -1;
    }
    return check_expert_options(o);
}
