/* pl011.c - polled PL011 UART driver (pl011.h; PL011 TRM, DDI 0183). */
#include <stdint.h>

#include "pl011.h"

#define UART_DR 0x00u
#define UART_FR 0x18u
#define UART_IBRD 0x24u
#define UART_FBRD 0x28u
#define UART_LCR_H 0x2Cu
#define UART_CR 0x30u
#define UART_IMSC 0x38u
#define UART_ICR 0x44u

#define FR_BUSY (1u << 3)
#define FR_RXFE (1u << 4)
#define FR_TXFF (1u << 5)
#define LCR_H_FEN (1u << 4)
#define LCR_H_WLEN_8 (3u << 5)
#define CR_UARTEN (1u << 0)
#define CR_TXE (1u << 8)
#define CR_RXE (1u << 9)
#define ICR_ALL 0x7FFu

static volatile uint32_t *uart_reg(uintptr_t base, uint32_t offset)
{
    return (volatile uint32_t *)(base + offset);
}

void pl011_init(uintptr_t base, uint32_t clock_hz, uint32_t baud)
{
    *uart_reg(base, UART_CR) = 0;
    while (*uart_reg(base, UART_FR) & FR_BUSY) {
    }
    if (clock_hz != 0 && baud != 0) {
        /* divisor in 1/64ths: clock / (16 * baud), rounded to nearest */
        uint32_t div64 = (uint32_t)((4ull * clock_hz + baud / 2u) / baud);
        *uart_reg(base, UART_IBRD) = div64 >> 6;
        *uart_reg(base, UART_FBRD) = div64 & 63u;
    }
    *uart_reg(base, UART_LCR_H) = LCR_H_WLEN_8 | LCR_H_FEN; /* also latches the divisor */
    *uart_reg(base, UART_IMSC) = 0;
    *uart_reg(base, UART_ICR) = ICR_ALL;
    *uart_reg(base, UART_CR) = CR_UARTEN | CR_TXE | CR_RXE;
}

void pl011_put(uintptr_t base, uint8_t byte)
{
    while (*uart_reg(base, UART_FR) & FR_TXFF) {
    }
    *uart_reg(base, UART_DR) = byte;
}

int pl011_get(uintptr_t base)
{
    if (*uart_reg(base, UART_FR) & FR_RXFE) {
        return -1;
    }
    return (int)(*uart_reg(base, UART_DR) & 0xFFu);
}

void pl011_flush(uintptr_t base)
{
    while (*uart_reg(base, UART_FR) & FR_BUSY) {
    }
}
