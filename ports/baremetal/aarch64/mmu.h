/*
 * mmu.h - the AArch64 port's identity map (4 KiB granule, 39-bit addresses).
 *
 *   code (.text)               normal write-back, read-only, executable
 *   rodata + load images       normal write-back, read-only, execute-never
 *   RAM region (whole)         normal write-back, read-write, execute-never
 *   weight region              normal write-back, READ-ONLY, execute-never
 *   UART, GIC                  Device-nGnRE, execute-never
 *
 * Everything else is unmapped: a stray access faults and is reported.
 */
#ifndef COLIBRI_AARCH64_MMU_H
#define COLIBRI_AARCH64_MMU_H

/* Exit status when the map cannot be built (page-table pool too small, or an
 * address beyond 39 bits). */
#define MMU_EXIT_NO_MAP 5

/* Build the tables, enable the MMU and the caches. Runs from startup.S with
 * the MMU off; returns with it on, or exits with MMU_EXIT_NO_MAP. */
void aarch64_mmu_enable(void);

#endif
