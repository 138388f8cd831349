/*
 * gicv2.h - Arm GICv2 distributor and CPU interface, enough for one
 * interrupt at a time on one core (the timer PPI board_run_in_interrupt uses).
 * Addresses come from the caller (board file, [interrupts]).
 */
#ifndef COLIBRI_AARCH64_GICV2_H
#define COLIBRI_AARCH64_GICV2_H

#include <stdint.h>

#define GICV2_SPURIOUS 1023u

/* Everything disabled and cleared, then distributor and CPU interface on with
 * every priority unmasked. Interrupts are group 0, signalled as IRQ. */
void gicv2_init(uintptr_t dist, uintptr_t cpu);

void gicv2_enable(uintptr_t dist, uint32_t intid);
void gicv2_disable(uintptr_t dist, uint32_t intid);

/* GICC_IAR: the interrupt being taken (bits 9:0 the INTID, GICV2_SPURIOUS if
 * none); pass the whole value back to gicv2_end. */
uint32_t gicv2_acknowledge(uintptr_t cpu);
void gicv2_end(uintptr_t cpu, uint32_t iar);

#endif
