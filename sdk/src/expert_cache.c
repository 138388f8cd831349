/*
 * expert_cache.c - routed experts read from storage into slots of the
 * caller's arena (colibri_expert_cache.h, docs/core.md).
 *
 * The arena holds the bookkeeping arrays, then the slots, 64-byte aligned:
 * the pinned experts first (read once, never given up), then the others.
 * Which slot a block that is not there takes (docs/core.md): a decoded
 * token visits the layers in order, so a plain least-recently-used cache
 * smaller than one token's experts would give up exactly the layer that
 * comes next and hit almost never. Each MoE layer may keep an equal share of
 * the unpinned slots (its quota); a slot is taken from the block's own layer
 * when that layer has its share, else from a layer over its share; within
 * those, the expert used least often (uses halve every `keys` acquires, so
 * the count follows the routing as it drifts), the least recently used of
 * equals. Held slots are never taken, nor, while others can be, those the
 * experts just chosen will ask for.
 */
#include "colibri.h"

#define NO_SLOT UINT32_MAX
#define NO_KEY UINT32_MAX
#define SLOT_ALIGN 64u

/* The largest expert block of the model, and its MoE layers (0: none). */
static size_t largest_block(const colibri_model *m, uint32_t *moe_layers)
{
    size_t largest = 0, size;
    *moe_layers = 0;
    for (uint32_t layer = 0; layer < m->hp.n_layers; layer++) {
        if (colibri_expert_block(m, layer, 0, NULL, &size) != COLIBRI_OK) {
            continue;
        }
        (*moe_layers)++;
        for (uint32_t e = 0; e < m->hp.n_experts; e++) {
            if (colibri_expert_block(m, layer, e, NULL, &size) == COLIBRI_OK && size > largest) {
                largest = size;
            }
        }
    }
    return largest;
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1u) / to * to;
}

/* Bytes of the bookkeeping arrays for n_slots slots. */
static size_t books_size(const colibri_model *m, uint32_t n_slots)
{
    size_t keys = (size_t)m->hp.n_layers * m->hp.n_experts;
    return sizeof(uint32_t) * (4u * (size_t)n_slots + 2u * keys + m->hp.n_layers);
}

/* The block size of a slot, 0 for a model the cache cannot serve; its MoE
 * layers in *moe_layers. One pass over the expert blocks. */
static size_t slot_size(const colibri_model *m, uint32_t *moe_layers)
{
    *moe_layers = 0;
    if (m == NULL || m->hp.n_layers == 0 || m->hp.n_experts == 0) {
        return 0;
    }
    return round_up(largest_block(m, moe_layers), SLOT_ALIGN);
}

/* colibri_expert_cache_size for slots of `slot` bytes (0 on overflow). */
static size_t cache_size(const colibri_model *m, size_t slot, uint32_t n_slots)
{
    if (slot == 0 || n_slots == 0 || n_slots > (SIZE_MAX / 2u) / slot) {
        return 0;
    }
    return 3u + books_size(m, n_slots) + (SLOT_ALIGN - 1u) + (size_t)n_slots * slot;
}

/* The slots of `slot` bytes an arena of arena_size bytes holds. */
static uint32_t slots_in(const colibri_model *m, size_t slot, size_t arena_size)
{
    size_t fixed, n;
    if (slot == 0) {
        return 0;
    }
    fixed = cache_size(m, slot, 1) - (4u * sizeof(uint32_t) + slot);
    if (arena_size <= fixed) {
        return 0;
    }
    n = (arena_size - fixed) / (4u * sizeof(uint32_t) + slot);
    return n < UINT32_MAX / 2u ? (uint32_t)n : UINT32_MAX / 2u;
}

size_t colibri_expert_cache_size(const colibri_model *model, uint32_t n_slots)
{
    uint32_t moe_layers;
    return cache_size(model, slot_size(model, &moe_layers), n_slots);
}

uint32_t colibri_expert_cache_slots(const colibri_model *model, size_t arena_size)
{
    uint32_t moe_layers;
    return slots_in(model, slot_size(model, &moe_layers), arena_size);
}

/* Carve the arrays and the slots out of the arena. */
static void lay_out(colibri_expert_cache *c, uint8_t *arena, uint32_t n_slots)
{
    uintptr_t data = ((uintptr_t)arena + 3u) & ~(uintptr_t)3u;
    uint32_t *words = (uint32_t *)data;
    c->slot_key = words;
    c->slot_holds = c->slot_key + n_slots;
    c->slot_wanted = c->slot_holds + n_slots;
    c->slot_used = c->slot_wanted + n_slots;
    c->where = c->slot_used + n_slots;
    c->uses = c->where + c->keys;
    c->per_layer = c->uses + c->keys;
    data = (uintptr_t)(c->per_layer + c->model->hp.n_layers);
    c->slot_data = (uint8_t *)((data + SLOT_ALIGN - 1u) & ~(uintptr_t)(SLOT_ALIGN - 1u));
    c->n_slots = n_slots;
    for (uint32_t i = 0; i < n_slots; i++) {
        c->slot_key[i] = NO_KEY;
        c->slot_holds[i] = 0;
        c->slot_wanted[i] = 0;
        c->slot_used[i] = 0;
    }
    for (uint32_t k = 0; k < c->keys; k++) {
        c->where[k] = NO_SLOT;
        c->uses[k] = 0;
    }
    for (uint32_t l = 0; l < c->model->hp.n_layers; l++) {
        c->per_layer[l] = 0;
    }
}

