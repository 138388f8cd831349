/*
 * colibri_runner_ops.c - what the runner does with the model: forward (in
 * thread or interrupt context), greedy generation, verify, reset, top-k and
 * the logits digest. Shared by the frame requests and the text commands.
 */
#include <string.h>

#include "colibri_runner_internal.h"
#include "colibri.h"

#define NO_TENSOR 0xFFFFFFFFu

uint64_t colibri_runner_ticks(const colibri_runner *r)
{
    return r->ticks != NULL ? r->ticks(r->ticks_ctx) : 0;
}

uint32_t colibri_runner_vocab(const colibri_runner *r)
{
    return r->init_status == COLIBRI_OK ? r->model.hp.vocab_size : 0;
}

void colibri_runner_decode_ids(colibri_runner_buffer *b, size_t offset, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = colibri_proto_get_u32(b->bytes + offset + (size_t)4 * i);
        b->ids[i] = (int32_t)id;
    }
}

/* The forward call itself; runs in thread or interrupt context. */
static void run_job(void *arg)
{
    colibri_runner *r = (colibri_runner *)arg;
    colibri_runner_job *job = &r->job;
    float *logits = job->mode == COLIBRI_LOGITS_NONE ? NULL : r->logits;
    uint64_t start = colibri_runner_ticks(r);
    job->status = colibri_forward(&r->model, &r->state, job->ids, job->n_ids, logits, job->mode,
                                  r->scratch, r->scratch_size, NULL);
    job->ticks = colibri_runner_ticks(r) - start;
}

int colibri_runner_forward(colibri_runner *r, const int32_t *ids, uint32_t n_ids, int keep_logits,
                           int in_interrupt, colibri_runner_forward_out *out)
{
    memset(out, 0, sizeof *out);
    if (in_interrupt && r->io.run_in_interrupt == NULL) {
        return -1;
    }
    if (r->init_status != COLIBRI_OK) {
        out->status = r->init_status;
        return 0;
    }
    r->job.ids = ids;
    r->job.n_ids = n_ids;
    r->job.mode = keep_logits ? COLIBRI_LOGITS_LAST : COLIBRI_LOGITS_NONE;
    r->job.status = COLIBRI_E_BAD_ARGUMENT;
    r->job.ticks = 0;
    if (in_interrupt) {
        if (r->io.run_in_interrupt(r->io.ctx, run_job, r, &out->stack_used) != 0) {
            return -1;
        }
        out->in_interrupt = 1;
    } else {
        run_job(r);
    }
    out->status = r->job.status;
    out->ticks = r->job.ticks;
    r->logits_valid = keep_logits && out->status == COLIBRI_OK;
    return 0;
}

void colibri_runner_generate(colibri_runner *r, const int32_t *prompt, uint32_t n_prompt,
                             uint32_t n_new, uint8_t *ids_le, colibri_runner_generation *g)
{
    colibri_runner_forward_out step;
    memset(g, 0, sizeof *g);
    (void)colibri_runner_forward(r, prompt, n_prompt, 1, 0, &step);
    g->status = step.status;
    g->prompt_ticks = step.ticks;
    for (uint32_t i = 0; i < n_new && g->status == COLIBRI_OK; i++) {
        int32_t next = (int32_t)colibri_argmax(r->logits, r->model.hp.vocab_size);
        colibri_proto_put_u32(ids_le + (size_t)4 * i, (uint32_t)next);
        g->n_generated = i + 1;
        if (i + 1 == n_new) {
            break;
        }
        (void)colibri_runner_forward(r, &next, 1, 1, 0, &step);
        g->status = step.status;
        g->decode_ticks += step.ticks;
    }
}

colibri_status colibri_runner_verify(colibri_runner *r, uint32_t *bad_tensor, uint64_t *ticks)
{
    uint64_t start = colibri_runner_ticks(r);
    colibri_status status = r->init_status;
    *bad_tensor = NO_TENSOR;
    if (status == COLIBRI_OK) {
        status = colibri_verify(&r->model, bad_tensor);
        if (status == COLIBRI_OK) {
            *bad_tensor = NO_TENSOR;
        }
    }
    *ticks = colibri_runner_ticks(r) - start;
    return status;
}

colibri_status colibri_runner_reset(colibri_runner *r)
{
    r->logits_valid = 0;
    if (r->init_status == COLIBRI_OK) {
        colibri_state_reset(&r->state);
    }
    return r->init_status;
}

/* Insert (id, value) into the sorted best list of *count (<= k) entries. */
static void top_k_insert(uint32_t *ids, float *values, uint32_t *count, uint32_t k, uint32_t id,
                         float value)
{
    uint32_t at = *count;
    if (value != value) { /* NaN: never among the largest */
        return;
    }
    while (at > 0 && value > values[at - 1]) {
        at--;
    }
    if (at >= k) {
        return;
    }
    uint32_t last = *count < k ? *count : k - 1;
    for (uint32_t j = last; j > at; j--) {
        ids[j] = ids[j - 1];
        values[j] = values[j - 1];
    }
    ids[at] = id;
    values[at] = value;
    if (*count < k) {
        (*count)++;
    }
}

uint32_t colibri_runner_top_k(const float *v, uint32_t n, uint32_t k, uint8_t *pairs_le)
{
    uint32_t ids[COLIBRI_PROTO_MAX_TOP_K];
    float values[COLIBRI_PROTO_MAX_TOP_K];
    uint32_t count = 0;
    if (k > COLIBRI_PROTO_MAX_TOP_K) {
        k = COLIBRI_PROTO_MAX_TOP_K;
    }
    for (uint32_t i = 0; i < n && k > 0; i++) {
        top_k_insert(ids, values, &count, k, i, v[i]);
    }
    for (uint32_t j = 0; j < count; j++) {
        colibri_proto_put_u32(pairs_le + (size_t)8 * j, ids[j]);
        colibri_proto_put_f32(pairs_le + (size_t)8 * j + 4, values[j]);
    }
    return count;
}

uint32_t colibri_runner_logits_crc(const colibri_runner *r)
{
    uint32_t crc = 0;
    uint8_t le[4];
    if (!r->logits_valid) {
        return 0;
    }
    for (uint32_t i = 0; i < r->model.hp.vocab_size; i++) {
        colibri_proto_put_f32(le, r->logits[i]);
        crc = colibri_crc32_update(crc, le, sizeof le);
    }
    return crc;
}

colibri_status colibri_runner_self_test(colibri_runner *r)
{
    colibri_runner_forward_out out;
    const int32_t token = 0;
    if (r->init_status != COLIBRI_OK) {
        return r->init_status;
    }
    (void)colibri_runner_forward(r, &token, 1, 1, 0, &out);
    colibri_status status = out.status;
    for (uint32_t i = 0; status == COLIBRI_OK && i < r->model.hp.vocab_size; i++) {
        if (r->logits[i] - r->logits[i] != 0.0f) { /* NaN or infinite */
            status = COLIBRI_E_BAD_HYPERPARAMS;
        }
    }
    (void)colibri_runner_reset(r);
    return status;
}
