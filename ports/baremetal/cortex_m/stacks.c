/*
 * stacks.c - stack high-water marks by painting. startup.S paints both
 * stacks with CM_STACK_PAINT at reset; a stack's use is the distance from
 * its top to the deepest word that no longer holds the paint.
 */
#include "cm_regs.h"
#include "cortex_m.h"

extern uint32_t __msp_limit[], __msp_top[], __psp_limit[], __psp_top[];

static size_t used_bytes(const volatile uint32_t *limit, const volatile uint32_t *top)
{
    const volatile uint32_t *word = limit;
    while (word < top && *word == CM_STACK_PAINT) {
        word++;
    }
    return (size_t)((uintptr_t)top - (uintptr_t)word);
}

void cm_handler_stack_paint(void)
{
    uint32_t primask = cm_irq_save(); /* no handler may use MSP meanwhile */
    for (volatile uint32_t *word = __msp_limit; word < __msp_top; word++) {
        *word = CM_STACK_PAINT;
    }
    cm_irq_restore(primask);
}

size_t cm_handler_stack_used(void)
{
    return used_bytes(__msp_limit, __msp_top);
}

size_t cm_thread_stack_used(void)
{
    return used_bytes(__psp_limit, __psp_top);
}

size_t cm_handler_stack_size(void)
{
    return (size_t)((uintptr_t)__msp_top - (uintptr_t)__msp_limit);
}

size_t cm_thread_stack_size(void)
{
    return (size_t)((uintptr_t)__psp_top - (uintptr_t)__psp_limit);
}
