/*
 * colibri_proto.c - the frame codec of the serial protocol: little-endian
 * fields, the frame CRC, sealing a frame for sending and receiving one under
 * per-byte timeouts (docs/serial-protocol.md sections 2 and 3).
 */
#include "colibri_proto.h"

#include <string.h>

#include "colibri.h"

void colibri_proto_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

void colibri_proto_put_u32(uint8_t *p, uint32_t v)
{
    colibri_proto_put_u16(p, (uint16_t)(v & 0xFFFFu));
    colibri_proto_put_u16(p + 2, (uint16_t)(v >> 16));
}

void colibri_proto_put_u64(uint8_t *p, uint64_t v)
{
    colibri_proto_put_u32(p, (uint32_t)(v & 0xFFFFFFFFu));
    colibri_proto_put_u32(p + 4, (uint32_t)(v >> 32));
}

void colibri_proto_put_f32(uint8_t *p, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    colibri_proto_put_u32(p, bits);
}

uint16_t colibri_proto_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

uint32_t colibri_proto_get_u32(const uint8_t *p)
{
    return (uint32_t)colibri_proto_get_u16(p) | ((uint32_t)colibri_proto_get_u16(p + 2) << 16);
}

uint64_t colibri_proto_get_u64(const uint8_t *p)
{
    return (uint64_t)colibri_proto_get_u32(p) | ((uint64_t)colibri_proto_get_u32(p + 4) << 32);
}

uint32_t colibri_proto_frame_crc(const uint8_t *frame, uint16_t length)
{
    return colibri_crc32_update(0, frame + 2, (size_t)4 + length);
}

size_t colibri_proto_seal(uint8_t *frame, uint8_t type, uint8_t seq, uint16_t length)
{
    if (length > COLIBRI_PROTO_MAX_PAYLOAD) {
        return 0;
    }
    frame[0] = (uint8_t)COLIBRI_PROTO_SYNC0;
    frame[1] = (uint8_t)COLIBRI_PROTO_SYNC1;
    frame[2] = type;
    frame[3] = seq;
    colibri_proto_put_u16(frame + 4, length);
    colibri_proto_put_u32(frame + COLIBRI_PROTO_HEADER_BYTES + length,
                          colibri_proto_frame_crc(frame, length));
    return COLIBRI_PROTO_HEADER_BYTES + (size_t)length + COLIBRI_PROTO_CRC_BYTES;
}

int colibri_proto_is_request(uint8_t type)
{
    return type >= COLIBRI_MSG_HELLO && type <= COLIBRI_MSG_VERIFY;
}

static int read_timed(const colibri_serial_io *io)
{
    return io->read_byte(io->ctx, COLIBRI_PROTO_BYTE_TIMEOUT_MS);
}

/* Read frame[from .. to) byte by byte; 0, or -1 when a byte did not come. */
static int read_span(const colibri_serial_io *io, uint8_t *frame, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        int b = read_timed(io);
        if (b < 0) {
            return -1;
        }
        frame[i] = (uint8_t)b;
    }
    return 0;
}

/* Discard up to count bytes, stopping early at the first silence. */
static void skip_bytes(const colibri_serial_io *io, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (read_timed(io) < 0) {
            return;
        }
    }
}

colibri_proto_rx colibri_proto_receive_frame(const colibri_serial_io *io, uint8_t *frame,
                                             int *pushback, colibri_proto_error *error)
{
    int second = read_timed(io);
    *pushback = -1;
    frame[2] = 0;
    frame[3] = 0;
    if (second != (int)COLIBRI_PROTO_SYNC1) {
        *pushback = second;
        return COLIBRI_PROTO_RX_NOT_FRAME;
    }
    frame[0] = (uint8_t)COLIBRI_PROTO_SYNC0;
    frame[1] = (uint8_t)COLIBRI_PROTO_SYNC1;
    if (read_span(io, frame, 2, COLIBRI_PROTO_HEADER_BYTES) != 0) {
        *error = COLIBRI_PROTO_E_TIMEOUT;
        return COLIBRI_PROTO_RX_ERROR;
    }
    uint16_t length = colibri_proto_get_u16(frame + 4);
    if (length > COLIBRI_PROTO_MAX_PAYLOAD) {
        skip_bytes(io, (uint32_t)length + COLIBRI_PROTO_CRC_BYTES);
        *error = COLIBRI_PROTO_E_TOO_LONG;
        return COLIBRI_PROTO_RX_ERROR;
    }
    size_t end = COLIBRI_PROTO_HEADER_BYTES + (size_t)length + COLIBRI_PROTO_CRC_BYTES;
    if (read_span(io, frame, COLIBRI_PROTO_HEADER_BYTES, end) != 0) {
        *error = COLIBRI_PROTO_E_TIMEOUT;
        return COLIBRI_PROTO_RX_ERROR;
    }
    if (colibri_proto_get_u32(frame + end - COLIBRI_PROTO_CRC_BYTES) !=
        colibri_proto_frame_crc(frame, length)) {
        *error = COLIBRI_PROTO_E_BAD_CRC;
        return COLIBRI_PROTO_RX_ERROR;
    }
    return COLIBRI_PROTO_RX_OK;
}
