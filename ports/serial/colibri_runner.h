/*
 * colibri_runner.h - a device-side server of the Colibri serial protocol
 * (docs/serial-protocol.md): binary frames for the host test runner
 * (colibri-test) and a human line mode (help, info, gen, verify, reset) on
 * the same UART.
 *
 * The caller owns every byte: the runner struct (large: it holds the receive
 * and transmit frames, about 9 KiB; make it static), the KV memory, the
 * scratch memory and the logits buffer. No malloc, no stdio, no system call;
 * the only way out is the colibri_serial_io callbacks.
 *
 *   #include "colibri_runner.h"
 *   #include "model_config.h"
 *
 *   static colibri_runner runner;
 *   static _Alignas(16) uint8_t kv[COLIBRI_MODEL_STATE_BYTES];
 *   static _Alignas(16) uint8_t work[COLIBRI_MODEL_SCRATCH_BYTES];
 *   static float logits[COLIBRI_MODEL_VOCAB_SIZE];
 *
 *   static int uart_read(void *ctx, uint32_t ms) { (void)ctx; return board_uart_read(ms); }
 *   static void uart_write(void *ctx, const uint8_t *p, size_t n)
 *   { (void)ctx; board_uart_write(p, n); }
 *   ...
 *   colibri_serial_io io = { uart_read, uart_write, isr_hook, NULL };
 *   colibri_runner_config cfg = {
 *       .image = board_weights(), .image_size = board_weights_size(),
 *       .expected_fingerprint = COLIBRI_MODEL_FINGERPRINT, .port = board_port(), (ticks)
 *       .kv = kv, .kv_size = sizeof kv, .context = COLIBRI_MODEL_CONTEXT,
 *       .scratch = work, .scratch_size = sizeof work,
 *       .logits = logits, .logits_count = COLIBRI_MODEL_VOCAB_SIZE,
 *       .board_name = COLIBRI_BOARD_NAME, .tick_unit = COLIBRI_BOARD_TICKS_UNIT,
 *   };
 *   colibri_runner_init(&runner, &io, &cfg);   (serves even if the model is bad)
 *   colibri_runner_serve(&runner);             (never returns)
 *
 * samples/baremetal/serial_runner/main.c is this program, complete.
 *
 * If the image fails colibri_init (weights not flashed, wrong model), the
 * runner still serves: INFO carries the status, FORWARD/GENERATE/VERIFY
 * answer with it, so the host can say what is wrong.
 */
#ifndef COLIBRI_RUNNER_H
#define COLIBRI_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "colibri_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the caller gives colibri_runner_init. Every pointer must outlive the
 * runner. */
typedef struct colibri_runner_config {
    const void *image;             /* the model image (4-byte aligned) */
    size_t image_size;             /* bytes available at image */
    uint32_t expected_fingerprint; /* COLIBRI_MODEL_FINGERPRINT, or 0: any image */
    const colibri_port *port;      /* (optional) passed to colibri_init; its ticks time
                                    * every request (INFO names their unit) */
    void *kv;                      /* KV memory, 16-byte aligned */
    size_t kv_size;                /* >= colibri_state_size(model, context) */
    uint32_t context;              /* positions; 0: the model's max_context */
    void *scratch;                 /* 16-byte aligned */
    size_t scratch_size;           /* >= colibri_scratch_size(model, context) */
    float *logits;                 /* last-position logits */
    uint32_t logits_count;         /* floats at logits, >= vocab_size */
    const char *board_name;        /* (optional) shown in INFO; first 127 bytes */
    const char *tick_unit;         /* (optional) what a tick is, e.g. "cycles (DWT)" */
} colibri_runner_config;

/* Job handed to the interrupt hook (internal; public only for its size). */
typedef struct colibri_runner_job {
    const int32_t *ids;
    uint32_t n_ids;
    colibri_logits_mode mode;
    colibri_status status;
    uint64_t ticks;
} colibri_runner_job;

/* A frame buffer; ids of a request are decoded in place into .ids
 * (internal; public only for its size). */
typedef union colibri_runner_buffer {
    uint8_t bytes[COLIBRI_PROTO_MAX_FRAME];
    int32_t ids[COLIBRI_PROTO_MAX_FRAME / 4 + 1];
} colibri_runner_buffer;

