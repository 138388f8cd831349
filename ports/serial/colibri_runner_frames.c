/*
 * colibri_runner_frames.c - the binary requests: check each payload, run
 * the operation, encode the reply (docs/serial-protocol.md section 4 gives
 * every field; the offsets below follow it).
 */
#include <string.h>

#include "colibri_runner_internal.h"

#define NO_TENSOR 0xFFFFFFFFu
#define INFO_FIXED_BYTES 52u
#define RESULT_FIXED_BYTES 32u
#define LOGITS_FIXED_BYTES 12u
#define GENERATED_FIXED_BYTES 36u
#define FORWARD_FLAGS_KNOWN (COLIBRI_FORWARD_LOGITS | COLIBRI_FORWARD_IN_INTERRUPT)

/* A request being served: its type, sequence number and payload. */
typedef struct request {
    uint8_t type;
    uint8_t seq;
    uint16_t length;
    const uint8_t *payload;
} request;

static uint8_t *reply_payload(colibri_runner *r)
{
    return r->tx.bytes + COLIBRI_PROTO_HEADER_BYTES;
}

static void reply(colibri_runner *r, const request *q, uint16_t length)
{
    colibri_runner_send(r, (uint8_t)(q->type | 0x80u), q->seq, length);
}

static void reply_error(colibri_runner *r, const request *q, colibri_proto_error code,
                        const char *text)
{
    colibri_runner_send_error(r, q->seq, q->type, code, text);
}

/* Write a length-prefixed name at p; returns the bytes written. */
static size_t put_name(uint8_t *p, const char *name)
{
    size_t n = colibri_text_length(name, COLIBRI_PROTO_MAX_TEXT);
    p[0] = (uint8_t)n;
    if (n > 0) {
        memcpy(p + 1, name, n);
    }
    return 1 + n;
}

static uint32_t capabilities(const colibri_runner *r)
{
    return (r->ticks != NULL ? COLIBRI_CAP_TICKS : 0u) |
           (r->io.run_in_interrupt != NULL ? COLIBRI_CAP_INTERRUPT : 0u);
}

static void serve_hello(colibri_runner *r, const request *q)
{
    uint8_t *p = reply_payload(r);
    const colibri_hparams *hp = &r->model.hp;
    colibri_proto_put_u16(p + 0, COLIBRI_PROTO_VERSION);
    colibri_proto_put_u16(p + 2, COLIBRI_PROTO_MAX_PAYLOAD);
    colibri_proto_put_u32(p + 4, (uint32_t)r->init_status);
    colibri_proto_put_u32(p + 8, r->init_status == COLIBRI_OK ? r->model.fingerprint : 0u);
    colibri_proto_put_u32(p + 12, r->expected_fingerprint);
    colibri_proto_put_u32(p + 16, hp->vocab_size);
    colibri_proto_put_u32(p + 20, r->state.max_context);
    colibri_proto_put_u32(p + 24, r->state.pos);
    colibri_proto_put_u32(p + 28, hp->n_layers);
    colibri_proto_put_u32(p + 32, hp->n_experts);
    colibri_proto_put_u32(p + 36, hp->top_k);
    colibri_proto_put_u32(p + 40, hp->arch);
    colibri_proto_put_u32(p + 44, capabilities(r));
    p[48] = COLIBRI_VERSION_MAJOR;
    p[49] = COLIBRI_VERSION_MINOR;
    p[50] = COLIBRI_VERSION_PATCH;
    p[51] = COLIBRI_FORMAT_MAJOR;
    size_t n = INFO_FIXED_BYTES;
    n += put_name(p + n, r->board_name);
    n += put_name(p + n, r->tick_unit);
    reply(r, q, (uint16_t)n);
}

static int check_empty(colibri_runner *r, const request *q)
{
    if (q->length != 0) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "this request has no payload");
        return -1;
    }
    return 0;
}

static void serve_reset(colibri_runner *r, const request *q)
{
    uint8_t *p = reply_payload(r);
    if (check_empty(r, q) != 0) {
        return;
    }
    colibri_proto_put_u32(p, (uint32_t)colibri_runner_reset(r));
    colibri_proto_put_u32(p + 4, r->state.pos);
    reply(r, q, 8);
}

