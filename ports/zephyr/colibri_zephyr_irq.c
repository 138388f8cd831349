/*
 * colibri_zephyr_irq.c - run a function once in interrupt context: a k_timer
 * expiry handler (called by the system clock interrupt) runs it, the calling
 * thread waits on a semaphore. On Cortex-M the interrupt stack can be painted
 * before and scanned after, to tell how much of it the interrupts used.
 */
#include <string.h>

#include <zephyr/kernel.h>

#include "colibri_zephyr.h"

#ifdef CONFIG_COLIBRI_IRQ_STACK_MEASURE
#define PAINT_BYTE 0xC5u
#define PAINT_KEEP_TOP 128u /* bytes below the top left alone: in use at worst */

K_KERNEL_STACK_ARRAY_DECLARE(z_interrupt_stacks, CONFIG_MP_MAX_NUM_CPUS, CONFIG_ISR_STACK_SIZE);

static uint8_t *isr_stack_base(void)
{
    return (uint8_t *)K_KERNEL_STACK_BUFFER(z_interrupt_stacks[0]);
}

static size_t isr_stack_paintable(void)
{
    return K_KERNEL_STACK_SIZEOF(z_interrupt_stacks[0]) - PAINT_KEEP_TOP;
}

/* In thread mode no exception is active, so the interrupt stack (MSP) holds
 * nothing below its top; with interrupts locked it stays so while painting. */
void colibri_zephyr_irq_stack_paint(void)
{
    if (k_is_in_isr()) {
        return;
    }
    unsigned int key = irq_lock();
    memset(isr_stack_base(), PAINT_BYTE, isr_stack_paintable());
    irq_unlock(key);
}

size_t colibri_zephyr_irq_stack_used(void)
{
    const uint8_t *base = isr_stack_base();
    size_t untouched = 0;
    while (untouched < isr_stack_paintable() && base[untouched] == PAINT_BYTE) {
        untouched++;
    }
    return K_KERNEL_STACK_SIZEOF(z_interrupt_stacks[0]) - untouched;
}
#else
void colibri_zephyr_irq_stack_paint(void)
{
}

size_t colibri_zephyr_irq_stack_used(void)
{
    return 0;
}
#endif

#ifdef CONFIG_COLIBRI_IRQ_FORWARD

BUILD_ASSERT(CONFIG_ISR_STACK_SIZE >= CONFIG_COLIBRI_STACK_SIZE + 512,
             "CONFIG_ISR_STACK_SIZE too small for colibri_forward in an interrupt "
             "(CONFIG_COLIBRI_STACK_SIZE plus 512 bytes for the kernel's own frames)");

typedef struct irq_call {
    void (*fn)(void *arg);
    void *arg;
} irq_call;

static irq_call pending;
static K_SEM_DEFINE(call_done, 0, 1);
static K_MUTEX_DEFINE(call_lock);

static void irq_call_expired(struct k_timer *timer)
{
    (void)timer;
    pending.fn(pending.arg);
    k_sem_give(&call_done);
}

static K_TIMER_DEFINE(call_timer, irq_call_expired, NULL);

int colibri_zephyr_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    if (fn == NULL || k_is_in_isr()) {
        return -1;
    }
    k_mutex_lock(&call_lock, K_FOREVER);
    pending.fn = fn;
    pending.arg = arg;
    k_sem_reset(&call_done);
    colibri_zephyr_irq_stack_paint();
    k_timer_start(&call_timer, K_TICKS(1), K_NO_WAIT);
    k_sem_take(&call_done, K_FOREVER);
    if (stack_used != NULL) {
        *stack_used = colibri_zephyr_irq_stack_used();
    }
    k_mutex_unlock(&call_lock);
    return 0;
}

#else /* !CONFIG_COLIBRI_IRQ_FORWARD */

int colibri_zephyr_run_in_interrupt(void (*fn)(void *arg), void *arg, size_t *stack_used)
{
    (void)fn;
    (void)arg;
    if (stack_used != NULL) {
        *stack_used = 0;
    }
    return -1;
}

#endif
