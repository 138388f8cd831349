/*
 * cm_regs.h - the Cortex-M system registers this port touches, by address.
 * ARMv7-M (Cortex-M7) and ARMv8.1-M (Cortex-M55) share these addresses;
 * the two MPU layouts differ and are described in cm_mpu_v7m.c/_v8m.c.
 * Secure code (the AN547 runs Secure) reaches the Secure banks here.
 *
 * Plain macros, hex literals without a suffix, so that startup.S can include
 * this file too (in C such a literal is unsigned int when it exceeds int).
 */
#ifndef COLIBRI_CM_REGS_H
#define COLIBRI_CM_REGS_H

/* System control block */
#define CM_ICSR_ADDR 0xE000ED04   /* interrupt control and state */
#define CM_VTOR_ADDR 0xE000ED08   /* vector table offset */
#define CM_CCR_ADDR 0xE000ED14    /* configuration and control */
#define CM_SHPR3_ADDR 0xE000ED20  /* priorities of PendSV (bits 23:16), SysTick (31:24) */
#define CM_SHCSR_ADDR 0xE000ED24  /* system handler control and state */
#define CM_CFSR_ADDR 0xE000ED28   /* configurable fault status */
#define CM_HFSR_ADDR 0xE000ED2C   /* HardFault status */
#define CM_MMFAR_ADDR 0xE000ED34  /* MemManage fault address */
#define CM_BFAR_ADDR 0xE000ED38   /* BusFault address */
#define CM_SFSR_ADDR 0xE000EDE4   /* SecureFault status (Armv8-M Security Extension) */
#define CM_CLIDR_ADDR 0xE000ED78  /* cache level ID */
#define CM_CCSIDR_ADDR 0xE000ED80 /* cache size ID (of the level CSSELR selects) */
#define CM_CSSELR_ADDR 0xE000ED84 /* cache size selection */
#define CM_CPACR_ADDR 0xE000ED88  /* coprocessor access control: CP10/CP11 = FPU, MVE */

#define CM_ICSR_PENDSVSET 0x10000000
#define CM_ICSR_PENDSTSET 0x04000000
#define CM_CCR_DC 0x00010000 /* data cache enable */
#define CM_CCR_IC 0x00020000 /* instruction cache enable */
#define CM_SHCSR_MEMFAULTENA 0x00010000
#define CM_SHCSR_BUSFAULTENA 0x00020000
#define CM_SHCSR_USGFAULTENA 0x00040000
#define CM_CPACR_CP10_CP11_FULL 0x00F00000

/* Floating-point context control */
#define CM_FPCCR_ADDR 0xE000EF34
#define CM_FPCCR_ASPEN 0x80000000 /* set CONTROL.FPCA on FP use: frames carry FP state */
#define CM_FPCCR_LSPEN 0x40000000 /* reserve the FP frame, save it on first FP use */

/* Cache maintenance */
#define CM_ICIALLU_ADDR 0xE000EF50 /* invalidate all instruction cache */
#define CM_DCISW_ADDR 0xE000EF60   /* invalidate data cache line by set/way */

/* SysTick */
#define CM_SYST_CSR_ADDR 0xE000E010
#define CM_SYST_RVR_ADDR 0xE000E014
#define CM_SYST_CVR_ADDR 0xE000E018
#define CM_SYST_CSR_ENABLE 0x00000001
#define CM_SYST_CSR_TICKINT 0x00000002
#define CM_SYST_CSR_CLKSOURCE 0x00000004 /* 1: the processor clock */

/* MPU (PMSAv7 uses RASR at 0xE000EDA0, PMSAv8 uses RLAR there) */
#define CM_MPU_TYPE_ADDR 0xE000ED90
#define CM_MPU_CTRL_ADDR 0xE000ED94
#define CM_MPU_RNR_ADDR 0xE000ED98
#define CM_MPU_RBAR_ADDR 0xE000ED9C
#define CM_MPU_RASR_ADDR 0xE000EDA0
#define CM_MPU_RLAR_ADDR 0xE000EDA0
#define CM_MPU_MAIR0_ADDR 0xE000EDC0
#define CM_MPU_CTRL_ENABLE 0x00000001
#define CM_MPU_CTRL_PRIVDEFENA 0x00000004

/* Stack painting: the word written over unused stack at reset. */
#define CM_STACK_PAINT 0xC0D1B41E

#ifndef __ASSEMBLER__
#include <stdint.h>

#define CM_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

static inline void cm_dsb(void)
{
    __asm__ volatile("dsb 0xF" ::: "memory");
}

static inline void cm_isb(void)
{
    __asm__ volatile("isb 0xF" ::: "memory");
}

/* Mask interrupts; returns the previous PRIMASK for cm_irq_restore. */
static inline uint32_t cm_irq_save(void)
{
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    return primask;
}

static inline void cm_irq_restore(uint32_t primask)
{
    __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
}

/* The exception number being handled, 0 in thread mode. */
static inline uint32_t cm_ipsr(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    return ipsr;
}
#endif

#endif
