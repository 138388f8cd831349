/*
 * colibri_ota.h - the over-the-air part of colibri.h, which includes it
 * (include colibri.h): SHA-512, Ed25519 and signed images, and the A/B
 * weight slots (docs/ota.md). Built from sdk/src/ota and sdk/src/crypto (the
 * Zephyr module: only with CONFIG_COLIBRI_SLOTS).
 */
#ifndef COLIBRI_OTA_H
#define COLIBRI_OTA_H

#include "colibri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Authenticity: SHA-512, Ed25519 and signed images (docs/format.md, section 8;
 * docs/ota.md has the threat model). Verification only: no secret key ever
 * lives on a device. No allocation; stack use up to 6.5 KiB (Cortex-M7, -O2).
 * ------------------------------------------------------------------------- */

/* SHA-512 (FIPS 180-4). Caller storage; init, update any number of times,
 * final. Messages up to 2^64 - 1 bytes. */
typedef struct colibri_sha512_ctx {
    uint64_t state[8];
    uint64_t bytes;     /* absorbed so far */
    uint8_t block[128]; /* the partial block */
} colibri_sha512_ctx;

void colibri_sha512_init(colibri_sha512_ctx *ctx);
void colibri_sha512_update(colibri_sha512_ctx *ctx, const void *data, size_t size);
void colibri_sha512_final(colibri_sha512_ctx *ctx, uint8_t digest[64]);
/* The three above in one call. */
void colibri_sha512(const void *data, size_t size, uint8_t digest[64]);

/*
 * Verify an Ed25519 signature (RFC 8032, 5.1.7: R || S, 64 bytes) of
 * message[0 .. size) under a 32-byte public key. COLIBRI_OK, or
 * COLIBRI_E_SIGNATURE (wrong signature, S >= L, R not a point or of small
 * order), COLIBRI_E_BAD_KEY (the key is not a point, or of small order).
 * All inputs are public; the comparison is constant time.
 */
colibri_status colibri_ed25519_verify(const uint8_t signature[64], const uint8_t public_key[32],
                                      const void *message, size_t size);

/* Bytes of the signature block of an image of image_size bytes hashed in
 * blocks of block_size (a power of two, 4 KiB .. 16 MiB): 192 + 64 * blocks. */
#define COLIBRI_SIGNATURE_BLOCK_SIZE(image_size, block_size)                                       \
    (192u + 64u * (((image_size) + (block_size)-1u) / (block_size)))

/* A checked signature block: pointers into the caller's image memory. */
typedef struct colibri_signature {
    const uint8_t *image;      /* the image it signs */
    const uint8_t *block;      /* the signature block, at image + image_size */
    uint64_t image_size;       /* bytes of the image it covers */
    uint64_t size;             /* bytes of the signature block */
    uint64_t image_version;    /* the signer's version number (anti-rollback) */
    uint32_t fingerprint;      /* the image's meta CRC-32 */
    uint32_t hash_block_size;  /* bytes per hashed block (the last may be shorter) */
    uint32_t n_blocks;         /* hashed blocks */
    const uint8_t *hashes;     /* n_blocks x 64 bytes: SHA-512 of each block */
    const uint8_t *public_key; /* the 32-byte key it was signed with */
} colibri_signature;

/*
 * Find the signature block after the image at [image, image + avail) and
 * check it: its layout and that it describes this image, that its key is
 * trusted_key, its Ed25519 signature, and the hashes of the blocks that hold
 * the image header and tables. After COLIBRI_OK the header and tables are
 * authentic (colibri_init then checks their content) and *sig describes the
 * data blocks for colibri_signature_verify_blocks. trusted_key NULL checks
 * against the block's own key: integrity, not authenticity (host tools).
 * Statuses: COLIBRI_E_UNSIGNED, COLIBRI_E_BAD_SIGNATURE_BLOCK,
 * COLIBRI_E_UNSUPPORTED_VERSION, COLIBRI_E_WRONG_KEY, COLIBRI_E_BAD_KEY,
 * COLIBRI_E_SIGNATURE, COLIBRI_E_HASH_MISMATCH (and those of a bad image
 * header: COLIBRI_E_TRUNCATED, COLIBRI_E_BAD_MAGIC). On failure *sig is
 * zeroed.
 */
colibri_status colibri_signature_check(colibri_signature *sig, const void *image, size_t avail,
                                       const uint8_t trusted_key[32]);

