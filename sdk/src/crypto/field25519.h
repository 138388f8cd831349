/*
 * field25519.h - arithmetic modulo p = 2^255 - 19, the field of Ed25519
 * (RFC 8032, section 5.1). An element is 16 signed 64-bit limbs of 16 bits,
 * value = sum(limb[i] * 2^(16 i)) mod p; limbs may leave [0, 2^16) between
 * operations (fe_mul carries its result). Every operation runs the same
 * instructions whatever the values (no branch or index depends on them).
 */
#ifndef COLIBRI_FIELD25519_H
#define COLIBRI_FIELD25519_H

#include <stdint.h>

typedef int64_t colibri_fe[16];

void colibri_fe_copy(colibri_fe out, const colibri_fe a);
void colibri_fe_set_small(colibri_fe out, int64_t value); /* 0 <= value < 2^16 */
void colibri_fe_add(colibri_fe out, const colibri_fe a, const colibri_fe b);
void colibri_fe_sub(colibri_fe out, const colibri_fe a, const colibri_fe b);
void colibri_fe_mul(colibri_fe out, const colibri_fe a, const colibri_fe b);
void colibri_fe_sq(colibri_fe out, const colibri_fe a);
void colibri_fe_invert(colibri_fe out, const colibri_fe a);  /* a^(p-2) */
void colibri_fe_pow_p58(colibri_fe out, const colibri_fe a); /* a^((p-5)/8) */
/* The canonical 32 little-endian bytes (value fully reduced below p). */
void colibri_fe_pack(uint8_t out[32], const colibri_fe a);
/* The low 255 bits of in (the top bit is ignored), not reduced. */
void colibri_fe_unpack(colibri_fe out, const uint8_t in[32]);
/* 1 if a == b mod p, else 0 (constant time). */
int colibri_fe_equal(const colibri_fe a, const colibri_fe b);
/* The low bit of the canonical value. */
int colibri_fe_parity(const colibri_fe a);
/* out = b if flag else a; flag is 0 or 1 (constant time). */
void colibri_fe_select(colibri_fe out, const colibri_fe a, const colibri_fe b, int flag);

#endif
