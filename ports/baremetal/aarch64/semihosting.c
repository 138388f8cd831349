/*
 * semihosting.c - program exit through Arm semihosting (semihosting.h).
 *
 * AArch64 semihosting: HLT #0xF000 with the operation in w0 and a pointer to
 * its parameter block in x1. SYS_EXIT_EXTENDED (0x20) takes {reason, subcode};
 * with reason ADP_Stopped_ApplicationExit the subcode is the exit status.
 * The other operations (file reads: semihosting_call.h) return in x0.
 * May run with the MMU off (startup.S on an unsupported EL): port.mk builds
 * this file with -mgeneral-regs-only -mstrict-align.
 */
#include <stdint.h>

#include "semihosting.h"
#include "semihosting_call.h"

#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

static volatile int semihosting_call_active;

int aarch64_semihosting_active(void)
{
    return semihosting_call_active;
}

void aarch64_halt(void)
{
    __asm__ volatile("msr daifset, #0xf" : : : "memory");
    for (;;) {
        __asm__ volatile("wfi");
    }
}

void aarch64_semihosting_exit(int status)
{
    uint64_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint64_t)(uint32_t)status};
    register uint64_t op __asm__("x0") = SYS_EXIT_EXTENDED;
    register uint64_t arg __asm__("x1") = (uint64_t)(uintptr_t)block;
    semihosting_call_active = 1;
    __asm__ volatile("hlt #0xf000" : "+r"(op) : "r"(arg) : "memory");
    aarch64_halt(); /* the host did not exit (a debugger resumed us) */
}

intptr_t semihosting_call(uint32_t operation, uintptr_t *parameters)
{
    register uint64_t result __asm__("x0") = operation;
    register uint64_t block __asm__("x1") = (uint64_t)(uintptr_t)parameters;
    semihosting_call_active = 1;
    __asm__ volatile("hlt #0xf000" : "+r"(result) : "r"(block) : "memory");
    semihosting_call_active = 0;
    return (intptr_t)result;
}
