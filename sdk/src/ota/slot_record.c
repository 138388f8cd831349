/*
 * slot_record.c - the 64-byte slot record and its two copies (docs/ota.md,
 * "Slot record"): encode, decode, read the newest valid copy, write the next
 * one into both copies' sectors in turn. A copy cut short by a power cut
 * fails its CRC and the other copy stands.
 */
#include "colibri_compat.h"
#include "colibri.h"

#define RECORD_MAGIC "COLISLT\x1a"
#define RECORD_VERSION 1u

enum {
    REC_MAGIC = 0,
    REC_VERSION = 8,
    REC_SIZE = 10,
    REC_SEQ = 12,
    REC_STATE = 16,       /* u8 x 2, then 2 reserved bytes */
    REC_GENERATION = 20,  /* u32 x 2 */
    REC_FINGERPRINT = 28, /* u32 x 2 */
    REC_VERSION_A = 36,   /* u64 x 2 */
    REC_RESERVED = 52,    /* 8 bytes, zero */
    REC_CRC = 60
};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

void colibri_slot_record_encode(const colibri_slot_record *record, uint8_t out[64])
{
    memset(out, 0, COLIBRI_SLOT_RECORD_BYTES);
    memcpy(out + REC_MAGIC, RECORD_MAGIC, 8);
    out[REC_VERSION] = RECORD_VERSION;
    out[REC_SIZE] = COLIBRI_SLOT_RECORD_BYTES;
    put_u32(out + REC_SEQ, record->seq);
    for (int i = 0; i < 2; i++) {
        out[REC_STATE + i] = record->state[i];
        put_u32(out + REC_GENERATION + 4 * i, record->generation[i]);
        put_u32(out + REC_FINGERPRINT + 4 * i, record->fingerprint[i]);
        put_u64(out + REC_VERSION_A + 8 * i, record->image_version[i]);
    }
    put_u32(out + REC_CRC, colibri_crc32_update(0, out, REC_CRC));
}

colibri_status colibri_slot_record_decode(colibri_slot_record *record, const uint8_t in[64])
{
    memset(record, 0, sizeof *record);
    uint8_t reserved = in[REC_STATE + 2] | in[REC_STATE + 3];
    for (int i = 0; i < 8; i++) {
        reserved |= in[REC_RESERVED + i];
    }
    if (!colibri_bytes_equal(in + REC_MAGIC, (const uint8_t *)RECORD_MAGIC, 8) ||
        colibri_rd_u16(in + REC_VERSION) != 1 ||
        colibri_rd_u16(in + REC_SIZE) != COLIBRI_SLOT_RECORD_BYTES || reserved != 0 ||
        in[REC_STATE] > COLIBRI_SLOT_BAD || in[REC_STATE + 1] > COLIBRI_SLOT_BAD ||
        colibri_rd_u32(in + REC_SEQ) == 0 ||
        colibri_crc32_update(0, in, REC_CRC) != colibri_rd_u32(in + REC_CRC)) {
        return COLIBRI_E_CHECKSUM;
    }
    record->seq = colibri_rd_u32(in + REC_SEQ);
    for (int i = 0; i < 2; i++) {
        record->state[i] = in[REC_STATE + i];
        record->generation[i] = colibri_rd_u32(in + REC_GENERATION + 4 * i);
        record->fingerprint[i] = colibri_rd_u32(in + REC_FINGERPRINT + 4 * i);
        record->image_version[i] = colibri_rd_u64(in + REC_VERSION_A + 8 * i);
    }
    return COLIBRI_OK;
}

static int disjoint(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size)
{
    return a + a_size <= b || b + b_size <= a;
}

