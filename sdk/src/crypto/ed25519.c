/*
 * ed25519.c - Ed25519 signature verification (RFC 8032, section 5.1.7) on
 * the twisted Edwards curve -x^2 + y^2 = 1 + d x^2 y^2 over GF(2^255 - 19),
 * points in extended coordinates (X : Y : Z : T), x = X/Z, y = Y/Z, xy = T/Z.
 *
 * Every input is public (the key, the message, the signature), so the
 * double-scalar multiplication may branch on scalar bits; the field
 * arithmetic and the final comparison are constant time anyway. Refused:
 * S >= L (non-canonical, RFC 8032 5.1.7 step 1), an A or R whose encoding
 * does not decode (y >= p, no square root, x = 0 with the sign bit set), and
 * an A or R of small order (8 P = identity), which would let one signature
 * verify for many messages.
 */
#include "colibri_compat.h"
#include "colibri.h"
#include "field25519.h"

typedef struct point {
    colibri_fe x, y, z, t;
} point;

/* d = -121665 / 121666, 2d, sqrt(-1) = 2^((p-1)/4), and the base point B
 * (y = 4/5, x even), all mod p, in 16-bit limbs. */
static const colibri_fe curve_d = {0x78a3, 0x1359, 0x4dca, 0x75eb, 0xd8ab, 0x4141, 0x0a4d, 0x0070,
                                   0xe898, 0x7779, 0x4079, 0x8cc7, 0xfe73, 0x2b6f, 0x6cee, 0x5203};
static const colibri_fe curve_2d = {0xf159, 0x26b2, 0x9b94, 0xebd6, 0xb156, 0x8283, 0x149a, 0x00e0,
                                    0xd130, 0xeef3, 0x80f2, 0x198e, 0xfce7, 0x56df, 0xd9dc, 0x2406};
static const colibri_fe sqrt_m1 = {0xa0b0, 0x4a0e, 0x1b27, 0xc4ee, 0xe478, 0xad2f, 0x1806, 0x2f43,
                                   0xd7a7, 0x3dfb, 0x0099, 0x2b4d, 0xdf0b, 0x4fc1, 0x2480, 0x2b83};
static const colibri_fe base_x = {0xd51a, 0x8f25, 0x2d60, 0xc956, 0xa7b2, 0x9525, 0xc760, 0x692c,
                                  0xdc5c, 0xfdd6, 0xe231, 0xc0a4, 0x53fe, 0xcd6e, 0x36d3, 0x2169};
static const colibri_fe base_y = {0x6658, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666,
                                  0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666};
static const colibri_fe base_t = {0xdda3, 0xa5b7, 0x8ab3, 0x6dde, 0x52f5, 0x7751, 0x9f80, 0x20f0,
                                  0xe37d, 0x64ab, 0x4e8e, 0x66ea, 0x7665, 0xd78b, 0x5f0f, 0x6787};

/* The group order L = 2^252 + 27742317777372353535851937790883648493,
 * little-endian. */
static const uint8_t group_order[32] = {
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10};

static void point_identity(point *p)
{
    colibri_fe_set_small(p->x, 0);
    colibri_fe_set_small(p->y, 1);
    colibri_fe_set_small(p->z, 1);
    colibri_fe_set_small(p->t, 0);
}

/* p = p + q (add-2008-hwcd-3 for a = -1; unified: also doubles). */
static void point_add(point *p, const point *q)
{
    colibri_fe a, b, c, d, e, f, g, h;
    colibri_fe_sub(a, p->y, p->x);
    colibri_fe_sub(h, q->y, q->x);
    colibri_fe_mul(a, a, h);
    colibri_fe_add(b, p->y, p->x);
    colibri_fe_add(h, q->y, q->x);
    colibri_fe_mul(b, b, h);
    colibri_fe_mul(c, p->t, q->t);
    colibri_fe_mul(c, c, curve_2d);
    colibri_fe_mul(d, p->z, q->z);
    colibri_fe_add(d, d, d);
    colibri_fe_sub(e, b, a);
    colibri_fe_sub(f, d, c);
    colibri_fe_add(g, d, c);
    colibri_fe_add(h, b, a);
    colibri_fe_mul(p->x, e, f);
    colibri_fe_mul(p->y, h, g);
    colibri_fe_mul(p->z, g, f);
    colibri_fe_mul(p->t, e, h);
}