/*
 * Hash blocks [first, first + count) of the image (count 0: through the
 * last) and compare each with the signed table: COLIBRI_OK or
 * COLIBRI_E_HASH_MISMATCH, *bad_block (optional) = the first bad block.
 * Time is proportional to the bytes hashed.
 */
colibri_status colibri_signature_verify_blocks(const colibri_signature *sig, uint32_t first,
                                               uint32_t count, uint32_t *bad_block);

/* ---------------------------------------------------------------------------
 * A/B weight slots for over-the-air updates (docs/ota.md). Two slots of one
 * flash (or file) hold two images; a 64-byte slot record, kept in two copies
 * in two erase sectors, says which is good, on trial or bad. An update
 * writes the slot that is not running, verifies it, then flips the record;
 * boot takes the newest slot that verifies and reverts a slot that failed
 * its first run. A power cut at any point leaves the old or the new image
 * bootable, never a mix. No allocation; the flash is read in place.
 * ------------------------------------------------------------------------- */

typedef enum colibri_slot_state {
    COLIBRI_SLOT_EMPTY = 0,   /* nothing usable: erased, or being written */
    COLIBRI_SLOT_PENDING = 1, /* written and verified, waiting for its first boot */
    COLIBRI_SLOT_TRYING = 2,  /* booted once, not confirmed yet */
    COLIBRI_SLOT_GOOD = 3,    /* confirmed by a successful run */
    COLIBRI_SLOT_BAD = 4      /* failed verification or its first run */
} colibri_slot_state;

/* The decoded slot record (docs/ota.md, "Slot record"). */
typedef struct colibri_slot_record {
    uint32_t seq;              /* write count; the valid copy with the larger seq wins; 0: none */
    uint8_t state[2];          /* colibri_slot_state of slot A (0) and B (1) */
    uint32_t generation[2];    /* seq of the record that installed the slot's image */
    uint32_t fingerprint[2];   /* the image's meta CRC-32 */
    uint64_t image_version[2]; /* the signed image version (0 if unsigned) */
} colibri_slot_record;

/* Where the slots live and how to write there: caller storage. Offsets are
 * from `base`; records and slots start on sector boundaries and do not
 * overlap (colibri_slots_check). */
typedef struct colibri_slots {
    const uint8_t *base;  /* the flash (or file) as memory, read in place */
    uint32_t sector_size; /* erase unit, a power of two */
    uint64_t record[2];   /* offsets of the two record copies, one sector each */
    uint64_t slot[2];     /* offsets of slot A and slot B */
    uint64_t slot_size;   /* bytes of each slot, a multiple of sector_size */
    /* Erase [offset, offset + size): whole sectors; afterwards they read 0xFF. */
    colibri_status (*erase)(void *ctx, uint64_t offset, uint64_t size);
    /* Program size bytes at offset (into erased flash); the port pads to its
     * program unit. Returns COLIBRI_OK or COLIBRI_E_FLASH. */
    colibri_status (*program)(void *ctx, uint64_t offset, const void *data, size_t size);
    void *ctx;
    const uint8_t *trusted_key;    /* (optional) 32 bytes: images must be signed by it */
    uint32_t expected_fingerprint; /* 0: any image (an update changes the fingerprint) */
} colibri_slots;

/* Check the layout (alignment, overlap, callbacks): COLIBRI_OK or
 * COLIBRI_E_BAD_ARGUMENT. */
colibri_status colibri_slots_check(const colibri_slots *slots);

/* The layout rule of docs/ota.md (section 1) for `length` bytes of flash
 * from base: the two record copies in the first two sectors, then slot A
 * and slot B, each (length - 2 sectors) / 2 rounded down to a sector (0 when
 * nothing fits: colibri_slots_check refuses it). Sets sector_size, record,
 * slot and slot_size; the caller sets the rest. */
void colibri_slots_layout(colibri_slots *slots, uint64_t length, uint32_t sector);

/* Read the newest valid record copy into *record (seq 0 and every slot
 * EMPTY when neither copy is valid: a new device). Returns the copy (0 or 1)
 * that was used, or -1 when none. */
int colibri_slot_record_read(const colibri_slots *slots, colibri_slot_record *record);

/* Write *record as the next seq into the copy that is not the newest, then
 * into the other copy, each read back: at rest both copies hold the newest
 * record. *record->seq is updated. COLIBRI_OK or COLIBRI_E_FLASH. */
colibri_status colibri_slot_record_write(const colibri_slots *slots, colibri_slot_record *record);

