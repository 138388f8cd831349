/*
 * paged_moe - a model that is not in the address map: the image's start
 * (everything but the routed experts, COLIBRI_MODEL_RESIDENT_BYTES) is read
 * from storage into RAM, and the routed experts are read as the router
 * picks them into an expert cache in RAM (docs/core.md, "An expert cache in
 * caller memory"; docs/baremetal-paging.md). The image must keep its experts
 * last (colibri-convert --experts-last).
 *
 * Storage is the board's (board_storage_read): under QEMU a host file read
 * through semihosting, named on the emulator's command line with the
 * settings after it:
 *
 *   -semihosting-config enable=on,target=native,arg=paged_moe,arg=PATH
 *                       [,arg=slots=N][,arg=pin=K1:K2:...][,arg=gen=N]
 *                       [,arg=ids=A:B:...][,arg=logits=0|1][,arg=verify=0|1]
 *
 * slots: cache slots (default and most: COLIBRI_EXPERT_CACHE_SLOTS, the
 * arena compiled in); pin: experts held for good (layer * n_experts +
 * expert, e.g. from colibri-plot experts --sram-bytes); gen: tokens to
 * generate (default 8); ids: the prompt (default ids[i] = (7 i + 3) mod
 * vocab, 8 ids); logits: 1 (the default, for a prompt of at most 8 ids)
 * prints the prompt's logits as hex words ("logits ROW ..."); verify: 1 (the
 * default) checks every block read against its CRC-32s and scales
 * (COLIBRI_EXPERT_CACHE_VERIFY), 0 trusts the storage. Then it
 * decodes greedily, one line per token with the cache's reads for it, then
 * the totals.
 * Exit status: 0, 1 bad setting or storage, 2 image refused, 3 cache
 * refused, 4 forward failed.
 */
#include "board.h"
#include "board_config.h"
#include "colibri.h"
#include "console.h"
#include "model_config.h"

#define N_IDS 8u       /* the default prompt, and the most whose logits are printed */
#define PROMPT_MAX 64u /* ids= */
#define GEN_MAX 256u
_Static_assert(N_IDS + 8u <= COLIBRI_MODEL_CONTEXT, "the prompt and 8 tokens exceed the context");

/* The arena's slots: make firmware EXPERT_CACHE_SLOTS=N, else every block. */
#define MAX_SLOTS                                                                                  \
    (COLIBRI_EXPERT_CACHE_SLOTS > 0 ? COLIBRI_EXPERT_CACHE_SLOTS : COLIBRI_MODEL_N_EXPERT_BLOCKS)
#define PIN_MAX 256u

static _Alignas(64) uint8_t image_start[COLIBRI_MODEL_RESIDENT_BYTES];
static _Alignas(64) uint8_t arena[COLIBRI_MODEL_EXPERT_CACHE_BYTES(MAX_SLOTS)];
static _Alignas(16) uint8_t kv_memory[COLIBRI_MODEL_STATE_BYTES];
static _Alignas(16) uint8_t scratch[COLIBRI_MODEL_SCRATCH_BYTES];
static float logits[N_IDS * COLIBRI_MODEL_VOCAB_SIZE];
static colibri_model model;
static colibri_state state;
static colibri_expert_cache cache;
static colibri_port port;
static uint32_t pinned[PIN_MAX];
static int32_t prompt[PROMPT_MAX];

typedef struct settings {
    uint32_t slots, n_pinned, gen, n_prompt, logits, verify;
} settings;

static void fail(const char *what, const char *why, int code)
{
    console_puts("paged_moe: ");
    console_puts(what);
    console_puts(": ");
    console_puts(why);
    console_puts("\n");
    board_exit(code);
}

static void put_field(const char *name, uint64_t value)
{
    console_puts(name);
    console_put_u64(value);
}

/* A decimal number at *p, which moves past it; -1 if there is none. */
static int64_t number(const char **p)
{
    int64_t value = -1;
    while (**p >= '0' && **p <= '9' && value < ((int64_t)1 << 40)) {
        value = (value < 0 ? 0 : value * 10) + (**p - '0');
        (*p)++;
    }
    return value;
}