static void point_negate(point *p)
{
    colibri_fe zero;
    colibri_fe_set_small(zero, 0);
    colibri_fe_sub(p->x, zero, p->x);
    colibri_fe_sub(p->t, zero, p->t);
}

static void point_encode(uint8_t out[32], const point *p)
{
    colibri_fe zi, x, y;
    colibri_fe_invert(zi, p->z);
    colibri_fe_mul(x, p->x, zi);
    colibri_fe_mul(y, p->y, zi);
    colibri_fe_pack(out, y);
    out[31] ^= (uint8_t)(colibri_fe_parity(x) << 7);
}

/* 1 if the 32 little-endian bytes of y (top bit cleared) are >= p. */
static int y_not_canonical(const uint8_t in[32])
{
    if ((in[31] & 0x7f) != 0x7f || in[0] < 0xed) {
        return 0;
    }
    for (int i = 1; i < 31; i++) {
        if (in[i] != 0xff) {
            return 0;
        }
    }
    return 1;
}

/* RFC 8032 5.1.3: y, then x from x^2 = (y^2 - 1) / (d y^2 + 1) and the sign
 * bit. Returns 0 when the encoding is not a point. */
static int point_decode(point *p, const uint8_t in[32])
{
    colibri_fe u, v, v3, check, one;
    if (y_not_canonical(in)) {
        return 0;
    }
    colibri_fe_set_small(one, 1);
    colibri_fe_unpack(p->y, in);
    colibri_fe_set_small(p->z, 1);
    colibri_fe_sq(u, p->y);
    colibri_fe_mul(v, u, curve_d);
    colibri_fe_sub(u, u, one);
    colibri_fe_add(v, v, one);
    /* x = u v^3 (u v^7)^((p-5)/8) */
    colibri_fe_sq(v3, v);
    colibri_fe_mul(v3, v3, v);
    colibri_fe_sq(p->x, v3);
    colibri_fe_mul(p->x, p->x, v);
    colibri_fe_mul(p->x, p->x, u);
    colibri_fe_pow_p58(p->x, p->x);
    colibri_fe_mul(p->x, p->x, v3);
    colibri_fe_mul(p->x, p->x, u);
    colibri_fe_sq(check, p->x);
    colibri_fe_mul(check, check, v);
    if (!colibri_fe_equal(check, u)) {
        colibri_fe_mul(p->x, p->x, sqrt_m1);
        colibri_fe_sq(check, p->x);
        colibri_fe_mul(check, check, v);
        if (!colibri_fe_equal(check, u)) {
            return 0;
        }
    }
    int sign = in[31] >> 7;
    colibri_fe zero;
    colibri_fe_set_small(zero, 0);
    if (colibri_fe_equal(p->x, zero) && sign) {
        return 0;
    }
    if (colibri_fe_parity(p->x) != sign) {
        colibri_fe_sub(p->x, zero, p->x);
    }
    colibri_fe_mul(p->t, p->x, p->y);
    return 1;
}

/* 1 if 8 p is the identity (p has order 1, 2, 4 or 8). */
static int small_order(const point *p)
{
    point q = *p;
    colibri_fe zero;
    for (int i = 0; i < 3; i++) {
        point r = q;
        point_add(&q, &r);
    }
    colibri_fe_set_small(zero, 0);
    return colibri_fe_equal(q.x, zero) && colibri_fe_equal(q.y, q.z);
}

/* 1 if the 32-byte little-endian s is below L. */
static int scalar_canonical(const uint8_t s[32])
{
    for (int i = 31; i >= 0; i--) {
        if (s[i] != group_order[i]) {
            return s[i] < group_order[i];
        }
    }
    return 0;
}