/* How many record copies (0, 1 or 2) are valid. Boot rewrites the record
 * when only one is, so a single damaged copy is repaired. */
int colibri_slot_record_copies(const colibri_slots *slots);

/* Encode / decode one 64-byte record copy (docs/ota.md). Decoding returns
 * COLIBRI_OK or COLIBRI_E_CHECKSUM (bad magic, version, field or CRC: the
 * copy is not used). */
#define COLIBRI_SLOT_RECORD_BYTES 64u
void colibri_slot_record_encode(const colibri_slot_record *record, uint8_t out[64]);
colibri_status colibri_slot_record_decode(colibri_slot_record *record, const uint8_t in[64]);

/* Verify the image in slot i as boot does: signature and every block hash
 * (when slots->trusted_key is set), colibri_init with the expected
 * fingerprint, every tensor CRC. *size receives the image's size. */
colibri_status colibri_slot_verify(const colibri_slots *slots, uint32_t slot, uint64_t *size,
                                   uint64_t *image_version);

/* What colibri_slot_boot chose. */
typedef struct colibri_slot_boot {
    uint32_t slot;     /* 0 = A, 1 = B */
    const void *image; /* the image, in place */
    uint64_t size;     /* its size: pass to colibri_init */
    int on_trial;      /* 1: first boot of a new image: call colibri_slot_confirm
                         * after a good run, or colibri_slot_reject */
    uint32_t rejected; /* slots marked BAD during this boot (bit 0 A, bit 1 B) */
} colibri_slot_boot;

/*
 * Choose the slot to run: a slot still TRYING failed its first run (the
 * device restarted before confirming it) and becomes BAD; a PENDING slot is
 * tried first (and becomes TRYING); then the GOOD slots, newest first; with
 * no record, any slot that verifies, the higher signed version first. Each
 * candidate is verified (colibri_slot_verify); one that fails becomes BAD.
 * COLIBRI_OK, COLIBRI_E_NO_SLOT, or COLIBRI_E_FLASH (a record write failed).
 */
colibri_status colibri_slot_boot_select(const colibri_slots *slots, colibri_slot_boot *boot);

/* The slot a device runs per the record: the one on trial (TRYING), else
 * the newest GOOD one; -1 for none. An update writes the other. */
int colibri_slot_running(const colibri_slot_record *record);

/* The image on trial ran well: it becomes GOOD (and stays the newest). */
colibri_status colibri_slot_confirm(const colibri_slots *slots, uint32_t slot);
/* The image failed at run time: it becomes BAD; boot again to fall back.
 * COLIBRI_E_LAST_IMAGE (nothing changed) for a GOOD or PENDING slot while
 * the other slot is not GOOD: rejecting it would leave nothing to boot. The
 * image on trial can always be rejected (an unconfirmed trial ends BAD at
 * the next boot anyway). */
colibri_status colibri_slot_reject(const colibri_slots *slots, uint32_t slot);

/* An update in progress: caller storage; fields private. */
typedef struct colibri_slot_update {
    const colibri_slots *slots;
    uint32_t target;      /* the slot being written */
    uint64_t size;        /* bytes announced */
    uint64_t written;     /* bytes programmed so far */
    uint64_t min_version; /* the running image's version (rollback floor) */
    int active;           /* between begin and finish */
} colibri_slot_update;

/*
 * Start writing `size` bytes (image and signature block) into the slot that
 * is not `running` (the slot this boot runs, or -1 for none): the record
 * first marks that slot EMPTY, then its sectors are erased.
 * COLIBRI_E_SLOT_TOO_SMALL, COLIBRI_E_FLASH.
 */
colibri_status colibri_slot_update_begin(colibri_slot_update *update, const colibri_slots *slots,
                                         int running, uint64_t size);
/* Program the next bytes: offset must equal the bytes written so far
 * (COLIBRI_E_UPDATE_ORDER otherwise); every byte is read back. */
colibri_status colibri_slot_update_write(colibri_slot_update *update, uint64_t offset,
                                         const void *data, size_t size);
/*
 * All bytes written: verify the new slot (colibri_slot_verify; refuse a
 * signed version below the running image's unless allow_older), check that
 * the image that verified, with its signature block, is exactly the bytes
 * written (COLIBRI_E_UPDATE_MISMATCH: e.g. a prefix that the slot's older
 * bytes would complete), and only then flip the record: the slot becomes
 * PENDING and the next boot tries it.
 */
colibri_status colibri_slot_update_finish(colibri_slot_update *update, int allow_older);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_OTA_H */
