/*
 * expert_port.c - the port's expert slots (version 4: expert_acquire,
 * expert_release, experts_chosen) against the in-place run, bit for bit.
 *
 *   expert_port MODEL.bin KERNELS THREADS BATCH [FAIL_AT]
 *
 * The image is loaded twice: the pristine copy runs in place (the
 * reference), and a copy whose every routed expert block is overwritten
 * with 0xFF bytes (NaN weights and scales) runs with a port that copies the
 * blocks the core asks for from the pristine copy into COLIBRI_EXPERTS_HELD
 * slots, each filled with 0xFF again when released. So any read of an
 * expert's bytes in place, or of a block after its release, changes the
 * logits. The port checks that every request names a real block (offset and
 * size), that no more than COLIBRI_EXPERTS_HELD are held, that releases
 * match, and that each layer acquires the experts experts_chosen announced,
 * in that order. The prompt's logits and those of three greedy decode steps
 * must equal the reference's. With FAIL_AT = k the k-th acquire (from 1)
 * fails: the call must return COLIBRI_E_EXPERT_UNAVAILABLE with nothing held
 * and the state's position unchanged, and the same call run again on the
 * same state without the fault (then the rest of the run) must give the
 * reference's logits: the state lost nothing.
 * An image whose expert blocks come last (format 1.9, EXPERTS_LAST) runs a
 * third time from only its start: a buffer of exactly the bytes before its
 * first expert block (ASan sees any read past it), which colibri_init must
 * accept with the port's experts and refuse (COLIBRI_E_TRUNCATED) without
 * them or one byte short of the other tensors' end; colibri_verify checks the
 * part given, colibri_verify_expert answers COLIBRI_E_EXPERT_UNAVAILABLE, and
 * the logits must again be the reference's.
 * Prints "ok acquires=N held=H" (then " prefix=BYTES") or a FAIL line; exit
 * status 0 or 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "file_bytes.h"
#include "colibri_linux.h"
#include "model_internal.h"

#define PROMPT 13u
#define STEPS 3u
#define MAX_BLOCKS 4096u

typedef struct block_range {
    uint64_t offset;
    size_t size;
    uint32_t layer, expert;
} block_range;

typedef struct storage_port {
    const uint8_t *pristine;
    colibri_linux_pool *pool; /* parallel_for, as the Linux port's */
    block_range blocks[MAX_BLOCKS];
    uint32_t n_blocks;
    uint8_t *slot[COLIBRI_EXPERTS_HELD];
    size_t slot_size;
    int held_layer[COLIBRI_EXPERTS_HELD], held_expert[COLIBRI_EXPERTS_HELD];
    uint32_t held, max_held, acquires, fail_at;
    uint32_t chosen[256], n_chosen, next_chosen, chosen_layer;
    int bad; /* a broken rule, said once */
} storage_port;

static int failed(storage_port *p, const char *what)
{
    if (!p->bad) {
        printf("FAIL %s\n", what);
    }
    p->bad = 1;
    return 0;
}

static const block_range *find_block(const storage_port *p, uint32_t layer, uint32_t expert)
{
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        if (p->blocks[i].layer == layer && p->blocks[i].expert == expert) {
            return &p->blocks[i];
        }
    }
    return NULL;
}

static void on_chosen(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t count)
{
    storage_port *p = ctx;
    if (count == 0 || count > 256u || p->held != 0) {
        failed(p, "experts_chosen: a count out of range, or called while blocks are held");
        return;
    }
    memcpy(p->chosen, experts, count * sizeof *experts);
    p->n_chosen = count;
    p->next_chosen = 0;
    p->chosen_layer = layer;
}

