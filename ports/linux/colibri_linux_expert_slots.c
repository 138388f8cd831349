/*
 * colibri_linux_expert_slots.c - the expert cache's slots: the port slots
 * the core calls (expert_acquire, expert_release, experts_chosen) and which
 * slot a block that is not there takes.
 *
 * The policy (docs/linux.md, "Which expert a slot gives up"): a decoded
 * token visits the layers in order, so a plain least-recently-used cache
 * smaller than one token's experts evicts exactly the layer that comes next
 * and hits almost never. Here each MoE layer may keep an equal share of the
 * slots (its quota); a slot is taken from the key's own layer when that layer
 * has its share, else from a layer over its share; within those, the expert
 * used least often (uses halve every `keys` acquires, so the count follows
 * the routing as it drifts), the least recently used of equals. Slots being
 * read, held by the core, or wanted by the experts just chosen are never
 * taken. COLIBRI_LINUX_EXPERTS_LRU takes the least recently used slot of
 * all instead (the baseline the benchmark compares with).
 */
#include <string.h>

#include "colibri_linux_experts_internal.h"

static uint32_t key_layer(const colibri_linux_experts *c, uint32_t key)
{
    return key / c->experts;
}

/* Can slot s be taken? Not while read, held or (unless spare_wanted) wanted. */
static int takeable(const colibri_linux_experts *c, const expert_slot *s, int spare_wanted)
{
    if (s->state == SLOT_LOADING || s->holds > 0) {
        return 0;
    }
    return spare_wanted || s->wanted != c->epoch;
}

/* Is a worse victim than b (the one to give up first)? */
static int worse(const colibri_linux_experts *c, const expert_slot *a, const expert_slot *b)
{
    uint32_t ua = c->uses[a->key], ub = c->uses[b->key];
    if ((c->flags & COLIBRI_LINUX_EXPERTS_LRU) == 0 && ua != ub) {
        return ua < ub;
    }
    return a->last_use < b->last_use;
}

/* May a slot of `layer` go to a block of `for_layer`? */
static int layer_may_give(const colibri_linux_experts *c, uint32_t layer, uint32_t for_layer)
{
    if (c->flags & COLIBRI_LINUX_EXPERTS_LRU) {
        return 1;
    }
    if (c->per_layer[for_layer] >= c->quota) {
        return layer == for_layer;
    }
    return c->per_layer[layer] > c->quota;
}

/* The slot to give up for a block of for_layer: an empty or failed one
 * first, else the worst the policy allows, else (quotas cannot always be
 * kept while slots are busy) the worst of any layer. NO_SLOT: all busy. */
static uint32_t victim(const colibri_linux_experts *c, uint32_t for_layer, int spare_wanted)
{
    uint32_t best = NO_SLOT, any = NO_SLOT;
    for (uint32_t i = 0; i < c->n_slots; i++) {
        const expert_slot *s = &c->slots[i];
        if (!takeable(c, s, spare_wanted)) {
            continue;
        }
        if (s->state == SLOT_EMPTY || s->state == SLOT_FAILED) {
            return i;
        }
        if (any == NO_SLOT || worse(c, s, &c->slots[any])) {
            any = i;
        }
        if (layer_may_give(c, key_layer(c, s->key), for_layer) &&
            (best == NO_SLOT || worse(c, s, &c->slots[best]))) {
            best = i;
        }
    }
    return best != NO_SLOT ? best : any;
}

void colibri_expert_slot_clear(colibri_linux_experts *c, uint32_t slot)
{
    expert_slot *s = &c->slots[slot];
    if (s->key != NO_KEY) {
        c->where[s->key] = NO_SLOT;
        c->per_layer[key_layer(c, s->key)]--;
    }
    s->key = NO_KEY;
    s->state = SLOT_EMPTY;
    s->wanted = 0;
}

uint32_t colibri_expert_slot_take(colibri_linux_experts *c, uint32_t key, uint64_t offset,
                                  size_t size, int spare_wanted)
{
    uint32_t slot = victim(c, key_layer(c, key), spare_wanted);
    if (slot == NO_SLOT) {
        return NO_SLOT;
    }
    expert_slot *s = &c->slots[slot];
    colibri_expert_slot_clear(c, slot);
    s->key = key;
    s->offset = offset;
    s->size = size;
    s->state = SLOT_LOADING;
    s->ahead = 0;
    s->last_use = c->clock;
    c->where[key] = slot;
    c->per_layer[key_layer(c, key)]++;
    return slot;
}

void colibri_expert_slot_count_use(colibri_linux_experts *c, uint32_t key)
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

/* ---- the port slots ---------------------------------------------------------- */

static uint32_t key_of(const colibri_linux_experts *c, uint32_t layer, uint32_t expert)
{
    return layer * c->experts + expert;
}

