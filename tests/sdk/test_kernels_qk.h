/*
 * test_kernels_qk.h - the super-block products (matmat_qk, format 1.15,
 * docs/format.md 3.5, and matmat_qkr16, 1.16, 3.6) of every table against
 * the contract written out once more: the test keeps each weight's level,
 * each block's scale and min and each super-block's d and dmin, packs them
 * as the format says (its own packer, not the core's; the R16 tiles from the
 * rows by 3.6's table), and computes the dot from the unpacked values.
 * Included by test_kernels.c after its activation helpers.
 */

enum { QK_SUPER = 256, QK_SUB = 8, QK_MAX_SB = (Q_MAX_COLS + QK_SUPER - 1) / QK_SUPER };

typedef struct qkweights {
    uint32_t bits, rows, cols, nsb;
    uint8_t level[Q_ROWS][QK_MAX_SB * QK_SUPER];
    uint8_t scale[Q_ROWS][QK_MAX_SB * QK_SUB], min[Q_ROWS][QK_MAX_SB * QK_SUB];
    uint16_t d[Q_ROWS][QK_MAX_SB], dmin[Q_ROWS][QK_MAX_SB];
} qkweights;

static qkweights qk_w;
/* The packed super-blocks go where test_kernels.c packs its blocks. */
#define qk_packed q_packed
_Static_assert(sizeof q_packed >= (Q_ROWS + G - 1) / G * G * QK_MAX_SB * (16u + 32u * 6u) + 1u,
               "room to pack");
static uint8_t qk_by_row[Q_ROWS * QK_MAX_SB * (16u + 32u * 6u)];

/* Levels at random with the extremes 0 and 2^bits - 1 among them, scales and
 * mins 0 .. 63 (0 and 63 too), d and dmin as scale_of gives (extremes too);
 * zeros past cols (what a converter writes). */
static void qkweights_fill(qkweights *w, uint32_t bits, uint32_t cols, int scales)
{
    uint32_t top = (1u << bits) - 1u;
    w->bits = bits, w->rows = Q_ROWS, w->cols = cols, w->nsb = (cols + QK_SUPER - 1) / QK_SUPER;
    for (uint32_t r = 0; r < Q_ROWS; r++) {
        for (uint32_t i = 0; i < w->nsb * QK_SUPER; i++) {
            uint32_t v = i % 29u == 3u ? top : i % 31u == 4u ? 0u : next_u16() & top;
            w->level[r][i] = (uint8_t)(i < cols ? v : 0u);
        }
        for (uint32_t j = 0; j < w->nsb * QK_SUB; j++) {
            int live = j * QK < cols;
            w->scale[r][j] = (uint8_t)(live ? (j % 5u == 1u ? 63u : next_u16() & 63u) : 0u);
            w->min[r][j] = (uint8_t)(live ? (j % 7u == 2u ? 63u : next_u16() & 63u) : 0u);
        }
        for (uint32_t s = 0; s < w->nsb; s++) {
            w->d[r][s] = scale_of(scales, r, s);
            w->dmin[r][s] = scale_of(scales, r + 1u, s + 2u);
        }
    }
}

/* Element e of block j in a part of `width` bits a level (1, 2 or 4: the
 * blocks interleaved): byte 32 (width j div 8) + e, shift width j mod 8. */
static void qk_put(uint8_t *part, uint32_t width, uint32_t j, uint32_t e, uint32_t value)
{
    uint32_t byte = 32u * (width * j / 8u) + e, shift = width * j % 8u;
    part[byte] = (uint8_t)(part[byte] | value << shift);
}

static void qk_pack(uint8_t *out, const qkweights *w)
{
    uint32_t bits = w->bits, low = bits <= 3u ? 2u : 4u, bytes = 16u + 32u * bits;
    memset(out, 0, (size_t)w->rows * w->nsb * bytes);
    for (uint32_t r = 0; r < w->rows; r++) {
        for (uint32_t s = 0; s < w->nsb; s++) {
            uint8_t *sb = out + ((size_t)r * w->nsb + s) * bytes;
            sb[0] = (uint8_t)w->d[r][s], sb[1] = (uint8_t)(w->d[r][s] >> 8);
            sb[2] = (uint8_t)w->dmin[r][s], sb[3] = (uint8_t)(w->dmin[r][s] >> 8);
            for (uint32_t j = 0; j < QK_SUB; j++) {
                uint32_t sc = w->scale[r][s * QK_SUB + j], mn = w->min[r][s * QK_SUB + j];
                sb[4 + j] = (uint8_t)(sc | (mn & 3u) << 6);
                sb[12 + j % 4u] = (uint8_t)(sb[12 + j % 4u] | (mn >> 2) << (j < 4u ? 0u : 4u));
                for (uint32_t e = 0; e < QK; e++) {
                    uint32_t v = w->level[r][s * QK_SUPER + j * QK + e];
                    qk_put(sb + 16u, low, j, e, v & ((1u << low) - 1u));
                    if (bits > low) {
                        qk_put(sb + 16u + 32u * low, bits - low, j, e, v >> low);
                    }
                }
            }
        }
    }
}

