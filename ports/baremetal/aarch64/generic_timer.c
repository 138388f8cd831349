/* generic_timer.c - virtual count and EL1 virtual timer (generic_timer.h). */
#include <stdint.h>

#include "generic_timer.h"
#include "sysreg.h"

#define CNTV_CTL_ENABLE 1u

uint64_t generic_timer_count(void)
{
    aarch64_isb();
    return sysreg_read_cntvct_el0();
}

uint64_t generic_timer_frequency(void)
{
    uint64_t hz = sysreg_read_cntfrq_el0() & 0xFFFFFFFFu;
    return hz != 0 ? hz : 1u; /* firmware left it unset: count, do not divide by 0 */
}

void generic_timer_fire_after(uint64_t counts)
{
    sysreg_write_cntv_cval_el0(generic_timer_count() + counts);
    sysreg_write_cntv_ctl_el0(CNTV_CTL_ENABLE);
    aarch64_isb();
}

void generic_timer_stop(void)
{
    sysreg_write_cntv_ctl_el0(0);
    aarch64_isb();
}