static const void *acquire(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset, size_t size)
{
    storage_port *p = ctx;
    const block_range *b = find_block(p, layer, expert);
    uint32_t s = 0;
    if (b == NULL || b->offset != offset || b->size != size) {
        failed(p, "expert_acquire: not an expert block of the image");
        return NULL;
    }
    if (layer != p->chosen_layer || p->next_chosen >= p->n_chosen ||
        p->chosen[p->next_chosen] != expert) {
        failed(p, "expert_acquire: not the next expert experts_chosen announced");
    }
    p->next_chosen++;
    if (++p->acquires == p->fail_at) {
        return NULL;
    }
    while (s < COLIBRI_EXPERTS_HELD && p->held_expert[s] >= 0) {
        s++;
    }
    if (s == COLIBRI_EXPERTS_HELD) {
        failed(p, "expert_acquire: more than COLIBRI_EXPERTS_HELD blocks held");
        return NULL;
    }
    memcpy(p->slot[s], p->pristine + offset, size);
    p->held_layer[s] = (int)layer;
    p->held_expert[s] = (int)expert;
    p->held++;
    p->max_held = p->held > p->max_held ? p->held : p->max_held;
    return p->slot[s];
}

static void release(void *ctx, uint32_t layer, uint32_t expert)
{
    storage_port *p = ctx;
    for (uint32_t s = 0; s < COLIBRI_EXPERTS_HELD; s++) {
        if (p->held_layer[s] == (int)layer && p->held_expert[s] == (int)expert) {
            memset(p->slot[s], 0xFF, p->slot_size);
            p->held_expert[s] = -1;
            p->held--;
            return;
        }
    }
    failed(p, "expert_release: a block that is not held");
}

static void pool_for(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg)
{
    colibri_linux_parallel_for(((storage_port *)ctx)->pool, n_tasks, fn, arg);
}

/* Every routed expert's block (layer, expert, offset, size) of the model. */
static void list_blocks(const colibri_model *m, storage_port *p)
{
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        layer_view layer;
        colibri_layer_view_load(m, l, &layer);
        int moe = layer.ffn_kind == FFN_MOE || layer.ffn_kind == FFN_SHORTCUT;
        for (uint32_t e = 0; moe && e < m->hp.n_experts; e++) {
            expert_view ev;
            colibri_expert_view_load(m, &layer, e, &ev);
            if (p->n_blocks < MAX_BLOCKS) {
                block_range b = {(uint64_t)(ev.block - m->image), ev.block_size, l, e};
                p->blocks[p->n_blocks++] = b;
                p->slot_size = ev.block_size > p->slot_size ? ev.block_size : p->slot_size;
            }
        }
    }
}

static uint8_t *load(const char *path, size_t *size)
{
    return file_bytes(path, size, 4096u);
}

typedef struct run_result {
    float *logits; /* PROMPT + STEPS rows of vocab */
    colibri_status status;
    int failed_once; /* a call failed for want of an expert, and was run again */
    int pos_kept;    /* that call left state.pos where it was and held no block */
} run_result;

/* One colibri_forward call; when it fails for want of an expert and `retry`
 * is given, checks what the call left (its position, no block held) and runs
 * the same call again on the same state, the fault gone: what a caller does,
 * which needs the state to have lost nothing (the KV cache, a short
 * convolution's rows). */
static colibri_status forward_call(const colibri_model *m, colibri_state *state, const int32_t *ids,
                                   uint32_t n, float *logits, colibri_logits_mode mode,
                                   void *scratch, size_t scratch_size, storage_port *retry,
                                   run_result *r)
{
    uint32_t pos = state->pos;
    colibri_status status =
        colibri_forward(m, state, ids, n, logits, mode, scratch, scratch_size, NULL);
    if (status == COLIBRI_E_EXPERT_UNAVAILABLE && retry != NULL && retry->fail_at != 0u) {
        r->failed_once = 1;
        r->pos_kept = state->pos == pos && retry->held == 0u;
        retry->fail_at = 0;
        status = colibri_forward(m, state, ids, n, logits, mode, scratch, scratch_size, NULL);
    }
    return status;
}