static uint8_t *slot_bytes(const colibri_expert_cache *c, uint32_t slot)
{
    return c->slot_data + (size_t)slot * c->slot_bytes;
}

static void note_failure(colibri_expert_cache *c, uint32_t key, int read_error,
                         colibri_status check)
{
    c->stats.failures++;
    c->stats.last_read_error = read_error;
    c->stats.last_check = check;
    c->stats.last_layer = key / c->experts;
    c->stats.last_expert = key % c->experts;
}

/* Read key's block, the image's bytes [offset, offset + size) (size at most
 * a slot), into slot and check it as configured: 0, or -1 with the failure
 * on record. */
static int fill(colibri_expert_cache *c, uint32_t slot, uint32_t key, uint64_t offset, size_t size)
{
    uint32_t layer = key / c->experts, expert = key % c->experts;
    uint8_t *dst = slot_bytes(c, slot);
    colibri_status status;
    int rc;
    c->stats.reads++;
    rc = c->config.read(c->config.read_ctx, offset, dst, size);
    if (rc != 0) {
        note_failure(c, key, rc, COLIBRI_OK);
        return -1;
    }
    c->stats.bytes_read += size;
    if ((c->config.flags & COLIBRI_EXPERT_CACHE_VERIFY) != 0 &&
        (status = colibri_verify_expert_block(c->model, layer, expert, dst)) != COLIBRI_OK) {
        note_failure(c, key, 0, status);
        return -1;
    }
    return 0;
}

/* ---- which slot to give up ---------------------------------------------------- */

static int is_pinned(const colibri_expert_cache *c, uint32_t slot)
{
    return slot < c->config.n_pinned;
}

/* Is slot a a worse keeper than slot b (the one to give up first)? */
static int worse(const colibri_expert_cache *c, uint32_t a, uint32_t b)
{
    uint32_t ua = c->uses[c->slot_key[a]], ub = c->uses[c->slot_key[b]];
    if (ua != ub) {
        return ua < ub;
    }
    return (int32_t)(c->slot_used[a] - c->slot_used[b]) < 0; /* older, across a wrap too */
}

/* May a slot of `layer` go to a block of for_layer? */
static int layer_may_give(const colibri_expert_cache *c, uint32_t layer, uint32_t for_layer)
{
    if (c->per_layer[for_layer] >= c->quota) {
        return layer == for_layer;
    }
    return c->per_layer[layer] > c->quota;
}

/* The slot to give a block of for_layer: an empty one first, else the worst
 * the quotas allow, else the worst of any layer; those the chosen experts
 * want only when nothing else is free. NO_SLOT: every slot is held. */
static uint32_t victim(const colibri_expert_cache *c, uint32_t for_layer)
{
    uint32_t best = NO_SLOT, any = NO_SLOT, wanted = NO_SLOT;
    for (uint32_t i = c->config.n_pinned; i < c->n_slots; i++) {
        if (c->slot_holds[i] > 0) {
            continue;
        }
        if (c->slot_key[i] == NO_KEY) {
            return i;
        }
        if (c->slot_wanted[i] == c->epoch) {
            wanted = (wanted == NO_SLOT || worse(c, i, wanted)) ? i : wanted;
            continue;
        }
        any = (any == NO_SLOT || worse(c, i, any)) ? i : any;
        if (layer_may_give(c, c->slot_key[i] / c->experts, for_layer) &&
            (best == NO_SLOT || worse(c, i, best))) {
            best = i;
        }
    }
    return best != NO_SLOT ? best : any != NO_SLOT ? any : wanted;
}

static void forget(colibri_expert_cache *c, uint32_t slot)
{
    uint32_t key = c->slot_key[slot];
    if (key != NO_KEY) {
        c->where[key] = NO_SLOT;
        if (!is_pinned(c, slot)) {
            c->per_layer[key / c->experts]--;
        }
    }
    c->slot_key[slot] = NO_KEY;
    c->slot_wanted[slot] = 0;
}

static void remember(colibri_expert_cache *c, uint32_t slot, uint32_t key)
{
    c->slot_key[slot] = key;
    c->where[key] = slot;
    if (!is_pinned(c, slot)) {
        c->per_layer[key / c->experts]++;
    }
}

static void count_use(colibri_expert_cache *c, uint32_t key)
{
    c->clock++;
    if (c->clock % c->keys == 0) {
        for (uint32_t k = 0; k < c->keys; k++) {
            c->uses[k] /= 2u;
        }
    }
    if (c->uses[key] < UINT32_MAX) {
        c->uses[key]++;
    }
}

