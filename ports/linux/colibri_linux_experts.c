/*
 * colibri_linux_experts.c - the expert cache's life: a model's expert
 * layout, opening the cache (its slots, its bookkeeping, the file, the
 * readers, the dense part read ahead) and closing it, its counters and its
 * last failure.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "colibri_linux_experts_internal.h"
#include "colibri_linux_internal.h"

/* Layer l's experts, summed into *out; 0 if l is not MoE. */
static int add_layer(const colibri_model *model, uint32_t l, colibri_linux_expert_layout *out)
{
    for (uint32_t e = 0; e < model->hp.n_experts; e++) {
        size_t size;
        if (colibri_expert_block(model, l, e, NULL, &size) != COLIBRI_OK) {
            return 0;
        }
        out->expert_bytes += size;
        out->block_max = size > out->block_max ? size : out->block_max;
    }
    return 1;
}

/* The fewest slots a cache may have: the real experts one token can use
 * (top_k, fewer when zero-computation experts take picks), at least 3, and
 * never more than there are blocks. */
static uint32_t fewest_slots(uint32_t top_k, uint32_t experts, uint32_t moe_layers)
{
    uint32_t per_token = top_k < experts ? top_k : experts;
    uint32_t fewest = per_token > 3u ? per_token : 3u;
    uint64_t blocks = (uint64_t)experts * moe_layers;
    return blocks < fewest ? (uint32_t)blocks : fewest;
}

