/*
 * signature_layout.h - byte offsets of the signature block that may follow a
 * model image (docs/format.md, section 8); this file mirrors that text.
 */
#ifndef COLIBRI_SIGNATURE_LAYOUT_H
#define COLIBRI_SIGNATURE_LAYOUT_H

#define SIG_MAGIC_TEXT "COLISIG\x1a"
#define SIG_MAGIC_SIZE 8u
#define SIG_HEADER_SIZE 128u /* fixed part, before the block hashes */
#define SIG_HASH_SIZE 64u    /* SHA-512 */
#define SIG_ED25519_SIZE 64u /* R || S */
#define SIG_MIN_BLOCK_LOG2 12u
#define SIG_MAX_BLOCK_LOG2 24u
#define SIG_HASH_SHA512 1u
#define SIG_ALG_ED25519 1u

enum {
    SIG_MAGIC = 0,
    SIG_VERSION_MAJOR = 8,
    SIG_VERSION_MINOR = 10,
    SIG_FIXED_SIZE = 12,
    SIG_IMAGE_SIZE = 16,
    SIG_IMAGE_VERSION = 24,
    SIG_BLOCK_LOG2 = 32,
    SIG_N_BLOCKS = 36,
    SIG_FINGERPRINT = 40,
    SIG_HASH_ALG = 44,
    SIG_SIGN_ALG = 48,
    SIG_TOTAL_SIZE = 52,
    SIG_PUBLIC_KEY = 56,
    SIG_RESERVED = 88, /* 40 bytes, zero */
    SIG_RESERVED_SIZE = 40
};

#endif