/* ---- the port's expert slots -------------------------------------------------- */

static const void *cache_acquire(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset,
                                 size_t size)
{
    colibri_expert_cache *c = (colibri_expert_cache *)ctx;
    uint32_t key, slot;
    if (c == NULL || c->model == NULL || layer >= c->model->hp.n_layers || expert >= c->experts ||
        size > c->slot_bytes) {
        return NULL;
    }
    key = layer * c->experts + expert;
    c->stats.acquires++;
    count_use(c, key);
    slot = c->where[key];
    if (slot != NO_SLOT) {
        c->stats.hits++;
    } else {
        slot = victim(c, layer);
        if (slot == NO_SLOT) {
            return NULL; /* more held than COLIBRI_EXPERTS_HELD: not the core's way */
        }
        forget(c, slot);
        if (fill(c, slot, key, offset, size) != 0) {
            return NULL;
        }
        remember(c, slot, key);
    }
    c->slot_holds[slot]++;
    c->slot_used[slot] = c->clock;
    return slot_bytes(c, slot);
}

static void cache_release(void *ctx, uint32_t layer, uint32_t expert)
{
    colibri_expert_cache *c = (colibri_expert_cache *)ctx;
    uint32_t slot;
    if (c == NULL || c->model == NULL || layer >= c->model->hp.n_layers || expert >= c->experts) {
        return;
    }
    slot = c->where[layer * c->experts + expert];
    if (slot != NO_SLOT && c->slot_holds[slot] > 0) {
        c->slot_holds[slot]--;
    }
}

static void cache_chosen(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t count)
{
    colibri_expert_cache *c = (colibri_expert_cache *)ctx;
    if (c == NULL || c->model == NULL || layer >= c->model->hp.n_layers) {
        return;
    }
    c->epoch++;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t slot =
            experts[i] < c->experts ? c->where[layer * c->experts + experts[i]] : NO_SLOT;
        if (slot != NO_SLOT) {
            c->slot_wanted[slot] = c->epoch;
        }
    }
}

void colibri_expert_cache_port(colibri_expert_cache *cache, colibri_port *port)
{
    if (cache == NULL || port == NULL) {
        return;
    }
    port->version = port->version < 4u ? 4u : port->version;
    port->ctx = cache;
    port->expert_acquire = cache_acquire;
    port->expert_release = cache_release;
    port->experts_chosen = cache_chosen;
}

/* ---- setting up ------------------------------------------------------------- */

/* Are the pinned keys routed experts, each once? */
static int pinned_valid(const colibri_model *m, const colibri_expert_cache_config *cfg)
{
    uint32_t experts = m->hp.n_experts;
    if (cfg->n_pinned > 0 && cfg->pinned == NULL) {
        return 0;
    }
    for (uint32_t i = 0; i < cfg->n_pinned; i++) {
        uint32_t key = cfg->pinned[i];
        if (key / experts >= m->hp.n_layers ||
            colibri_expert_block(m, key / experts, key % experts, NULL, NULL) != COLIBRI_OK) {
            return 0;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (cfg->pinned[j] == key) {
                return 0;
            }
        }
    }
    return 1;
}

colibri_status colibri_expert_cache_init(colibri_expert_cache *cache, const colibri_model *model,
                                         void *arena, size_t arena_size,
                                         const colibri_expert_cache_config *config)
{
    uint32_t n_slots, moe_layers;
    size_t slot;
    if (cache == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    *cache = (colibri_expert_cache){0};
    slot = slot_size(model, &moe_layers);
    if (arena == NULL || config == NULL || config->read == NULL || slot == 0 ||
        !pinned_valid(model, config)) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    n_slots = slots_in(model, slot, arena_size);
    if (n_slots < COLIBRI_EXPERTS_HELD || n_slots - COLIBRI_EXPERTS_HELD < config->n_pinned) {
        return COLIBRI_E_WORKSPACE_TOO_SMALL;
    }
    cache->config = *config;
    cache->slot_bytes = slot;
    cache->experts = model->hp.n_experts;
    cache->keys = model->hp.n_layers * model->hp.n_experts;
    cache->quota = (n_slots - config->n_pinned) / moe_layers;
    cache->quota = cache->quota > 0 ? cache->quota : 1u;
    cache->model = model;
    lay_out(cache, (uint8_t *)arena, n_slots);
    for (uint32_t i = 0; i < config->n_pinned; i++) {
        uint32_t key = config->pinned[i];
        uint64_t offset;
        size_t size;
        (void)colibri_expert_block(model, key / cache->experts, key % cache->experts, &offset,
                                   &size); /* a routed expert: pinned_valid */
        if (fill(cache, i, key, offset, size) != 0) {
            cache->model = NULL; /* no block from a cache that is not whole */
            return COLIBRI_E_EXPERT_UNAVAILABLE;
        }
        remember(cache, i, config->pinned[i]);
    }
    return COLIBRI_OK;
}