/* out = the 64-byte little-endian x mod L. Limbs are bytes held in int64;
 * byte i >= 32 has weight 2^(8 i) = 16 * 2^(8 (i - 32)) * 2^252, and
 * 2^252 = -(L - 2^252) mod L, so it folds into bytes i-32 .. i-12. */
static void scalar_reduce(uint8_t out[32], const uint8_t in[64])
{
    int64_t x[64];
    for (int i = 0; i < 64; i++) {
        x[i] = in[i];
    }
    for (int i = 63; i >= 32; i--) {
        int64_t c = 0;
        for (int j = i - 32; j < i - 12; j++) {
            x[j] += c - 16 * x[i] * group_order[j - (i - 32)];
            c = (x[j] + 128) >> 8;
            x[j] -= c * 256;
        }
        x[i - 12] += c;
        x[i] = 0;
    }
    /* Now |x| < 2^257 in bytes 0..31 (byte 31 may be large): subtract
     * (byte 31 >> 4) L, then carry. */
    int64_t c = 0;
    for (int j = 0; j < 32; j++) {
        x[j] += c - (x[31] >> 4) * group_order[j];
        c = x[j] >> 8;
        x[j] &= 255;
    }
    for (int j = 0; j < 32; j++) {
        x[j] -= c * group_order[j];
    }
    for (int j = 0; j < 32; j++) {
        x[j + 1] += x[j] >> 8;
        out[j] = (uint8_t)(x[j] & 255);
    }
}

static int scalar_bit(const uint8_t s[32], int i)
{
    return (s[i >> 3] >> (i & 7)) & 1;
}

/* r = [s] B + [k] a, bit by bit from the top (Straus). */
static void double_scalar_mul(point *r, const uint8_t s[32], const uint8_t k[32], const point *a)
{
    point table[4];
    point_identity(&table[0]);
    colibri_fe_copy(table[1].x, base_x);
    colibri_fe_copy(table[1].y, base_y);
    colibri_fe_set_small(table[1].z, 1);
    colibri_fe_copy(table[1].t, base_t);
    table[2] = *a;
    table[3] = table[1];
    point_add(&table[3], a);
    point_identity(r);
    for (int i = 255; i >= 0; i--) {
        point twice = *r;
        point_add(r, &twice);
        int pick = scalar_bit(s, i) | (scalar_bit(k, i) << 1);
        if (pick != 0) {
            point_add(r, &table[pick]);
        }
    }
}

colibri_status colibri_ed25519_verify(const uint8_t signature[64], const uint8_t public_key[32],
                                      const void *message, size_t size)
{
    point a, r, check;
    uint8_t digest[64];
    uint8_t k[32];
    uint8_t encoded[32];
    colibri_sha512_ctx hash;
    if (signature == NULL || public_key == NULL || (message == NULL && size > 0)) {
        return COLIBRI_E_BAD_ARGUMENT;
    }
    if (!point_decode(&a, public_key) || small_order(&a)) {
        return COLIBRI_E_BAD_KEY;
    }
    if (!scalar_canonical(signature + 32) || !point_decode(&r, signature) || small_order(&r)) {
        return COLIBRI_E_SIGNATURE;
    }
    colibri_sha512_init(&hash);
    colibri_sha512_update(&hash, signature, 32);
    colibri_sha512_update(&hash, public_key, 32);
    colibri_sha512_update(&hash, message, size);
    colibri_sha512_final(&hash, digest);
    scalar_reduce(k, digest);
    /* [S] B == R + [k] A  <=>  [S] B + [k] (-A) encodes as R. */
    point_negate(&a);
    double_scalar_mul(&check, signature + 32, k, &a);
    point_encode(encoded, &check);
    return colibri_bytes_equal(encoded, signature, 32) ? COLIBRI_OK : COLIBRI_E_SIGNATURE;
}
