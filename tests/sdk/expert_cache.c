/*
 * expert_cache.c - the core's expert cache (colibri_expert_cache.h) against
 * the image in memory, bit for bit.
 *
 *   expert_cache MODEL.bin SLOTS PINNED [read:K | flip:K]
 *
 * MODEL.bin must keep its experts last (format 1.9, EXPERTS_LAST). The
 * reference runs the whole image in place; the paged run gets a buffer of
 * exactly the bytes before the first expert block (ASan sees any read past
 * it) and a cache of SLOTS slots, the first PINNED routed experts pinned,
 * whose read hook copies from the file's bytes and counts. The prompt's
 * logits and those of three greedy decode steps must equal the reference's.
 * read:K makes the K-th read (from 1) fail with code -5, flip:K flips a bit
 * of the K-th block read (the cache checks every block): the forward call
 * must end with COLIBRI_E_EXPERT_UNAVAILABLE, the position unchanged, the
 * failure on record, and the run from there on must again give the
 * reference's logits; a fault while the pinned experts are read makes
 * colibri_expert_cache_init refuse (the cache then gives no block: "ok init
 * refused"). Also checked: arenas one byte short of SLOTS slots,
 * and pins that are not routed experts, are refused.
 * Prints "ok slots=N acquires=A hits=H reads=R bytes_read=B" or a FAIL line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "file_bytes.h"
#include "model_internal.h"

#define PROMPT 13u
#define STEPS 3u
#define BATCH 7u

typedef struct storage {
    const uint8_t *image;
    size_t size;
    uint32_t reads, fail_at, flip_at;
} storage;

static int storage_read(void *ctx, uint64_t offset, void *dst, size_t size)
{
    storage *s = (storage *)ctx;
    s->reads++;
    if (offset > s->size || size > s->size - offset || s->reads == s->fail_at) {
        return -5;
    }
    memcpy(dst, s->image + offset, size);
    if (s->reads == s->flip_at) {
        ((uint8_t *)dst)[size / 2u] ^= 0x10u;
    }
    return 0;
}

static uint8_t *load(const char *path, size_t *size)
{
    return file_bytes(path, size, 64u);
}

typedef struct run {
    colibri_model model;
    colibri_state state;
    void *kv, *scratch;
    size_t scratch_size;
    float *logits; /* PROMPT + STEPS rows of vocab */
} run;

static colibri_status start(run *r, const uint8_t *image, size_t size, const colibri_port *port)
{
    colibri_options opt = {0, port};
    colibri_status status = colibri_init(&r->model, image, size, &opt);
    uint32_t ctx = PROMPT + STEPS;
    if (status != COLIBRI_OK) {
        return status;
    }
    r->scratch_size = colibri_scratch_size_batch(&r->model, ctx, BATCH);
    r->kv = aligned_alloc(64u, colibri_state_size(&r->model, ctx));
    r->scratch = aligned_alloc(64u, r->scratch_size);
    r->logits = calloc((size_t)(PROMPT + STEPS) * r->model.hp.vocab_size, sizeof(float));
    return colibri_state_init(&r->state, &r->model, r->kv, colibri_state_size(&r->model, ctx), ctx);
}

/* Forward step `step` (0: the prompt, all logits; s: greedy token s). */
static colibri_status step(run *r, uint32_t s)
{
    uint32_t vocab = r->model.hp.vocab_size;
    if (s == 0) {
        int32_t ids[PROMPT];
        for (uint32_t i = 0; i < PROMPT; i++) {
            ids[i] = (int32_t)((1u + 7u * i) % vocab);
        }
        return colibri_forward(&r->model, &r->state, ids, PROMPT, r->logits, COLIBRI_LOGITS_ALL,
                               r->scratch, r->scratch_size, NULL);
    }
    float *row = r->logits + (size_t)(PROMPT + s - 1u) * vocab;
    int32_t next = (int32_t)colibri_argmax(row - vocab, vocab);
    return colibri_forward(&r->model, &r->state, &next, 1, row, COLIBRI_LOGITS_LAST, r->scratch,
                           r->scratch_size, NULL);
}

