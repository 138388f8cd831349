/*
 * semihosting.h - Arm semihosting, just enough to end a program under QEMU
 * (-semihosting) with an exit status.
 */
#ifndef COLIBRI_AARCH64_SEMIHOSTING_H
#define COLIBRI_AARCH64_SEMIHOSTING_H

/* SYS_EXIT_EXTENDED with ADP_Stopped_ApplicationExit and `status`: QEMU
 * exits with that status. Without a semihosting host the HLT instruction
 * traps (or halts the core under a debugger); the fault handler sees
 * aarch64_semihosting_active() and parks the core instead. Never returns. */
void aarch64_semihosting_exit(int status) __attribute__((noreturn));

/* Nonzero while a semihosting call is in flight. */
int aarch64_semihosting_active(void);

/* Park the core: interrupts masked, WFI forever. */
void aarch64_halt(void) __attribute__((noreturn));

#endif
