/*
 * generic_timer.h - the Arm generic timer seen from EL1: the virtual count
 * (CNTVCT_EL0, CNTFRQ_EL0 ticks per second) and the EL1 virtual timer
 * (CNTV_*), whose interrupt is a PPI (board file: [interrupts] timer_irq).
 */
#ifndef COLIBRI_AARCH64_GENERIC_TIMER_H
#define COLIBRI_AARCH64_GENERIC_TIMER_H

#include <stdint.h>

/* The virtual count, read after an ISB so it is not taken early. */
uint64_t generic_timer_count(void);

/* Counts per second (CNTFRQ_EL0, set by firmware or QEMU); never 0. */
uint64_t generic_timer_frequency(void);

/* Arm the virtual timer to fire `counts` from now (interrupt unmasked). */
void generic_timer_fire_after(uint64_t counts);

/* Disable the virtual timer; its (level) interrupt drops. */
void generic_timer_stop(void);

#endif
