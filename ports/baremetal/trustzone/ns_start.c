/*
 * ns_start.c - the Non-secure application's start (TrustZone-M,
 * docs/trustzone.md): its vector table, at the start of its code region
 * (the Secure side points VTOR_NS here and MSP_NS at entry 0), a reset
 * handler that sets its stack limit, copies .data, zeroes .bss and runs
 * main, and a tick count on the Non-secure SysTick (which counts the same
 * clock as the Secure one), whose handler calls tz_ns_tick_hook when set.
 * The console and the end of the run are the Secure side's (ns_board.c).
 */
#include <stdint.h>

#include "board.h"
#include "board_config.h"
#include "cm_regs.h"
#include "colibri_tz.h"

int main(void);
void tz_ns_reset(void);
void tz_ns_fault(void);
void tz_ns_systick(void);
uint64_t tz_ns_ticks(void);

/* Called from the Non-secure SysTick handler when set (a test's hook). */
void (*volatile tz_ns_tick_hook)(void);

extern uint32_t __ns_stack_top[], __ns_stack_limit[], __ns_data_start[], __ns_data_end[];
extern uint32_t __ns_data_load[];
extern uint32_t __ns_bss_start[], __ns_bss_end[];

typedef union ns_vector {
    void (*handler)(void);
    const void *stack_top;
} ns_vector;

__attribute__((section(".vectors"), used)) const ns_vector tz_ns_vectors[16] = {
    {.stack_top = __ns_stack_top},
    {.handler = tz_ns_reset},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_fault},
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_fault},
    {.handler = 0},
    {.handler = tz_ns_fault},
    {.handler = tz_ns_systick},
};

static volatile uint32_t elapsed_ms;
static const uint32_t ticks_per_ms = COLIBRI_BOARD_TICKS_HZ / 1000u;

void tz_ns_reset(void)
{
    volatile uint32_t *to = __ns_data_start;
    __asm__ volatile("msr msplim, %0" : : "r"(__ns_stack_limit)); /* an overflow faults */
    const volatile uint32_t *from = __ns_data_load;
    while (to < __ns_data_end) {
        *to++ = *from++;
    }
    for (volatile uint32_t *p = __ns_bss_start; p < __ns_bss_end; p++) {
        *p = 0u;
    }
    CM_REG(CM_SYST_RVR_ADDR) = ticks_per_ms - 1u;
    CM_REG(CM_SYST_CVR_ADDR) = 0u;
    CM_REG(CM_SYST_CSR_ADDR) = CM_SYST_CSR_CLKSOURCE | CM_SYST_CSR_TICKINT | CM_SYST_CSR_ENABLE;
    colibri_tz_exit(main());
}

void tz_ns_systick(void)
{
    void (*hook)(void) = tz_ns_tick_hook;
    elapsed_ms = elapsed_ms + 1u;
    if (hook != NULL) {
        hook();
    }
}

/* Milliseconds and the current one's count-down, read consistently. */
uint64_t tz_ns_ticks(void)
{
    uint32_t ms, down;
    do {
        ms = elapsed_ms;
        down = CM_REG(CM_SYST_CVR_ADDR);
    } while (ms != elapsed_ms || (CM_REG(CM_ICSR_ADDR) & CM_ICSR_PENDSTSET) != 0u);
    return (uint64_t)ms * ticks_per_ms + (ticks_per_ms - 1u - down);
}

/* A Non-secure fault (not a Secure one: those the Secure side reports). */
void tz_ns_fault(void)
{
    static const char line[] = "\nNS FAULT\n";
    colibri_tz_console_write(line, sizeof line - 1u);
    colibri_tz_exit(98);
}

void board_uart_write(const uint8_t *data, size_t n)
{
    colibri_tz_console_write((const char *)data, (uint32_t)n);
}

void board_exit(int status)
{
    colibri_tz_exit(status);
    for (;;) {
    }
}