/* docs/format.md 3.6's table: byte p of row i's super-block in its tile. */
static uint32_t qk_tile_byte(uint32_t p, uint32_t i)
{
    if (p < 4u) {
        return p < 2u ? 2u * i + p : 32u + 2u * i + p - 2u;
    }
    if (p < 16u) {
        return 64u + 16u * (p - 4u) + i;
    }
    uint32_t u = (p - 16u) / 4u, t = (p - 16u) % 4u;
    return 256u + 64u * u + 4u * i + t;
}

/* The rows (packed by qk_pack) in groups of 16, a tile per super-block;
 * padding rows zero. */
static void qk_pack_r16(uint8_t *out, const qkweights *w)
{
    uint32_t bytes = 16u + 32u * w->bits, groups = (w->rows + G - 1u) / G;
    qk_pack(qk_by_row, w);
    memset(out, 0, (size_t)groups * G * w->nsb * bytes);
    for (uint32_t r = 0; r < w->rows; r++) {
        for (uint32_t s = 0; s < w->nsb; s++) {
            const uint8_t *sb = qk_by_row + ((size_t)r * w->nsb + s) * bytes;
            uint8_t *tile = out + ((size_t)(r / G) * w->nsb + s) * G * bytes;
            for (uint32_t p = 0; p < bytes; p++) {
                tile[qk_tile_byte(p, r % G)] = sb[p];
            }
        }
    }
}

/* Per block of 32 in order (none of a row's padding): acc = fmaf(isum,
 * (d * sc) * d_x, acc), then acc = fmaf(-xsum, (dmin * m) * d_x, acc). */
static float spec_qkdot(const qkweights *w, uint32_t r, const float *d, const int8_t *q)
{
    float acc = 0.0f;
    for (uint32_t b = 0; b * QK < w->cols; b++) {
        int64_t isum = 0, xsum = 0;
        for (uint32_t i = 0; i < QK; i++) {
            isum += (int64_t)w->level[r][b * QK + i] * q[b * QK + i];
            xsum += q[b * QK + i];
        }
        float scale = spec_half(w->d[r][b / QK_SUB]) * (float)w->scale[r][b];
        float min = spec_half(w->dmin[r][b / QK_SUB]) * (float)w->min[r][b];
        acc = fmaf((float)isum, scale * d[b], acc);
        acc = fmaf((float)-xsum, min * d[b], acc);
    }
    return acc;
}

static void test_qk_matmat(const colibri_kernels *k, int layout, uint32_t bits, uint32_t cols,
                           int akind, uint32_t shift)
{
    qkweights_fill(&qk_w, bits, cols, akind % 2);
    (layout == R16 ? qk_pack_r16 : qk_pack)(qk_packed + shift, &qk_w);
    check_quantizer(cols, akind);
    for (uint32_t t = 0; t < Q_TOKENS; t++) {
        for (uint32_t r = 0; r < Q_ROWS; r++) {
            q_spec[t * Q_OUT_STRIDE + r] = spec_qkdot(&qk_w, r, q_d[t], q_q[t]);
        }
    }
    int ok = 1;
    for (size_t ri = 0; ri < sizeof q_rows / sizeof q_rows[0]; ri++) {
        for (size_t ti = 0; ti < sizeof q_tokens / sizeof q_tokens[0]; ti++) {
            uint32_t rows = q_rows[ri], n = q_tokens[ti];
            q_expect(rows, n);
            (layout == R16 ? k->matmat_qkr16 : k->matmat_qk)(got, Q_OUT_STRIDE, qk_packed + shift,
                                                             q_blocks, rows, cols, n, bits);
            ok = ok && same(got, want, Q_TOKENS * Q_OUT_STRIDE);
        }
    }
    char slot[16];
    snprintf(slot, sizeof slot, "matmat_qk%s%u", layout == R16 ? "r16_" : "", (unsigned)bits);
    check(ok, k, slot, cols, shift, akind);
}

/* Columns: a part block, one super-block and a bit, a part last super-block,
 * and (the tables that decode in chunks) 2080. Every activation kind runs
 * with 3 bits (a low part of 2 and a high part of 1: both unpack paths);
 * the other widths with ordinary and extreme scales (kinds 0 and 1), which
 * is where they differ: the test's time on the emulated CPUs. */
static const uint32_t qk_cols[] = {1, 257, 1000, 2080};

static void test_qk(const colibri_kernels *k, int layout)
{
    size_t cases = sizeof qk_cols / sizeof qk_cols[0] - (q_col_cases(k) < 13u);
    for (size_t c = 0; c < cases; c++) {
        for (uint32_t bits = 2; bits <= 6u; bits++) {
            int kinds = bits == 3u ? Q_ACT_KINDS : 2;
            for (int akind = 0; akind < kinds; akind++) {
                test_qk_matmat(k, layout, bits, qk_cols[c], akind, (uint32_t)(c % 2u));
            }
        }
    }
}
