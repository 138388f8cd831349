/*
 * semihost.c - leave QEMU with an exit status: the Arm semihosting call
 * SYS_EXIT_EXTENDED (0x20) through BKPT 0xAB, with the parameter block
 * {ADP_Stopped_ApplicationExit, status}. QEMU needs -semihosting.
 */
#include "cortex_m.h"

#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

void cm_semihost_exit(int status)
{
    static uint32_t block[2];
    block[0] = ADP_STOPPED_APPLICATION_EXIT;
    block[1] = (uint32_t)status;
    register uint32_t operation __asm__("r0") = SYS_EXIT_EXTENDED;
    register uint32_t *parameter __asm__("r1") = block;
    __asm__ volatile("bkpt 0xAB" : "+r"(operation) : "r"(parameter) : "memory");
    for (;;) {
        __asm__ volatile("wfi");
    }
}
