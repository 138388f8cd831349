/*
 * run_in_interrupt.c - board_run_in_interrupt (board.h) on the EL1 virtual
 * timer through a GICv2, and the IRQ path behind it.
 *
 * The job runs inside the timer's IRQ handler, on the interrupt stack (SP_EL1,
 * link.ld: __irq_stack_bottom..__irq_stack_top), after vectors.S has saved
 * every general and FP/SIMD register. The stack is painted with a pattern
 * before the interrupt and scanned after it: the lowest overwritten word gives
 * the bytes used, the exception frame included. Meanwhile the thread waits in
 * interrupt_wait.S with sentinels in its registers; a register the interrupt
 * changed is a port bug and ends the program (aarch64_fatal).
 */
#include <stddef.h>
#include <stdint.h>

#include "aarch64_board.h"
#include "board.h"
#include "board_config.h"
#include "generic_timer.h"
#include "gicv2.h"
#include "interrupts.h"
#include "sysreg.h"

#define STACK_PAINT 0xC5C5C5C5C5C5C5C5ull
#define TIMER_DELAY_DIVISOR 10000u /* fire after 100 us */
#define GIC_DIST ((uintptr_t)COLIBRI_BOARD_GIC_DIST_BASE)
#define GIC_CPU ((uintptr_t)COLIBRI_BOARD_GIC_CPU_BASE)

extern uint64_t __irq_stack_bottom[], __irq_stack_top[];

static struct {
    void (*fn)(void *arg);
    void *arg;
    volatile uint32_t done;
} timer_job;

static void irq_stack_paint(void)
{
    for (volatile uint64_t *p = __irq_stack_bottom; p < __irq_stack_top; p++) {
        *p = STACK_PAINT;
    }
}

static size_t irq_stack_used(void)
{
    const volatile uint64_t *p = __irq_stack_bottom;
    while (p < __irq_stack_top && *p == STACK_PAINT) {
        p++;
    }
    return (size_t)((const uint8_t *)__irq_stack_top - (const uint8_t *)p);
}

void aarch64_interrupts_init(void)
{
    gicv2_init(GIC_DIST, GIC_CPU);
}

void aarch64_irq_handle(void)
{
    uint32_t iar = gicv2_acknowledge(GIC_CPU);
    uint32_t intid = iar & 0x3FFu;
    if (intid == GICV2_SPURIOUS) {
        return;
    }
    if (intid == COLIBRI_BOARD_TIMER_IRQ) {
        generic_timer_stop(); /* level interrupt: drop it before the end of interrupt */
        if (timer_job.fn != NULL && !timer_job.done) {
            timer_job.fn(timer_job.arg);
            timer_job.done = 1;
        }
    }
    gicv2_end(GIC_CPU, iar);
}

int board_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    if (stack_used != NULL) {
        *stack_used = 0;
    }
    if (fn == NULL) {
        return -1;
    }
    irq_stack_paint();
    timer_job.fn = fn;
    timer_job.arg = arg;
    timer_job.done = 0;
    aarch64_irq_mask();
    gicv2_enable(GIC_DIST, COLIBRI_BOARD_TIMER_IRQ);
    generic_timer_fire_after(generic_timer_frequency() / TIMER_DELAY_DIVISOR + 1u);
    uint64_t clobbered = aarch64_wait_for_flag(&timer_job.done);
    gicv2_disable(GIC_DIST, COLIBRI_BOARD_TIMER_IRQ);
    if (clobbered != 0) {
        aarch64_fatal("interrupt changed the thread's registers", clobbered);
    }
    timer_job.fn = NULL;
    if (stack_used != NULL) {
        *stack_used = irq_stack_used();
    }
    return 0;
}
