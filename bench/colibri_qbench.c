/*
 * colibri_qbench.c - speed of the quantized products (matmat_q8, matmat_q4,
 * the same blocks in groups of 16 rows: matmat_q8r16, matmat_q4r16, and the
 * super-blocks of matmat_qk at 2 .. 6 bits: qk2 .. qk6, and in groups of 16
 * rows: matmat_qkr16, qk2r16 .. qk6r16) of every kernel table this CPU
 * runs, on one thread, against the reference:
 *
 *   colibri-qbench [--rows R] [--cols C] [--tokens N] [--reps K]
 *
 * Random weights (rows x cols, default 1024 x 4096) and activations (N
 * tokens, default 1: a decode matvec; N > 1: a prompt chunk). Each
 * (table, dtype) runs K times (default 20, at least 0.2 s) and the fastest
 * run counts (the machine is shared). One line each:
 *   table=T dtype=q8 tokens=N ns_per_block=X weights_gb_per_s=Y speedup=Z digest=D
 * ns_per_block: per block of 32 weights and token; weights_gb_per_s: weight
 * bytes per second (decode's figure: what memory must deliver); speedup: the
 * reference's time over this table's; digest: FNV-1a of the output bits,
 * the same on every line of a dtype and of its r16 twin (the tables and the
 * layouts agree bit for bit); a qk line's block is a block of 32 of its
 * super-blocks (its bytes: 1/8 of one). First,
 * the activation quantizer's ns per block of 32 (every product runs it once
 * per token, whatever the table).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri_linux.h"
#include "quant.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t rng = 2463534242u;

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* Random blocks: scales of about 2^-7 (binary16), values over the range. */
static void fill_weights(uint8_t *w, size_t blocks, size_t block_bytes)
{
    for (size_t b = 0; b < blocks; b++) {
        uint8_t *blk = w + b * block_bytes;
        uint16_t h = (uint16_t)(0x2000u + (next_u32() & 0x3FFu));
        blk[0] = (uint8_t)h, blk[1] = (uint8_t)(h >> 8);
        for (size_t i = 2; i < block_bytes; i++) {
            blk[i] = (uint8_t)next_u32();
        }
    }
}

static uint64_t digest(const float *v, size_t n)
{
    uint64_t h = 1469598103934665603u;
    const uint8_t *p = (const uint8_t *)v;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        h = (h ^ p[i]) * 1099511628211u;
    }
    return h;
}

/* The blocks of rows x nb (row after row) in groups of 16 rows (colibri.h,
 * COLIBRI_QGROUP_ROWS); padding rows zero. */
static void pack_r16(uint8_t *dst, const uint8_t *src, size_t rows, size_t nb, size_t block_bytes)
{
    size_t g_rows = COLIBRI_QGROUP_ROWS, tile = g_rows * block_bytes;
    memset(dst, 0, (rows + g_rows - 1) / g_rows * nb * tile);
    for (size_t r = 0; r < rows; r++) {
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + (r * nb + b) * block_bytes;
            uint8_t *t = dst + ((r / g_rows) * nb + b) * tile;
            size_t i = r % g_rows;
            t[2 * i] = blk[0], t[2 * i + 1] = blk[1];
            for (size_t e = 0; e + 2 < block_bytes; e++) {
                t[32 + 64 * (e / 4) + 4 * i + e % 4] = blk[2 + e];
            }
        }
    }
}

typedef void (*qmatmat_fn)(float *, size_t, const uint8_t *, const colibri_qblock *, uint32_t,
                           uint32_t, uint32_t);
typedef void (*qkmatmat_fn)(float *, size_t, const uint8_t *, const colibri_qblock *, uint32_t,
                            uint32_t, uint32_t, uint32_t);

/* Random super-blocks: d and dmin of about 2^-7 (binary16), the rest random. */
static void fill_superblocks(uint8_t *w, size_t count, uint32_t bits)
{
    for (size_t s = 0; s < count; s++) {
        uint8_t *sb = w + s * COLIBRI_QK_BYTES(bits);
        for (size_t i = 0; i < COLIBRI_QK_BYTES(bits); i++) {
            sb[i] = (uint8_t)next_u32();
        }
        for (size_t i = 0; i < 4; i += 2) {
            uint16_t h = (uint16_t)(0x2000u + (next_u32() & 0x3FFu));
            sb[i] = (uint8_t)h, sb[i + 1] = (uint8_t)(h >> 8);
        }
    }
}

/* The super-blocks of rows x nsb (row after row, bits bits) in groups of 16
 * rows (docs/format.md 3.6: colibri_qk_r16_offset); padding rows zero. */
