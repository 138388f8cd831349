/*
 * cache.c - L1 caches of the Cortex-M7 and Cortex-M55.
 *
 * Both caches are enabled when the core has them (CLIDR): the instruction
 * cache is always safe (no code is written at run time), and so is the data
 * cache in this port, because no other bus master (DMA, a second core)
 * shares memory with the CPU: the weights are read-only and written only
 * before boot, the UARTs are device memory (never cached). A port that adds
 * DMA must clean/invalidate around it. QEMU models no caches: CLIDR reads 0
 * there, or the maintenance operations do nothing.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define CLIDR_L1_INSTRUCTION 0x1u /* Ctype1 bit 0: separate instruction cache */
#define CLIDR_L1_DATA 0x6u        /* Ctype1 0b010 data, 0b011 split, 0b100 unified */

static void instruction_cache_enable(void)
{
    cm_dsb();
    cm_isb();
    CM_REG(CM_ICIALLU_ADDR) = 0;
    cm_dsb();
    cm_isb();
    CM_REG(CM_CCR_ADDR) |= CM_CCR_IC;
    cm_dsb();
    cm_isb();
}

/* Invalidate every line of the L1 data cache by set and way, then enable it. */
static void data_cache_enable(void)
{
    CM_REG(CM_CSSELR_ADDR) = 0; /* level 1, data */
    cm_dsb();
    uint32_t ccsidr = CM_REG(CM_CCSIDR_ADDR);
    uint32_t sets = ((ccsidr >> 13) & 0x7FFFu) + 1u;
    uint32_t ways = ((ccsidr >> 3) & 0x3FFu) + 1u;
    uint32_t line_shift = (ccsidr & 0x7u) + 4u;
    uint32_t way_shift = ways > 1u ? (uint32_t)__builtin_clz(ways - 1u) : 0u;
    for (uint32_t set = 0; set < sets; set++) {
        for (uint32_t way = 0; way < ways; way++) {
            CM_REG(CM_DCISW_ADDR) = (way << way_shift) | (set << line_shift);
        }
    }
    cm_dsb();
    CM_REG(CM_CCR_ADDR) |= CM_CCR_DC;
    cm_dsb();
    cm_isb();
}

void cm_caches_enable(void)
{
    uint32_t level1 = CM_REG(CM_CLIDR_ADDR) & 0x7u;
    if ((level1 & CLIDR_L1_INSTRUCTION) != 0u && (CM_REG(CM_CCR_ADDR) & CM_CCR_IC) == 0u) {
        instruction_cache_enable();
    }
    if ((level1 & CLIDR_L1_DATA) != 0u && (CM_REG(CM_CCR_ADDR) & CM_CCR_DC) == 0u) {
        data_cache_enable();
    }
}
