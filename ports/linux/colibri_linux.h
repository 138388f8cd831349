/*
 * colibri_linux.h - the Linux port of Colibri: map a model image file, give
 * the core a clock and a prefetch hook.
 *
 *   colibri_linux_mapping map;
 *   char err[1024];
 *   if (colibri_linux_map(&map, "model.bin", COLIBRI_LINUX_MAP_MLOCK,
 *                         err, sizeof err) != COLIBRI_LINUX_OK) {
 *       fprintf(stderr, "%s\n", err);          (err names the file and the cure)
 *       return 1;
 *   }
 *   colibri_port port;
 *   colibri_linux_port_ctx ctx = {.map = &map, .pool = colibri_linux_pool_start(threads)};
 *   colibri_linux_port_init(&port, &ctx);
 *   colibri_options opt = { 0, &port };
 *   colibri_init(&model, map.data, map.size, &opt);
 *   ...
 *   colibri_linux_unmap(&map);
 *
 * What colibri_linux_map does, in order (docs/linux.md):
 *   1. open(O_RDONLY | O_CLOEXEC), fstat: refuses a missing file, a
 *      directory or any other non-regular file, an empty file, a file smaller
 *      than the 256-byte header and a file too large for the address space.
 *   2. flock(LOCK_SH | LOCK_NB): a shared advisory lock, so a cooperating
 *      writer that takes LOCK_EX (the converter, a flasher) is refused while
 *      the model is in use, and vice versa. Advisory only: see the caveat.
 *   3. pread of the header (no page of the file is mapped yet): the magic
 *      "COLIBRI\x1a" must be at byte 0 and the header's image_size (u64 LE
 *      at byte 16) must not exceed the file size. A truncated file is thus
 *      refused with an error instead of a SIGBUS on first touch.
 *   4. mmap(PROT_READ, MAP_PRIVATE) of exactly the file size.
 *   5. madvise: MADV_RANDOM over the whole image (an MoE decode step reads
 *      top_k of n_experts expert blocks per layer, so sequential read-ahead
 *      would mostly fetch experts that are not used), then MADV_WILLNEED over
 *      the header and the layer/tensor tables, which colibri_init reads at
 *      once. The core's prefetch hook asks for each expert block with
 *      MADV_WILLNEED before it is read (colibri_linux_port_init).
 *   6. With COLIBRI_LINUX_MAP_MLOCK: getrlimit(RLIMIT_MEMLOCK) first; an
 *      image larger than the soft limit is refused (unless the process has
 *      CAP_IPC_LOCK) with a message stating the limit, the image size and
 *      how to raise the limit; then mlock, whose failure is reported with
 *      strerror(errno).
 *
 * Caveat (a Linux limit, not a bug of this port): a file that another process
 * truncates while it is mapped makes the next read of a page past the new end
 * raise SIGBUS. The lock above is advisory and does not prevent it, nor does
 * mlock (truncation drops locked pages too). Replace model files by writing
 * a new file and rename()-ing it over the old one: mappings of the old file
 * stay valid. A program that cannot rule this out catches SIGBUS (as
 * colibri-run does) to report it.
 *
 * The port library never exits, never prints and never allocates.
 */
#ifndef COLIBRI_LINUX_H
#define COLIBRI_LINUX_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags for colibri_linux_map. */
#define COLIBRI_LINUX_MAP_MLOCK 0x1u    /* lock the whole image in RAM */
#define COLIBRI_LINUX_MAP_NO_FLOCK 0x2u /* do not take the shared flock */
#define COLIBRI_LINUX_MAP_POPULATE                                                                 \
    0x4u                             /* map every page now (MAP_POPULATE): no page faults later */
#define COLIBRI_LINUX_MAP_FLAGS 0x7u /* all of the above */

/* Results of the port functions. 0 is success; the values are pinned. */
typedef enum colibri_linux_status {
    COLIBRI_LINUX_OK = 0,
    COLIBRI_LINUX_E_BAD_ARGUMENT = 1, /* NULL pointer, unknown flag */
    COLIBRI_LINUX_E_OPEN = 2,         /* open or fstat failed (errno in text) */
    COLIBRI_LINUX_E_NOT_REGULAR = 3,  /* a directory, device, FIFO, socket... */
    COLIBRI_LINUX_E_EMPTY = 4,        /* file of 0 bytes */
    COLIBRI_LINUX_E_TOO_SMALL = 5,    /* smaller than the 256-byte header */
    COLIBRI_LINUX_E_TOO_LARGE = 6,    /* larger than this process can map */
    COLIBRI_LINUX_E_BAD_MAGIC = 7,    /* not a Colibri model image */
    COLIBRI_LINUX_E_TRUNCATED = 8,    /* header's image_size > file size */
    COLIBRI_LINUX_E_LOCKED = 9,       /* another process holds LOCK_EX */
    COLIBRI_LINUX_E_READ = 10,        /* pread of the header failed */
    COLIBRI_LINUX_E_MMAP = 11,        /* mmap failed (errno in text) */
    COLIBRI_LINUX_E_MLOCK_LIMIT = 12, /* image larger than RLIMIT_MEMLOCK */
    COLIBRI_LINUX_E_MLOCK = 13,       /* mlock failed (errno in text) */
    COLIBRI_LINUX_E_THREAD = 14,      /* a thread could not be started */
    COLIBRI_LINUX_E_NO_EXPERTS = 15,  /* the model has no routed experts to stream */
    COLIBRI_LINUX_E_BUDGET = 16       /* fewer cache slots than the model needs */
} colibri_linux_status;

