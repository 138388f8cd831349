/*
 * slot_boot.c - which weight slot to run (docs/ota.md, "Boot"): verify a
 * slot's image, pick the newest one that verifies, try a new image once and
 * revert it when its first run never confirmed it.
 */
#include "colibri_compat.h"
#include "colibri.h"

colibri_status colibri_slot_verify(const colibri_slots *s, uint32_t slot, uint64_t *size,
                                   uint64_t *image_version)
{
    colibri_model model;
    colibri_options options = {s->expected_fingerprint, NULL};
    const uint8_t *image = s->base + s->slot[slot];
    colibri_status status;
    *size = 0;
    *image_version = 0;
    if (s->trusted_key != NULL) {
        colibri_signature sig;
        status = colibri_signature_check(&sig, image, (size_t)s->slot_size, s->trusted_key);
        if (status == COLIBRI_OK) {
            status = colibri_signature_verify_blocks(&sig, 0, 0, NULL);
        }
        if (status != COLIBRI_OK) {
            return status;
        }
        *image_version = sig.image_version;
    }
    status = colibri_init(&model, image, (size_t)s->slot_size, &options);
    if (status == COLIBRI_OK) {
        status = colibri_verify(&model, NULL);
    }
    if (status == COLIBRI_OK) {
        *size = model.image_size;
    }
    return status;
}

/* Candidates in the order boot tries them; returns how many. */
static uint32_t candidates(const colibri_slot_record *r, uint32_t order[2])
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < 2; i++) {
        if (r->state[i] == COLIBRI_SLOT_PENDING) {
            order[n++] = i;
        }
    }
    uint32_t newer = r->generation[1] > r->generation[0] ? 1 : 0;
    for (uint32_t k = 0; k < 2; k++) {
        uint32_t i = k == 0 ? newer : 1 - newer;
        if (r->state[i] == COLIBRI_SLOT_GOOD) {
            order[n++] = i;
        }
    }
    return n;
}

static colibri_status set_state(const colibri_slots *s, colibri_slot_record *r, uint32_t slot,
                                uint8_t state)
{
    r->state[slot] = state;
    return colibri_slot_record_write(s, r);
}

/* No valid record (a new device): whichever slot verifies, the higher
 * signed version first; the record is written once one is found. */
static colibri_status boot_without_record(const colibri_slots *s, colibri_slot_boot *boot)
{
    uint64_t size[2], version[2];
    colibri_status status[2];
    for (uint32_t i = 0; i < 2; i++) {
        status[i] = colibri_slot_verify(s, i, &size[i], &version[i]);
    }
    if (status[0] != COLIBRI_OK && status[1] != COLIBRI_OK) {
        return COLIBRI_E_NO_SLOT;
    }
    uint32_t pick = status[0] != COLIBRI_OK || (status[1] == COLIBRI_OK && version[1] > version[0]);
    colibri_slot_record r;
    memset(&r, 0, sizeof r);
    for (uint32_t i = 0; i < 2; i++) {
        r.state[i] = status[i] == COLIBRI_OK ? COLIBRI_SLOT_GOOD : COLIBRI_SLOT_EMPTY;
        r.image_version[i] = version[i];
        r.fingerprint[i] = status[i] == COLIBRI_OK ? colibri_rd_u32(s->base + s->slot[i] + 24) : 0;
    }
    r.generation[pick] = 1;
    if (colibri_slot_record_write(s, &r) != COLIBRI_OK) {
        return COLIBRI_E_FLASH;
    }
    boot->slot = pick;
    boot->image = s->base + s->slot[pick];
    boot->size = size[pick];
    return COLIBRI_OK;
}

colibri_status colibri_slot_boot_select(const colibri_slots *s, colibri_slot_boot *boot)
{
    colibri_slot_record r;
    uint32_t order[2];
    if (boot == NULL || colibri_slots_check(s) != COLIBRI_OK) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    memset(boot, 0, sizeof *boot);
    if (colibri_slot_record_read(s, &r) < 0) {
        return boot_without_record(s, boot);
    }
    if (colibri_slot_record_copies(s) < 2 && colibri_slot_record_write(s, &r) != COLIBRI_OK) {
        return COLIBRI_E_FLASH; /* one copy damaged: both hold the newest record again */
    }
    for (uint32_t i = 0; i < 2; i++) {
        if (r.state[i] == COLIBRI_SLOT_TRYING) { /* its first run never confirmed it */
            if (set_state(s, &r, i, COLIBRI_SLOT_BAD) != COLIBRI_OK) {
                return COLIBRI_E_FLASH;
            }
            boot->rejected |= 1u << i;
        }
    }
    uint32_t n = candidates(&r, order);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        uint64_t size, version;
        int trial = r.state[i] == COLIBRI_SLOT_PENDING;
        if (colibri_slot_verify(s, i, &size, &version) != COLIBRI_OK) {
            if (set_state(s, &r, i, COLIBRI_SLOT_BAD) != COLIBRI_OK) {
                return COLIBRI_E_FLASH;
            }
            boot->rejected |= 1u << i;
            continue;
        }
        if (trial && set_state(s, &r, i, COLIBRI_SLOT_TRYING) != COLIBRI_OK) {
            return COLIBRI_E_FLASH;
        }
        boot->slot = i;
        boot->image = s->base + s->slot[i];
        boot->size = size;
        boot->on_trial = trial;
        return COLIBRI_OK;
    }
    return COLIBRI_E_NO_SLOT;
}

/* The record, for a state change of slot; COLIBRI_E_BAD_ARGUMENT without one. */
static colibri_status record_for(const colibri_slots *s, uint32_t slot, colibri_slot_record *r)
{
    if (slot > 1 || colibri_slots_check(s) != COLIBRI_OK || colibri_slot_record_read(s, r) < 0) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    return COLIBRI_OK;
}

colibri_status colibri_slot_confirm(const colibri_slots *s, uint32_t slot)
{
    colibri_slot_record r;
    colibri_status status = record_for(s, slot, &r);
    if (status != COLIBRI_OK || r.state[slot] == COLIBRI_SLOT_GOOD) {
        return status; /* a GOOD slot is confirmed already */
    }
    if (r.state[slot] != COLIBRI_SLOT_TRYING) {
        return COLIBRI_E_UPDATE_ORDER;
    }
    return set_state(s, &r, slot, COLIBRI_SLOT_GOOD);
}

/* Rejecting is refused where it would leave nothing to boot: a slot that
 * could boot (GOOD or PENDING) is rejected only while the other slot is
 * GOOD. The image on trial always can be: the next boot would mark it BAD
 * anyway. */
colibri_status colibri_slot_reject(const colibri_slots *s, uint32_t slot)
{
    colibri_slot_record r;
    colibri_status status = record_for(s, slot, &r);
    if (status != COLIBRI_OK) {
        return status;
    }
    uint8_t state = r.state[slot];
    if ((state == COLIBRI_SLOT_GOOD || state == COLIBRI_SLOT_PENDING) &&
        r.state[1 - slot] != COLIBRI_SLOT_GOOD) {
        return COLIBRI_E_LAST_IMAGE;
    }
    return set_state(s, &r, slot, COLIBRI_SLOT_BAD);
}

int colibri_slot_running(const colibri_slot_record *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->state[i] == COLIBRI_SLOT_TRYING) {
            return i;
        }
    }
    int newer = r->generation[1] > r->generation[0] ? 1 : 0;
    if (r->state[newer] == COLIBRI_SLOT_GOOD) {
        return newer;
    }
    return r->state[1 - newer] == COLIBRI_SLOT_GOOD ? 1 - newer : -1;
}