static void pack_qk_r16(uint8_t *dst, const uint8_t *src, size_t rows, size_t nsb, uint32_t bits)
{
    size_t g_rows = COLIBRI_QGROUP_ROWS, bytes = COLIBRI_QK_BYTES(bits), tile = g_rows * bytes;
    memset(dst, 0, (rows + g_rows - 1) / g_rows * nsb * tile);
    for (size_t r = 0; r < rows; r++) {
        for (size_t s = 0; s < nsb; s++) {
            const uint8_t *sb = src + (r * nsb + s) * bytes;
            uint8_t *t = dst + ((r / g_rows) * nsb + s) * tile;
            for (uint32_t p = 0; p < bytes; p++) {
                t[colibri_qk_r16_offset(p, (uint32_t)(r % g_rows))] = sb[p];
            }
        }
    }
}

/* Fastest of reps runs of a super-block product (and of 0.2 s more), in ns. */
static uint64_t best_time_qk(qkmatmat_fn f, float *out, const uint8_t *w, const colibri_qblock *x,
                             uint32_t rows, uint32_t cols, uint32_t n, uint32_t bits, int reps)
{
    uint64_t best = UINT64_MAX, start = now_ns();
    for (int k = 0; k < reps || now_ns() - start < 200000000u; k++) {
        uint64_t t0 = now_ns();
        f(out, rows, w, x, rows, cols, n, bits);
        uint64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* Fastest of reps runs (and of as many more as 0.2 s takes), in ns. */
static uint64_t best_time(qmatmat_fn f, float *out, const uint8_t *w, const colibri_qblock *x,
                          uint32_t rows, uint32_t cols, uint32_t n, int reps)
{
    uint64_t best = UINT64_MAX, start = now_ns();
    for (int k = 0; k < reps || now_ns() - start < 200000000u; k++) {
        uint64_t t0 = now_ns();
        f(out, rows, w, x, rows, cols, n);
        uint64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static int arg_u32(int argc, char **argv, const char *name, uint32_t fallback)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return atoi(argv[i + 1]);
        }
    }
    return (int)fallback;
}

/* The qk2 .. qk6 lines: each table's matmat_qk, then the qk2r16 .. qk6r16
 * lines: its matmat_qkr16 on the same super-blocks in groups of 16 rows (a
 * NULL slot is the reference's, not printed again). */
static void bench_superblocks(const char *const *order, int n_tables, const colibri_qblock *x,
                              float *out, uint32_t rows, uint32_t cols, uint32_t n, int reps)
{
    size_t count = (size_t)rows * ((cols + COLIBRI_QK_BLOCK - 1u) / COLIBRI_QK_BLOCK);
    size_t blocks = (size_t)rows * colibri_qblocks(cols);
    size_t nsb = (cols + COLIBRI_QK_BLOCK - 1u) / COLIBRI_QK_BLOCK;
    uint8_t *w = malloc(count * COLIBRI_QK_BYTES(6u));
    uint8_t *w16 = malloc(((size_t)rows + 15u) / 16u * 16u * nsb * COLIBRI_QK_BYTES(6u));
    if (w == NULL || w16 == NULL) {
        fprintf(stderr, "colibri-qbench: out of memory\n");
        free(w), free(w16);
        return;
    }
    for (uint32_t variant = 0; variant < 10u; variant++) {
        uint32_t bits = 2u + variant % 5u, r16 = variant / 5u;
        uint64_t reference_ns = 0;
        rng = 2463534242u + bits; /* the r16 twin gets the same super-blocks */
        fill_superblocks(w, count, bits);
        if (r16) {
            pack_qk_r16(w16, w, rows, nsb, bits);
        }
        for (int i = 0; i < n_tables; i++) {
            const colibri_kernels *k = colibri_linux_kernels(order[i]);
            qkmatmat_fn f = k == NULL ? NULL : r16 ? k->matmat_qkr16 : k->matmat_qk;
            if (f == NULL) {
                continue;
            }
            uint64_t ns = best_time_qk(f, out, r16 ? w16 : w, x, rows, cols, n, bits, reps);
            reference_ns = i == 0 ? ns : reference_ns;
            printf("table=%s dtype=qk%u%s tokens=%u ns_per_block=%.3f weights_gb_per_s=%.2f "
                   "speedup=%.2f digest=%016llx\n",
                   order[i], (unsigned)bits, r16 ? "r16" : "", (unsigned)n,
                   (double)ns / (double)(blocks * n),
                   (double)(count * COLIBRI_QK_BYTES(bits)) / (double)ns,
                   (double)reference_ns / (double)ns,
                   (unsigned long long)digest(out, (size_t)n * rows));
        }
    }
    free(w), free(w16);
}

int main(int argc, char **argv)
{
    int rows = arg_u32(argc, argv, "--rows", 1024), cols = arg_u32(argc, argv, "--cols", 4096);
    int n = arg_u32(argc, argv, "--tokens", 1), reps = arg_u32(argc, argv, "--reps", 20);
    if (rows < 1 || cols < 1 || n < 1 || n > 4096 || reps < 1) {
        fprintf(stderr,
                "colibri-qbench: --rows, --cols, --tokens (<= 4096), --reps must be >= 1\n");
        return 2;
    }
    uint32_t nb = colibri_qblocks((uint32_t)cols);
    size_t blocks = (size_t)rows * nb;
    uint8_t *w = malloc(blocks * COLIBRI_Q8_BLOCK_BYTES);
    uint8_t *w16 = malloc(((size_t)rows + 15u) / 16u * 16u * nb * COLIBRI_Q8_BLOCK_BYTES);
    float *xf = malloc((size_t)cols * sizeof(float));
    colibri_qblock *x = malloc((size_t)n * nb * sizeof *x),
                   *xs = malloc((size_t)n * nb * sizeof *x);
    float *out = malloc((size_t)n * (size_t)rows * sizeof(float));
    if (w == NULL || w16 == NULL || xf == NULL || x == NULL || xs == NULL || out == NULL) {
        fprintf(stderr, "colibri-qbench: out of memory\n");
        return 1;
    }
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < cols; i++) {
            xf[i] = (float)(int32_t)next_u32() / 2147483648.0f;
        }
        colibri_quantize_row(x + (size_t)t * nb, xf, (uint32_t)cols);
    }
    /* the activation quantizer, once per product whatever the table */
    uint64_t quant_ns = UINT64_MAX, quant_start = now_ns();
    for (int k = 0; k < reps || now_ns() - quant_start < 200000000u; k++) {
        uint64_t t0 = now_ns();
        for (int t = 0; t < n; t++) {
            colibri_quantize_row(xs + (size_t)t * nb, xf, (uint32_t)cols);
        }
        uint64_t t = now_ns() - t0;
        quant_ns = t < quant_ns ? t : quant_ns;
    }
    printf("quantize_row tokens=%d ns_per_block=%.3f\n", n,
           (double)quant_ns / (double)((size_t)n * nb));
    /* the tables built in, the reference first (the others' yardstick) */
    char names[256], *save = NULL;
    const char *order[16] = {"reference"};
    int n_tables = 1;
    colibri_linux_kernel_names(names, sizeof names);
    printf("rows=%d cols=%d tokens=%d tables: %s\n", rows, cols, n, names);
    for (char *tok = strtok_r(names, ", ", &save); tok != NULL && n_tables < 16;
         tok = strtok_r(NULL, ", ", &save)) {
        if (strcmp(tok, "reference") != 0) {
            order[n_tables++] = tok;
        }
    }
    static const char *dtype_names[4] = {"q8", "q4", "q8r16", "q4r16"};
    for (int dtype = 0; dtype < 4; dtype++) {
        int q4 = dtype % 2, r16 = dtype / 2;
        size_t block_bytes = q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES;
        uint64_t reference_ns = 0;
        rng = 2463534242u + (uint32_t)q4; /* the r16 twin gets the same blocks */
        fill_weights(w, blocks, block_bytes);
        if (r16) {
            pack_r16(w16, w, (size_t)rows, nb, block_bytes);
        }
        for (int i = 0; i < n_tables; i++) {
            const colibri_kernels *k = colibri_linux_kernels(order[i]);
            qmatmat_fn slots[4] = {0};
            if (k != NULL) {
                slots[0] = k->matmat_q8, slots[1] = k->matmat_q4;
                slots[2] = k->matmat_q8r16, slots[3] = k->matmat_q4r16;
            }
            qmatmat_fn f = slots[dtype];
            if (f == NULL) {
                continue; /* not for this CPU, or the reference's slot */
            }
            uint64_t ns = best_time(f, out, r16 ? w16 : w, x, (uint32_t)rows, (uint32_t)cols,
                                    (uint32_t)n, reps);
            reference_ns = i == 0 ? ns : reference_ns;
            printf("table=%s dtype=%s tokens=%d ns_per_block=%.3f weights_gb_per_s=%.2f "
                   "speedup=%.2f digest=%016llx\n",
                   order[i], dtype_names[dtype], n, (double)ns / (double)(blocks * (size_t)n),
                   (double)(blocks * block_bytes) / (double)ns, (double)reference_ns / (double)ns,
                   (unsigned long long)digest(out, (size_t)n * (size_t)rows));
        }
    }
    bench_superblocks(order, n_tables, x, out, (uint32_t)rows, (uint32_t)cols, (uint32_t)n, reps);
    free(w), free(w16), free(xf), free(x), free(xs), free(out);
    return 0;
}
