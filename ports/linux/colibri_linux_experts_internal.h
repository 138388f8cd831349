/*
 * colibri_linux_experts_internal.h - the expert cache's parts, shared by its
 * three files: opening and closing it (colibri_linux_experts.c), the slots
 * and which one to give up (colibri_linux_expert_slots.c), and reading the
 * file (colibri_linux_expert_io.c). One lock guards everything below that
 * changes; a block's bytes are written only by the one thread that reads it,
 * while its slot is LOADING, and read by the core only once it is READY.
 */
#ifndef COLIBRI_LINUX_EXPERTS_INTERNAL_H
#define COLIBRI_LINUX_EXPERTS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri_linux.h"

/* Direct reads start and end on this boundary (the largest logical block
 * size of a Linux block device), and slots are aligned to it. */
#define EXPERT_IO_ALIGN 4096u
#define EXPERT_IO_THREADS_MAX 16u
#define NO_SLOT UINT32_MAX
#define NO_KEY UINT32_MAX

typedef enum slot_state { SLOT_EMPTY, SLOT_LOADING, SLOT_READY, SLOT_FAILED } slot_state;

typedef struct expert_slot {
    uint8_t *buf;    /* slot_bytes, EXPERT_IO_ALIGN-aligned */
    uint64_t offset; /* the block's place in the image */
    size_t size;     /* and its size */
    size_t data_at;  /* where the block starts in buf */
    uint32_t key;    /* layer * experts_per_layer + expert, or NO_KEY */
    slot_state state;
    uint32_t holds;    /* acquired and not yet released */
    int ahead;         /* read ahead and not acquired since */
    uint64_t wanted;   /* the experts_chosen call (epoch) that wants it */
    uint64_t last_use; /* the acquire clock at its last use */
} expert_slot;

/* What went wrong with a read: errno, or one of these. */
#define READ_SHORT (-1)    /* the file ended before the block did */
#define READ_CHECKSUM (-2) /* the bytes fail the block's CRC-32s or scales */

typedef struct read_failure {
    int what; /* an errno, READ_SHORT or READ_CHECKSUM; 0: none */
    uint32_t key;
    uint64_t at;           /* the file offset the failing read started at */
    colibri_status status; /* READ_CHECKSUM: what the check said */
} read_failure;

struct colibri_linux_experts {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a slot to read, or stop */
    pthread_cond_t done; /* a read finished */
    const colibri_model *model;
    colibri_linux_expert_layout layout;
    uint32_t experts; /* per layer: key = layer * experts + expert */
    uint32_t keys;    /* n_layers * experts */
    int fd, direct;
    unsigned flags;
    colibri_linux_read_fn read;
    uint8_t *arena;
    size_t arena_bytes;
    expert_slot *slots;
    uint32_t n_slots, quota; /* quota: slots each MoE layer may keep */
    uint32_t *where;         /* [keys]: the slot holding a key, or NO_SLOT */
    uint32_t *uses;          /* [keys]: acquires, halved every `keys` acquires */
    uint32_t *per_layer;     /* [n_layers]: slots holding the layer's experts */
    uint32_t *queue;         /* ring of n_slots slot numbers to read */
    uint32_t q_head, q_count;
    uint64_t clock, epoch;
    pthread_t threads[EXPERT_IO_THREADS_MAX];
    uint32_t n_threads;
    int stop;
    colibri_linux_expert_stats stats;
    read_failure failure; /* the last one */
};

/* ---- colibri_linux_expert_slots.c ---- */

/* The slot to give key (whose block is `offset`, `size`), taken from what it
 * held before, or NO_SLOT when every slot is busy (held or being read; with
 * spare_wanted 0 also those the current chosen experts want). The slot is
 * the key's now, LOADING. Lock held. */
uint32_t colibri_expert_slot_take(colibri_linux_experts *c, uint32_t key, uint64_t offset,
                                  size_t size, int spare_wanted);

/* The slot's key forgotten (a failed read): EMPTY. Lock held. */
void colibri_expert_slot_clear(colibri_linux_experts *c, uint32_t slot);

/* One more use of key (the frequency the policy weighs). Lock held. */
void colibri_expert_slot_count_use(colibri_linux_experts *c, uint32_t key);

/* ---- colibri_linux_expert_io.c ---- */

/* Read slot `slot`'s block into it (no lock held; the slot is LOADING and
 * this thread's): 0, or -1 with *failure filled. */
int colibri_expert_read(colibri_linux_experts *c, uint32_t slot, read_failure *failure);

/* A read finished: the slot READY or FAILED, the counters, the waiters
 * woken. Lock held. */
void colibri_expert_read_done(colibri_linux_experts *c, uint32_t slot, int rc,
                              const read_failure *failure);

/* Start and stop cfg->io_threads readers of the queue. */
colibri_linux_status colibri_expert_readers_start(colibri_linux_experts *c, uint32_t n);
void colibri_expert_readers_stop(colibri_linux_experts *c);

/* Open the mapped file again for reading (O_DIRECT unless BUFFERED or the
 * filesystem refuses it: a first direct read decides). */
colibri_linux_status colibri_expert_file_open(colibri_linux_experts *c,
                                              const colibri_linux_mapping *map, char *err,
                                              size_t err_size);

#endif