/* A one-line description of a status; never NULL. */
const char *colibri_linux_strerror(colibri_linux_status status);

/* A mapped model file. Caller storage; filled by colibri_linux_map. */
typedef struct colibri_linux_mapping {
    const uint8_t *data; /* first byte of the mapping; NULL when unmapped */
    size_t size;         /* bytes mapped == file size at map time */
    uint64_t image_size; /* the header's image_size (<= size) */
    size_t page_size;    /* sysconf(_SC_PAGESIZE) */
    int fd;              /* open descriptor holding the flock; -1 if none */
    int locked;          /* 1 if the image is mlock'd */
    int populated;       /* 1 if every page was mapped at map time */
    int flocked;         /* 1 if the shared flock is held */
    int64_t mtime_ns;    /* the file's modification time at map time */
} colibri_linux_mapping;

/*
 * Map the model image file at path for reading (steps above). flags is 0 or
 * a combination of COLIBRI_LINUX_MAP_*. On success *m describes the mapping
 * and err (if err_size > 0) holds an empty string. On failure *m is reset
 * (data NULL, fd -1), nothing stays open or mapped, and err holds one line
 * of plain text naming the file, what is wrong and, where there is one, the
 * cure. 1024 bytes hold every message but for very long paths; a longer one
 * is cut short, always terminated. err may be NULL if err_size is 0.
 */
colibri_linux_status colibri_linux_map(colibri_linux_mapping *m, const char *path, unsigned flags,
                                       char *err, size_t err_size);

/* 1 if the mapped file was written since it was mapped (its modification
 * time or size changed: an in-place rewrite that changes the bytes under a
 * running model, which the flock cannot stop), 0 if not, -1 if fstat fails. */
int colibri_linux_changed(const colibri_linux_mapping *m);

/* Unlock, unmap, release the flock and close. Safe on a reset or already
 * unmapped mapping; afterwards *m is reset. */
void colibri_linux_unmap(colibri_linux_mapping *m);

/* Access patterns for colibri_linux_advise. */
typedef enum colibri_linux_access {
    COLIBRI_LINUX_ACCESS_RANDOM = 0,     /* the default after map: decode */
    COLIBRI_LINUX_ACCESS_SEQUENTIAL = 1, /* one pass over everything: verify */
    COLIBRI_LINUX_ACCESS_WILLNEED = 2,   /* read the whole image ahead now */
    COLIBRI_LINUX_ACCESS_DONTNEED = 3    /* drop its pages (and the file's page cache)
                                          * now: they are read again when touched */
} colibri_linux_access;

/* Tell the kernel how the whole image is about to be read (madvise). A hint:
 * returns 0, or the errno of a failed madvise (nothing else changes). */
int colibri_linux_advise(const colibri_linux_mapping *m, colibri_linux_access access);

/* Heap memory for the caller-owned buffers (KV state, scratch, logits): align
 * must be a power of two that is a multiple of sizeof(void *); the size is
 * rounded up to it (C11 aligned_alloc's rule). NULL when bytes is so large
 * that rounding would overflow, or when there is no memory. free() it. */
void *colibri_linux_alloc_aligned(size_t bytes, size_t align);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t colibri_linux_ticks_ns(void);

/* Most threads a pool runs (the caller's included). */
#define COLIBRI_LINUX_MAX_THREADS 64u

/* A pool of worker threads for the core's parallel_for (opaque). */
typedef struct colibri_linux_pool colibri_linux_pool;

/* Start n_threads - 1 workers (the thread that calls parallel_for is the
 * n-th); n_threads 1 .. COLIBRI_LINUX_MAX_THREADS. NULL on a bad count or
 * when a thread cannot be made (none is left running then). */
colibri_linux_pool *colibri_linux_pool_start(uint32_t n_threads);

/* Stop and join the workers, free the pool; NULL is ignored. No
 * parallel_for may be running. */
void colibri_linux_pool_stop(colibri_linux_pool *pool);

/* Threads of the pool, the caller's included (1 for NULL). */
uint32_t colibri_linux_pool_threads(const colibri_linux_pool *pool);

