/*
 * colibri_expert_cache.h - routed experts read from storage into a cache in
 * the caller's memory (docs/core.md, "An expert cache in caller memory").
 * Part of colibri.h, which includes it; not included on its own.
 *
 * For a device whose image does not fit its memory: the routed experts stay
 * in storage (external flash behind a driver, an SD card, a file) and a
 * read hook copies the blocks the router picks into slots of an arena the
 * caller owns, as it owns the KV state. The cache fills the port's version 4
 * expert slots. No allocation, no lock, no clock: what it keeps and gives up
 * depends only on the sequence of requests, so a run is repeatable, and the
 * logits are the same bits as the image's in memory whatever the cache's
 * size. It runs on the thread that calls colibri_forward (an interrupt
 * handler too, when the read hook may run there).
 */
#ifndef COLIBRI_EXPERT_CACHE_H
#define COLIBRI_EXPERT_CACHE_H

/* Copy the image's bytes [offset, offset + size) from storage to dst (64-byte
 * aligned): 0, or a nonzero code of the reader's own, kept in the cache's
 * statistics (the forward pass then ends with COLIBRI_E_EXPERT_UNAVAILABLE). */
typedef int (*colibri_read_fn)(void *read_ctx, uint64_t offset, void *dst, size_t size);

/* Check every block read: its data CRC-32s and scales (colibri_verify_expert_block). */
#define COLIBRI_EXPERT_CACHE_VERIFY 1u

typedef struct colibri_expert_cache_config {
    colibri_read_fn read; /* required */
    void *read_ctx;       /* passed to read */
    /* Experts held for good (a routing profile's hottest: colibri-plot
     * experts --sram-bytes), each as layer * n_experts + expert, read by
     * colibri_expert_cache_init; NULL with n_pinned 0: none. */
    const uint32_t *pinned;
    uint32_t n_pinned;
    uint32_t flags; /* COLIBRI_EXPERT_CACHE_VERIFY */
} colibri_expert_cache_config;

typedef struct colibri_expert_cache_stats {
    uint64_t acquires;                /* blocks the core asked for */
    uint64_t hits;                    /* ... that were in a slot (pinned ones included) */
    uint64_t bytes_read;              /* through the read hook, the pinned blocks included */
    uint32_t reads;                   /* read hook calls */
    uint32_t failures;                /* reads that failed or whose block failed its check */
    int last_read_error;              /* the read hook's code at the last failure (0: the check) */
    colibri_status last_check;        /* the check's status at the last failure */
    uint32_t last_layer, last_expert; /* the block of the last failure */
} colibri_expert_cache_stats;

/* Caller storage, filled by colibri_expert_cache_init; the fields are the
 * cache's own. A zeroed cache gives no block. */
typedef struct colibri_expert_cache {
    const colibri_model *model;
    colibri_expert_cache_config config;
    uint8_t *slot_data;    /* n_slots * slot_bytes, 64-byte aligned */
    size_t slot_bytes;     /* the largest expert block, rounded up to 64 */
    uint32_t n_slots;      /* pinned ones first */
    uint32_t experts;      /* per layer: key = layer * experts + expert */
    uint32_t keys;         /* n_layers * experts */
    uint32_t quota;        /* unpinned slots each MoE layer may keep */
    uint32_t *slot_key;    /* [n_slots] the key a slot holds, or UINT32_MAX */
    uint32_t *slot_holds;  /* [n_slots] acquired and not yet released */
    uint32_t *slot_wanted; /* [n_slots] the experts_chosen call that wants it */
    uint32_t *slot_used;   /* [n_slots] the acquire count at its last use */
    uint32_t *where;       /* [keys] the slot holding a key, or UINT32_MAX */
    uint32_t *uses;        /* [keys] acquires, halved every `keys` acquires */
    uint32_t *per_layer;   /* [n_layers] unpinned slots holding the layer's experts */
    uint32_t clock, epoch;
    colibri_expert_cache_stats stats;
} colibri_expert_cache;

/* Bytes of arena a cache of n_slots slots needs (pinned ones included),
 * alignment slack included; 0 on bad arguments or an image without MoE
 * layers. A cache needs at least COLIBRI_EXPERTS_HELD slots besides the
 * pinned ones. */
size_t colibri_expert_cache_size(const colibri_model *model, uint32_t n_slots);

/* The slots an arena of arena_size bytes holds (0 on bad arguments). */
uint32_t colibri_expert_cache_slots(const colibri_model *model, size_t arena_size);

/*
 * Lay the cache out in [arena, arena + arena_size) (any alignment: as many
 * slots as fit) for model, and read the pinned experts. COLIBRI_E_BAD_ARGUMENT
 * for a NULL argument, no read hook, or a pinned key that is out of range,
 * not a routed expert or repeated; COLIBRI_E_WORKSPACE_TOO_SMALL when the
 * arena holds fewer than n_pinned + COLIBRI_EXPERTS_HELD slots;
 * COLIBRI_E_EXPERT_UNAVAILABLE when a pinned block's read or check fails
 * (the statistics say which). model must have been initialised with the
 * port colibri_expert_cache_port filled, so that the cache is its ctx.
 */
colibri_status colibri_expert_cache_init(colibri_expert_cache *cache, const colibri_model *model,
                                         void *arena, size_t arena_size,
                                         const colibri_expert_cache_config *config);

/* Fill port's expert slots (expert_acquire, expert_release, experts_chosen)
 * with the cache's, its ctx with the cache and its version with at least 4.
 * The port's other functions then get the cache as ctx: they must not need
 * one of their own. Before colibri_init, with the port then in its options. */
void colibri_expert_cache_port(colibri_expert_cache *cache, colibri_port *port);

#endif
