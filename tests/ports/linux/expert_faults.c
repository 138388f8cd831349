/*
 * expert_faults.c - the Linux expert cache against a storage that fails
 * (tests/ports/linux/test_linux_expert_faults.py).
 *
 *   expert_faults IMAGE MODE NTH IO_THREADS VERIFY
 *
 * Runs a 13-token prompt in chunks of 7 and then 5 decoded tokens with a
 * cache of the fewest slots the model allows, reading the file through a
 * reader that misbehaves as MODE says at its NTH call (1-based; once):
 *   none   nothing
 *   eio    fails with EIO
 *   eof    returns 0 (the file ends inside the block)
 *   flip   reads, then flips a bit of what it read
 *   short  returns half of what was asked (every call from the NTH on)
 *   eintr  fails with EINTR (every call from the NTH on, every other one)
 * A forward pass that fails prints "fail STATUS pos POS: MESSAGE" and is run
 * again (the fault fired once). The last line is "ok CRC" with the CRC-32 of
 * every logit of the passes that succeeded, or "error ..." (exit 1).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"

static const char *g_mode;
static long g_nth;
static atomic_long g_calls;

static long faulty_read(int fd, void *buf, size_t count, int64_t offset)
{
    long call = atomic_fetch_add(&g_calls, 1) + 1;
    ssize_t n;
    if (call == g_nth && strcmp(g_mode, "eio") == 0) {
        errno = EIO;
        return -1;
    }
    if (call == g_nth && strcmp(g_mode, "eof") == 0) {
        return 0;
    }
    if (call >= g_nth && strcmp(g_mode, "eintr") == 0 && call % 2 == 0) {
        errno = EINTR;
        return -1;
    }
    if (call >= g_nth && strcmp(g_mode, "short") == 0 && count > 4096) {
        count = count / 2 / 4096 * 4096; /* a direct read stays aligned */
    }
    n = pread(fd, buf, count, (off_t)offset);
    if (n > 0 && call == g_nth && strcmp(g_mode, "flip") == 0) {
        ((unsigned char *)buf)[n / 2] ^= 0x10u;
    }
    return (long)n;
}

typedef struct run {
    colibri_model model;
    colibri_state state;
    void *kv, *scratch;
    float *logits;
    size_t kv_bytes, scratch_bytes;
    colibri_linux_experts *cache;
    uint32_t crc;
} run;

/* One forward pass, run again after a failure that the fault explains. */
static int forward(run *r, const int32_t *ids, uint32_t n)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t pos = r->state.pos;
        colibri_status st = colibri_forward(&r->model, &r->state, ids, n, r->logits,
                                            COLIBRI_LOGITS_ALL, r->scratch, r->scratch_bytes, NULL);
        if (st == COLIBRI_OK) {
            r->crc = colibri_crc32_update(r->crc, (const uint8_t *)r->logits,
                                          (size_t)n * r->model.hp.vocab_size * sizeof(float));
            return 0;
        }
        char why[512];
        colibri_linux_experts_error(r->cache, why, sizeof why);
        printf("fail %d pos %u->%u: %s\n", (int)st, pos, r->state.pos, why);
    }
    return -1;
}

static int run_all(run *r)
{
    static const int32_t prompt[13] = {1, 5, 9, 3, 7, 2, 8, 4, 6, 11, 13, 12, 10};
    int32_t next = 3;
    if (forward(r, prompt, 7) != 0 || forward(r, prompt + 7, 6) != 0) {
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        if (forward(r, &next, 1) != 0) {
            return -1;
        }
        next = (int32_t)colibri_argmax(r->logits, r->model.hp.vocab_size);
    }
    return 0;
}

static int setup(run *r, const colibri_linux_mapping *map, colibri_linux_port_ctx *pctx,
                 colibri_port *port, uint32_t io_threads, int verify)
{
    colibri_linux_expert_layout layout;
    colibri_linux_expert_config cfg = {0};
    colibri_options opt = {0};
    char err[1024];
    if (colibri_init(&r->model, map->data, map->size, NULL) != COLIBRI_OK ||
        colibri_linux_expert_layout_of(&r->model, &layout) != COLIBRI_LINUX_OK) {
        return -1;
    }
    cfg.slots = layout.min_slots;
    cfg.io_threads = io_threads;
    cfg.flags = verify ? COLIBRI_LINUX_EXPERTS_VERIFY : 0u;
    cfg.read = faulty_read;
    if (colibri_linux_experts_open(&r->cache, map, &r->model, &cfg, err, sizeof err) !=
        COLIBRI_LINUX_OK) {
        printf("error %s\n", err);
        return -1;
    }
    pctx->map = map;
    pctx->experts = r->cache;
    colibri_linux_port_init(port, pctx);
    port->kernels = NULL;
    opt.port = port;
    if (colibri_init(&r->model, map->data, map->size, &opt) != COLIBRI_OK) {
        return -1;
    }
    r->kv_bytes = colibri_state_size(&r->model, 32);
    r->scratch_bytes = colibri_scratch_size_batch(&r->model, 32, 7);
    r->kv = colibri_linux_alloc_aligned(r->kv_bytes, 64);
    r->scratch = colibri_linux_alloc_aligned(r->scratch_bytes, 64);
    r->logits = colibri_linux_alloc_aligned(7u * r->model.hp.vocab_size * sizeof(float), 64);
    if (r->kv == NULL || r->scratch == NULL || r->logits == NULL) {
        return -1;
    }
    return colibri_state_init(&r->state, &r->model, r->kv, r->kv_bytes, 32) == COLIBRI_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    colibri_linux_mapping map;
    colibri_linux_port_ctx pctx = {0};
    colibri_port port;
    run r = {0};
    char err[1024];
    int rc = 1;
    if (argc != 6) {
        fprintf(stderr, "usage: expert_faults IMAGE MODE NTH IO_THREADS VERIFY\n");
        return 2;
    }
    g_mode = argv[2];
    g_nth = atol(argv[3]);
    if (colibri_linux_map(&map, argv[1], 0, err, sizeof err) != COLIBRI_LINUX_OK) {
        printf("error %s\n", err);
        return 1;
    }
    if (setup(&r, &map, &pctx, &port, (uint32_t)atoi(argv[4]), atoi(argv[5])) == 0 &&
        run_all(&r) == 0) {
        printf("ok %08x\n", r.crc);
        rc = 0;
    } else {
        printf("error a run failed twice\n");
    }
    colibri_linux_experts_close(r.cache);
    free(r.kv);
    free(r.scratch);
    free(r.logits);
    colibri_linux_unmap(&map);
    return rc;
}
