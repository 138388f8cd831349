/*
 * mmu.c - identity map and MMU/cache enable for the AArch64 port (mmu.h).
 *
 * Runs once from startup.S with the MMU off, so every access is to Device
 * memory: port.mk builds this file with -mstrict-align (no unaligned access)
 * and -mgeneral-regs-only (no FP/SIMD register use in startup code). The page
 * tables live in .bss, already zero.
 *
 * Translation: TTBR0_EL1 only, 4 KiB granule, T0SZ = 25 (39-bit addresses),
 * walk from level 1. A range is mapped with 2 MiB level-2 blocks where it
 * covers whole aligned blocks and with 4 KiB level-3 pages at its edges.
 */
#include <stddef.h>
#include <stdint.h>

#include "aarch64_board.h"
#include "board_config.h"
#include "mmu.h"
#include "semihosting.h"
#include "sysreg.h"

#define PAGE_SIZE 0x1000ull
#define BLOCK_SIZE 0x200000ull /* level-2 block: 2 MiB */
#define ENTRIES 512u
#define VA_BITS 39u
#define TABLE_POOL 16u /* root + level-2/3 tables: 64 KiB */

/* Stage 1 VMSAv8-64 descriptor fields, 4 KiB granule. */
#define DESC_BLOCK 1ull
#define DESC_TABLE 3ull /* also a level-3 page */
#define DESC_TYPE_MASK 3ull
#define DESC_ADDR_MASK 0x0000FFFFFFFFF000ull
#define DESC_ATTR(index) ((uint64_t)(index) << 2)
#define DESC_AP_READ_ONLY (1ull << 7)
#define DESC_SH_INNER (3ull << 8)
#define DESC_AF (1ull << 10)
#define DESC_PXN (1ull << 53)
#define DESC_UXN (1ull << 54)

/* MAIR_EL1 attribute slots. */
#define ATTR_NORMAL 0    /* 0xFF: inner/outer write-back, read/write-allocate */
#define ATTR_DEVICE 1    /* 0x04: Device-nGnRE */
#define ATTR_NONCACHED 2 /* 0x44: Normal, inner/outer non-cacheable */
#define MAIR_VALUE (0xFFull | (0x04ull << 8) | (0x44ull << 16))

#define MAP_NORMAL (DESC_ATTR(ATTR_NORMAL) | DESC_SH_INNER | DESC_AF)
#define MAP_CODE (MAP_NORMAL | DESC_AP_READ_ONLY | DESC_UXN)
#define MAP_READ_ONLY (MAP_NORMAL | DESC_AP_READ_ONLY | DESC_PXN | DESC_UXN)
#define MAP_READ_WRITE (MAP_NORMAL | DESC_PXN | DESC_UXN)
#define MAP_DEVICE (DESC_ATTR(ATTR_DEVICE) | DESC_AF | DESC_PXN | DESC_UXN)
/* The A/B slots' flash: commands are written, weights read in place (also
 * unaligned, which Device memory forbids), nothing is cached. */
#define MAP_FLASH (DESC_ATTR(ATTR_NONCACHED) | DESC_AF | DESC_PXN | DESC_UXN)

/* TCR_EL1: T0SZ 25, TTBR0 walks write-back cacheable inner shareable, 4 KiB
 * granule, TTBR1 walks disabled; IPS (bits 34:32) is filled at run time. */
#define TCR_VALUE ((64ull - VA_BITS) | (1ull << 8) | (1ull << 10) | (3ull << 12) | (1ull << 23))
#define TCR_IPS_SHIFT 32
#define IPS_MAX 5ull /* 48-bit physical addresses */

#define GIC_DIST_BYTES 0x1000ull /* GICv2 register frames actually used */
#define GIC_CPU_BYTES 0x2000ull
#define UART_BYTES 0x1000ull

/* Linker symbols (link.ld, memory.ld). */
extern char __text_start[], __text_end[], __rodata_start[], __code_image_end[];
extern char __ram_region_start[], __ram_region_end[];

static uint64_t page_tables[TABLE_POOL][ENTRIES] __attribute__((aligned(4096)));
static uint32_t tables_used = 1; /* page_tables[0] is the level-1 root */

static void mmu_fail(void)
{
    aarch64_semihosting_exit(MMU_EXIT_NO_MAP);
}

