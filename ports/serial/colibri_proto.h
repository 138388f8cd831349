/*
 * colibri_proto.h - the Colibri serial protocol: frame layout, message
 * types, payload limits and error codes, plus the byte-level IO seam.
 * docs/serial-protocol.md is the normative description; this header and
 * tools/colibri_tools/serial_proto.py are its two implementations.
 *
 * A frame on the wire (all integers little-endian):
 *
 *   offset  size  field
 *   0       1     sync0   0xC0
 *   1       1     sync1   0x1B
 *   2       1     type    COLIBRI_MSG_*
 *   3       1     seq     chosen by the host; a reply repeats its request's
 *   4       2     length  payload bytes, 0 .. COLIBRI_PROTO_MAX_PAYLOAD
 *   6       len   payload
 *   6+len   4     crc     CRC-32 (zlib polynomial) of bytes 2 .. 6+len-1
 *
 * Freestanding: needs only <stddef.h>/<stdint.h>; the .c uses memcpy/memset.
 */
#ifndef COLIBRI_PROTO_H
#define COLIBRI_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLIBRI_PROTO_VERSION 1u

#define COLIBRI_PROTO_SYNC0 0xC0u
#define COLIBRI_PROTO_SYNC1 0x1Bu
#define COLIBRI_PROTO_HEADER_BYTES 6u
#define COLIBRI_PROTO_CRC_BYTES 4u
#define COLIBRI_PROTO_MAX_PAYLOAD 4096u
#define COLIBRI_PROTO_MAX_FRAME                                                                    \
    (COLIBRI_PROTO_HEADER_BYTES + COLIBRI_PROTO_MAX_PAYLOAD + COLIBRI_PROTO_CRC_BYTES)

/* Receiver timeouts. A frame whose next byte does not come within
 * BYTE_TIMEOUT_MS is dropped with an ERROR reply; a text line waits up to
 * LINE_TIMEOUT_MS per byte (a human is typing). */
#define COLIBRI_PROTO_BYTE_TIMEOUT_MS 200u
#define COLIBRI_PROTO_LINE_TIMEOUT_MS 30000u
#define COLIBRI_PROTO_MAX_LINE 200u /* characters of one text command */

/* Bounds of the payloads (docs/serial-protocol.md section 4). */
#define COLIBRI_PROTO_MAX_IDS 1000u          /* ids in FORWARD / GENERATE, tokens generated */
#define COLIBRI_PROTO_MAX_TOP_K 32u          /* (id, logit) pairs in RESULT */
#define COLIBRI_PROTO_MAX_LOGITS_CHUNK 1020u /* floats in one LOGITS reply */
#define COLIBRI_PROTO_MAX_TEXT 127u          /* bytes of a name in INFO */
#define COLIBRI_PROTO_MAX_ERROR_TEXT 120u    /* bytes of the text in ERROR */

/* Message types. Requests go host -> device; the reply to request T is
 * T | 0x80; ERROR can answer any frame. */
typedef enum colibri_msg_type {
    COLIBRI_MSG_HELLO = 0x01,
    COLIBRI_MSG_RESET = 0x02,
    COLIBRI_MSG_FORWARD = 0x03,
    COLIBRI_MSG_GET_LOGITS = 0x04,
    COLIBRI_MSG_GENERATE = 0x05,
    COLIBRI_MSG_VERIFY = 0x06,
    COLIBRI_MSG_SLOT_STATUS = 0x07, /* A/B weight slots (docs/ota.md) */
    COLIBRI_MSG_SLOT_BEGIN = 0x08,
    COLIBRI_MSG_SLOT_WRITE = 0x09,
    COLIBRI_MSG_SLOT_FINISH = 0x0A,
    COLIBRI_MSG_INFO = 0x81,
    COLIBRI_MSG_RESET_DONE = 0x82,
    COLIBRI_MSG_RESULT = 0x83,
    COLIBRI_MSG_LOGITS = 0x84,
    COLIBRI_MSG_GENERATED = 0x85,
    COLIBRI_MSG_VERIFY_RESULT = 0x86,
    COLIBRI_MSG_SLOT_STATE = 0x87,
    COLIBRI_MSG_SLOT_BEGUN = 0x88,
    COLIBRI_MSG_SLOT_WRITTEN = 0x89,
    COLIBRI_MSG_SLOT_FINISHED = 0x8A,
    COLIBRI_MSG_ERROR = 0xFF
} colibri_msg_type;

/* FORWARD flags (u8). Bits not named here must be 0. */
#define COLIBRI_FORWARD_LOGITS 0x01u       /* keep last-position logits: digest, top-k */
#define COLIBRI_FORWARD_IN_INTERRUPT 0x02u /* run colibri_forward in an interrupt handler */

/* INFO capability bits. */
#define COLIBRI_CAP_TICKS 0x01u     /* ticks are measured (else always 0) */
#define COLIBRI_CAP_INTERRUPT 0x02u /* COLIBRI_FORWARD_IN_INTERRUPT is available */

