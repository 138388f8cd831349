/*
 * field25519.c - arithmetic modulo p = 2^255 - 19 in sixteen 16-bit limbs
 * (field25519.h). 2^256 = 38 mod p folds a product's upper half back.
 * Right shifts of negative limbs are arithmetic (floor), as GCC and Clang
 * define them; colibri_compat.h checks it.
 */
#include "field25519.h"

#include "colibri_compat.h"

void colibri_fe_copy(colibri_fe out, const colibri_fe a)
{
    for (int i = 0; i < 16; i++) {
        out[i] = a[i];
    }
}

void colibri_fe_set_small(colibri_fe out, int64_t value)
{
    out[0] = value;
    for (int i = 1; i < 16; i++) {
        out[i] = 0;
    }
}

/* One carry pass: every limb to [0, 2^16) but limb 0, which takes 38 times
 * the carry out of limb 15. */
static void carry(colibri_fe a)
{
    for (int i = 0; i < 16; i++) {
        int64_t c = a[i] >> 16;
        a[i] -= c * 65536;
        if (i < 15) {
            a[i + 1] += c;
        } else {
            a[0] += 38 * c;
        }
    }
}

void colibri_fe_add(colibri_fe out, const colibri_fe a, const colibri_fe b)
{
    for (int i = 0; i < 16; i++) {
        out[i] = a[i] + b[i];
    }
}

void colibri_fe_sub(colibri_fe out, const colibri_fe a, const colibri_fe b)
{
    for (int i = 0; i < 16; i++) {
        out[i] = a[i] - b[i];
    }
}

void colibri_fe_mul(colibri_fe out, const colibri_fe a, const colibri_fe b)
{
    int64_t t[31];
    for (int i = 0; i < 31; i++) {
        t[i] = 0;
    }
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) {
            t[i + j] += a[i] * b[j];
        }
    }
    for (int i = 0; i < 15; i++) {
        t[i] += 38 * t[i + 16];
    }
    for (int i = 0; i < 16; i++) {
        out[i] = t[i];
    }
    carry(out);
    carry(out);
}

void colibri_fe_sq(colibri_fe out, const colibri_fe a)
{
    colibri_fe_mul(out, a, a);
}

/* a^e for e = 2^(top+1) - 1 with the bits in `zero` cleared, top down. */
static void pow_fixed(colibri_fe out, const colibri_fe a, int top, int zero_a, int zero_b)
{
    colibri_fe c;
    colibri_fe_copy(c, a);
    for (int i = top - 1; i >= 0; i--) {
        colibri_fe_sq(c, c);
        if (i != zero_a && i != zero_b) {
            colibri_fe_mul(c, c, a);
        }
    }
    colibri_fe_copy(out, c);
}

void colibri_fe_invert(colibri_fe out, const colibri_fe a)
{
    pow_fixed(out, a, 254, 2, 4); /* p - 2 = 2^255 - 21: bits 2 and 4 clear */
}

void colibri_fe_pow_p58(colibri_fe out, const colibri_fe a)
{
    pow_fixed(out, a, 251, 1, 1); /* (p - 5) / 8 = 2^252 - 3: bit 1 clear */
}

void colibri_fe_select(colibri_fe out, const colibri_fe a, const colibri_fe b, int flag)
{
    int64_t mask = -(int64_t)flag;
    for (int i = 0; i < 16; i++) {
        out[i] = a[i] ^ (mask & (a[i] ^ b[i]));
    }
}

void colibri_fe_pack(uint8_t out[32], const colibri_fe a)
{
    colibri_fe t;
    colibri_fe m;
    colibri_fe_copy(t, a);
    carry(t);
    carry(t);
    carry(t);
    carry(t);
    /* Now 0 <= t < 2^256 - 38 + 2^16; subtract p at most twice, keeping the
     * difference when it does not borrow. */
    for (int round = 0; round < 2; round++) {
        m[0] = t[0] - 0xffed;
        for (int i = 1; i < 15; i++) {
            m[i] = t[i] - 0xffff - ((m[i - 1] >> 16) & 1);
            m[i - 1] &= 0xffff;
        }
        m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1);
        m[14] &= 0xffff;
        int borrow = (int)((m[15] >> 16) & 1);
        m[15] &= 0xffff;
        colibri_fe_select(t, t, m, 1 - borrow);
    }
    for (int i = 0; i < 16; i++) {
        out[2 * i] = (uint8_t)(t[i] & 0xff);
        out[2 * i + 1] = (uint8_t)((t[i] >> 8) & 0xff);
    }
}

void colibri_fe_unpack(colibri_fe out, const uint8_t in[32])
{
    for (int i = 0; i < 16; i++) {
        out[i] = (int64_t)in[2 * i] | ((int64_t)in[2 * i + 1] << 8);
    }
    out[15] &= 0x7fff;
}

int colibri_fe_equal(const colibri_fe a, const colibri_fe b)
{
    uint8_t pa[32];
    uint8_t pb[32];
    colibri_fe_pack(pa, a);
    colibri_fe_pack(pb, b);
    return colibri_bytes_equal(pa, pb, 32);
}

int colibri_fe_parity(const colibri_fe a)
{
    uint8_t p[32];
    colibri_fe_pack(p, a);
    return p[0] & 1;
}