/* The colibri_port.parallel_for of this port, ctx a colibri_linux_pool (or
 * NULL: the tasks run in order on the calling thread). One caller at a time
 * per pool. */
void colibri_linux_parallel_for(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg);

/* Online CPUs, 1 .. COLIBRI_LINUX_MAX_THREADS. */
uint32_t colibri_linux_cpu_count(void);

/* ---- Experts from storage: a budgeted cache (docs/linux.md, "Models
 * larger than memory") ------------------------------------------------------
 *
 * The routed experts' blocks are read from the model file into a fixed set
 * of cache slots, allocated once, instead of being paged in through the
 * mapping; everything else is read in place from the mapping. Reads are
 * large and aligned (O_DIRECT where the filesystem allows, so they add no
 * page cache), done by I/O threads as soon as a layer's router has chosen,
 * while the experts before them compute. The logits are the bits of the
 * in-memory run whatever the slot count: the bytes are the same bytes. */

/* A model's routed experts as the cache sees them. */
typedef struct colibri_linux_expert_layout {
    uint64_t expert_bytes; /* every routed expert's block, summed */
    uint64_t dense_bytes;  /* the rest of the image: what stays mapped */
    size_t block_max;      /* the largest block */
    size_t slot_bytes;     /* one slot: block_max plus room to align a direct read */
    uint32_t moe_layers;   /* layers with routed experts */
    uint32_t experts;      /* routed experts per MoE layer */
    uint32_t min_slots;    /* the fewest slots a cache may have: min(top_k, experts),
                              at least 3, at most moe_layers * experts */
} colibri_linux_expert_layout;

/* The layout of an initialised model's experts; COLIBRI_LINUX_E_NO_EXPERTS
 * when it has no MoE layer. */
colibri_linux_status colibri_linux_expert_layout_of(const colibri_model *model,
                                                    colibri_linux_expert_layout *out);

/* Bytes a memory budget keeps for the process itself: the program, libc,
 * thread stacks, page tables and the cache's tables (docs/linux.md). */
#define COLIBRI_LINUX_PROCESS_RESERVE (24u << 20)

/* The slots a process may have in `budget` bytes when it also holds the
 * dense part (layout), held_bytes of buffers (KV state, scratch, logits) and
 * COLIBRI_LINUX_PROCESS_RESERVE; at most every expert. *minimum (may be
 * NULL) gets the smallest budget that leaves layout->min_slots. 0 when the
 * budget is below that. */
uint32_t colibri_linux_budget_slots(const colibri_linux_expert_layout *layout, uint64_t budget,
                                    uint64_t held_bytes, uint64_t *minimum);

/* Flags of colibri_linux_expert_config. */
#define COLIBRI_LINUX_EXPERTS_BUFFERED 0x1u /* plain reads even where O_DIRECT works */
#define COLIBRI_LINUX_EXPERTS_MLOCK 0x2u    /* lock the slots in RAM */
#define COLIBRI_LINUX_EXPERTS_VERIFY 0x4u   /* check each read block's CRCs and scales */
#define COLIBRI_LINUX_EXPERTS_LRU 0x8u      /* evict the least recently used (a baseline) */
#define COLIBRI_LINUX_EXPERTS_FLAGS 0xFu

/* pread's signature: where the cache reads (tests inject faults here). */
typedef long (*colibri_linux_read_fn)(int fd, void *buf, size_t count, int64_t offset);

typedef struct colibri_linux_expert_config {
    uint32_t slots;             /* layout.min_slots .. ; each layout.slot_bytes */
    uint32_t io_threads;        /* 0: read on the calling thread, nothing ahead */
    unsigned flags;             /* COLIBRI_LINUX_EXPERTS_* */
    colibri_linux_read_fn read; /* NULL: pread */
} colibri_linux_expert_config;

/* Counters since open; the calling thread's view. */
typedef struct colibri_linux_expert_stats {
    uint64_t acquires;   /* blocks the core asked for */
    uint64_t hits;       /* ... that were in a slot before their layer chose */
    uint64_t ahead;      /* ... read ahead when their layer chose, in time */
    uint64_t waits;      /* ... read ahead, not yet in: the core waited */
    uint64_t misses;     /* ... read on demand (not hinted, or no free slot) */
    uint64_t reads;      /* blocks read from the file */
    uint64_t bytes_read; /* bytes those reads asked for (aligned) */
    uint64_t stall_ns;   /* time the core waited for blocks */
    uint64_t failures;   /* reads that failed (error, short, checksum) */
    uint32_t slots, io_threads;
    int direct; /* 1 if reads bypass the page cache (O_DIRECT) */
} colibri_linux_expert_stats;

/* An expert cache (opaque). */
typedef struct colibri_linux_experts colibri_linux_experts;