/* The prompt (all logits), then STEPS greedy tokens (last logits each). */
static void run(const uint8_t *image, size_t size, const colibri_port *port, uint32_t batch,
                run_result *r, storage_port *retry)
{
    colibri_model model;
    colibri_options opt = {0, port};
    colibri_state state;
    int32_t ids[PROMPT];
    r->status = colibri_init(&model, image, size, &opt);
    if (r->status != COLIBRI_OK) {
        return;
    }
    uint32_t vocab = model.hp.vocab_size, ctx = PROMPT + STEPS;
    size_t scratch_size = colibri_scratch_size_batch(&model, ctx, batch);
    void *kv = colibri_linux_alloc_aligned(colibri_state_size(&model, ctx), 64u);
    void *scratch = colibri_linux_alloc_aligned(scratch_size, 64u);
    r->logits = calloc((size_t)(PROMPT + STEPS) * vocab, sizeof(float));
    for (uint32_t i = 0; i < PROMPT; i++) {
        ids[i] = (int32_t)((1u + 7u * i) % vocab);
    }
    colibri_state_init(&state, &model, kv, colibri_state_size(&model, ctx), ctx);
    r->status = forward_call(&model, &state, ids, PROMPT, r->logits, COLIBRI_LOGITS_ALL, scratch,
                             scratch_size, retry, r);
    for (uint32_t s = 0; s < STEPS && r->status == COLIBRI_OK; s++) {
        float *row = r->logits + (size_t)(PROMPT + s) * vocab;
        int32_t next = (int32_t)colibri_argmax(row - vocab, vocab);
        r->status = forward_call(&model, &state, &next, 1, row, COLIBRI_LOGITS_LAST, scratch,
                                 scratch_size, retry, r);
    }
    free(kv);
    free(scratch);
}

/* End of the data of the tensors that are not routed experts'. */
static uint64_t others_end(const colibri_model *m)
{
    uint64_t end = 0;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        const uint8_t *e = tensor_entry(m, i);
        uint16_t role = colibri_rd_u16(e + TEN_ROLE);
        uint64_t last = colibri_rd_u64(e + TEN_OFFSET) + colibri_rd_u64(e + TEN_SIZE);
        if ((role < ROLE_EXPERT_GATE || role > ROLE_EXPERT_DOWN) && last > end) {
            end = last;
        }
    }
    return end;
}

