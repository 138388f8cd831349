/*
 * exceptions.c - where vectors.S lands: IRQs go to the interrupt handler,
 * anything else (synchronous abort, FIQ, SError, an exception from a lower
 * EL) is a fault: reported on the UART with its syndrome, then the program
 * ends with status AARCH64_EXIT_FAULT. aarch64_fatal does the same for a port
 * invariant found broken.
 */
#include <stdint.h>

#include "board.h"
#include "board_config.h"
#include "context.h"
#include "interrupts.h"
#include "pl011.h"
#include "semihosting.h"
#include "sysreg.h"

#define AARCH64_EXIT_FAULT 3
#define ESR_EC_SHIFT 26

static const char *const type_names[4] = {"synchronous", "IRQ", "FIQ", "SError"};
static const char *const source_names[4] = {"EL1 thread (SP_EL0)", "EL1 handler (SP_EL1)",
                                            "EL0 AArch64", "EL0 AArch32"};

static const char *exception_class_name(uint32_t ec)
{
    switch (ec) {
    case 0x00: return "unknown instruction";
    case 0x07: return "FP/SIMD access trapped";
    case 0x15: return "SVC";
    case 0x21: return "instruction abort";
    case 0x22: return "PC alignment";
    case 0x25: return "data abort";
    case 0x26: return "SP alignment";
    case 0x2C: return "FP exception";
    default: return "other";
    }
}

static void fault_puts(const char *s)
{
    while (*s != '\0') {
        pl011_put(COLIBRI_BOARD_UART_BASE, (uint8_t)*s++);
    }
}

static void fault_hex(const char *label, uint64_t value)
{
    char digits[19] = "0x";
    for (int i = 0; i < 16; i++) {
        digits[2 + i] = "0123456789abcdef"[(value >> (60 - 4 * i)) & 0xFu];
    }
    digits[18] = '\0';
    fault_puts(label);
    fault_puts(digits);
}

static void fault_report(uint64_t slot, const aarch64_context *ctx)
{
    static int reporting;
    if (aarch64_semihosting_active() || reporting) {
        aarch64_halt(); /* HLT trapped: no semihosting host; or a fault while reporting */
    }
    reporting = 1;
    uint64_t esr = sysreg_read_esr_el1();
    fault_puts("\r\ncolibri: fault: ");
    fault_puts(type_names[slot % 4u]);
    fault_puts(" exception from ");
    fault_puts(source_names[(slot / 4u) % 4u]);
    fault_puts(": ");
    fault_puts(exception_class_name((uint32_t)(esr >> ESR_EC_SHIFT) & 0x3Fu));
    fault_hex("\r\n  ESR_EL1 ", esr);
    fault_hex(" ELR_EL1 ", ctx->elr);
    fault_hex(" FAR_EL1 ", sysreg_read_far_el1());
    fault_hex(" SPSR_EL1 ", ctx->spsr);
    fault_puts("\r\n");
    pl011_flush(COLIBRI_BOARD_UART_BASE);
    aarch64_semihosting_exit(AARCH64_EXIT_FAULT);
}

void aarch64_fatal(const char *what, uint64_t value)
{
    fault_puts("\r\ncolibri: fault: ");
    fault_puts(what);
    fault_hex(": ", value);
    fault_puts("\r\n");
    pl011_flush(COLIBRI_BOARD_UART_BASE);
    aarch64_semihosting_exit(AARCH64_EXIT_FAULT);
}

void aarch64_exception_dispatch(uint64_t slot, aarch64_context *ctx)
{
    uint64_t source = slot / 4u;
    if (slot % 4u == VECTOR_TYPE_IRQ &&
        (source == VECTOR_FROM_EL1_SP0 || source == VECTOR_FROM_EL1_SPX)) {
        aarch64_irq_handle();
        return;
    }
    fault_report(slot, ctx);
}
