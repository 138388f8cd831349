/*
 * systick.c - the tick source: SysTick at the processor clock, reloaded
 * every millisecond, extended to 64 bits by counting its wraps.
 *
 * What a tick is: one cycle of the processor clock (boards/<board>.toml
 * [ticks] hz). On hardware that is a CPU cycle. Under QEMU, SysTick counts
 * QEMU's virtual clock at that rate; with -icount shift=0 the virtual clock
 * advances 1 ns per guest instruction, so ticks = instructions * hz / 1e9,
 * deterministic from run to run (docs/port-cortex-m.md). DWT->CYCCNT would
 * be the natural cycle counter on hardware, but QEMU does not implement it
 * (it reads 0), so every board uses SysTick.
 */
#include "cm_regs.h"
#include "cortex_m.h"

#define SYSTICK_PRIORITY 0x00u /* highest: never held off by the interrupt job */
#define PENDSV_PRIORITY 0xFFu  /* lowest: the interrupt job preempts only threads */

void SysTick_Handler(void);

static volatile uint64_t elapsed_ms;
static uint32_t ticks_per_ms;

void cm_systick_init(uint32_t cpu_hz)
{
    ticks_per_ms = cpu_hz / 1000u;
    CM_REG(CM_SHPR3_ADDR) =
        (CM_REG(CM_SHPR3_ADDR) & 0x0000FFFFu) | (SYSTICK_PRIORITY << 24) | (PENDSV_PRIORITY << 16);
    CM_REG(CM_SYST_CSR_ADDR) = 0;
    CM_REG(CM_SYST_RVR_ADDR) = ticks_per_ms - 1u;
    CM_REG(CM_SYST_CVR_ADDR) = 0;
    CM_REG(CM_SYST_CSR_ADDR) = CM_SYST_CSR_CLKSOURCE | CM_SYST_CSR_TICKINT | CM_SYST_CSR_ENABLE;
}

void SysTick_Handler(void)
{
    elapsed_ms = elapsed_ms + 1u;
    cm_job_on_tick();
}

/* Whole milliseconds and the count-down value of the current one, read
 * consistently: a wrap the handler has not counted yet shows as a pending
 * SysTick, and is counted here. */
static uint64_t read_ticks(void)
{
    uint32_t primask = cm_irq_save();
    uint64_t ms = elapsed_ms;
    uint32_t down = CM_REG(CM_SYST_CVR_ADDR);
    if ((CM_REG(CM_ICSR_ADDR) & CM_ICSR_PENDSTSET) != 0u) {
        down = CM_REG(CM_SYST_CVR_ADDR);
        ms++;
    }
    cm_irq_restore(primask);
    return ms * ticks_per_ms + (ticks_per_ms - 1u - down);
}

uint64_t cm_systick_ticks(void)
{
    return read_ticks();
}

uint64_t cm_systick_millis(void)
{
    return read_ticks() / ticks_per_ms;
}
