/*
 * colibri_runner_internal.h - how the runner's files share work (not a
 * public header): the model operations (colibri_runner_ops.c), the frame
 * requests (colibri_runner_frames.c) and the text commands
 * (colibri_runner_lines.c).
 */
#ifndef COLIBRI_RUNNER_INTERNAL_H
#define COLIBRI_RUNNER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "colibri_runner.h"
#include "colibri_text.h"

/* ---- model operations, shared by frames and lines ------------------------ */

typedef struct colibri_runner_forward_out {
    colibri_status status;
    uint64_t ticks;    /* of colibri_forward alone */
    size_t stack_used; /* interrupt stack bytes, when run in an interrupt */
    int in_interrupt;  /* 1 if it ran in an interrupt handler */
} colibri_runner_forward_out;

typedef struct colibri_runner_generation {
    colibri_status status; /* first failure, or COLIBRI_OK */
    uint32_t n_generated;  /* ids written */
    uint64_t prompt_ticks; /* the prompt's forward call */
    uint64_t decode_ticks; /* every later forward call */
} colibri_runner_generation;

/* Run ids through the model; keep_logits: LAST mode (logits kept), else
 * NONE. Returns 0, or -1 (nothing ran) when in_interrupt is asked and the
 * board cannot. */
int colibri_runner_forward(colibri_runner *r, const int32_t *ids, uint32_t n_ids, int keep_logits,
                           int in_interrupt, colibri_runner_forward_out *out);

/* Greedy decoding: forward the prompt, then n_new times take the argmax and
 * (but for the last) feed it back. Ids go to ids_le as u32 LE. */
void colibri_runner_generate(colibri_runner *r, const int32_t *prompt, uint32_t n_prompt,
                             uint32_t n_new, uint8_t *ids_le, colibri_runner_generation *g);

/* colibri_verify; *bad_tensor is 0xFFFFFFFF when no tensor is bad. */
colibri_status colibri_runner_verify(colibri_runner *r, uint32_t *bad_tensor, uint64_t *ticks);

/* Empty the KV state and drop the logits. */
colibri_status colibri_runner_reset(colibri_runner *r);

/* The k largest of v[0..n) as (u32 id, f32 value) LE pairs, largest first,
 * ties to the lower id. Returns the pairs written (min(k, n)). */
uint32_t colibri_runner_top_k(const float *v, uint32_t n, uint32_t k, uint8_t *pairs_le);

/* CRC-32 of the kept logits as float32 LE bytes (0 if none kept). */
uint32_t colibri_runner_logits_crc(const colibri_runner *r);

uint64_t colibri_runner_ticks(const colibri_runner *r);
uint32_t colibri_runner_vocab(const colibri_runner *r);

/* Decode n u32 LE ids at b->bytes + offset into b->ids[0..n) (in place:
 * offset >= 4 keeps every source byte ahead of the ids written). */
void colibri_runner_decode_ids(colibri_runner_buffer *b, size_t offset, uint32_t n);

/* ---- replies ---------------------------------------------------------------- */

/* Seal the reply whose payload (length bytes) is at r->tx.bytes + 6; send. */
void colibri_runner_send(colibri_runner *r, uint8_t type, uint8_t seq, uint16_t length);

/* Send ERROR: code, the type it answers, a short text (cut to fit). */
void colibri_runner_send_error(colibri_runner *r, uint8_t seq, uint8_t type,
                               colibri_proto_error code, const char *text);

/* Serve the good frame in r->rx. */
void colibri_runner_serve_frame(colibri_runner *r);

/* Serve one text command (NUL-terminated, without its end of line). */
void colibri_runner_serve_line(colibri_runner *r, const char *line);

#endif