void colibri_linux_experts_chosen(void *ctx, uint32_t layer, const uint32_t *experts,
                                  uint32_t count)
{
    colibri_linux_experts *c = (colibri_linux_experts *)ctx;
    pthread_mutex_lock(&c->lock);
    c->epoch++;
    for (uint32_t i = 0; i < count; i++) { /* first, so none of them is taken below */
        uint32_t slot = c->where[key_of(c, layer, experts[i])];
        if (slot != NO_SLOT) {
            c->slots[slot].wanted = c->epoch;
        }
    }
    for (uint32_t i = 0; c->n_threads > 0 && i < count; i++) {
        uint32_t key = key_of(c, layer, experts[i]), slot;
        uint64_t offset;
        size_t size;
        if (c->where[key] != NO_SLOT ||
            colibri_expert_block(c->model, layer, experts[i], &offset, &size) != COLIBRI_OK ||
            (slot = colibri_expert_slot_take(c, key, offset, size, 0)) == NO_SLOT) {
            continue;
        }
        c->slots[slot].wanted = c->epoch;
        c->slots[slot].ahead = 1;
        c->queue[(c->q_head + c->q_count++) % c->n_slots] = slot;
        pthread_cond_signal(&c->work);
    }
    pthread_mutex_unlock(&c->lock);
}

/* A slot for key, read on this thread: NO_SLOT if the read failed. Waits
 * while every slot is busy (reads ahead finish; the core holds fewer than
 * min_slots). Lock held; dropped while reading. */
static uint32_t read_on_demand(colibri_linux_experts *c, uint32_t key, uint64_t offset, size_t size)
{
    uint32_t slot;
    read_failure failure;
    int rc;
    while ((slot = colibri_expert_slot_take(c, key, offset, size, 1)) == NO_SLOT) {
        pthread_cond_wait(&c->done, &c->lock);
    }
    c->stats.misses++;
    pthread_mutex_unlock(&c->lock);
    rc = colibri_expert_read(c, slot, &failure);
    pthread_mutex_lock(&c->lock);
    colibri_expert_read_done(c, slot, rc, &failure);
    if (rc != 0) {
        colibri_expert_slot_clear(c, slot); /* its failure is on record */
        return NO_SLOT;
    }
    return slot;
}

/* The slot holding key once its read ahead is over (counted as a hit, a
 * read ahead in time or a wait), or NO_SLOT if it is not there. Lock held. */
static uint32_t resident(colibri_linux_experts *c, uint32_t key)
{
    uint32_t slot = c->where[key];
    if (slot == NO_SLOT) {
        return NO_SLOT;
    }
    if (c->slots[slot].state == SLOT_LOADING) {
        c->stats.waits++;
        while (c->where[key] == slot && c->slots[slot].state == SLOT_LOADING) {
            pthread_cond_wait(&c->done, &c->lock);
        }
        return c->where[key];
    }
    if (c->slots[slot].ahead) {
        c->stats.ahead++;
    } else {
        c->stats.hits++;
    }
    return slot;
}

const void *colibri_linux_expert_acquire(void *ctx, uint32_t layer, uint32_t expert,
                                         uint64_t offset, size_t size)
{
    colibri_linux_experts *c = (colibri_linux_experts *)ctx;
    uint32_t key = key_of(c, layer, expert), slot;
    const void *block = NULL;
    uint64_t t0 = colibri_linux_ticks_ns();
    if (layer >= c->model->hp.n_layers || expert >= c->experts || size > c->layout.block_max) {
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    c->stats.acquires++;
    colibri_expert_slot_count_use(c, key);
    slot = resident(c, key);
    if (slot != NO_SLOT && c->slots[slot].state == SLOT_FAILED) {
        colibri_expert_slot_clear(c, slot); /* its failure is on record */
        slot = NO_SLOT;
    } else if (slot == NO_SLOT) {
        slot = read_on_demand(c, key, offset, size);
    }
    if (slot != NO_SLOT) {
        expert_slot *s = &c->slots[slot];
        s->holds++;
        s->ahead = 0;
        s->last_use = c->clock;
        block = s->buf + s->data_at;
    }
    c->stats.stall_ns += colibri_linux_ticks_ns() - t0;
    pthread_mutex_unlock(&c->lock);
    return block;
}

void colibri_linux_expert_release(void *ctx, uint32_t layer, uint32_t expert)
{
    colibri_linux_experts *c = (colibri_linux_experts *)ctx;
    uint32_t slot;
    if (layer >= c->model->hp.n_layers || expert >= c->experts) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    slot = c->where[key_of(c, layer, expert)];
    if (slot != NO_SLOT && c->slots[slot].holds > 0) {
        c->slots[slot].holds--;
    }
    pthread_mutex_unlock(&c->lock);
}