/* Numbers A:B:... (each at most max) into list: 0, or -1. */
static int numbers(const char *p, uint32_t *list, uint32_t *count, uint32_t room, uint32_t max)
{
    int64_t n;
    do {
        n = number(&p);
        if (n < 0 || n > (int64_t)max || *count == room) {
            return -1;
        }
        list[(*count)++] = (uint32_t)n;
    } while (*p == ':' && *++p != '\0');
    return *p == '\0' || *p == ' ' ? 0 : -1;
}

static int starts(const char *p, const char *word)
{
    while (*word != '\0' && *p == *word) {
        p++;
        word++;
    }
    return *word == '\0';
}

/* One "name=value" word at p: 0, or -1 for a word this sample does not know. */
static int setting(const char *p, settings *s)
{
    int64_t n;
    if (starts(p, "slots=")) {
        p += 6;
        n = number(&p);
        s->slots = (uint32_t)n;
        return n < 1 || n > (int64_t)MAX_SLOTS ? -1 : 0;
    }
    if (starts(p, "gen=")) {
        p += 4;
        n = number(&p);
        s->gen = (uint32_t)n;
        return n < 1 || n > (int64_t)GEN_MAX ? -1 : 0;
    }
    if (starts(p, "logits=") || starts(p, "verify=")) {
        uint32_t *flag = starts(p, "logits=") ? &s->logits : &s->verify;
        p += 7;
        n = number(&p);
        *flag = (uint32_t)n;
        return (n == 0 || n == 1) && (*p == '\0' || *p == ' ') ? 0 : -1;
    }
    if (starts(p, "pin=")) {
        return numbers(p + 4, pinned, &s->n_pinned, PIN_MAX, UINT32_MAX);
    }
    if (starts(p, "ids=")) {
        s->n_prompt = 0;
        return numbers(p + 4, (uint32_t *)prompt, &s->n_prompt, PROMPT_MAX,
                       COLIBRI_MODEL_VOCAB_SIZE - 1u);
    }
    return -1;
}

static settings read_settings(void)
{
    settings s = {MAX_SLOTS, 0, 8, N_IDS, 1, 1};
    const char *p = board_args();
    for (uint32_t i = 0; i < N_IDS; i++) {
        prompt[i] = (int32_t)((7u * i + 3u) % COLIBRI_MODEL_VOCAB_SIZE);
    }
    while (*p != '\0') {
        if (setting(p, &s) != 0) {
            fail("setting", p, 1);
        }
        while (*p != '\0' && *p != ' ') {
            p++;
        }
        while (*p == ' ') {
            p++;
        }
    }
    if (s.n_prompt + s.gen > COLIBRI_MODEL_CONTEXT || (s.logits && s.n_prompt > N_IDS)) {
        fail("setting", "prompt and gen exceed the context, or logits=1 with more than 8 ids", 1);
    }
    return s;
}

static void load(int64_t size, const settings *s)
{
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT, &port};
    colibri_status status;
    colibri_expert_cache_config config = {board_storage_read, NULL, pinned, s->n_pinned,
                                          s->verify ? COLIBRI_EXPERT_CACHE_VERIFY : 0u};
    if (size != (int64_t)COLIBRI_MODEL_IMAGE_SIZE) {
        fail("storage", size < 0 ? "no image file (semihosting argument)" : "not this model", 1);
    }
    if (board_storage_read(NULL, 0, image_start, sizeof image_start) != 0) {
        fail("storage", "the image's start cannot be read", 1);
    }
    port = *board_port();
    colibri_expert_cache_port(&cache, &port);
    status = colibri_init(&model, image_start, sizeof image_start, &options);
    if (status == COLIBRI_OK) {
        status = colibri_verify(&model, NULL);
    }
    if (status != COLIBRI_OK) {
        fail("model image", colibri_strerror(status), 2);
    }
    status = colibri_expert_cache_init(&cache, &model, arena,
                                       colibri_expert_cache_size(&model, s->slots), &config);
    if (status != COLIBRI_OK) {
        fail("expert cache", colibri_strerror(status), 3);
    }
    put_field("paged: image=", model.image_size);
    put_field(" resident=", model.resident_size);
    put_field(" slots=", cache.n_slots);
    put_field(" pinned=", cache.config.n_pinned);
    put_field(" slot_bytes=", cache.slot_bytes);
    put_field(" arena=", colibri_expert_cache_size(&model, s->slots));
    put_field(" pinned_read=", cache.stats.bytes_read);
    put_field(" verify=", s->verify);
    console_puts("\n");
}

