/*
 * colibri_runner.c - set-up of the serial runner and its input loop: bytes
 * are sorted into frames (sync 0xC0 0x1B), text lines (a printable first
 * byte) and stray bytes (skipped); see docs/serial-protocol.md section 2.
 */
#include <string.h>

#include "colibri_runner_internal.h"

#define ASCII_BACKSPACE 0x08
#define ASCII_DELETE 0x7F

static void copy_name(char *dst, const char *src)
{
    size_t n = colibri_text_length(src, COLIBRI_PROTO_MAX_TEXT);
    if (n > 0) {
        memcpy(dst, src, n);
    }
    dst[n] = '\0';
}

static colibri_status setup_model(colibri_runner *r, const colibri_runner_config *cfg)
{
    colibri_options options = {cfg->expected_fingerprint, cfg->port};
    colibri_status status = colibri_init(&r->model, cfg->image, cfg->image_size, &options);
    if (status != COLIBRI_OK) {
        return status;
    }
    uint32_t context = cfg->context != 0 ? cfg->context : r->model.hp.max_context;
    status = colibri_state_init(&r->state, &r->model, cfg->kv, cfg->kv_size, context);
    if (status != COLIBRI_OK) {
        return status;
    }
    if (cfg->scratch == NULL || cfg->scratch_size < colibri_scratch_size(&r->model, context) ||
        cfg->logits == NULL || cfg->logits_count < r->model.hp.vocab_size) {
        return COLIBRI_E_WORKSPACE_TOO_SMALL;
    }
    return COLIBRI_OK;
}

colibri_status colibri_runner_init(colibri_runner *runner, const colibri_serial_io *io,
                                   const colibri_runner_config *cfg)
{
    if (runner == NULL || io == NULL || io->read_byte == NULL || io->write == NULL || cfg == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    memset(runner, 0, sizeof *runner);
    runner->io = *io;
    if (cfg->port != NULL) {
        runner->ticks = cfg->port->ticks;
        runner->ticks_ctx = cfg->port->ctx;
    }
    runner->pushback = -1;
    runner->expected_fingerprint = cfg->expected_fingerprint;
    runner->scratch = cfg->scratch;
    runner->scratch_size = cfg->scratch_size;
    runner->logits = cfg->logits;
    runner->logits_count = cfg->logits_count;
    copy_name(runner->board_name, cfg->board_name);
    copy_name(runner->tick_unit, cfg->tick_unit);

    runner->init_status = setup_model(runner, cfg);
    return runner->init_status;
}

/* ---- replies ------------------------------------------------------------------ */

void colibri_runner_send(colibri_runner *r, uint8_t type, uint8_t seq, uint16_t length)
{
    size_t size = colibri_proto_seal(r->tx.bytes, type, seq, length);
    if (size > 0) {
        r->io.write(r->io.ctx, r->tx.bytes, size);
    }
}

void colibri_runner_send_error(colibri_runner *r, uint8_t seq, uint8_t type,
                               colibri_proto_error code, const char *text)
{
    uint8_t *p = r->tx.bytes + COLIBRI_PROTO_HEADER_BYTES;
    size_t n = colibri_text_length(text, COLIBRI_PROTO_MAX_ERROR_TEXT);
    colibri_proto_put_u16(p, (uint16_t)code);
    p[2] = type;
    p[3] = (uint8_t)n;
    if (n > 0) {
        memcpy(p + 4, text, n);
    }
    colibri_runner_send(r, COLIBRI_MSG_ERROR, seq, (uint16_t)(4 + n));
}

/* ---- input ----------------------------------------------------------------------- */

static int next_byte(colibri_runner *r, uint32_t timeout_ms)
{
    int b = r->pushback;
    if (b >= 0) {
        r->pushback = -1;
        return b;
    }
    return r->io.read_byte(r->io.ctx, timeout_ms);
}

static const char *receive_error_text(colibri_proto_error error)
{
    switch (error) {
    case COLIBRI_PROTO_E_BAD_CRC: return "frame CRC mismatch: frame dropped";
    case COLIBRI_PROTO_E_TOO_LONG: return "frame length above 4096: frame skipped";
    case COLIBRI_PROTO_E_TIMEOUT: return "frame cut short: no byte for 200 ms";
    default: return "bad frame";
    }
}

static void handle_frame(colibri_runner *r)
{
    colibri_proto_error error = COLIBRI_PROTO_E_BAD_CRC;
    int pushback = -1;
    colibri_proto_rx rx = colibri_proto_receive_frame(&r->io, r->rx.bytes, &pushback, &error);
    if (rx == COLIBRI_PROTO_RX_NOT_FRAME) {
        r->pushback = pushback;
        return;
    }
    if (rx == COLIBRI_PROTO_RX_ERROR) {
        r->frames_bad++;
        colibri_runner_send_error(r, r->rx.bytes[3], r->rx.bytes[2], error,
                                  receive_error_text(error));
        return;
    }
    r->frames_ok++;
    colibri_runner_serve_frame(r);
}

static int is_printable(int b)
{
    return b >= 0x20 && b <= 0x7E;
}

static void reply_text(colibri_runner *r, const char *line)
{
    char buf[80];
    colibri_text t;
    colibri_text_init(&t, buf, sizeof buf, &r->io);
    colibri_text_str(&t, line);
    colibri_text_newline(&t);
    colibri_text_flush(&t);
}

/* Collect a text line that began with first; a sync byte abandons it (the
 * frame that starts there is served next). */
static void handle_line(colibri_runner *r, int first)
{
    size_t n = 0, seen = 0;
    int too_long = 0;
    int b = first;
    for (;;) {
        /* A bounded wait: at most twice a full line of bytes, then give up
         * (a noisy line without end-of-line must not hold the runner). */
        if (++seen > 2u * COLIBRI_PROTO_MAX_LINE) {
            reply_text(r, "error: line longer than 200 characters");
            return;
        }
        if (b == (int)COLIBRI_PROTO_SYNC0) {
            r->pushback = b;
            return;
        }
        if (b == '\r' || b == '\n') {
            break;
        }
        if (b == ASCII_BACKSPACE || b == ASCII_DELETE) {
            n -= n > 0;
        } else if (is_printable(b) && n < COLIBRI_PROTO_MAX_LINE) {
            r->line[n++] = (char)b;
        } else if (is_printable(b)) {
            too_long = 1;
        }
        b = r->io.read_byte(r->io.ctx, COLIBRI_PROTO_LINE_TIMEOUT_MS);
        if (b < 0) {
            reply_text(r, "error: line dropped: no end of line within 30 s");
            return;
        }
    }
    r->line[n] = '\0';
    if (too_long) {
        reply_text(r, "error: line longer than 200 characters");
        return;
    }
    colibri_runner_serve_line(r, r->line);
}

int colibri_runner_poll(colibri_runner *runner, uint32_t timeout_ms)
{
    int b = next_byte(runner, timeout_ms);
    if (b < 0) {
        return 0;
    }
    if (b == (int)COLIBRI_PROTO_SYNC0) {
        handle_frame(runner);
    } else if (is_printable(b)) {
        handle_line(runner, b);
    }
    return 1;
}

void colibri_runner_banner(colibri_runner *runner)
{
    reply_text(runner, "colibri serial runner, protocol 1; type help");
}

_Noreturn void colibri_runner_serve(colibri_runner *runner)
{
    colibri_runner_banner(runner);
    for (;;) {
        (void)colibri_runner_poll(runner, 1000);
    }
}
