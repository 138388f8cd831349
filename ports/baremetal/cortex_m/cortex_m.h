/*
 * cortex_m.h - what the files of the Cortex-M port share, plus the port's own
 * additions to board.h for Cortex-M samples (the interrupt job API).
 *
 * Board facts reach these functions as arguments from board.c, which reads
 * them from board_config.h (colibri-board) and cm_board_config.h
 * (colibri_tools/board/port_cortex_m.py); no file here holds an address of a particular board.
 */
#ifndef COLIBRI_CORTEX_M_H
#define COLIBRI_CORTEX_M_H

#include <stddef.h>
#include <stdint.h>

/* ---- console UART drivers: uart_cmsdk.c, uart_stm32.c -------------------- */

typedef struct cm_uart_config {
    uintptr_t base;
    uint32_t clock_hz; /* the UART's kernel/APB clock */
    uint32_t baud;
    uint8_t tx_port; /* STM32 only: GPIO port of TX (0 = A), its pin, */
    uint8_t tx_pin;
    uint8_t rx_port; /* the same for RX, */
    uint8_t rx_pin;
    uint8_t alternate_function; /* and the pins' alternate function */
} cm_uart_config;

typedef struct cm_uart_driver {
    void (*init)(const cm_uart_config *config);
    void (*write_byte)(uintptr_t base, uint8_t byte); /* waits for room */
    int (*read_byte)(uintptr_t base);                 /* a byte, or -1 if none */
} cm_uart_driver;

extern const cm_uart_driver cm_uart_cmsdk; /* Arm CMSDK APB UART (MPS2/MPS3) */
extern const cm_uart_driver cm_uart_stm32; /* STM32H7 USART/UART, polled */

/* ---- SysTick: ticks and milliseconds: systick.c --------------------------- */

/* SysTick at the processor clock cpu_hz (a multiple of 1000), interrupting
 * every millisecond; SysTick gets the highest priority, PendSV the lowest. */
void cm_systick_init(uint32_t cpu_hz);
/* Processor clock cycles since cm_systick_init (64 bits, monotonic). */
uint64_t cm_systick_ticks(void);
uint64_t cm_systick_millis(void);

/* ---- caches, MPU, weight window: cache.c, mpu_v7m.c / mpu_v8m.c ----------- */

/* Enable the L1 instruction and data caches that CLIDR reports, after
 * invalidating them; leaves an already enabled cache alone. */
void cm_caches_enable(void);

/* Make [base, base + size) normal, cacheable (write-through), read-only,
 * execute-never memory, and [guard_base, guard_base + guard_size) minus the
 * weights inaccessible to speculation (guard_size 0: no guard; size 0: no
 * weights region, the guard alone). Everything else keeps the default
 * memory map. 0 on success, -1 if the MPU cannot express the regions (then
 * it is left off). */
int cm_mpu_protect_weights(uintptr_t base, uint32_t size, uintptr_t guard_base,
                           uint32_t guard_size);

/* Bring the clocks to what the board file says ([ticks] hz, [uart]
 * clock_hz): nothing to do on the QEMU boards; on the STM32H7, back to the
 * reset state (HSI 64 MHz, prescalers /1), whatever a debugger set up. */
void cm_clocks_as_reset(void);
void cm_clocks_stm32h7_hsi64(void);

/* Whether the weight window can be read now: always on the QEMU boards;
 * on the STM32H7, only once the QUADSPI is in memory-mapped mode. */
int cm_weights_always_ready(void);
int cm_weights_stm32h7_quadspi_mapped(void);

/* ---- jobs in interrupt context: irq_job.c ---------------------------------- */

/* Run fn(arg) once from an interrupt handler (PendSV, pended by the next
 * SysTick, at most 1 ms away) and return at once. Thread mode only; -1 if
 * called from a handler or while a job is pending or running. */
int cm_job_start(void (*fn)(void *arg), void *arg);
/* 1 once the job started by cm_job_start has returned. */
int cm_job_done(void);
/* Sleep (WFI) until the job is done. */
void cm_job_wait(void);
/* Called by the SysTick handler every millisecond. */
void cm_job_on_tick(void);

/* ---- stacks: stacks.c ------------------------------------------------------- */

/* Repaint the whole handler stack (MSP); thread mode only. */
void cm_handler_stack_paint(void);
/* Bytes of the handler stack / thread stack written since the last paint
 * (the deepest word that no longer holds the paint). */
size_t cm_handler_stack_used(void);
size_t cm_thread_stack_used(void);
size_t cm_handler_stack_size(void);
size_t cm_thread_stack_size(void);

/* ---- end of the program: semihost.c, faults.c ------------------------------- */

/* SYS_EXIT_EXTENDED through semihosting (BKPT 0xAB): QEMU -semihosting exits
 * with status. Without a semihosting host the BKPT faults: only call it on a
 * board whose board file enables semihosting. */
void cm_semihost_exit(int status) __attribute__((noreturn));

/* Enable the MemManage, BusFault and UsageFault handlers (else HardFault). */
void cm_faults_enable(void);

/* Write *address back to itself and report whether that faulted (MemManage,
 * e.g. the MPU's read-only weight region): 1 faulted, 0 written. The fault
 * handler resumes after the store. Thread mode only. */
int cm_write_faults(volatile uint32_t *address);

/* Status board_exit reports for a fault or an unexpected exception. */
#define CM_EXIT_FAULT 250

#endif