/* RESULT flags. */
#define COLIBRI_RESULT_RAN_IN_INTERRUPT 0x01u

/* ERROR codes (u16). Pinned, like colibri_status. */
typedef enum colibri_proto_error {
    COLIBRI_PROTO_E_BAD_CRC = 1,      /* frame CRC mismatch: frame dropped */
    COLIBRI_PROTO_E_TOO_LONG = 2,     /* length > COLIBRI_PROTO_MAX_PAYLOAD */
    COLIBRI_PROTO_E_UNKNOWN_TYPE = 3, /* type is not a request */
    COLIBRI_PROTO_E_TIMEOUT = 4,      /* frame cut short: a byte did not come in time */
    COLIBRI_PROTO_E_BAD_PAYLOAD = 5,  /* payload length or fields invalid for the type */
    COLIBRI_PROTO_E_NO_LOGITS = 6,    /* GET_LOGITS with no logits kept */
    COLIBRI_PROTO_E_NO_INTERRUPT = 7, /* IN_INTERRUPT asked, board cannot */
    COLIBRI_PROTO_E_NO_SLOTS = 8      /* SLOT_* request, device has no A/B slots */
} colibri_proto_error;

/*
 * The byte-level seam to the UART (or socket, pty, USB CDC). Filled by the
 * port or sample; the protocol code only calls these.
 */
typedef struct colibri_serial_io {
    /* One received byte (0..255), or -1 if none arrived within timeout_ms
     * (0 = return at once). Required. */
    int (*read_byte)(void *ctx, uint32_t timeout_ms);
    /* Send n bytes; returns when they are sent or queued. Required. */
    void (*write)(void *ctx, const uint8_t *data, size_t n);
    /* (optional) Run fn(arg) once from an interrupt handler and return after
     * it has finished. Returns 0, or -1 if the board cannot. stack_used
     * (may be NULL) receives the interrupt stack bytes used, or 0. */
    int (*run_in_interrupt)(void *ctx, void (*fn)(void *arg), void *arg, size_t *stack_used);
    void *ctx; /* passed back to every function above */
} colibri_serial_io;

/* Little-endian field access (byte-wise: no alignment needed). */
void colibri_proto_put_u16(uint8_t *p, uint16_t v);
void colibri_proto_put_u32(uint8_t *p, uint32_t v);
void colibri_proto_put_u64(uint8_t *p, uint64_t v);
void colibri_proto_put_f32(uint8_t *p, float v);
uint16_t colibri_proto_get_u16(const uint8_t *p);
uint32_t colibri_proto_get_u32(const uint8_t *p);
uint64_t colibri_proto_get_u64(const uint8_t *p);

/* CRC-32 of a frame's bytes 2 .. 6+length-1 (type, seq, length, payload). */
uint32_t colibri_proto_frame_crc(const uint8_t *frame, uint16_t length);

/*
 * Complete the frame whose payload (length bytes) already lies at
 * frame + COLIBRI_PROTO_HEADER_BYTES: write sync, type, seq, length and the
 * CRC. frame must hold COLIBRI_PROTO_HEADER_BYTES + length + 4 bytes.
 * Returns the frame's total size, or 0 if length > COLIBRI_PROTO_MAX_PAYLOAD.
 */
size_t colibri_proto_seal(uint8_t *frame, uint8_t type, uint8_t seq, uint16_t length);

/* 1 if type is a request a device serves (HELLO .. VERIFY), else 0. */
int colibri_proto_is_request(uint8_t type);

/* Outcome of colibri_proto_receive_frame. */
typedef enum colibri_proto_rx {
    COLIBRI_PROTO_RX_OK = 0,    /* a whole frame with a good CRC is in the buffer */
    COLIBRI_PROTO_RX_NOT_FRAME, /* the byte after sync0 was not sync1 (see *pushback) */
    COLIBRI_PROTO_RX_ERROR      /* bad frame; *error says why (reply ERROR) */
} colibri_proto_rx;

/*
 * Receive the rest of a frame whose sync0 byte has just been read. Every
 * byte is awaited at most COLIBRI_PROTO_BYTE_TIMEOUT_MS. On RX_OK the frame
 * (from sync0) is in frame[0 .. 6+length+4). On RX_NOT_FRAME, *pushback is
 * the byte that followed sync0 (-1 on timeout): the caller treats it as the
 * next input byte. On RX_ERROR, *error is a colibri_proto_error and frame[2],
 * frame[3] hold the type and seq if they were received (else 0): an oversize
 * frame's announced bytes are skipped (until silence) before returning.
 * frame must hold COLIBRI_PROTO_MAX_FRAME bytes.
 */
colibri_proto_rx colibri_proto_receive_frame(const colibri_serial_io *io, uint8_t *frame,
                                             int *pushback, colibri_proto_error *error);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_PROTO_H */
