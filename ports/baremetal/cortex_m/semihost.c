/*
 * semihost.c - Arm semihosting through BKPT 0xAB (operation in r0, parameter
 * block in r1, result in r0): leave QEMU with an exit status
 * (SYS_EXIT_EXTENDED, 0x20, with {ADP_Stopped_ApplicationExit, status}) and
 * the other operations (semihosting_call.h). QEMU needs -semihosting; on a
 * board file without it no call is made.
 */
#include "cm_board_config.h"
#include "cortex_m.h"
#include "semihosting_call.h"

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

intptr_t semihosting_call(uint32_t operation, uintptr_t *parameters)
{
    if (!CM_BOARD_SEMIHOSTING) {
        return -1;
    }
    register uint32_t result __asm__("r0") = operation;
    register uintptr_t *block __asm__("r1") = parameters;
    __asm__ volatile("bkpt 0xAB" : "+r"(result) : "r"(block) : "memory");
    return (intptr_t)(int32_t)result;
}
