/*
 * start.c - the smallest bare-metal start for tests/sdk/test_kernels.c on a
 * Cortex-M under QEMU: a vector table, the FPU and MVE switched on (CPACR
 * cp10/cp11), then newlib's semihosting start-up (rdimon: printf goes to the
 * host, main's return value becomes QEMU's exit status). A fault spins; the
 * test's timeout catches it.
 */
#include <stdint.h>

#define CPACR (*(volatile uint32_t *)0xE000ED88u)

extern void _start(void);
extern uint32_t __stack_top;

void reset_handler(void);
void fault_handler(void);

void reset_handler(void)
{
    CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    _start();
}

void fault_handler(void)
{
    for (;;) {
    }
}

/* initial stack, reset, NMI, HardFault, MemManage, BusFault, UsageFault */
__attribute__((section(".vectors"), used)) void *const vectors[7] = {
    &__stack_top,          (void *)reset_handler, (void *)fault_handler, (void *)fault_handler,
    (void *)fault_handler, (void *)fault_handler, (void *)fault_handler,
};
