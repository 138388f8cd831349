/*
 * colibri_runner_slots.c - the SLOT_* requests (docs/serial-protocol.md,
 * section 4.7): report the A/B slot record, and write a new image into the
 * slot that is not running, verified before the record flips
 * (colibri_slot_update_*, docs/ota.md); and boot from the slots, with the
 * first run of a new image confirming or rejecting it.
 */
#include <string.h>

#include "colibri_runner_internal.h"

#define SLOT_STATE_BYTES 56u
#define SLOT_WRITE_FIXED 8u

/* SLOT_STATUS (empty) -> SLOT_STATE. */
static uint16_t slot_status(colibri_runner *r, uint8_t *out)
{
    colibri_slot_record rec;
    int copy = colibri_slot_record_read(r->slots, &rec);
    memset(out, 0, SLOT_STATE_BYTES);
    colibri_proto_put_u32(out, 0);
    out[4] = r->running_slot >= 0 ? (uint8_t)r->running_slot : 0xFFu;
    out[5] = r->slots->trusted_key != NULL;
    out[6] = rec.state[0];
    out[7] = rec.state[1];
    colibri_proto_put_u32(out + 8, copy >= 0 ? rec.seq : 0);
    for (int i = 0; i < 2; i++) {
        colibri_proto_put_u32(out + 12 + 4 * i, rec.generation[i]);
        colibri_proto_put_u32(out + 20 + 4 * i, rec.fingerprint[i]);
        colibri_proto_put_u64(out + 32 + 8 * i, rec.image_version[i]);
    }
    colibri_proto_put_u64(out + 48, r->slots->slot_size);
    return SLOT_STATE_BYTES;
}

static int slot_request(colibri_runner *r, uint8_t type, const uint8_t *in, uint16_t n,
                        uint8_t *out, uint16_t *out_length)
{
    colibri_status status;
    switch (type) {
    case COLIBRI_MSG_SLOT_STATUS:
        if (n != 0) {
            return COLIBRI_PROTO_E_BAD_PAYLOAD;
        }
        *out_length = slot_status(r, out);
        return 0;
    case COLIBRI_MSG_SLOT_BEGIN:
        if (n != 8) {
            return COLIBRI_PROTO_E_BAD_PAYLOAD;
        }
        status = colibri_slot_update_begin(&r->update, r->slots, r->running_slot,
                                           colibri_proto_get_u64(in));
        colibri_proto_put_u32(out, (uint32_t)status);
        colibri_proto_put_u32(out + 4, status == COLIBRI_OK ? r->update.target : 0xFFFFFFFFu);
        *out_length = 8;
        return 0;
    case COLIBRI_MSG_SLOT_WRITE:
        if (n <= SLOT_WRITE_FIXED) {
            return COLIBRI_PROTO_E_BAD_PAYLOAD;
        }
        status = colibri_slot_update_write(&r->update, colibri_proto_get_u64(in),
                                           in + SLOT_WRITE_FIXED, n - SLOT_WRITE_FIXED);
        colibri_proto_put_u32(out, (uint32_t)status);
        colibri_proto_put_u64(out + 4, r->update.written);
        *out_length = 12;
        return 0;
    case COLIBRI_MSG_SLOT_FINISH:
        if (n != 4 || (colibri_proto_get_u32(in) & ~1u) != 0) {
            return COLIBRI_PROTO_E_BAD_PAYLOAD;
        }
        status = colibri_slot_update_finish(&r->update, (int)(colibri_proto_get_u32(in) & 1u));
        colibri_proto_put_u32(out, (uint32_t)status);
        *out_length = 4;
        return 0;
    default: return COLIBRI_PROTO_E_UNKNOWN_TYPE;
    }
}

void colibri_runner_enable_slots(colibri_runner *r, const colibri_slots *slots, int running_slot)
{
    r->slots = slots;
    r->running_slot = running_slot;
    r->slot_requests = slots != NULL ? slot_request : NULL;
}

/* One line "ota: [slot X]WHAT" on the runner's UART. */
static void say(colibri_runner *r, int slot, const char *what)
{
    char buf[96];
    colibri_text t;
    colibri_text_init(&t, buf, sizeof buf, &r->io);
    colibri_text_str(&t, "ota: ");
    if (slot >= 0) {
        colibri_text_str(&t, "slot ");
        colibri_text_char(&t, (char)('A' + slot));
    }
    colibri_text_str(&t, what);
    colibri_text_newline(&t);
    colibri_text_flush(&t);
}

int colibri_runner_boot_slots(colibri_runner *r, const colibri_serial_io *io,
                              colibri_runner_config *cfg, const colibri_slots *slots)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        colibri_slot_boot boot;
        colibri_status status = colibri_slot_boot_select(slots, &boot);
        cfg->image = status == COLIBRI_OK ? boot.image : slots->base;
        cfg->image_size = status == COLIBRI_OK ? (size_t)boot.size : 0;
        (void)colibri_runner_init(r, io, cfg); /* serves even without a model */
        colibri_runner_enable_slots(r, slots, status == COLIBRI_OK ? (int)boot.slot : -1);
        if (status != COLIBRI_OK) {
            say(r, -1, "no slot holds a bootable image; waiting for an update");
            return -1;
        }
        if (!boot.on_trial) {
            say(r, (int)boot.slot, ": running");
            return (int)boot.slot;
        }
        if (colibri_runner_self_test(r) == COLIBRI_OK &&
            colibri_slot_confirm(slots, boot.slot) == COLIBRI_OK) {
            say(r, (int)boot.slot, ": new image passed its first run, confirmed");
            return (int)boot.slot;
        }
        say(r, (int)boot.slot, ": new image failed its first run, rejected");
        (void)colibri_slot_reject(slots, boot.slot);
    }
    return r->running_slot;
}