/* The image from only its start (an EXPERTS_LAST image): 0, or a FAIL said. */
static int prefix_run(const uint8_t *pristine, const colibri_model *probe, const storage_port *sp,
                      const colibri_port *seam, const colibri_port *plain, uint32_t batch,
                      const run_result *ref, size_t *prefix_bytes)
{
    uint64_t first = UINT64_MAX, need = others_end(probe);
    colibri_model m;
    colibri_options with = {0, seam}, without = {0, plain};
    run_result got = {0};
    uint32_t bad_tensor = 0;
    for (uint32_t i = 0; i < sp->n_blocks; i++) {
        first = sp->blocks[i].offset < first ? sp->blocks[i].offset : first;
    }
    uint8_t *prefix = malloc((size_t)first);
    memcpy(prefix, pristine, (size_t)first);
    int ok = colibri_init(&m, prefix, (size_t)first, &without) == COLIBRI_E_TRUNCATED &&
             colibri_init(&m, prefix, (size_t)need - 1u, &with) == COLIBRI_E_TRUNCATED &&
             colibri_init(&m, prefix, (size_t)first, &with) == COLIBRI_OK &&
             m.resident_size == first && colibri_verify(&m, &bad_tensor) == COLIBRI_OK &&
             colibri_verify_expert(&m, sp->blocks[0].layer, sp->blocks[0].expert) ==
                 COLIBRI_E_EXPERT_UNAVAILABLE;
    if (ok) {
        run(prefix, (size_t)first, seam, batch, &got, NULL);
    }
    size_t bytes = (size_t)(PROMPT + STEPS) * probe->hp.vocab_size * sizeof(float);
    ok = ok && got.status == COLIBRI_OK && memcmp(got.logits, ref->logits, bytes) == 0;
    if (!ok) {
        printf("FAIL the image from its first %llu bytes (others end at %llu): init, verify or "
               "logits\n",
               (unsigned long long)first, (unsigned long long)need);
    }
    *prefix_bytes = (size_t)first;
    free(got.logits);
    free(prefix);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    static storage_port sp;
    size_t size, size2;
    colibri_model probe;
    colibri_linux_port_ctx ctx = {.map = NULL};
    colibri_port plain, seam;
    run_result ref = {0}, got = {0};
    setvbuf(stdout, NULL, _IONBF, 0); /* said before any leak report ends the process */
    if (argc < 5) {
        fprintf(stderr, "usage: expert_port MODEL.bin KERNELS THREADS BATCH [FAIL_AT]\n");
        return 2;
    }
    uint8_t *pristine = load(argv[1], &size), *poisoned = load(argv[1], &size2);
    uint32_t threads = (uint32_t)atoi(argv[3]), batch = (uint32_t)atoi(argv[4]);
    sp.fail_at = argc > 5 ? (uint32_t)atoi(argv[5]) : 0u;
    if (pristine == NULL || poisoned == NULL || colibri_init(&probe, pristine, size, NULL) != 0) {
        printf("FAIL cannot load %s\n", argv[1]);
        return 1;
    }
    ctx.pool = threads > 1u ? colibri_linux_pool_start(threads) : NULL;
    colibri_linux_port_init(&plain, &ctx);
    plain.kernels = colibri_linux_kernels(argv[2]);
    if (plain.kernels == NULL) {
        printf("FAIL no kernel table %s runs here\n", argv[2]);
        return 1;
    }
    sp.pristine = pristine;
    list_blocks(&probe, &sp);
    for (uint32_t i = 0; i < sp.n_blocks; i++) {
        memset(poisoned + sp.blocks[i].offset, 0xFF, sp.blocks[i].size);
    }
    for (uint32_t s = 0; s < COLIBRI_EXPERTS_HELD; s++) {
        sp.slot[s] = colibri_linux_alloc_aligned(sp.slot_size, 64u);
        sp.held_expert[s] = -1;
    }
    seam = plain;
    seam.ctx = &sp;
    sp.pool = ctx.pool;
    seam.parallel_for = ctx.pool != NULL ? pool_for : NULL;
    seam.expert_acquire = acquire;
    seam.expert_release = release;
    seam.experts_chosen = on_chosen;
    uint32_t fail_at = sp.fail_at;
    run(pristine, size, &plain, batch, &ref, NULL);
    if (ref.status != COLIBRI_OK) {
        printf("FAIL the in-place run: %s\n", colibri_strerror(ref.status));
        return 1;
    }
    run(poisoned, size, &seam, batch, &got, &sp);
    if (fail_at != 0 && (!got.failed_once || !got.pos_kept)) {
        printf("FAIL acquire %u: %s\n", fail_at,
               got.failed_once ? "the failed call moved the position or held a block"
                               : "no call failed for want of it");
        return 1;
    }
    size_t bytes = (size_t)(PROMPT + STEPS) * probe.hp.vocab_size * sizeof(float);
    if (got.status != COLIBRI_OK || memcmp(got.logits, ref.logits, bytes) != 0) {
        printf("FAIL logits differ from the in-place run (status %d)\n", (int)got.status);
        return 1;
    }
    if (sp.bad || sp.held != 0 || sp.acquires == 0) {
        printf("FAIL the port's rules (held %u, acquires %u)\n", sp.held, sp.acquires);
        return 1;
    }
    size_t prefix = 0;
    int experts_last = (colibri_rd_u32(pristine + HDR_FLAGS) & HDR_FLAG_EXPERTS_LAST) != 0;
    if (experts_last && prefix_run(pristine, &probe, &sp, &seam, &plain, batch, &ref, &prefix)) {
        return 1;
    }
    printf("ok acquires=%u held=%u", sp.acquires, sp.max_held);
    if (experts_last) {
        printf(" prefix=%zu", prefix);
    }
    printf("\n");
    colibri_linux_pool_stop(ctx.pool);
    for (uint32_t s = 0; s < COLIBRI_EXPERTS_HELD; s++) {
        free(sp.slot[s]);
    }
    free(ref.logits);
    free(got.logits);
    free(pristine);
    free(poisoned);
    return 0;
}