static void finish(run *r)
{
    free(r->kv);
    free(r->scratch);
    free(r->logits);
}

/* All steps; a step that fails once (the fault) must keep the position and
 * then pass. 0, or a FAIL said. */
static int run_all(run *r, const colibri_expert_cache *cache)
{
    for (uint32_t s = 0; s <= STEPS; s++) {
        uint32_t pos = r->state.pos, failures = cache ? cache->stats.failures : 0;
        colibri_status status = step(r, s);
        if (status == COLIBRI_E_EXPERT_UNAVAILABLE && cache != NULL &&
            cache->stats.failures == failures + 1u && r->state.pos == pos) {
            status = step(r, s); /* the fault is spent */
        }
        if (status != COLIBRI_OK) {
            printf("FAIL step %u: %s (position %u, was %u)\n", s, colibri_strerror(status),
                   r->state.pos, pos);
            return 1;
        }
    }
    return 0;
}

/* The first n routed experts in key order. */
static uint32_t first_experts(const colibri_model *m, uint32_t *keys, uint32_t n)
{
    uint32_t found = 0;
    for (uint32_t k = 0; found < n && k < m->hp.n_layers * m->hp.n_experts; k++) {
        if (colibri_expert_block(m, k / m->hp.n_experts, k % m->hp.n_experts, NULL, NULL) ==
            COLIBRI_OK) {
            keys[found++] = k;
        }
    }
    return found;
}

/* Arguments the cache must refuse. 0, or a FAIL said. */
static int refusals(const colibri_model *m, uint8_t *arena, uint32_t slots,
                    const colibri_expert_cache_config *good)
{
    colibri_expert_cache c;
    colibri_expert_cache_config cfg = *good;
    uint32_t not_routed = m->hp.n_layers * m->hp.n_experts, twice[2];
    size_t short_arena = colibri_expert_cache_size(m, slots) - 1u;
    int bad = colibri_expert_cache_slots(m, short_arena) != slots - 1u;
    cfg.n_pinned = 0;
    bad |= colibri_expert_cache_init(&c, m, arena, colibri_expert_cache_size(m, 1), &cfg) !=
           COLIBRI_E_WORKSPACE_TOO_SMALL;
    cfg.pinned = &not_routed;
    cfg.n_pinned = 1;
    bad |= colibri_expert_cache_init(&c, m, arena, short_arena, &cfg) != COLIBRI_E_BAD_ARGUMENT;
    first_experts(m, twice, 1);
    twice[1] = twice[0];
    cfg.pinned = twice;
    cfg.n_pinned = 2;
    bad |= colibri_expert_cache_init(&c, m, arena, short_arena, &cfg) != COLIBRI_E_BAD_ARGUMENT;
    cfg = *good;
    cfg.read = NULL;
    bad |= colibri_expert_cache_init(&c, m, arena, short_arena, &cfg) != COLIBRI_E_BAD_ARGUMENT;
    if (bad) {
        printf("FAIL a short arena or a bad pin was not refused\n");
    }
    return bad;
}

