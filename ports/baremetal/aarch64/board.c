/*
 * board.c - ports/baremetal/board.h for AArch64 boards (Cortex-A at EL1).
 *
 * Console: PL011 at COLIBRI_BOARD_UART_BASE, polled. Time: the generic
 * timer's virtual count. Ticks: PMCCNTR_EL0. Interrupts: GICv2 + EL1 virtual
 * timer (run_in_interrupt.c). Exit: semihosting. Every address comes from the
 * board file through board_config.h and aarch64_board.h.
 */
#include <stddef.h>
#include <stdint.h>

#include "aarch64_port.h"
#include "board.h"
#include "board_config.h"
#include "generic_timer.h"
#include "interrupts.h"
#include "pl011.h"
#include "pmu.h"
#include "semihosting.h"

#define UART_BASE ((uintptr_t)COLIBRI_BOARD_UART_BASE)

uint32_t aarch64_entry_el;
static uint64_t boot_count;
static int pmu_ok;

void board_init(void)
{
    pmu_ok = pmu_cycles_start() == 0;
    boot_count = generic_timer_count();
    pl011_init(UART_BASE, COLIBRI_BOARD_UART_CLOCK_HZ, COLIBRI_BOARD_UART_BAUD);
    aarch64_interrupts_init();
}

void board_uart_write(const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pl011_put(UART_BASE, data[i]);
    }
}

int board_uart_read(uint32_t timeout_ms)
{
    uint64_t start = board_millis();
    for (;;) {
        int byte = pl011_get(UART_BASE);
        if (byte >= 0) {
            return byte;
        }
        if (board_millis() - start >= timeout_ms) {
            return -1;
        }
    }
}

uint64_t board_millis(void)
{
    uint64_t counts = generic_timer_count() - boot_count;
    uint64_t hz = generic_timer_frequency();
    return counts / hz * 1000u + counts % hz * 1000u / hz;
}

uint64_t board_ticks(void)
{
    return pmu_cycles();
}

static uint64_t port_ticks(void *ctx)
{
    (void)ctx;
    return pmu_cycles();
}

const colibri_port *board_port(void)
{
    static const colibri_port port = {
        .version = COLIBRI_PORT_VERSION, .ticks = port_ticks, .kernels = COLIBRI_BOARD_KERNELS};
    return &port;
}

const void *board_weights(void)
{
    return (const void *)(uintptr_t)COLIBRI_BOARD_WEIGHTS_ADDR;
}

size_t board_weights_size(void)
{
    return (size_t)COLIBRI_BOARD_WEIGHTS_SIZE;
}

void board_exit(int status)
{
    pl011_flush(UART_BASE);
    aarch64_semihosting_exit(status);
}

const char *board_description(void)
{
    static const char *const lines[2][2] = {
        {"aarch64 EL1 (entered at EL1), MMU and caches on, no PMU (ticks are 0)",
         "aarch64 EL1 (entered at EL1), MMU and caches on, PMU cycle counter"},
        {"aarch64 EL1 (entered at EL2), MMU and caches on, no PMU (ticks are 0)",
         "aarch64 EL1 (entered at EL2), MMU and caches on, PMU cycle counter"},
    };
    return lines[aarch64_entry_el == 2u][pmu_ok != 0];
}
