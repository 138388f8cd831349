/*
 * sysreg.h - AArch64 system register access and barriers for the bare-metal
 * port. One static inline reader/writer pair per register the port uses:
 * sysreg_read_<name>() and sysreg_write_<name>(value).
 */
#ifndef COLIBRI_AARCH64_SYSREG_H
#define COLIBRI_AARCH64_SYSREG_H

#include <stdint.h>

#define AARCH64_SYSREG(name)                                                                       \
    static inline uint64_t sysreg_read_##name(void)                                                \
    {                                                                                              \
        uint64_t value;                                                                            \
        __asm__ volatile("mrs %0, " #name : "=r"(value));                                          \
        return value;                                                                              \
    }                                                                                              \
    static inline void sysreg_write_##name(uint64_t value)                                         \
    {                                                                                              \
        __asm__ volatile("msr " #name ", %0" : : "r"(value) : "memory");                           \
    }

AARCH64_SYSREG(currentel)
AARCH64_SYSREG(sctlr_el1)
AARCH64_SYSREG(tcr_el1)
AARCH64_SYSREG(mair_el1)
AARCH64_SYSREG(ttbr0_el1)
AARCH64_SYSREG(id_aa64mmfr0_el1)
AARCH64_SYSREG(id_aa64dfr0_el1)
AARCH64_SYSREG(ctr_el0)
AARCH64_SYSREG(esr_el1)
AARCH64_SYSREG(far_el1)
AARCH64_SYSREG(elr_el1)
AARCH64_SYSREG(cntfrq_el0)
AARCH64_SYSREG(cntvct_el0)
AARCH64_SYSREG(cntv_ctl_el0)
AARCH64_SYSREG(cntv_cval_el0)
AARCH64_SYSREG(pmcr_el0)
AARCH64_SYSREG(pmcntenset_el0)
AARCH64_SYSREG(pmccfiltr_el0)
AARCH64_SYSREG(pmccntr_el0)

/* SCTLR_EL1 bits the port sets. */
#define SCTLR_EL1_M (1ull << 0)    /* stage 1 MMU */
#define SCTLR_EL1_C (1ull << 2)    /* data caches */
#define SCTLR_EL1_SA (1ull << 3)   /* SP alignment check at EL1 */
#define SCTLR_EL1_I (1ull << 12)   /* instruction caches */
#define SCTLR_EL1_WXN (1ull << 19) /* writable implies execute-never */

static inline void aarch64_isb(void)
{
    __asm__ volatile("isb" : : : "memory");
}

static inline void aarch64_dsb_sy(void)
{
    __asm__ volatile("dsb sy" : : : "memory");
}

static inline void aarch64_irq_mask(void)
{
    __asm__ volatile("msr daifset, #2" : : : "memory");
}

#endif
