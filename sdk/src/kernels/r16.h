/*
 * r16.h - the walk over a matrix stored in groups of 16 rows (Q8_R16,
 * Q4_R16: colibri.h, docs/format.md 3.4), written once for every table with
 * R16 products: the bytes of a tile (block b of a group's 16 rows), where a
 * group starts, and the loop that hands each group to the table's pass with
 * the tokens the pass takes. The group stays in cache while the tokens pass.
 */
#ifndef COLIBRI_KERNELS_R16_H
#define COLIBRI_KERNELS_R16_H

#include "colibri.h"
#include "quant.h"

enum { COLIBRI_R16_ROWS = 16 };

static inline size_t colibri_r16_tile_bytes(int q4)
{
    return COLIBRI_R16_ROWS * (q4 ? COLIBRI_Q4_BLOCK_BYTES : COLIBRI_Q8_BLOCK_BYTES);
}

/* The group that holds row r (r a multiple of 16): nb tiles of tile_bytes. */
static inline const uint8_t *colibri_r16_group(const uint8_t *w, uint32_t r, uint32_t nb,
                                               size_t tile_bytes)
{
    return w + (size_t)(r / COLIBRI_R16_ROWS) * nb * tile_bytes;
}

/* A table's pass: the first tokens of x (tokens_left of them, nb blocks
 * each) through one group, out[t * stride + row]; returns how many tokens
 * it took (at least one). rows_left counts the rows from the group's first
 * (its padding rows, past the matrix, are not written). */
typedef uint32_t colibri_r16_pass(float *out, size_t stride, const uint8_t *group,
                                  size_t tile_bytes, const colibri_qblock *x, uint32_t nb,
                                  uint32_t rows_left, uint32_t tokens_left, int q4);

/* Every group of the matrix, each with all n tokens, pass after pass.
 * Inlined into the table's product, where pass is a constant. */
static inline __attribute__((always_inline)) void
colibri_r16_walk(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                 uint32_t rows, uint32_t cols, uint32_t n, int q4, colibri_r16_pass *pass)
{
    uint32_t nb = colibri_qblocks(cols);
    size_t tile_bytes = colibri_r16_tile_bytes(q4);
    for (uint32_t r = 0; r < rows; r += COLIBRI_R16_ROWS) {
        const uint8_t *group = colibri_r16_group(w, r, nb, tile_bytes);
        for (uint32_t t = 0; t < n;) {
            t += pass(out + t * stride + r, stride, group, tile_bytes, x + (size_t)t * nb, nb,
                      rows - r, n - t, q4);
        }
    }
}

/* QK_R16 tiles (format 1.16): with a high part (3, 5, 6 bits) a tile's lines
 * are read out of order (the high part's chunks, past the low part's, with
 * every block), which the hardware prefetcher of the Zen 4 host does not
 * follow from DRAM: qk3 took 3.5x as long a block from DRAM as from cache.
 * So blocks j0 .. j0 + k - 1 of a tile ask for their eighths of the tile's
 * bytes COLIBRI_QKR16_PREFETCH bytes ahead: spread over the blocks, not a
 * burst a tile, so that the line fill buffers stay free for the loads. A
 * low part alone is read in order, which the hardware follows better than
 * any hint. Prefetches past the matrix are hints, never faults. */
enum { COLIBRI_QKR16_PREFETCH = 6144 };

static inline __attribute__((always_inline)) void
colibri_qkr16_prefetch(const uint8_t *tile, uint32_t bits, uint32_t j0, uint32_t k)
{
    size_t part = 2u * COLIBRI_QK_BYTES(bits); /* an eighth of the tile */
    if (bits == 2u || bits == 4u) {
        return;
    }
    for (size_t at = j0 * part; at < (j0 + k) * part; at += 64u) {
        __builtin_prefetch(tile + COLIBRI_QKR16_PREFETCH + at);
    }
}

#endif