/* The runner. Caller storage; treat the fields as private. */
typedef struct colibri_runner {
    colibri_serial_io io;
    uint64_t (*ticks)(void *ctx); /* the port's, or NULL */
    void *ticks_ctx;
    colibri_model model;
    colibri_state state;
    colibri_status init_status; /* colibri_init / state checks */
    uint32_t expected_fingerprint;
    void *scratch;
    size_t scratch_size;
    float *logits;
    uint32_t logits_count;
    int logits_valid; /* logits hold the last FORWARD/GENERATE's */
    int pushback;     /* a byte read ahead, or -1 */
    colibri_runner_job job;
    char board_name[COLIBRI_PROTO_MAX_TEXT + 1];
    char tick_unit[COLIBRI_PROTO_MAX_TEXT + 1];
    uint32_t frames_ok; /* counters, shown by the `info` line command */
    uint32_t frames_bad;
    char line[COLIBRI_PROTO_MAX_LINE + 1];
    /* A/B weight slots (colibri_runner_enable_slots); NULL: SLOT_* requests
     * answer NO_SLOTS and no slot code is linked in. */
    int (*slot_requests)(struct colibri_runner *r, uint8_t type, const uint8_t *in, uint16_t n,
                         uint8_t *out, uint16_t *out_length);
    const colibri_slots *slots;
    int running_slot;
    colibri_slot_update update;
    colibri_runner_buffer rx; /* the request being served */
    colibri_runner_buffer tx; /* the reply being built */
} colibri_runner;

/*
 * Set the runner up: copy *io, initialise the model on cfg->image (with
 * cfg->expected_fingerprint and cfg->port), then the state on cfg->kv, and
 * check the scratch and logits sizes. Returns COLIBRI_OK, or the first
 * failure (also reported in INFO); the runner is usable either way.
 * COLIBRI_E_BAD_ARGUMENT if runner, io (or its read/write) or cfg is NULL:
 * then the runner must not be used.
 */
colibri_status colibri_runner_init(colibri_runner *runner, const colibri_serial_io *io,
                                   const colibri_runner_config *cfg);

/*
 * Wait up to timeout_ms for input and answer it: one frame, one text line,
 * or one stray byte (skipped). Once input starts, the frame or line is
 * finished under the protocol's per-byte timeouts, so a call lasts at most
 * timeout_ms plus the time to serve one request. Returns 1 if input was
 * handled, 0 if none arrived.
 */
int colibri_runner_poll(colibri_runner *runner, uint32_t timeout_ms);

/*
 * Serve the SLOT_* requests (docs/serial-protocol.md 4.7) on these A/B
 * weight slots: an update goes into the slot that is not running_slot (0 A,
 * 1 B, -1 none). Call after colibri_runner_init. Only a program that calls
 * this links the slot and signature code.
 */
void colibri_runner_enable_slots(colibri_runner *runner, const colibri_slots *slots,
                                 int running_slot);

/*
 * Boot from A/B weight slots (docs/ota.md): choose a slot
 * (colibri_slot_boot_select), bring the runner up on it (colibri_runner_init
 * with cfg, whose image and image_size this sets) and serve SLOT_* requests.
 * A new image on trial must pass colibri_runner_self_test to be confirmed;
 * one that fails is rejected and boot chooses again, so the other slot
 * comes back. With no bootable slot the runner serves without a model and
 * waits for an update. One "ota: ..." line on io says what happened.
 * Returns the slot running (0 A, 1 B) or -1.
 */
int colibri_runner_boot_slots(colibri_runner *runner, const colibri_serial_io *io,
                              colibri_runner_config *cfg, const colibri_slots *slots);

/*
 * The first run of a new image (docs/ota.md): one forward pass of token 0
 * must give finite logits; the state is reset afterwards. COLIBRI_OK, the
 * init status, the forward status, or COLIBRI_E_BAD_HYPERPARAMS for
 * non-finite logits.
 */
colibri_status colibri_runner_self_test(colibri_runner *runner);

/* Write the greeting line ("colibri serial runner ...; type help"). */
void colibri_runner_banner(colibri_runner *runner);

/* The banner, then colibri_runner_poll forever. */
_Noreturn void colibri_runner_serve(colibri_runner *runner);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_RUNNER_H */