/* The table an entry points to, creating it if the entry is empty. */
static uint64_t *table_below(uint64_t *entry)
{
    if ((*entry & DESC_TYPE_MASK) == DESC_TABLE) {
        return (uint64_t *)(uintptr_t)(*entry & DESC_ADDR_MASK);
    }
    if (*entry != 0 || tables_used == TABLE_POOL) {
        mmu_fail(); /* a block where finer pages are needed, or no table left */
    }
    uint64_t *table = page_tables[tables_used++];
    *entry = (uint64_t)(uintptr_t)table | DESC_TABLE;
    return table;
}

static void map_range(uint64_t start, uint64_t end, uint64_t attrs)
{
    uint64_t addr = start & ~(PAGE_SIZE - 1);
    end = (end + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
    if (end > (1ull << VA_BITS) || end < addr) {
        mmu_fail();
    }
    while (addr < end) {
        uint64_t *level2 = table_below(&page_tables[0][(addr >> 30) % ENTRIES]);
        uint64_t *block = &level2[(addr >> 21) % ENTRIES];
        if (addr % BLOCK_SIZE == 0 && end - addr >= BLOCK_SIZE && *block == 0) {
            *block = addr | attrs | DESC_BLOCK;
            addr += BLOCK_SIZE;
            continue;
        }
        uint64_t *level3 = table_below(block);
        level3[(addr >> 12) % ENTRIES] = addr | attrs | DESC_TABLE;
        addr += PAGE_SIZE;
    }
}

static uint64_t addr_of(const char *symbol)
{
    return (uint64_t)(uintptr_t)symbol;
}

static void map_board(void)
{
    map_range(addr_of(__text_start), addr_of(__text_end), MAP_CODE);
    map_range(addr_of(__rodata_start), addr_of(__code_image_end), MAP_READ_ONLY);
    map_range(addr_of(__ram_region_start), addr_of(__ram_region_end), MAP_READ_WRITE);
    map_range(COLIBRI_BOARD_WEIGHTS_ADDR,
              (uint64_t)COLIBRI_BOARD_WEIGHTS_ADDR + COLIBRI_BOARD_WEIGHTS_SIZE, MAP_READ_ONLY);
    if (COLIBRI_BOARD_HAS_SLOTS) {
        map_range(COLIBRI_BOARD_SLOTS_BASE, COLIBRI_BOARD_SLOTS_BASE + COLIBRI_BOARD_SLOTS_SIZE,
                  MAP_FLASH);
    }
    map_range(COLIBRI_BOARD_UART_BASE, COLIBRI_BOARD_UART_BASE + UART_BYTES, MAP_DEVICE);
    map_range(COLIBRI_BOARD_GIC_DIST_BASE, COLIBRI_BOARD_GIC_DIST_BASE + GIC_DIST_BYTES,
              MAP_DEVICE);
    map_range(COLIBRI_BOARD_GIC_CPU_BASE, COLIBRI_BOARD_GIC_CPU_BASE + GIC_CPU_BYTES, MAP_DEVICE);
}

/* The tables were written with the MMU off, straight to memory; drop any
 * stale cached copy before the table walker (which reads through the
 * cache) sees them. */
static void tables_invalidate(void)
{
    uint64_t line = 4ull << ((sysreg_read_ctr_el0() >> 16) & 0xF);
    uint64_t start = addr_of((const char *)page_tables);
    uint64_t end = start + (uint64_t)tables_used * sizeof page_tables[0];
    for (uint64_t addr = start; addr < end; addr += line) {
        __asm__ volatile("dc ivac, %0" : : "r"(addr) : "memory");
    }
    aarch64_dsb_sy();
}

void aarch64_mmu_enable(void)
{
    map_board();
    tables_invalidate();
    uint64_t ips = sysreg_read_id_aa64mmfr0_el1() & 0xF;
    sysreg_write_mair_el1(MAIR_VALUE);
    sysreg_write_tcr_el1(TCR_VALUE | ((ips > IPS_MAX ? IPS_MAX : ips) << TCR_IPS_SHIFT));
    sysreg_write_ttbr0_el1(addr_of((const char *)page_tables[0]));
    aarch64_isb();
    __asm__ volatile("tlbi vmalle1\n\tdsb ish\n\tic iallu\n\tdsb ish\n\tisb" : : : "memory");
    sysreg_write_sctlr_el1(sysreg_read_sctlr_el1() | SCTLR_EL1_M | SCTLR_EL1_C | SCTLR_EL1_I |
                           SCTLR_EL1_SA | SCTLR_EL1_WXN);
    aarch64_isb();
}
