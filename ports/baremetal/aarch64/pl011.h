/*
 * pl011.h - Arm PrimeCell PL011 UART, polled (no interrupts, no DMA).
 * The base address and clock come from the caller (board_config.h).
 */
#ifndef COLIBRI_AARCH64_PL011_H
#define COLIBRI_AARCH64_PL011_H

#include <stdint.h>

/* 8N1, FIFOs on, transmitter and receiver enabled. clock_hz 0 keeps the
 * divisor the boot loader programmed. */
void pl011_init(uintptr_t base, uint32_t clock_hz, uint32_t baud);

/* Wait for room in the transmit FIFO, then queue one byte. */
void pl011_put(uintptr_t base, uint8_t byte);

/* One received byte, or -1 if the receive FIFO is empty. */
int pl011_get(uintptr_t base);

/* Wait until every queued byte has left the shift register. */
void pl011_flush(uintptr_t base);

#endif