colibri_linux_status colibri_linux_expert_layout_of(const colibri_model *model,
                                                    colibri_linux_expert_layout *out)
{
    if (model == NULL || out == NULL || model->image == NULL) {
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    for (uint32_t l = 0; model->hp.n_experts > 0 && l < model->hp.n_layers; l++) {
        out->moe_layers += (uint32_t)add_layer(model, l, out);
    }
    if (out->moe_layers == 0) {
        return COLIBRI_LINUX_E_NO_EXPERTS;
    }
    out->experts = model->hp.n_experts;
    out->dense_bytes = model->image_size - out->expert_bytes;
    out->slot_bytes =
        colibri_linux_round_up(out->block_max + 2u * EXPERT_IO_ALIGN, EXPERT_IO_ALIGN);
    out->min_slots = fewest_slots(model->hp.top_k, out->experts, out->moe_layers);
    return COLIBRI_LINUX_OK;
}

uint32_t colibri_linux_budget_slots(const colibri_linux_expert_layout *layout, uint64_t budget,
                                    uint64_t held_bytes, uint64_t *minimum)
{
    uint64_t fixed = layout->dense_bytes + held_bytes + COLIBRI_LINUX_PROCESS_RESERVE;
    uint64_t least = fixed + (uint64_t)layout->min_slots * layout->slot_bytes;
    uint64_t every = (uint64_t)layout->moe_layers * layout->experts, slots;
    if (minimum != NULL) {
        *minimum = least;
    }
    if (budget < least || layout->slot_bytes == 0) {
        return 0;
    }
    slots = (budget - fixed) / layout->slot_bytes;
    return (uint32_t)(slots < every ? slots : every);
}

/* cfg against the layout: the slot count, the readers, the flags. */
static colibri_linux_status check_config(const colibri_linux_expert_config *cfg,
                                         const colibri_linux_expert_layout *layout, char *err,
                                         size_t err_size)
{
    char slot[64];
    if (cfg->io_threads > EXPERT_IO_THREADS_MAX || (cfg->flags & ~COLIBRI_LINUX_EXPERTS_FLAGS)) {
        colibri_linux_set_err(err, err_size,
                              "expert cache: %u reader threads (at most %u), flags 0x%x",
                              cfg->io_threads, EXPERT_IO_THREADS_MAX, cfg->flags);
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    if (cfg->slots < layout->min_slots) {
        colibri_linux_format_bytes(slot, sizeof slot, layout->slot_bytes);
        colibri_linux_set_err(err, err_size,
                              "expert cache: %u slots, but the model needs at least %u (one "
                              "token's real experts, 3 at least) of %s each",
                              cfg->slots, layout->min_slots, slot);
        return COLIBRI_LINUX_E_BUDGET;
    }
    if (cfg->slots > SIZE_MAX / layout->slot_bytes || cfg->slots > UINT32_MAX / 2u) {
        colibri_linux_set_err(err, err_size, "expert cache: %u slots do not fit the address space",
                              cfg->slots);
        return COLIBRI_LINUX_E_TOO_LARGE;
    }
    return COLIBRI_LINUX_OK;
}

/* The bookkeeping arrays, every key nowhere and every slot empty. */
static int alloc_tables(colibri_linux_experts *c)
{
    c->slots = (expert_slot *)calloc(c->n_slots, sizeof *c->slots);
    c->queue = (uint32_t *)calloc(c->n_slots, sizeof *c->queue);
    c->where = (uint32_t *)malloc((size_t)c->keys * sizeof *c->where);
    c->uses = (uint32_t *)calloc(c->keys, sizeof *c->uses);
    c->per_layer = (uint32_t *)calloc(c->model->hp.n_layers, sizeof *c->per_layer);
    if (c->slots == NULL || c->queue == NULL || c->where == NULL || c->uses == NULL ||
        c->per_layer == NULL) {
        return -1;
    }
    for (uint32_t k = 0; k < c->keys; k++) {
        c->where[k] = NO_SLOT;
    }
    for (uint32_t i = 0; i < c->n_slots; i++) {
        c->slots[i].buf = c->arena + (size_t)i * c->layout.slot_bytes;
        c->slots[i].key = NO_KEY;
    }
    return 0;
}

/* The slots: one anonymous mapping, locked on request. */
static colibri_linux_status map_arena(colibri_linux_experts *c, char *err, size_t err_size)
{
    char size[64];
    c->arena_bytes = (size_t)c->n_slots * c->layout.slot_bytes;
    colibri_linux_format_bytes(size, sizeof size, c->arena_bytes);
    c->arena = (uint8_t *)mmap(NULL, c->arena_bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->arena == MAP_FAILED) {
        c->arena = NULL;
        colibri_linux_set_err(err, err_size, "expert cache: cannot map %s of slots: %s", size,
                              strerror(errno));
        return COLIBRI_LINUX_E_MMAP;
    }
    if ((c->flags & COLIBRI_LINUX_EXPERTS_MLOCK) && mlock(c->arena, c->arena_bytes) != 0) {
        colibri_linux_set_err(err, err_size,
                              "expert cache: cannot lock %s of slots in memory: %s (raise "
                              "RLIMIT_MEMLOCK: ulimit -l)",
                              size, strerror(errno));
        return COLIBRI_LINUX_E_MLOCK;
    }
    return COLIBRI_LINUX_OK;
}

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return (x > y) - (x < y);
}

/* Ask the kernel to read the dense part of the mapping now (MADV_WILLNEED
 * over the gaps between expert blocks): it is read in place for every token
 * and fits the budget, and read ahead in large requests it does not fault in
 * one 4 KiB page at a time under MADV_RANDOM. A hint: failures are ignored. */
static void read_dense_ahead(const colibri_linux_experts *c, const colibri_linux_mapping *map)
{
    uint64_t *spans = (uint64_t *)malloc((size_t)c->keys * 2u * sizeof *spans), at = 0;
    uint32_t n = 0;
    for (uint32_t k = 0; spans != NULL && k < c->keys; k++) {
        size_t size;
        if (colibri_expert_block(c->model, k / c->experts, k % c->experts, &spans[2u * n], &size) ==
            COLIBRI_OK) {
            spans[2u * n++ + 1u] = size;
        }
    }
    if (spans != NULL) {
        qsort(spans, n, 2u * sizeof *spans, by_offset);
    }
    for (uint32_t i = 0; spans != NULL && i <= n; i++) {
        uint64_t end = i < n ? spans[2u * i] : map->size;
        uint64_t lo = at - at % map->page_size;
        if (end > lo) {
            (void)madvise((void *)(map->data + lo), (size_t)(end - lo), MADV_WILLNEED);
        }
        at = i < n ? spans[2u * i] + spans[2u * i + 1u] : at;
    }
    free(spans);
}

/* Everything open needs, in order; on failure the caller closes c. */
static colibri_linux_status open_parts(colibri_linux_experts *c, const colibri_linux_mapping *map,
                                       const colibri_linux_expert_config *cfg, char *err,
                                       size_t err_size)
{
    colibri_linux_status st = check_config(cfg, &c->layout, err, err_size);
    if (st != COLIBRI_LINUX_OK) {
        return st;
    }
    c->n_slots = cfg->slots;
    c->quota = cfg->slots / c->layout.moe_layers;
    if ((st = map_arena(c, err, err_size)) != COLIBRI_LINUX_OK) {
        return st;
    }
    if (alloc_tables(c) != 0) {
        colibri_linux_set_err(err, err_size, "expert cache: out of memory for its tables");
        return COLIBRI_LINUX_E_MMAP;
    }
    if ((st = colibri_expert_file_open(c, map, err, err_size)) != COLIBRI_LINUX_OK) {
        return st;
    }
    if ((st = colibri_expert_readers_start(c, cfg->io_threads)) != COLIBRI_LINUX_OK) {
        colibri_linux_set_err(err, err_size, "expert cache: cannot start %u reader threads",
                              cfg->io_threads);
        return st;
    }
    if (!map->locked && !map->populated) {
        read_dense_ahead(c, map);
    }
    return COLIBRI_LINUX_OK;
}

colibri_linux_status colibri_linux_experts_open(colibri_linux_experts **out,
                                                const colibri_linux_mapping *map,
                                                const colibri_model *model,
                                                const colibri_linux_expert_config *cfg, char *err,
                                                size_t err_size)
{
    colibri_linux_experts *c;
    colibri_linux_status st;
    colibri_linux_set_err(err, err_size, "%s", "");
    if (out == NULL || map == NULL || model == NULL || cfg == NULL || map->fd < 0 ||
        model->image != map->data) {
        colibri_linux_set_err(err, err_size,
                              "expert cache: no mapping, model or configuration, "
                              "or a model not loaded from that mapping");
        return COLIBRI_LINUX_E_BAD_ARGUMENT;
    }
    *out = NULL;
    if ((c = (colibri_linux_experts *)calloc(1, sizeof *c)) == NULL) {
        colibri_linux_set_err(err, err_size, "expert cache: out of memory");
        return COLIBRI_LINUX_E_MMAP;
    }
    c->fd = -1;
    c->model = model;
    c->flags = cfg->flags;
    c->read = cfg->read;
    c->experts = model->hp.n_experts;
    c->keys = model->hp.n_layers * model->hp.n_experts;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->done, NULL);
    st = colibri_linux_expert_layout_of(model, &c->layout);
    if (st == COLIBRI_LINUX_E_NO_EXPERTS) {
        colibri_linux_set_err(err, err_size,
                              "the model has no routed experts: nothing to read "
                              "from storage (run it without a memory budget)");
    }
    if (st == COLIBRI_LINUX_OK) {
        st = open_parts(c, map, cfg, err, err_size);
    }
    if (st != COLIBRI_LINUX_OK) {
        colibri_linux_experts_close(c);
        return st;
    }
    *out = c;
    return COLIBRI_LINUX_OK;
}

