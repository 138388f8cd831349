/*
 * signature.c - the signature block after a model image (docs/format.md,
 * section 8): find it, check its layout against the image, its key, its
 * Ed25519 signature, and the SHA-512 of each hashed block.
 */
#include "colibri_compat.h"
#include "colibri.h"
#include "image_layout.h"
#include "signature_layout.h"

static int block_magic(const uint8_t *p)
{
    static const char magic[] = SIG_MAGIC_TEXT;
    return colibri_bytes_equal(p, (const uint8_t *)magic, SIG_MAGIC_SIZE);
}

static int image_magic(const uint8_t *p)
{
    static const char magic[] = IMG_MAGIC;
    return colibri_bytes_equal(p, (const uint8_t *)magic, IMG_MAGIC_SIZE);
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t any = 0;
    for (size_t i = 0; i < n; i++) {
        any |= p[i];
    }
    return any == 0;
}

/* Where the image's header and tables end, clamped to [256, image_size]. */
static uint64_t meta_end(const uint8_t *img, uint64_t image_size)
{
    uint64_t table = colibri_rd_u64(img + HDR_TENSOR_TABLE);
    uint64_t bytes = (uint64_t)colibri_rd_u32(img + HDR_N_TENSORS) * IMG_TENSOR_ENTRY_SIZE;
    uint64_t end = table <= image_size && bytes <= image_size - table ? table + bytes : image_size;
    return end < IMG_HEADER_SIZE ? IMG_HEADER_SIZE : end;
}

/* The block's layout, against the image it follows. */
static colibri_status check_layout(const uint8_t *img, uint64_t image_size, const uint8_t *b,
                                   uint64_t room)
{
    if (room < SIG_HEADER_SIZE) {
        return COLIBRI_E_BAD_SIGNATURE_BLOCK;
    }
    if (colibri_rd_u16(b + SIG_VERSION_MAJOR) != 1 ||
        colibri_rd_u32(b + SIG_HASH_ALG) != SIG_HASH_SHA512 ||
        colibri_rd_u32(b + SIG_SIGN_ALG) != SIG_ALG_ED25519) {
        return COLIBRI_E_UNSUPPORTED_VERSION;
    }
    uint32_t log2 = colibri_rd_u32(b + SIG_BLOCK_LOG2);
    if (colibri_rd_u32(b + SIG_FIXED_SIZE) != SIG_HEADER_SIZE ||
        colibri_rd_u64(b + SIG_IMAGE_SIZE) != image_size || log2 < SIG_MIN_BLOCK_LOG2 ||
        log2 > SIG_MAX_BLOCK_LOG2 || !all_zero(b + SIG_RESERVED, SIG_RESERVED_SIZE) ||
        colibri_rd_u32(b + SIG_FINGERPRINT) != colibri_rd_u32(img + HDR_META_CRC)) {
        return COLIBRI_E_BAD_SIGNATURE_BLOCK;
    }
    uint64_t blocks = (image_size + (1ull << log2) - 1) >> log2;
    uint64_t total = SIG_HEADER_SIZE + SIG_HASH_SIZE * blocks + SIG_ED25519_SIZE;
    if (colibri_rd_u32(b + SIG_N_BLOCKS) != blocks || colibri_rd_u32(b + SIG_TOTAL_SIZE) != total) {
        return COLIBRI_E_BAD_SIGNATURE_BLOCK;
    }
    return total <= room ? COLIBRI_OK : COLIBRI_E_BAD_SIGNATURE_BLOCK;
}

static void fill(colibri_signature *sig, const uint8_t *img, uint64_t image_size, const uint8_t *b)
{
    sig->image = img;
    sig->block = b;
    sig->image_size = image_size;
    sig->size = colibri_rd_u32(b + SIG_TOTAL_SIZE);
    sig->image_version = colibri_rd_u64(b + SIG_IMAGE_VERSION);
    sig->fingerprint = colibri_rd_u32(b + SIG_FINGERPRINT);
    sig->hash_block_size = 1u << colibri_rd_u32(b + SIG_BLOCK_LOG2);
    sig->n_blocks = colibri_rd_u32(b + SIG_N_BLOCKS);
    sig->hashes = b + SIG_HEADER_SIZE;
    sig->public_key = b + SIG_PUBLIC_KEY;
}

static colibri_status check(colibri_signature *sig, const uint8_t *img, size_t avail,
                            const uint8_t *trusted_key)
{
    if (avail < IMG_HEADER_SIZE) {
        return COLIBRI_E_TRUNCATED;
    }
    if (!image_magic(img)) {
        return COLIBRI_E_BAD_MAGIC;
    }
    uint64_t image_size = colibri_rd_u64(img + HDR_IMAGE_SIZE);
    if (image_size < IMG_HEADER_SIZE || image_size > avail) {
        return COLIBRI_E_TRUNCATED;
    }
    const uint8_t *b = img + image_size;
    uint64_t room = avail - image_size;
    if (room < SIG_MAGIC_SIZE || !block_magic(b)) {
        return COLIBRI_E_UNSIGNED;
    }
    colibri_status status = check_layout(img, image_size, b, room);
    if (status != COLIBRI_OK) {
        return status;
    }
    fill(sig, img, image_size, b);
    if (trusted_key != NULL && !colibri_bytes_equal(sig->public_key, trusted_key, 32)) {
        return COLIBRI_E_WRONG_KEY;
    }
    size_t signed_bytes = SIG_HEADER_SIZE + (size_t)SIG_HASH_SIZE * sig->n_blocks;
    status = colibri_ed25519_verify(b + signed_bytes, sig->public_key, b, signed_bytes);
    if (status != COLIBRI_OK) {
        return status;
    }
    uint64_t end = meta_end(img, image_size);
    uint32_t log2 = colibri_rd_u32(b + SIG_BLOCK_LOG2);
    uint32_t meta_blocks = (uint32_t)((end + sig->hash_block_size - 1) >> log2);
    return colibri_signature_verify_blocks(sig, 0, meta_blocks, NULL);
}

colibri_status colibri_signature_check(colibri_signature *sig, const void *image, size_t avail,
                                       const uint8_t trusted_key[32])
{
    if (sig == NULL || image == NULL) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    memset(sig, 0, sizeof *sig);
    colibri_status status = check(sig, (const uint8_t *)image, avail, trusted_key);
    if (status != COLIBRI_OK) {
        memset(sig, 0, sizeof *sig);
    }
    return status;
}

colibri_status colibri_signature_verify_blocks(const colibri_signature *sig, uint32_t first,
                                               uint32_t count, uint32_t *bad_block)
{
    uint8_t digest[64];
    if (sig == NULL || sig->block == NULL || first > sig->n_blocks ||
        count > sig->n_blocks - first) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    uint32_t last = count == 0 ? sig->n_blocks : first + count;
    for (uint32_t i = first; i < last; i++) {
        uint64_t start = (uint64_t)i * sig->hash_block_size;
        uint64_t left = sig->image_size - start;
        size_t n = left < sig->hash_block_size ? (size_t)left : sig->hash_block_size;
        colibri_sha512(sig->image + start, n, digest);
        if (!colibri_bytes_equal(digest, sig->hashes + (size_t)SIG_HASH_SIZE * i, SIG_HASH_SIZE)) {
            if (bad_block != NULL) {
                *bad_block = i;
            }
            return COLIBRI_E_HASH_MISMATCH;
        }
    }
    return COLIBRI_OK;
}
