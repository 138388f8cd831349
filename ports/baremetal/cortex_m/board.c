/*
 * board.c - ports/baremetal/board.h for Cortex-M boards.
 *
 * Board facts: board_config.h (colibri-board: weights, UART, ticks) and
 * cm_board_config.h (colibri_tools/board/port_cortex_m.py: clock set-up, UART driver and pins,
 * caches, MPU guard, weight-window check, semihosting), both generated from
 * boards/<board>.toml. board_run_in_interrupt is in irq_job.c.
 */
#include "board.h"

#include "board_config.h"
#include "cm_board_config.h"
#include "cm_regs.h"
#include "console.h"
#include "cortex_m.h"

extern const uint8_t __colibri_weights_start[]; /* memory.ld, from the board file */

static const cm_uart_config console_uart = {
    .base = COLIBRI_BOARD_UART_BASE,
    .clock_hz = COLIBRI_BOARD_UART_CLOCK_HZ,
    .baud = COLIBRI_BOARD_UART_BAUD,
    .tx_port = CM_BOARD_UART_TX_PORT,
    .tx_pin = CM_BOARD_UART_TX_PIN,
    .rx_port = CM_BOARD_UART_RX_PORT,
    .rx_pin = CM_BOARD_UART_RX_PIN,
    .alternate_function = CM_BOARD_UART_ALTERNATE_FUNCTION,
};

static colibri_port ticks_port;
static int weights_readable;

static uint64_t port_ticks(void *ctx)
{
    (void)ctx;
    return cm_systick_ticks();
}

void board_init(void)
{
    cm_faults_enable();
    CM_BOARD_CLOCKS_INIT();
    /* An unreadable window gets no Normal-memory region at all: then only the
     * guard covers it, and nothing reads it, not even speculatively. */
    weights_readable = CM_BOARD_WEIGHTS_READY();
    int mpu = cm_mpu_protect_weights(COLIBRI_BOARD_WEIGHTS_ADDR,
                                     weights_readable ? COLIBRI_BOARD_WEIGHTS_SIZE : 0u,
                                     CM_BOARD_MPU_GUARD_ADDR, CM_BOARD_MPU_GUARD_SIZE);
    if (CM_BOARD_CACHES) {
        cm_caches_enable();
    }
    CM_BOARD_UART_DRIVER.init(&console_uart);
    cm_systick_init(COLIBRI_BOARD_TICKS_HZ);
    ticks_port = (colibri_port){
        .version = COLIBRI_PORT_VERSION, .ticks = port_ticks, .kernels = COLIBRI_BOARD_KERNELS};
    if (mpu != 0) {
        console_puts("board: MPU cannot express the weight region; left off\n");
    }
    if (!weights_readable) {
        console_puts("board: weight window not readable (QSPI not memory-mapped?)\n");
    }
}

void board_uart_write(const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        CM_BOARD_UART_DRIVER.write_byte(console_uart.base, data[i]);
    }
}

int board_uart_read(uint32_t timeout_ms)
{
    uint64_t start = cm_systick_millis();
    for (;;) {
        int byte = CM_BOARD_UART_DRIVER.read_byte(console_uart.base);
        if (byte >= 0 || cm_systick_millis() - start >= timeout_ms) {
            return byte;
        }
    }
}

uint64_t board_millis(void)
{
    return cm_systick_millis();
}

uint64_t board_ticks(void)
{
    return cm_systick_ticks();
}

const colibri_port *board_port(void)
{
    return &ticks_port;
}

const void *board_weights(void)
{
    return __colibri_weights_start;
}

/* 0 while the window cannot be read, so that colibri_init fails cleanly
 * instead of the first read faulting. */
/* No Cortex-M board of this port has a flash driver for its slots yet
 * (docs/ota.md: the QEMU MPS machines have no writable flash). */
const colibri_slots *board_slots(const uint8_t *trusted_key)
{
    (void)trusted_key;
    return NULL;
}

size_t board_weights_size(void)
{
    return weights_readable ? (size_t)COLIBRI_BOARD_WEIGHTS_SIZE : 0u;
}

/* The status of board_exit on a board without semihosting, for a debugger. */
volatile int cm_exit_status;

void board_exit(int status)
{
    if (CM_BOARD_SEMIHOSTING) {
        cm_semihost_exit(status);
    }
    (void)cm_irq_save();
    cm_exit_status = status;
    for (;;) {
        __asm__ volatile("wfi");
    }
}