/*
 * Open the cache for `model` (initialised from map->data): cfg->slots slots
 * of layout.slot_bytes (an anonymous mapping, locked with
 * COLIBRI_LINUX_EXPERTS_MLOCK), the mapped file opened again for reading
 * (O_DIRECT unless BUFFERED or the filesystem refuses it), cfg->io_threads
 * readers started. On failure *out is NULL, nothing stays open and err names
 * the cause (COLIBRI_LINUX_E_BUDGET states the minimum). The mapping and the
 * model must outlive the cache; the cache allocates (once, here) and never
 * prints.
 */
colibri_linux_status colibri_linux_experts_open(colibri_linux_experts **out,
                                                const colibri_linux_mapping *map,
                                                const colibri_model *model,
                                                const colibri_linux_expert_config *cfg, char *err,
                                                size_t err_size);

/* Stop the readers, free the slots, close the file; NULL is ignored. No
 * forward pass may be running. */
void colibri_linux_experts_close(colibri_linux_experts *cache);

void colibri_linux_experts_stats(colibri_linux_experts *cache, colibri_linux_expert_stats *out);

/* The last failed read as one line ("layer 3 expert 17: short read at byte
 * ..."), into out; returns 0 if no read failed. */
int colibri_linux_experts_error(colibri_linux_experts *cache, char *out, size_t size);

/* The port slots, ctx the cache (colibri_linux_port_init sets them from
 * colibri_linux_port_ctx.experts; these are for a port of one's own). */
const void *colibri_linux_expert_acquire(void *cache, uint32_t layer, uint32_t expert,
                                         uint64_t offset, size_t size);
void colibri_linux_expert_release(void *cache, uint32_t layer, uint32_t expert);
void colibri_linux_experts_chosen(void *cache, uint32_t layer, const uint32_t *experts,
                                  uint32_t count);

/* What the port's functions work on; caller storage that must outlive every
 * use of the port. */
typedef struct colibri_linux_port_ctx {
    const colibri_linux_mapping *map; /* prefetch within it; NULL: no prefetch */
    colibri_linux_pool *pool;         /* parallel_for on it; NULL: one thread */
    colibri_linux_experts *experts;   /* routed experts from it; NULL: mapped */
} colibri_linux_port_ctx;

/*
 * Fill *port for colibri_options.port: version COLIBRI_PORT_VERSION, ticks =
 * CLOCK_MONOTONIC nanoseconds, prefetch = madvise(MADV_WILLNEED) over the
 * pages of the range (ranges outside ctx->map are ignored; none at all when
 * the image is locked or populated: its pages are all there), parallel_for on
 * ctx->pool when it has more than one thread, kernels = the best table for
 * this CPU (colibri_linux_kernels(NULL)), and with ctx->experts the expert
 * slots on that cache. ctx may be NULL (then neither prefetch nor
 * parallel_for is set).
 */
void colibri_linux_port_init(colibri_port *port, colibri_linux_port_ctx *ctx);

/* The kernel table this binary has and this CPU runs: the preferred one for
 * name NULL, else the one of that name; NULL if there is no such table or
 * the CPU lacks what it needs. */
const colibri_kernels *colibri_linux_kernels(const char *name);

/* The names of the tables built in, "a, b, ..." into out (NUL-terminated,
 * cut to size); returns the length written. */
size_t colibri_linux_kernel_names(char *out, size_t size);

/* ---- A/B weight slots in a file (docs/ota.md, "Linux") --------------------- */

/* A slot store: two record copies (one sector each) at 0 and sector, slot A
 * at 2 * sector, slot B after it, each (size - 2 * sector) / 2 rounded down
 * to a sector. Caller storage. */
typedef struct colibri_linux_store {
    colibri_slots slots; /* erase/program: pwrite + fdatasync per sector or call */
    const uint8_t *map;  /* the whole store, mapped shared, read-only */
    size_t size;
    int fd; /* open read-write, holding flock(LOCK_EX) until unlock/close */
    uint8_t key[32];
} colibri_linux_store;

/* An Ed25519 public key written as 64 hex digits (colibri-sign hex): 0, or -1
 * for anything else. */
int colibri_linux_parse_key(const char *text, uint8_t key[32]);

/* Open, lock (exclusive, non-blocking) and map the store at path; sector a
 * power of two >= 4096; trusted_key (optional, 32 bytes) is copied into
 * slots.trusted_key. On failure err names the file and nothing stays open. */
colibri_linux_status colibri_linux_store_open(colibri_linux_store *s, const char *path,
                                              uint32_t sector, const uint8_t *trusted_key,
                                              char *err, size_t err_size);
/* Let other slot tools in (the mapping stays). */
void colibri_linux_store_unlock(colibri_linux_store *s);
void colibri_linux_store_close(colibri_linux_store *s);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_LINUX_H */
