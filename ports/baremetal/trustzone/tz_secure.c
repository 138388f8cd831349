/*
 * tz_secure.c - the Secure side's boot of the Non-secure world (Armv8-M
 * Security Extension; docs/trustzone.md): the SAU's three regions from the
 * board file (tz_config.h), SecureFault, the FPU for both worlds with the
 * Secure registers cleared before a Non-secure handler runs, then the
 * Non-secure reset handler through BLXNS.
 *
 * With the SAU on, an address in no SAU region is Secure, and the IDAU can
 * only make an address more Secure: the weights (0x9xxxxxxx on the AN547),
 * the Secure RAM and code and the peripherals stay Secure.
 */
#include <arm_cmse.h>

#include "cm_regs.h"
#include "cortex_m.h"
#include "tz_config.h"
#include "tz_secure.h"

#define SAU_CTRL_ADDR 0xE000EDD0u
#define SAU_RNR_ADDR 0xE000EDD8u
#define SAU_RBAR_ADDR 0xE000EDDCu
#define SAU_RLAR_ADDR 0xE000EDE0u
#define SAU_CTRL_ENABLE 0x1u
#define SAU_RLAR_NSC 0x2u
#define SAU_RLAR_ENABLE 0x1u
#define SAU_GRANULE_MASK 0x1Fu
#define SHCSR_SECUREFAULTENA 0x00080000u
#define NSACR_ADDR 0xE000ED8Cu
#define NSACR_CP10_CP11 0x00000C00u
#define CPACR_NS_ADDR 0xE002ED88u /* the Non-secure CPACR, through the alias */
#define VTOR_NS_ADDR 0xE002ED08u
/* FPCCR: a Non-secure exception that preempts Secure code finds the FP and
 * MVE registers cleared (TS: Secure state saved and cleared; CLRONRET(S):
 * cleared on returns too), so no weight or activation of a Secure pass
 * reaches a Non-secure handler through them. */
#define FPCCR_TS 0x04000000u
#define FPCCR_CLRONRETS 0x08000000u
#define FPCCR_CLRONRET 0x10000000u

typedef void __attribute__((cmse_nonsecure_call)) tz_ns_reset(void);

static void sau_region(uint32_t number, uint32_t base, uint32_t size, uint32_t flags)
{
    CM_REG(SAU_RNR_ADDR) = number;
    CM_REG(SAU_RBAR_ADDR) = base & ~SAU_GRANULE_MASK;
    CM_REG(SAU_RLAR_ADDR) = ((base + size - 1u) & ~SAU_GRANULE_MASK) | flags | SAU_RLAR_ENABLE;
}

void tz_secure_setup(void)
{
    sau_region(0u, TZ_NS_CODE_ADDR, TZ_NS_CODE_SIZE, 0u);
    sau_region(1u, TZ_NS_RAM_ADDR, TZ_NS_RAM_SIZE, 0u);
    sau_region(2u, TZ_NSC_ADDR, TZ_NSC_SIZE, SAU_RLAR_NSC);
    CM_REG(SAU_CTRL_ADDR) = SAU_CTRL_ENABLE;
    CM_REG(CM_SHCSR_ADDR) |= SHCSR_SECUREFAULTENA;
    CM_REG(NSACR_ADDR) |= NSACR_CP10_CP11;
    CM_REG(CPACR_NS_ADDR) |= CM_CPACR_CP10_CP11_FULL;
    CM_REG(CM_FPCCR_ADDR) |= FPCCR_TS | FPCCR_CLRONRET | FPCCR_CLRONRETS;
    cm_dsb();
    cm_isb();
}

void tz_start_nonsecure(void)
{
    const volatile uint32_t *vectors = (const volatile uint32_t *)(uintptr_t)TZ_NS_CODE_ADDR;
    tz_ns_reset *reset = (tz_ns_reset *)cmse_nsfptr_create((uintptr_t)vectors[1]);
    CM_REG(VTOR_NS_ADDR) = TZ_NS_CODE_ADDR;
    __asm__ volatile("msr msp_ns, %0" : : "r"(vectors[0]) : "memory");
    cm_isb();
    reset();
}
