/*
 * colibri_qbench_m.c - instructions per block of the quantized products on
 * a Cortex-M QEMU board (the tables its firmware has, and the reference),
 * counted with SysTick under QEMU's -icount (docs/kernels.md):
 *
 *   make build/qemu_an547/colibri-qbench.elf
 *   qemu-system-arm -M mps3-an547 -cpu cortex-m55 -m 2G -icount shift=0 \
 *       -semihosting -display none -serial null -kernel build/qemu_an547/colibri-qbench.elf
 *
 * A 256 x 1024 matrix (Q8 and Q4, by row and in groups of 16 rows: R16;
 * then the super-blocks QK2 .. QK6, by row and R16), 1 token (decode) and 4 (prompt); one
 * line per (table, dtype, layout, tokens): SysTick ticks per block of 32 weights and token, and the
 * output's FNV-1a digest (equal across tables). Under
 * -icount shift=0 a 32 MHz SysTick tick is 31.25 instructions (the AN547's
 * board file). Built with kernels_m's start (tests/ports/cortex_m).
 */
#include <stdint.h>
#include <stdio.h>

#include "colibri.h"
#include "quant.h"

#ifndef COLIBRI_BENCH_TABLES
#define COLIBRI_BENCH_TABLES &colibri_kernels_reference,
#endif

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

enum { ROWS = 256, COLS = 1024, NB = COLS / 32, TOKENS = 4 };

static const colibri_kernels *const tables[] = {COLIBRI_BENCH_TABLES};
static uint8_t weights[ROWS * NB * 34];
static colibri_qblock acts[TOKENS * NB];
static float out[TOKENS * ROWS], xf[COLS];
static uint32_t rng = 2463534242u;

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static uint32_t digest(const float *v, uint32_t n)
{
    uint32_t h = 2166136261u;
    const uint8_t *p = (const uint8_t *)v;
    for (uint32_t i = 0; i < n * 4u; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

typedef void matmat_q(float *out, size_t stride, const uint8_t *w, const colibri_qblock *x,
                      uint32_t rows, uint32_t cols, uint32_t n);

static matmat_q *slot(const colibri_kernels *k, int q4, int r16)
{
    if (r16) {
        return q4 ? k->matmat_q4r16 : k->matmat_q8r16;
    }
    return q4 ? k->matmat_q4 : k->matmat_q8;
}

/* Random quants; every block scale a normal binary16 (by row: a block's
 * first two bytes; R16: a tile's first 16 x 2). */
static void fill(int q4, int r16)
{
    uint32_t block_bytes = q4 ? 18u : 34u;
    for (uint32_t i = 0; i < sizeof weights; i++) {
        weights[i] = (uint8_t)next_u32();
    }
    uint32_t scales = r16 ? 16u : 1u;
    for (uint32_t b = 0; b < ROWS * NB / scales; b++) {
        uint8_t *at = weights + b * block_bytes * scales;
        for (uint32_t i = 0; i < scales; i++) {
            uint16_t h = (uint16_t)(0x2000u + (next_u32() & 0x3FFu));
            at[2 * i] = (uint8_t)h, at[2 * i + 1] = (uint8_t)(h >> 8);
        }
    }
}

/* Random super-blocks of `bits` bits, each d and dmin a normal binary16 (by
 * row: a super-block's first 2 x 2 bytes; R16: a tile's first 16 x 4). */
static void fill_qk(uint32_t bits, int r16)
{
    uint32_t g = r16 ? 16u : 1u, bytes = g * COLIBRI_QK_BYTES(bits);
    for (uint32_t i = 0; i < sizeof weights; i++) {
        weights[i] = (uint8_t)next_u32();
    }
    for (uint32_t s = 0; s < ROWS * COLS / COLIBRI_QK_BLOCK / g; s++) {
        for (uint32_t i = 0; i < 2u * g; i++) {
            uint16_t h = (uint16_t)(0x2000u + (next_u32() & 0x3FFu));
            weights[s * bytes + 2u * i] = (uint8_t)h,
                                     weights[s * bytes + 2u * i + 1u] = (uint8_t)(h >> 8);
        }
    }
}

static uint32_t ticks_qk(const colibri_kernels *k, uint32_t n, uint32_t bits, int r16)
{
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 5u;
    uint32_t start = SYST_CVR;
    (r16 ? k->matmat_qkr16 : k->matmat_qk)(out, ROWS, weights, acts, ROWS, COLS, n, bits);
    uint32_t end = SYST_CVR;
    SYST_CSR = 0;
    return (start - end) & 0x00FFFFFFu;
}

static void report(const char *table, const char *dtype, uint32_t n, uint32_t tk)
{
    printf("table=%s dtype=%s tokens=%u ticks_per_block=%u.%02u digest=%08x\n", table, dtype,
           (unsigned)n, (unsigned)(tk / (ROWS * NB * n)),
           (unsigned)(tk * 100u / (ROWS * NB * n) % 100u), (unsigned)digest(out, n * ROWS));
}

/* SysTick ticks of one product (a 24-bit down counter on the CPU clock). */
static uint32_t ticks(matmat_q *product, uint32_t n)
{
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 5u; /* enable, processor clock, no interrupt */
    uint32_t start = SYST_CVR;
    product(out, ROWS, weights, acts, ROWS, COLS, n);
    uint32_t end = SYST_CVR;
    SYST_CSR = 0;
    return (start - end) & 0x00FFFFFFu;
}

int main(void)
{
    for (uint32_t t = 0; t < TOKENS; t++) {
        for (uint32_t i = 0; i < COLS; i++) {
            xf[i] = (float)(int32_t)next_u32() / 2147483648.0f;
        }
        colibri_quantize_row(acts + t * NB, xf, COLS);
    }
    for (int layout = 0; layout < 4; layout++) {
        int q4 = layout & 1, r16 = layout >> 1;
        fill(q4, r16);
        for (uint32_t n = 1; n <= TOKENS; n += TOKENS - 1u) {
            for (uint32_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
                if (slot(tables[i], q4, r16) == NULL) {
                    continue;
                }
                uint32_t tk = ticks(slot(tables[i], q4, r16), n);
                report(tables[i]->name, q4 ? (r16 ? "q4r16" : "q4") : (r16 ? "q8r16" : "q8"), n,
                       tk);
            }
        }
    }
    _Static_assert(sizeof weights >= ROWS * (COLS / COLIBRI_QK_BLOCK) * COLIBRI_QK_BYTES(6u),
                   "room for QK6");
    for (uint32_t layout = 0; layout < 10u; layout++) {
        uint32_t bits = 2u + layout % 5u;
        int r16 = layout >= 5u;
        char dtype[8] = {'q', 'k', (char)('0' + bits), r16 ? 'r' : 0, '1', '6', 0};
        fill_qk(bits, r16);
        for (uint32_t n = 1; n <= TOKENS; n += TOKENS - 1u) {
            for (uint32_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
                if ((r16 ? tables[i]->matmat_qkr16 : tables[i]->matmat_qk) != NULL) {
                    report(tables[i]->name, dtype, n, ticks_qk(tables[i], n, bits, r16));
                }
            }
        }
    }
    return 0;
}
