/*
 * interrupts.h - the port's interrupt plumbing between board.c, the
 * exception dispatcher and board_run_in_interrupt (run_in_interrupt.c).
 */
#ifndef COLIBRI_AARCH64_INTERRUPTS_H
#define COLIBRI_AARCH64_INTERRUPTS_H

#include <stdint.h>

/* GIC on, every interrupt disabled; IRQs stay masked at the core until
 * board_run_in_interrupt opens them. */
void aarch64_interrupts_init(void);

/* Acknowledge, handle and end one IRQ (from the vector table). */
void aarch64_irq_handle(void);

/* interrupt_wait.S: with IRQs masked, sleep until *flag != 0, taking IRQs;
 * returns the mask of thread registers the interrupts changed (0: none;
 * bit n qn, bit 32 FPCR, bit 33 FPSR, bit 34 x9-x15). */
uint64_t aarch64_wait_for_flag(volatile uint32_t *flag);

/* Report a port invariant broken ("what", a value) on the UART and end the
 * program with status AARCH64_EXIT_FAULT (exceptions.c). */
void aarch64_fatal(const char *what, uint64_t value) __attribute__((noreturn));

#endif
