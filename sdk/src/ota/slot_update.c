/*
 * slot_update.c - write a new image into the slot that is not running
 * (docs/ota.md, "Update"): mark it EMPTY, erase, program and read back,
 * verify, and only then flip the record to PENDING.
 */
#include "colibri_compat.h"
#include "colibri.h"

colibri_status colibri_slot_update_begin(colibri_slot_update *u, const colibri_slots *s,
                                         int running, uint64_t size)
{
    colibri_slot_record r;
    if (u == NULL || colibri_slots_check(s) != COLIBRI_OK || running < -1 || running > 1 ||
        size == 0) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    memset(u, 0, sizeof *u);
    if (size > s->slot_size) {
        return COLIBRI_E_SLOT_TOO_SMALL;
    }
    (void)colibri_slot_record_read(s, &r);
    if (running >= 0 && r.state[running] == COLIBRI_SLOT_TRYING) {
        return COLIBRI_E_UPDATE_ORDER; /* confirm (or reject) the image on trial first */
    }
    u->slots = s;
    u->target = running == 0 ? 1 : 0;
    u->size = size;
    u->min_version = running >= 0 ? r.image_version[running] : 0;
    /* The record stops naming the target before a byte of it changes. */
    r.state[u->target] = COLIBRI_SLOT_EMPTY;
    r.generation[u->target] = 0;
    r.fingerprint[u->target] = 0;
    r.image_version[u->target] = 0;
    if (colibri_slot_record_write(s, &r) != COLIBRI_OK) {
        return COLIBRI_E_FLASH;
    }
    uint64_t span = (size + s->sector_size - 1) & ~(uint64_t)(s->sector_size - 1);
    if (s->erase(s->ctx, s->slot[u->target], span) != COLIBRI_OK) {
        return COLIBRI_E_FLASH;
    }
    u->active = 1;
    return COLIBRI_OK;
}

colibri_status colibri_slot_update_write(colibri_slot_update *u, uint64_t offset, const void *data,
                                         size_t size)
{
    if (u == NULL || (data == NULL && size > 0)) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (!u->active || offset != u->written || size > u->size - u->written) {
        return COLIBRI_E_UPDATE_ORDER;
    }
    const colibri_slots *s = u->slots;
    uint64_t at = s->slot[u->target] + offset;
    if (size > 0 && (s->program(s->ctx, at, data, size) != COLIBRI_OK ||
                     !colibri_bytes_equal(s->base + at, (const uint8_t *)data, size))) {
        u->active = 0;
        return COLIBRI_E_FLASH;
    }
    u->written += size;
    return COLIBRI_OK;
}

/* The image that verified must be exactly the bytes this update wrote: the
 * image, then (always with a trusted key, optionally without) its signature
 * block, and nothing past them. A prefix of an image would otherwise verify
 * with the slot's previous tail and signature block. */
static colibri_status check_extent(const colibri_slots *s, uint32_t target, uint64_t image_size,
                                   uint64_t written)
{
    colibri_signature sig;
    const uint8_t *image = s->base + s->slot[target];
    if (written == image_size && s->trusted_key == NULL) {
        return COLIBRI_OK;
    }
    if (written <= image_size ||
        colibri_signature_check(&sig, image, (size_t)written, s->trusted_key) != COLIBRI_OK) {
        return COLIBRI_E_UPDATE_MISMATCH;
    }
    return image_size + sig.size == written ? COLIBRI_OK : COLIBRI_E_UPDATE_MISMATCH;
}

colibri_status colibri_slot_update_finish(colibri_slot_update *u, int allow_older)
{
    colibri_slot_record r;
    uint64_t size, version;
    if (u == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (!u->active || u->written != u->size) {
        return COLIBRI_E_UPDATE_ORDER;
    }
    u->active = 0;
    const colibri_slots *s = u->slots;
    colibri_status status = colibri_slot_verify(s, u->target, &size, &version);
    if (status == COLIBRI_OK) {
        status = check_extent(s, u->target, size, u->written);
    }
    if (status != COLIBRI_OK) {
        return status;
    }
    if (s->trusted_key != NULL && version < u->min_version && !allow_older) {
        return COLIBRI_E_ROLLBACK;
    }
    (void)colibri_slot_record_read(s, &r);
    r.state[u->target] = COLIBRI_SLOT_PENDING;
    r.generation[u->target] = r.seq + 1;
    r.fingerprint[u->target] = colibri_rd_u32(s->base + s->slot[u->target] + 24);
    r.image_version[u->target] = version;
    return colibri_slot_record_write(s, &r);
}
