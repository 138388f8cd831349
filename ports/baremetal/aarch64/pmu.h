/*
 * pmu.h - the PMU cycle counter PMCCNTR_EL0, the port's tick source
 * (board file [ticks]). Under QEMU TCG the counter follows the virtual
 * clock at 1 GHz, so with -icount shift=0 one tick is one guest instruction.
 */
#ifndef COLIBRI_AARCH64_PMU_H
#define COLIBRI_AARCH64_PMU_H

#include <stdint.h>

/* Reset and start the 64-bit cycle counter, counting at EL0 and EL1.
 * Returns 0, or -1 when the core has no PMUv3 (then pmu_cycles() is 0). */
int pmu_cycles_start(void);

uint64_t pmu_cycles(void);

#endif