int main(int argc, char **argv)
{
    static colibri_expert_cache cache;
    static uint32_t pinned[4096];
    size_t size;
    uint8_t *image = argc > 3 ? load(argv[1], &size) : NULL;
    run ref = {0}, paged = {0};
    colibri_port port = {.version = COLIBRI_PORT_VERSION};
    storage store = {0};
    setvbuf(stdout, NULL, _IONBF, 0);
    if (image == NULL || start(&ref, image, size, NULL) != COLIBRI_OK ||
        (colibri_rd_u32(image + HDR_FLAGS) & HDR_FLAG_EXPERTS_LAST) == 0) {
        printf("FAIL usage: expert_cache MODEL.bin (experts last) SLOTS PINNED [read:K|flip:K]\n");
        return 1;
    }
    uint32_t slots = (uint32_t)atoi(argv[2]), n_pin = (uint32_t)atoi(argv[3]);
    store = (storage){image, size, 0, 0, 0};
    if (argc > 4) {
        uint32_t k = (uint32_t)atoi(argv[4] + 5);
        *(strncmp(argv[4], "read:", 5) == 0 ? &store.fail_at : &store.flip_at) = k;
    }
    if (run_all(&ref, NULL)) {
        return 1;
    }
    uint64_t first = UINT64_MAX, offset;
    for (uint32_t k = 0; k < ref.model.hp.n_layers * ref.model.hp.n_experts; k++) {
        uint32_t l = k / ref.model.hp.n_experts, e = k % ref.model.hp.n_experts;
        if (colibri_expert_block(&ref.model, l, e, &offset, NULL) == COLIBRI_OK && offset < first) {
            first = offset;
        }
    }
    uint8_t *prefix = malloc((size_t)first);
    memcpy(prefix, image, (size_t)first);
    colibri_expert_cache_port(&cache, &port);
    colibri_expert_cache_config cfg = {storage_read, &store, pinned,
                                       first_experts(&ref.model, pinned, n_pin),
                                       COLIBRI_EXPERT_CACHE_VERIFY};
    size_t arena_size = colibri_expert_cache_size(&ref.model, slots);
    uint8_t *arena = malloc(arena_size + 1u);
    colibri_status status = start(&paged, prefix, (size_t)first, &port);
    if (status != COLIBRI_OK || refusals(&paged.model, arena, slots, &cfg)) {
        return 1;
    }
    status = colibri_expert_cache_init(&cache, &paged.model, arena + 1, arena_size, &cfg);
    if (status == COLIBRI_E_EXPERT_UNAVAILABLE && store.reads <= cfg.n_pinned &&
        cache.stats.failures == 1u && (store.fail_at != 0 || store.flip_at != 0)) {
        printf("ok init refused: failures=%u\n", cache.stats.failures);
        status = step(&paged, 0) == COLIBRI_E_EXPERT_UNAVAILABLE ? COLIBRI_OK : COLIBRI_E_CHECKSUM;
        finish(&ref);
        finish(&paged);
        free(prefix);
        free(arena);
        free(image);
        return status == COLIBRI_OK ? 0 : 1;
    }
    if (status != COLIBRI_OK) {
        printf("FAIL cache of %u slots (%zu bytes): %s\n", slots, arena_size,
               colibri_strerror(status));
        return 1;
    }
    if (run_all(&paged, &cache)) {
        return 1;
    }
    size_t bytes = (size_t)(PROMPT + STEPS) * ref.model.hp.vocab_size * sizeof(float);
    int faulted = store.fail_at != 0 || store.flip_at != 0;
    if (memcmp(paged.logits, ref.logits, bytes) != 0) {
        printf("FAIL logits differ from the image in memory\n");
        return 1;
    }
    if (cache.stats.failures != (faulted ? 1u : 0u) ||
        (store.fail_at != 0 && cache.stats.last_read_error != -5) ||
        (store.flip_at != 0 && cache.stats.last_check == COLIBRI_OK)) {
        printf("FAIL failures=%u last_read_error=%d last_check=%d\n", cache.stats.failures,
               cache.stats.last_read_error, (int)cache.stats.last_check);
        return 1;
    }
    printf("ok slots=%u pinned=%u acquires=%llu hits=%llu reads=%u bytes_read=%llu\n",
           cache.n_slots, cache.config.n_pinned, (unsigned long long)cache.stats.acquires,
           (unsigned long long)cache.stats.hits, cache.stats.reads,
           (unsigned long long)cache.stats.bytes_read);
    finish(&ref);
    finish(&paged);
    free(prefix);
    free(arena);
    free(image);
    return 0;
}