/* ids at payload offset 4 (FORWARD, GENERATE); n from payload bytes 2..3. */
static int check_ids(colibri_runner *r, const request *q, uint32_t *n_ids)
{
    if (q->length < 4) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "payload shorter than 4 bytes");
        return -1;
    }
    *n_ids = colibri_proto_get_u16(q->payload + 2);
    if (*n_ids > COLIBRI_PROTO_MAX_IDS) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "more than 1000 ids");
        return -1;
    }
    if (q->length != 4u + 4u * *n_ids) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "length is not 4 + 4 * n_ids");
        return -1;
    }
    return 0;
}

static void serve_forward(colibri_runner *r, const request *q)
{
    uint32_t n_ids = 0;
    if (check_ids(r, q, &n_ids) != 0) {
        return;
    }
    uint8_t flags = q->payload[0];
    uint8_t top_k = q->payload[1];
    if ((flags & ~FORWARD_FLAGS_KNOWN) != 0 || top_k > COLIBRI_PROTO_MAX_TOP_K) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "unknown flag bit or top_k above 32");
        return;
    }
    colibri_runner_decode_ids(&r->rx, COLIBRI_PROTO_HEADER_BYTES + 4, n_ids);
    colibri_runner_forward_out out;
    int keep = (flags & COLIBRI_FORWARD_LOGITS) != 0;
    if (colibri_runner_forward(r, r->rx.ids, n_ids, keep,
                               (flags & COLIBRI_FORWARD_IN_INTERRUPT) != 0, &out) != 0) {
        reply_error(r, q, COLIBRI_PROTO_E_NO_INTERRUPT, "this board cannot run in an interrupt");
        return;
    }
    uint8_t *p = reply_payload(r);
    uint32_t n_top = 0;
    memset(p, 0, RESULT_FIXED_BYTES);
    if (r->logits_valid) {
        n_top =
            colibri_runner_top_k(r->logits, colibri_runner_vocab(r), top_k, p + RESULT_FIXED_BYTES);
        colibri_proto_put_u32(p + 16, colibri_runner_logits_crc(r));
        colibri_proto_put_u32(p + 20, colibri_runner_vocab(r));
    }
    colibri_proto_put_u32(p + 0, (uint32_t)out.status);
    colibri_proto_put_u32(p + 4, r->state.pos);
    colibri_proto_put_u64(p + 8, out.ticks);
    colibri_proto_put_u32(p + 24, (uint32_t)out.stack_used);
    p[28] = (uint8_t)n_top;
    p[29] = out.in_interrupt ? COLIBRI_RESULT_RAN_IN_INTERRUPT : 0u;
    reply(r, q, (uint16_t)(RESULT_FIXED_BYTES + 8u * n_top));
}

static void serve_get_logits(colibri_runner *r, const request *q)
{
    if (q->length != 6) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "GET_LOGITS payload is 6 bytes");
        return;
    }
    if (!r->logits_valid) {
        reply_error(r, q, COLIBRI_PROTO_E_NO_LOGITS,
                    "no logits kept: FORWARD with the logits flag first");
        return;
    }
    uint32_t total = colibri_runner_vocab(r);
    uint32_t offset = colibri_proto_get_u32(q->payload);
    uint32_t count = colibri_proto_get_u16(q->payload + 4);
    if (offset > total || count > COLIBRI_PROTO_MAX_LOGITS_CHUNK) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD,
                    "offset past the logits or count above 1020");
        return;
    }
    if (count > total - offset) {
        count = total - offset;
    }
    uint8_t *p = reply_payload(r);
    colibri_proto_put_u32(p, offset);
    colibri_proto_put_u32(p + 4, total);
    colibri_proto_put_u16(p + 8, (uint16_t)count);
    colibri_proto_put_u16(p + 10, 0);
    for (uint32_t i = 0; i < count; i++) {
        colibri_proto_put_f32(p + LOGITS_FIXED_BYTES + 4u * i, r->logits[offset + i]);
    }
    reply(r, q, (uint16_t)(LOGITS_FIXED_BYTES + 4u * count));
}

