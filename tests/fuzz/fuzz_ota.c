/*
 * fuzz_ota.c - libFuzzer target for the parsers of over-the-air updates
 * (docs/ota.md): the signature block after an image, a slot store (two
 * record copies and two slots) that boot selection reads and rewrites, and
 * an update (begin, writes, finish) sent into such a store, then boot,
 * confirm and reject. The first byte picks the target (its value modulo
 * 3); the rest is the untrusted bytes.
 * Build: make build/fuzz/fuzz_ota.
 */
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

#define SECTOR 256u

static uint8_t *store;
static size_t store_size;

static colibri_status fz_erase(void *ctx, uint64_t offset, uint64_t size)
{
    (void)ctx;
    if (offset > store_size || size > store_size - offset) {
        __builtin_trap(); /* the core must never erase outside the store */
    }
    memset(store + offset, 0xFF, (size_t)size);
    return COLIBRI_OK;
}

static colibri_status fz_program(void *ctx, uint64_t offset, const void *data, size_t size)
{
    (void)ctx;
    if (offset > store_size || size > store_size - offset) {
        __builtin_trap();
    }
    memcpy(store + offset, data, size);
    return COLIBRI_OK;
}

/* the public key of tests/ota_images.py's KEY, which signs the seeds */
static const uint8_t key[32] = {0x03, 0xa1, 0x07, 0xbf, 0xf3, 0xce, 0x10, 0xbe, 0x1d, 0x70, 0xdd,
                                0x18, 0xe7, 0x4b, 0xc0, 0x99, 0x67, 0xe4, 0xd6, 0x30, 0x9b, 0xa5,
                                0x0d, 0x5f, 0x1d, 0xdc, 0x86, 0x64, 0x12, 0x55, 0x31, 0xb8};

static void fuzz_signature(const uint8_t *data, size_t size)
{
    colibri_signature sig;
    /* a 4-byte aligned copy of exactly size bytes (reads past it are caught) */
    uint8_t *copy = malloc(size > 0 ? size : 1);
    memcpy(copy, data, size);
    if (colibri_signature_check(&sig, copy, size, NULL) == COLIBRI_OK) {
        (void)colibri_signature_verify_blocks(&sig, 0, 0, NULL);
    }
    (void)colibri_signature_check(&sig, copy, size, key);
    free(copy);
}

static void store_layout(colibri_slots *s)
{
    memset(s, 0, sizeof *s);
    s->base = store;
    s->sector_size = SECTOR;
    s->record[0] = 0;
    s->record[1] = SECTOR;
    s->slot_size = (store_size - 2 * SECTOR) / 2 / SECTOR * SECTOR;
    s->slot[0] = 2 * SECTOR;
    s->slot[1] = 2 * SECTOR + s->slot_size;
    s->erase = fz_erase;
    s->program = fz_program;
}

/* data: [sectors - 6] [flags] [the store: sectors x SECTOR bytes, 0xFF past
 * the input] [the update's bytes: the rest]. flags bit 0: allow older; bit
 * 1: the store trusts the key; bits 2-7: the write chunk - 1. */
static void fuzz_update(const uint8_t *data, size_t size)
{
    colibri_slots s;
    colibri_slot_update u;
    colibri_slot_record r;
    colibri_slot_boot boot;
    if (size < 2) {
        return;
    }
    store_size = (6u + data[0]) * SECTOR;
    size_t chunk = 1u + (data[1] >> 2);
    int flags = data[1];
    data += 2;
    size -= 2;
    size_t from_input = size < store_size ? size : store_size;
    store = malloc(store_size);
    memset(store, 0xFF, store_size);
    memcpy(store, data, from_input);
    const uint8_t *bytes = data + from_input;
    size_t n = size - from_input;
    store_layout(&s);
    s.trusted_key = (flags & 2) ? key : NULL;
    (void)colibri_slot_record_read(&s, &r);
    colibri_status status = colibri_slot_update_begin(&u, &s, colibri_slot_running(&r), n);
    for (size_t at = 0; status == COLIBRI_OK && at < n; at += chunk) {
        status = colibri_slot_update_write(&u, at, bytes + at, n - at < chunk ? n - at : chunk);
    }
    if (status == COLIBRI_OK && colibri_slot_update_finish(&u, flags & 1) == COLIBRI_OK &&
        memcmp(store + s.slot[u.target], bytes, n) != 0) {
        __builtin_trap(); /* PENDING must name exactly the bytes this update wrote */
    }
    if (colibri_slot_boot_select(&s, &boot) == COLIBRI_OK) {
        (void)colibri_slot_reject(&s, 1 - boot.slot);
        (void)(boot.on_trial ? colibri_slot_confirm(&s, boot.slot)
                             : colibri_slot_reject(&s, boot.slot));
        (void)colibri_slot_boot_select(&s, &boot);
    }
    free(store);
}

static void fuzz_store(const uint8_t *data, size_t size)
{
    colibri_slots s;
    colibri_slot_boot boot;
    colibri_slot_record r;
    if (size < 6 * SECTOR) {
        return;
    }
    store_size = size - size % SECTOR;
    store = malloc(store_size);
    memcpy(store, data, store_size);
    store_layout(&s);
    (void)colibri_slot_record_read(&s, &r);
    if (colibri_slot_boot_select(&s, &boot) == COLIBRI_OK) {
        if (boot.on_trial) {
            (void)colibri_slot_confirm(&s, boot.slot);
        }
        (void)colibri_slot_boot_select(&s, &boot);
    }
    free(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] % 3 == 2) {
        fuzz_update(data + 1, size - 1);
    } else if (data[0] % 3 == 1) {
        fuzz_store(data + 1, size - 1);
    } else {
        fuzz_signature(data + 1, size - 1);
    }
    return 0;
}