static void forward(const int32_t *ids, uint32_t n, colibri_logits_mode mode, uint64_t *ticks)
{
    colibri_status status =
        colibri_forward(&model, &state, ids, n, logits, mode, scratch, sizeof scratch, ticks);
    if (status != COLIBRI_OK) {
        console_puts("paged_moe: forward: ");
        console_puts(colibri_strerror(status));
        put_field(" layer=", cache.stats.last_layer);
        put_field(" expert=", cache.stats.last_expert);
        console_puts(" read_error=");
        console_puts(cache.stats.last_read_error < 0 ? "-" : "");
        console_put_u64((uint64_t)(cache.stats.last_read_error < 0 ? -cache.stats.last_read_error
                                                                   : cache.stats.last_read_error));
        console_puts("\n");
        board_exit(4);
    }
}

static void print_prompt_logits(uint32_t rows)
{
    for (uint32_t row = 0; row < rows; row++) {
        put_field("logits ", row);
        for (uint32_t i = 0; i < COLIBRI_MODEL_VOCAB_SIZE; i++) {
            uint32_t bits;
            __builtin_memcpy(&bits, &logits[row * COLIBRI_MODEL_VOCAB_SIZE + i], sizeof bits);
            console_puts(" ");
            console_put_hex32(bits);
        }
        console_puts("\n");
    }
}

/* Per token: the id, the bytes read for it, the hits and acquires, ticks. */
static void decode(const settings *s)
{
    int32_t next;
    uint64_t ticks = 0;
    uint32_t last = s->logits ? s->n_prompt - 1u : 0u, gen = s->gen;
    forward(prompt, s->n_prompt, s->logits ? COLIBRI_LOGITS_ALL : COLIBRI_LOGITS_LAST, &ticks);
    if (s->logits) {
        print_prompt_logits(s->n_prompt);
    }
    next =
        (int32_t)colibri_argmax(logits + last * COLIBRI_MODEL_VOCAB_SIZE, COLIBRI_MODEL_VOCAB_SIZE);
    put_field("prompt: ticks=", ticks);
    put_field(" bytes_read=", cache.stats.bytes_read);
    console_puts("\n");
    for (uint32_t t = 0; t < gen; t++) {
        uint64_t bytes = cache.stats.bytes_read, hits = cache.stats.hits;
        uint64_t acquires = cache.stats.acquires;
        put_field("token ", t);
        put_field(" id=", (uint64_t)next);
        if (t + 1u < gen) {
            forward(&next, 1, COLIBRI_LOGITS_LAST, &ticks);
            put_field(" bytes_read=", cache.stats.bytes_read - bytes);
            put_field(" hits=", cache.stats.hits - hits);
            put_field(" acquires=", cache.stats.acquires - acquires);
            put_field(" ticks=", ticks);
            next = (int32_t)colibri_argmax(logits, COLIBRI_MODEL_VOCAB_SIZE);
        }
        console_puts("\n");
    }
}

int main(void)
{
    settings s;
    int64_t size;
    board_init();
    console_puts("\npaged_moe on " COLIBRI_BOARD_NAME "\n");
    size = board_storage_open(); /* and the command line with it */
    s = read_settings();
    load(size, &s);
    if (colibri_state_init(&state, &model, kv_memory, sizeof kv_memory, COLIBRI_MODEL_CONTEXT) !=
        COLIBRI_OK) {
        fail("state", "refused", 4);
    }
    decode(&s);
    put_field("cache: acquires=", cache.stats.acquires);
    put_field(" hits=", cache.stats.hits);
    put_field(" reads=", cache.stats.reads);
    put_field(" bytes_read=", cache.stats.bytes_read);
    put_field(" failures=", cache.stats.failures);
    console_puts(" tick=" COLIBRI_BOARD_TICKS_UNIT "\n");
    board_exit(0);
}
