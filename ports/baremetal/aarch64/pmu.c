/* pmu.c - PMCCNTR_EL0 as a tick counter (pmu.h; PMUv3). */
#include <stdint.h>

#include "pmu.h"
#include "sysreg.h"

#define DFR0_PMUVER_SHIFT 8
#define PMUVER_NONE 0x0u
#define PMUVER_IMPDEF 0xFu
#define PMCR_E (1u << 0)  /* enable the counters */
#define PMCR_C (1u << 2)  /* reset the cycle counter */
#define PMCR_LC (1u << 6) /* 64-bit cycle counter overflow */
#define PMCNTEN_CYCLES (1u << 31)

static int pmu_present;

int pmu_cycles_start(void)
{
    uint64_t version = (sysreg_read_id_aa64dfr0_el1() >> DFR0_PMUVER_SHIFT) & 0xFu;
    pmu_present = version != PMUVER_NONE && version != PMUVER_IMPDEF;
    if (!pmu_present) {
        return -1;
    }
    sysreg_write_pmccfiltr_el0(0); /* count at EL1 and EL0 */
    sysreg_write_pmcntenset_el0(PMCNTEN_CYCLES);
    sysreg_write_pmcr_el0(sysreg_read_pmcr_el0() | PMCR_E | PMCR_C | PMCR_LC);
    aarch64_isb();
    return 0;
}

uint64_t pmu_cycles(void)
{
    if (!pmu_present) {
        return 0;
    }
    aarch64_isb();
    return sysreg_read_pmccntr_el0();
}
