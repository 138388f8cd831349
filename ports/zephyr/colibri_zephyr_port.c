/*
 * colibri_zephyr_port.c - the Zephyr port's colibri_port: the system timer's
 * hardware cycle counter as its ticks, and the kernel table the Kconfig
 * options built (Helium before DSP; neither: the reference).
 */
#include <zephyr/kernel.h>
#include <zephyr/logging/log.h>

#include "colibri_zephyr.h"

LOG_MODULE_REGISTER(colibri, CONFIG_COLIBRI_LOG_LEVEL);

#ifdef CONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER
uint64_t colibri_zephyr_ticks(void)
{
    return k_cycle_get_64();
}
#else
/* k_cycle_get_32 wraps; extend it to 64 bits. Correct as long as the
 * counter is read at least once per wrap period. */
uint64_t colibri_zephyr_ticks(void)
{
    static uint32_t last;
    static uint64_t high;
    unsigned int key = irq_lock();
    uint32_t now = k_cycle_get_32();
    if (now < last) {
        high += (uint64_t)1 << 32;
    }
    last = now;
    uint64_t ticks = high | now;
    irq_unlock(key);
    return ticks;
}
#endif

uint64_t colibri_zephyr_ticks_hz(void)
{
    return (uint64_t)sys_clock_hw_cycles_per_sec();
}

const char *colibri_zephyr_tick_unit(void)
{
    return "Zephyr hardware cycles (k_cycle_get)";
}

static uint64_t port_ticks(void *ctx)
{
    (void)ctx;
    return colibri_zephyr_ticks();
}

#if defined(CONFIG_COLIBRI_KERNELS_HELIUM)
#define COLIBRI_ZEPHYR_KERNELS (&colibri_kernels_helium)
#elif defined(CONFIG_COLIBRI_KERNELS_DSP)
#define COLIBRI_ZEPHYR_KERNELS (&colibri_kernels_dsp)
#else
#define COLIBRI_ZEPHYR_KERNELS (&colibri_kernels_reference)
#endif

const colibri_port *colibri_zephyr_port(void)
{
    static const colibri_port port = {
        .version = COLIBRI_PORT_VERSION, .ticks = port_ticks, .kernels = COLIBRI_ZEPHYR_KERNELS};
    return &port;
}

static int colibri_zephyr_report_region(void)
{
    LOG_INF("weights at 0x%lx, %lu bytes (%s)", (unsigned long)COLIBRI_ZEPHYR_WEIGHTS_ADDRESS,
            (unsigned long)COLIBRI_ZEPHYR_WEIGHTS_SIZE, COLIBRI_ZEPHYR_WEIGHTS_SOURCE);
    return 0;
}

SYS_INIT(colibri_zephyr_report_region, APPLICATION, 0);