static void serve_generate(colibri_runner *r, const request *q)
{
    uint32_t n_ids = 0;
    if (check_ids(r, q, &n_ids) != 0) {
        return;
    }
    uint32_t n_new = colibri_proto_get_u16(q->payload);
    if (n_new > COLIBRI_PROTO_MAX_IDS) {
        reply_error(r, q, COLIBRI_PROTO_E_BAD_PAYLOAD, "more than 1000 tokens asked");
        return;
    }
    colibri_runner_decode_ids(&r->rx, COLIBRI_PROTO_HEADER_BYTES + 4, n_ids);
    uint8_t *p = reply_payload(r);
    colibri_runner_generation g;
    colibri_runner_generate(r, r->rx.ids, n_ids, n_new, p + GENERATED_FIXED_BYTES, &g);
    uint64_t per_token = g.n_generated >= 2 ? g.decode_ticks / (g.n_generated - 1) : 0;
    colibri_proto_put_u32(p + 0, (uint32_t)g.status);
    colibri_proto_put_u32(p + 4, r->state.pos);
    colibri_proto_put_u64(p + 8, g.prompt_ticks + g.decode_ticks);
    colibri_proto_put_u64(p + 16, g.prompt_ticks);
    colibri_proto_put_u64(p + 24, per_token);
    colibri_proto_put_u16(p + 32, (uint16_t)g.n_generated);
    colibri_proto_put_u16(p + 34, 0);
    reply(r, q, (uint16_t)(GENERATED_FIXED_BYTES + 4u * g.n_generated));
}

static void serve_verify(colibri_runner *r, const request *q)
{
    uint8_t *p = reply_payload(r);
    uint32_t bad = NO_TENSOR;
    uint64_t ticks = 0;
    if (check_empty(r, q) != 0) {
        return;
    }
    colibri_status status = colibri_runner_verify(r, &bad, &ticks);
    colibri_proto_put_u32(p, (uint32_t)status);
    colibri_proto_put_u32(p + 4, bad);
    colibri_proto_put_u64(p + 8, ticks);
    reply(r, q, 16);
}

static void serve_slot(colibri_runner *r, const request *q)
{
    uint16_t length = 0;
    int code = r->slot_requests == NULL
                   ? COLIBRI_PROTO_E_NO_SLOTS
                   : r->slot_requests(r, q->type, q->payload, q->length, reply_payload(r), &length);
    if (code == COLIBRI_PROTO_E_NO_SLOTS) {
        reply_error(r, q, COLIBRI_PROTO_E_NO_SLOTS, "this device has no A/B weight slots");
    } else if (code != 0) {
        reply_error(r, q, (colibri_proto_error)code, "bad SLOT request payload");
    } else {
        reply(r, q, length);
    }
}

void colibri_runner_serve_frame(colibri_runner *r)
{
    request q;
    q.type = r->rx.bytes[2];
    q.seq = r->rx.bytes[3];
    q.length = colibri_proto_get_u16(r->rx.bytes + 4);
    q.payload = r->rx.bytes + COLIBRI_PROTO_HEADER_BYTES;
    switch (q.type) {
    case COLIBRI_MSG_HELLO: serve_hello(r, &q); break;
    case COLIBRI_MSG_RESET: serve_reset(r, &q); break;
    case COLIBRI_MSG_FORWARD: serve_forward(r, &q); break;
    case COLIBRI_MSG_GET_LOGITS: serve_get_logits(r, &q); break;
    case COLIBRI_MSG_GENERATE: serve_generate(r, &q); break;
    case COLIBRI_MSG_VERIFY: serve_verify(r, &q); break;
    case COLIBRI_MSG_SLOT_STATUS:
    case COLIBRI_MSG_SLOT_BEGIN:
    case COLIBRI_MSG_SLOT_WRITE:
    case COLIBRI_MSG_SLOT_FINISH: serve_slot(r, &q); break;
    default: reply_error(r, &q, COLIBRI_PROTO_E_UNKNOWN_TYPE, "unknown message type"); break;
    }
}