void colibri_linux_experts_close(colibri_linux_experts *c)
{
    if (c == NULL) {
        return;
    }
    colibri_expert_readers_stop(c);
    if (c->fd >= 0) {
        close(c->fd);
    }
    if (c->arena != NULL) {
        munmap(c->arena, c->arena_bytes);
    }
    free(c->slots);
    free(c->queue);
    free(c->where);
    free(c->uses);
    free(c->per_layer);
    pthread_cond_destroy(&c->done);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void colibri_linux_experts_stats(colibri_linux_experts *c, colibri_linux_expert_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    out->slots = c->n_slots;
    out->io_threads = c->n_threads;
    out->direct = c->direct;
    pthread_mutex_unlock(&c->lock);
}

int colibri_linux_experts_error(colibri_linux_experts *c, char *out, size_t size)
{
    read_failure f;
    char what[160];
    pthread_mutex_lock(&c->lock);
    f = c->failure;
    pthread_mutex_unlock(&c->lock);
    if (f.what == 0) {
        colibri_linux_set_err(out, size, "%s", "");
        return 0;
    }
    if (f.what == READ_SHORT) {
        (void)snprintf(what, sizeof what,
                       "the file ends at byte %llu, inside the block (was it "
                       "truncated?)",
                       (unsigned long long)f.at);
    } else if (f.what == READ_CHECKSUM) {
        (void)snprintf(what, sizeof what,
                       "the block read at byte %llu fails its check: %s (was "
                       "the file changed?)",
                       (unsigned long long)f.at, colibri_strerror(f.status));
    } else {
        (void)snprintf(what, sizeof what, "read error at byte %llu: %s", (unsigned long long)f.at,
                       strerror(f.what));
    }
    colibri_linux_set_err(out, size, "layer %u expert %u: %s", f.key / c->experts,
                          f.key % c->experts, what);
    return 1;
}
