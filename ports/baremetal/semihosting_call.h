/*
 * semihosting_call.h - one Arm semihosting operation, as each port traps
 * into the host (Cortex-M: BKPT 0xAB; AArch64: HLT 0xF000). The parameter
 * block is an array of words of the pointer's width (32 or 64 bits).
 */
#ifndef COLIBRI_SEMIHOSTING_CALL_H
#define COLIBRI_SEMIHOSTING_CALL_H

#include <stdint.h>

/* The operation's result, or -1 without a semihosting host (a board file
 * without -semihosting: the call is not made). */
intptr_t semihosting_call(uint32_t operation, uintptr_t *parameters);

#endif