colibri_status colibri_slots_check(const colibri_slots *s)
{
    if (s == NULL || s->base == NULL || s->erase == NULL || s->program == NULL ||
        s->sector_size < COLIBRI_SLOT_RECORD_BYTES || (s->sector_size & (s->sector_size - 1)) ||
        s->slot_size == 0 || (s->slot_size & (s->sector_size - 1)) != 0) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    uint64_t starts[4] = {s->record[0], s->record[1], s->slot[0], s->slot[1]};
    uint64_t sizes[4] = {s->sector_size, s->sector_size, s->slot_size, s->slot_size};
    for (int i = 0; i < 4; i++) {
        if ((starts[i] & (s->sector_size - 1)) != 0 || starts[i] > UINT64_MAX - sizes[i]) {
            return COLIBRI_E_BAD_ARGUMENT;
        }
        for (int j = 0; j < i; j++) {
            if (!disjoint(starts[i], sizes[i], starts[j], sizes[j])) {
                return COLIBRI_E_BAD_ARGUMENT;
            }
        }
    }
    return COLIBRI_OK;
}

void colibri_slots_layout(colibri_slots *s, uint64_t length, uint32_t sector)
{
    uint64_t records = 2ull * sector;
    uint64_t slot = length > records ? (length - records) / 2 : 0;
    int power_of_two = sector != 0 && (sector & (sector - 1)) == 0;
    slot = power_of_two ? slot & ~(uint64_t)(sector - 1) : 0; /* no 64-bit division */
    s->sector_size = sector;
    s->record[0] = 0;
    s->record[1] = sector;
    s->slot[0] = records;
    s->slot[1] = records + slot;
    s->slot_size = slot;
}

int colibri_slot_record_read(const colibri_slots *s, colibri_slot_record *record)
{
    colibri_slot_record copy[2];
    int valid[2];
    for (int i = 0; i < 2; i++) {
        valid[i] = colibri_slot_record_decode(&copy[i], s->base + s->record[i]) == COLIBRI_OK;
    }
    int use = -1;
    if (valid[0] && valid[1]) {
        use = copy[1].seq > copy[0].seq ? 1 : 0;
    } else if (valid[0] || valid[1]) {
        use = valid[0] ? 0 : 1;
    }
    if (use < 0) {
        memset(record, 0, sizeof *record);
    } else {
        *record = copy[use];
    }
    return use;
}

static colibri_status write_copy(const colibri_slots *s, int copy, const uint8_t *bytes)
{
    uint64_t at = s->record[copy];
    if (s->erase(s->ctx, at, s->sector_size) != COLIBRI_OK ||
        s->program(s->ctx, at, bytes, COLIBRI_SLOT_RECORD_BYTES) != COLIBRI_OK ||
        !colibri_bytes_equal(s->base + at, bytes, COLIBRI_SLOT_RECORD_BYTES)) {
        return COLIBRI_E_FLASH;
    }
    return COLIBRI_OK;
}

/* The new record goes into the copy that is not the newest, then into the
 * other one too: a power cut in either step leaves one valid copy (the old
 * record or the new one), and at rest both copies hold the newest record,
 * so one corrupted copy loses nothing. */
colibri_status colibri_slot_record_write(const colibri_slots *s, colibri_slot_record *record)
{
    colibri_slot_record newest;
    uint8_t bytes[COLIBRI_SLOT_RECORD_BYTES];
    int current = colibri_slot_record_read(s, &newest);
    int target = current == 0 ? 1 : 0;
    record->seq = newest.seq + 1;
    colibri_slot_record_encode(record, bytes);
    if (write_copy(s, target, bytes) != COLIBRI_OK ||
        write_copy(s, 1 - target, bytes) != COLIBRI_OK) {
        return COLIBRI_E_FLASH;
    }
    return COLIBRI_OK;
}

int colibri_slot_record_copies(const colibri_slots *s)
{
    colibri_slot_record copy;
    int valid = 0;
    for (int i = 0; i < 2; i++) {
        valid += colibri_slot_record_decode(&copy, s->base + s->record[i]) == COLIBRI_OK;
    }
    return valid;
}
