/*
 * vectors.c - the Cortex-M vector table: the 16 system exceptions. No
 * external interrupt is enabled by this port (the UARTs are polled, the
 * interrupt job runs in PendSV), so no IRQ entries follow them.
 */
#include "cortex_m.h"

typedef union cm_vector {
    void (*handler)(void);
    const void *stack_top;
} cm_vector;

extern const uint32_t __msp_top[];

void Reset_Handler(void);           /* startup.S */
void cm_fault_entry(void);          /* startup.S: picks the stacked frame */
void PendSV_Handler(void);          /* irq_job.c */
void SysTick_Handler(void);         /* systick.c */
void cm_unexpected_exception(void); /* faults.c */

__attribute__((section(".vectors"), used)) const cm_vector cm_vectors[16] = {
    {.stack_top = __msp_top},
    {.handler = Reset_Handler},
    {.handler = cm_unexpected_exception}, /* NMI */
    {.handler = cm_fault_entry},          /* HardFault */
    {.handler = cm_fault_entry},          /* MemManage */
    {.handler = cm_fault_entry},          /* BusFault */
    {.handler = cm_fault_entry},          /* UsageFault */
    {.handler = cm_fault_entry},          /* SecureFault (ARMv8-M), reserved on ARMv7-M */
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = cm_unexpected_exception}, /* SVCall */
    {.handler = cm_unexpected_exception}, /* DebugMonitor */
    {.handler = 0},
    {.handler = PendSV_Handler},
    {.handler = SysTick_Handler},
};
